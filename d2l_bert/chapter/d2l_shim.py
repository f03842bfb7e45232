"""The `d2l` module the chapter's cells see: this package first, then d2l.

`D2LShim` resolves each name to this package's object first (the public
names of `d2l_bert` and its section modules, `package_names`) and to the
real d2l 1.0.3 (``from d2l import mxnet as d2l``, `real_d2l`) for
everything else, so cells of both naming generations run
(``d2l.EncoderBlock`` and ``d2l.TransformerEncoderBlock``,
`names_0_17`).  A cell that imports d2l itself (``from d2l import mxnet
as d2l``, ``import d2l``) gets that same module: the cells' `__import__`
(`cell_import`) answers those two imports, and only them.  An edition's
own ``#@save`` definitions are its `d2l`: after the cell that makes
them, the shim answers them first (`own_definitions`).  The real d2l
module is never changed.
"""
import builtins
import functools
import importlib
import inspect
import pkgutil
import types

from .names_0_17 import RENAMED_0_17
from .own_definitions import rebound

#: Modules of this package that are tools, not book sections
TOOL_MODULES = ('d2l_bert.cli', 'd2l_bert.chapter', 'd2l_bert.threads',
                'd2l_bert.__main__', 'd2l_bert.dist')

#: Packages whose modules, not the package itself, offer names (the
#: book's sections are the modules of `d2l_bert.book`)
NAME_PACKAGES = ('d2l_bert.book', 'd2l_bert.data', 'd2l_bert.runs')

_FRAMEWORK_SUBMODULES = ('torch', 'tensorflow', 'jax', 'paddle')


def package_names():
    """Collect the names `d2l_bert` offers to the book's `d2l` namespace.

    Returns
    -------
    names : dict of str to object
        Public functions, classes and constants of `d2l_bert` and of its
        section modules (tools such as the chapter runner left out), plus
        private helpers whose name the real d2l also has (the book's
        ``#@save`` helpers such as `_read_wiki`).
    failed : dict of str to str
        Section modules that could not be imported, with the error.
    """
    import d2l_bert
    real = real_d2l()
    modules, failed = [d2l_bert], {}
    for name in _offering_modules(d2l_bert.__path__):
        try:
            modules.append(importlib.import_module(name))
        except Exception as e:  # a section being written must not stop us
            failed[name] = f'{type(e).__name__}: {e}'
    names = {}
    for module in modules:
        exported = getattr(module, '__all__', None)
        for name, obj in vars(module).items():
            if exported is not None and name not in exported:
                continue
            if name.startswith('__') or inspect.ismodule(obj):
                continue
            if name.startswith('_') and not hasattr(real, name):
                continue
            origin = getattr(obj, '__module__', None)
            defined_here = (origin or '').startswith('d2l_bert')
            constant = name.isupper() and origin is None
            if defined_here or constant or exported is not None:
                names.setdefault(name, obj)
    return names, failed


def _offering_modules(path):
    """Names of the modules whose names `package_names` collects: the
    package's modules but its tools, with the modules of `NAME_PACKAGES`
    in place of those packages."""
    for info in pkgutil.iter_modules(path, 'd2l_bert.'):
        if info.name.startswith(TOOL_MODULES):
            continue
        if info.name not in NAME_PACKAGES:
            yield info.name
            continue
        package = importlib.import_module(info.name)
        for sub_info in pkgutil.iter_modules(package.__path__,
                                             f'{info.name}.'):
            yield sub_info.name


@functools.lru_cache(maxsize=None)
def real_d2l():
    """The real d2l 1.0.3, ``from d2l import mxnet as d2l``."""
    from d2l import mxnet as d2l
    return d2l


class D2LShim(types.ModuleType):
    """The `d2l` the cells see: this package first, then d2l 1.0.3.

    Parameters
    ----------
    overrides : dict, optional
        Names answered before anything else (the data hooks).
    used : set, optional
        Where notes on the edition's own definitions go (the hooks'
        `used`).

    Attributes
    ----------
    met : dict of str to str
        Each name looked up so far and where it came from: ``'d2l_bert'``,
        ``'d2l 1.0.3'``, ``'hook'`` or ``'0.17 name of NEW'``.
    failed_modules : dict of str to str
        Section modules of this package that could not be imported.
    """

    def __init__(self, overrides=None, used=None):
        super().__init__('d2l', 'd2l_bert first, then d2l 1.0.3')
        names, failed = package_names()
        object.__setattr__(self, '_package', names)
        object.__setattr__(self, '_overrides', dict(overrides or {}))
        object.__setattr__(self, 'met', {})
        object.__setattr__(self, 'failed_modules', failed)
        # the edition's own ``#@save`` definitions (`save`), and where the
        # notes on them go
        object.__setattr__(self, 'saved', {})
        object.__setattr__(self, '_used', set() if used is None else used)

    def save(self, names, namespace):
        """Enter the edition's ``#@save`` definitions `names`, as bound in
        `namespace`: ``d2l.NAME`` answers them from now on
        (`own_definitions`)."""
        for name in names:
            if name in namespace:
                self.saved[name] = namespace[name]

    def _resolve(self, name):
        if name in self.saved:
            if name in self._package or hasattr(real_d2l(), name):
                self._used.add(f"d2l.{name}: the edition's own #@save "
                               "definition (d2l-bert's is not used)")
            return self.saved[name], 'edition'
        value, origin = self._resolve_ours(name)
        value, calls = rebound(value, self.saved)
        if calls:
            self._used.add(f"d2l.{name} ({origin}'s) calls the edition's "
                           f"{', '.join(calls)}, as in the edition's d2l")
        return value, origin

    def _resolve_ours(self, name):
        if name in self._overrides:
            return self._overrides[name], 'hook'
        if name in self._package:
            return self._package[name], 'd2l_bert'
        real = real_d2l()
        if hasattr(real, name):
            return getattr(real, name), 'd2l 1.0.3'
        if name in RENAMED_0_17:
            new = RENAMED_0_17[name]
            value, _ = self._resolve_ours(new)
            return value, f'0.17 name of {new}'
        raise AttributeError(
            f"module 'd2l' has no attribute {name!r} (neither d2l_bert nor "
            "d2l 1.0.3 defines it)")

    def __getattr__(self, name):
        if name.startswith('__'):
            raise AttributeError(name)
        value, origin = self._resolve(name)
        self.met[name] = origin
        return value

    def __dir__(self):
        return sorted(set(dir(real_d2l())) | set(self._package)
                      | set(self._overrides) | set(self.saved))


class D2LPackage(types.ModuleType):
    """What ``import d2l`` gives a cell: `.mxnet` (and bare names) are the
    shim; `.torch` and the other frameworks are the real submodules."""

    def __init__(self, shim):
        super().__init__('d2l')
        object.__setattr__(self, '_shim', shim)

    def __getattr__(self, name):
        if name == 'mxnet':
            return self._shim
        if name in _FRAMEWORK_SUBMODULES:
            return importlib.import_module(f'd2l.{name}')
        return getattr(self._shim, name)


def cell_import(package, name, globals=None, locals=None, fromlist=(),
                level=0):
    """`__import__` of the cells: d2l imports get `package`, a
    `D2LPackage`; every other import is Python's."""
    if level == 0 and name in ('d2l', 'd2l.mxnet'):
        return package
    return builtins.__import__(name, globals, locals, fromlist, level)
