"""MXNet 1.9.1 on NumPy 1.24 and later: the NumPy names it still reads.

MXNet 1.9.1 (2022) was written against NumPy 1.16 to 1.23.  Its wheel
(``py3-none``) installs on any Python 3 and reaches its C++ library
through `ctypes`, so NumPy's binary interface does not matter to it.  What
stops it on a newer NumPy is a handful of names that `mxnet.numpy` reads
from NumPy when it is imported (and one or two when an operator runs),
names that NumPy 1.24 and 2.0 removed.  This module gives exactly those
names back, on NumPy's own module object, with the meaning NumPy gives
them today (`REPLACEMENTS`); the old financial functions, which NumPy
moved out in 1.20 and has no replacement for, become functions that raise
an error naming themselves (`EXPIRED`), as NumPy 1.20 to 1.23 did.

NumPy 2 also prints its scalars with their type (``np.int64(2)``, NEP
51), and MXNet passes operator arguments to its library as `str` of
Python values: a list that holds NumPy integers, as
`mxnet.gluon.utils.split_and_load` makes, becomes ``'[0, np.int64(2)]'``,
which the library refuses.  NumPy's own switch for its 1.x printing,
``numpy.set_printoptions(legacy='1.25')``, is set for that (printed
scalars then also look as the book prints them).  NumPy keeps print
options per context: threads started later print the NumPy 2 way, so
call MXNet operators from the main thread, or call `give_back` in the
thread.  Python
3.12 also removed `distutils`, which MXNet imports for version checks:
setuptools' own `distutils` shim provides it, so setuptools must be
installed (d2l-bert's lock files for Python 3.12 and later pin it).

Python 3.14 made ``forkserver`` the default way to start processes on
Linux, where it had been ``fork``.  MXNet 1.9.1's `DataLoader` starts its
worker processes with the default and hands them the dataset by pickling
it, which fails for a dataset class defined in a notebook or a script's
``__main__`` (the book's `_WikiTextDataset`, run from a notebook cell):
`fork_default` sets ``fork`` back as the default, on Linux, when nothing
chose a start method yet.

Nothing is patched until `mxnet` is imported, and nothing at all on NumPy
1.23 and earlier, the book's environment.  No file of MXNet's or NumPy's
is changed.  The mechanism is the one setuptools uses for its `distutils`
shim: a ``.pth`` file in site-packages (`PTH_NAME`, written by
``python -m d2l_bert.mxnet_compat --install``, which ``run.py`` runs)
adds a finder to `sys.meta_path` when Python starts; the first ``import
mxnet``, whoever makes it, calls `give_back` and the finder removes
itself.  A script can also call `give_back` itself before importing
`mxnet`.

Defined here, not in the book.
"""
import importlib.util
import math
import os
import sys
import sysconfig
import tempfile
import types

#: The ``.pth`` file that loads the hook when Python starts
PTH_NAME = 'd2l_bert-mxnet-compat.pth'
#: Its one line: a no-op when d2l-bert is no longer installed
PTH_LINE = ("import importlib.util as _u; _u.find_spec('d2l_bert') and "
            "__import__('d2l_bert.mxnet_compat').mxnet_compat.add_hook()\n")

#: NumPy's financial functions, removed in NumPy 1.20 (NEP 32) and read
#: by `mxnet.numpy.fallback`; the `numpy-financial` package has them
EXPIRED = ('fv', 'ipmt', 'irr', 'mirr', 'npv', 'nper', 'pmt', 'ppmt',
           'pv', 'rate')


def _in1d(ar1, ar2, assume_unique=False, invert=False, **kwargs):
    """`numpy.in1d`: `numpy.isin` on the flattened first array."""
    import numpy
    return numpy.isin(numpy.ravel(ar1), ar2, assume_unique=assume_unique,
                      invert=invert, **kwargs)


def _msort(a):
    """`numpy.msort`: a copy of `a` sorted along its first axis."""
    import numpy
    return numpy.sort(a, axis=0)


def _replacements(numpy):
    """The removed names that MXNet 1.9.1 reads, with today's meaning.

    Each entry is ``name: value``; NumPy's own deprecation note for the
    name gives the same replacement.
    """
    return {
        # constants (NumPy 2.0)
        'PZERO': 0.0, 'NZERO': -0.0, 'PINF': math.inf, 'NINF': -math.inf,
        'NaN': math.nan, 'NAN': math.nan, 'Inf': math.inf,
        # aliases of functions that keep their other name (NumPy 2.0)
        'alltrue': numpy.all, 'sometrue': numpy.any,
        'product': numpy.prod, 'cumproduct': numpy.cumprod,
        'round_': numpy.round, 'row_stack': numpy.vstack,
        'trapz': getattr(numpy, 'trapezoid', None), 'in1d': _in1d,
        'msort': _msort,
        # the Python 2 names `mxnet.numpy.pad` reads (NumPy 2.0)
        'compat': types.SimpleNamespace(basestring=str, long=int,
                                        unicode=str),
        # the scalar type's old alias (NumPy 1.24 to 1.26 only)
        'bool': numpy.bool_,
    }


