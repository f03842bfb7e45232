"""Cells written for MXNet 2.0's Gluon, run under MXNet 1.9.1.

MXNet 2.0 removed ``self.params.get``: a block's own parameter is an
attribute, ``self.pos_embedding = gluon.Parameter('pos_embedding',
shape=...)``.  MXNet 1.9.1 keeps such an attribute for ``hybrid_forward``
and for `save_parameters`, but neither ``initialize()`` nor
``collect_params()`` sees it (they read the block's `ParameterDict`), so
the first forward pass fails with ``RuntimeError: Parameter
'pos_embedding' has not been initialized``.

`parameters_as_attributes` is the chapter runner's hook: while a cell
runs, a `gluon.Parameter` assigned as an attribute of a block, and not
made by ``self.params.get``, is entered in the block's `ParameterDict`
too, under the block's prefix (``bertencoder0_pos_embedding``, as
``self.params.get`` names it), so that two blocks' parameters of the
same name stay apart.  The book's blocks are not changed: their
``self.params.get`` parameters are in their dict already, and the hook
does nothing to them.

What else MXNet 2.0's editions write differently runs under 1.9.1 as it
is: ``forward`` in a `HybridBlock` (no ``hybrid_forward``), ``super()
.__init__()`` without a prefix, ``npx.set_np()`` left out (the runner's
cells run with NumPy semantics on), ``Trainer(net.collect_params(),
...)`` and ``.items()`` of ``collect_params(...)``.  ``.data(device=...)``
and ``X.device``, the names of MXNet 2.0's last releases, are not
adapted.
"""
import contextlib
import weakref

#: What the report's notes say of an edition whose blocks got this hook
NOTE = ('MXNet 2.0 Gluon: Parameters assigned as block attributes '
        '(gluon.Parameter) were entered in their blocks\' parameters, '
        'which MXNet 1.9.1\'s initialize() and collect_params() read (it '
        'sees only self.params.get\'s)')


@contextlib.contextmanager
def parameters_as_attributes(used):
    """While in this context, Parameters assigned as block attributes are
    entered in their blocks' `ParameterDict` (see the module).

    Parameters
    ----------
    used : set
        Gets `NOTE` the first time a Parameter is so entered.
    """
    from mxnet import gluon
    original = gluon.Block.__setattr__

    def setattr_(block, name, value):
        original(block, name, value)
        if isinstance(value, gluon.Parameter) and \
                '_params' in vars(block):
            if _enter(block, name, value):
                used.add(NOTE)

    gluon.Block.__setattr__ = setattr_
    try:
        yield
    finally:
        gluon.Block.__setattr__ = original


#: Parameters this hook renamed: assigned to another block too, they keep
#: their name
_RENAMED = weakref.WeakSet()


def _enter(block, name, param):
    """Enter `param`, `block`'s attribute `name`, in `block`'s
    `ParameterDict` unless it is there; return whether it was entered."""
    held = block._params._params  # name -> Parameter, an OrderedDict
    if held.get(param.name) is param:
        return False
    if param.name == name and param not in _RENAMED:
        # a Parameter of its own: named as self.params.get would name it;
        # one shared from another block keeps the name it has there
        param.name = block._params.prefix + name
        _RENAMED.add(param)
    held[param.name] = param
    return True