def _expired(name):
    """A stand-in for the removed financial function `name`."""
    def expired(*args, **kwargs):
        raise RuntimeError(
            f'numpy.{name} was removed in NumPy 1.20 (NEP 32) and NumPy '
            f'has no replacement, so mxnet.numpy.{name} cannot run; the '
            f'numpy-financial package has {name}')
    expired.__name__ = expired.__qualname__ = name
    return expired


def _missing(numpy, name):
    try:
        getattr(numpy, name)
    except AttributeError:
        return True
    return False


def numpy_is_old(version):
    """Whether NumPy `version` (a string) still has every name MXNet reads.

    >>> numpy_is_old('1.23.5'), numpy_is_old('1.24.0'), numpy_is_old('2.1')
    (True, False, False)
    """
    major, minor = (int(part) for part in version.split('.')[:2])
    return (major, minor) < (1, 24)


def give_back():
    """Put back on `numpy` the removed names that MXNet 1.9.1 reads.

    Only names NumPy no longer has are set; on NumPy 1.23 and earlier
    nothing is.  On NumPy 2 its scalars print as in NumPy 1.25 again
    (``numpy.set_printoptions(legacy='1.25')``, in this thread's context):
    MXNet turns operator arguments into strings with `str`.

    Returns
    -------
    tuple of str
        The names given back, sorted.
    """
    import numpy
    if numpy_is_old(numpy.__version__):
        return ()
    added = []
    values = _replacements(numpy)
    values.update((name, _expired(name)) for name in EXPIRED)
    for name, value in values.items():
        if value is not None and _missing(numpy, name):
            setattr(numpy, name, value)
            added.append(name)
    if int(numpy.__version__.split('.')[0]) >= 2:
        numpy.set_printoptions(legacy='1.25')   # `str([np.int64(2)])`
    return tuple(sorted(added))


def fork_default(version=None, platform=None):
    """Make ``fork`` the default start method again on Linux, Python 3.14
    and later, unless a start method was chosen already.

    Returns whether it was set.
    """
    import multiprocessing
    version = sys.version_info[:2] if version is None else version
    platform = sys.platform if platform is None else platform
    if version < (3, 14) or not platform.startswith('linux'):
        return False
    if multiprocessing.get_start_method(allow_none=True) is not None:
        return False
    multiprocessing.set_start_method('fork')
    return True


def check_distutils():
    """Raise a clear ImportError when `distutils` cannot be imported.

    MXNet 1.9.1 imports ``distutils.version``; Python 3.12 removed the
    module, and setuptools' shim gives it back.
    """
    if importlib.util.find_spec('distutils') is None:
        raise ImportError(
            f'MXNet 1.9.1 imports distutils, which Python '
            f'{sys.version_info[0]}.{sys.version_info[1]} no longer has; '
            f'install setuptools (`{sys.executable} -m pip install '
            f'setuptools`), whose distutils shim provides it')


class MXNetHook:
    """A `sys.meta_path` finder that prepares NumPy for ``import mxnet``.

    It finds nothing itself: when asked for `mxnet` it calls `give_back`,
    `fork_default` and `check_distutils`, removes itself, and lets the next finders
    import MXNet as usual.
    """

    def find_spec(self, fullname, path=None, target=None):
        if fullname == 'mxnet':
            remove_hook()
            give_back()
            fork_default()
            check_distutils()
        return None


def add_hook():
    """Install `MXNetHook` first in `sys.meta_path`, once.

    Does nothing when `mxnet` is imported already.
    """
    if 'mxnet' in sys.modules:
        return
    if not any(isinstance(finder, MXNetHook) for finder in sys.meta_path):
        sys.meta_path.insert(0, MXNetHook())


def remove_hook():
    """Take every `MXNetHook` out of `sys.meta_path`."""
    sys.meta_path[:] = [finder for finder in sys.meta_path
                        if not isinstance(finder, MXNetHook)]


def pth_path():
    """Where `install` writes the ``.pth``: this interpreter's purelib."""
    return os.path.join(sysconfig.get_paths()['purelib'], PTH_NAME)


def install():
    """Write the ``.pth`` that loads the hook, atomically; return its path.

    Run once per environment (``run.py`` does): ``python -m
    d2l_bert.mxnet_compat --install``.
    """
    path = pth_path()
    folder = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(prefix='.d2l_bert-pth-', dir=folder)
    try:
        with os.fdopen(fd, 'w') as f:
            f.write(PTH_LINE)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    return path


def main(argv=None):
    """``python -m d2l_bert.mxnet_compat [--install]``: say what it does."""
    argv = sys.argv[1:] if argv is None else argv
    if argv not in ([], ['--install']):
        print('usage: python -m d2l_bert.mxnet_compat [--install]',
              file=sys.stderr)
        return 2
    if argv:
        print(f'wrote {install()}')
    import numpy
    names = give_back()
    print(f'NumPy {numpy.__version__}: '
          + (f'gives back {", ".join(names)}' if names else
             'nothing to give back'))
    return 0


if __name__ == '__main__':
    sys.exit(main())
