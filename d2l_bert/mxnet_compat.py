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

MXNet 1.9.1's Linux wheel for aarch64 (arm64) links its library to the
Arm Performance Libraries (`ARMPL_LIBRARIES`), which it does not ship,
but asks them only for standard names: the CBLAS and LAPACKE functions,
Fortran LAPACK and the C math library.  Debian's OpenBLAS and LAPACKE
(``libopenblas0``, ``liblapacke``) carry all of them.  `load_arm_stand_ins`
loads, before MXNet's library, three stand-ins: tiny shared libraries
that bear the three names and hold no code, only the standard libraries
to load with them (`elf_stand_in` writes them, in memory, for this
machine).  The dynamic loader then takes them for the libraries
`libmxnet.so` names, and finds every function in OpenBLAS and LAPACKE.
On x86-64, or where the Arm Performance Libraries are installed,
nothing is loaded.

Nothing is patched until `mxnet` is imported, and nothing at all on NumPy
1.23 and earlier, the book's environment, on x86-64.  No file of MXNet's or NumPy's
is changed.  The mechanism is the one setuptools uses for its `distutils`
shim: a ``.pth`` file in site-packages (`PTH_NAME`, written by
``python -m d2l_bert.mxnet_compat --install``, which ``run.py`` runs)
adds a finder to `sys.meta_path` when Python starts; the first ``import
mxnet``, whoever makes it, calls `give_back` and the finder removes
itself.  A script can also call `give_back` itself before importing
`mxnet`.  The same moment, before MXNet's libraries are loaded, is the
last at which a process can choose their threads and kernels: the hook
first makes the choices of `d2l_bert.threads.set_threads`, quietly, where
the process has not made them yet (a variable you set is kept).

Defined here, not in the book.
"""
import ctypes
import importlib.util
import math
import os
import platform
import struct
import sys
import sysconfig
import tempfile
import types
import warnings

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
    with warnings.catch_warnings():
        # NumPy 1.24 to 1.26 warn that `numpy.bool` will come back
        warnings.simplefilter('ignore', FutureWarning)
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


#: The Arm Performance Libraries that MXNet 1.9.1's aarch64 `libmxnet.so`
#: names, each with the standard libraries its stand-in loads instead
#: (every function `libmxnet.so` asks of the three is in one of these)
ARMPL_LIBRARIES = {
    'libarmpl_lp64_mp.so': ('libopenblas.so.0', 'liblapacke.so.3'),
    'libamath.so': ('libm.so.6',),
    'libastring.so': ('libc.so.6',),
}
#: The system libraries MXNet's aarch64 wheel needs, by the Debian and
#: Ubuntu package that has each (GCC's OpenMP runtime is its own need)
ARM_SYSTEM_LIBRARIES = {'libopenblas.so.0': 'libopenblas0',
                        'liblapacke.so.3': 'liblapacke',
                        'libgomp.so.1': 'libgomp1'}
#: `e_machine` of the ELF header, by `platform.machine()`
ELF_MACHINES = {'aarch64': 183, 'arm64': 183, 'x86_64': 62}


def elf_stand_in(soname, needed, machine='aarch64'):
    """A shared library named `soname` that only loads `needed`.

    It defines no symbol and holds no code: one loadable segment with a
    dynamic section (its ``DT_NEEDED`` entries, ``DT_SONAME``), an empty
    symbol table and its hash table.  The dynamic loader, asked later for
    `soname`, takes the library loaded under that name, and looks up its
    symbols in `needed`.

    Parameters
    ----------
    soname : str
        The name it bears, e.g. ``'libamath.so'``.
    needed : sequence of str
        The libraries it loads, e.g. ``('libm.so.6',)``.
    machine : str
        `platform.machine()` of the target, a key of `ELF_MACHINES`.

    Returns
    -------
    bytes
        A 64-bit little-endian ELF shared object.
    """
    names = [soname] + list(needed)
    strtab, offsets = b'\0', []
    for name in names:
        offsets.append(len(strtab))
        strtab += name.encode() + b'\0'
    header, phdr = 64, 56
    symtab = header + 3 * phdr           # one null symbol, 24 bytes
    hashtab = symtab + 24                # nbucket 1, nchain 1, both 0
    strings = hashtab + 16
    dynamic = (strings + len(strtab) + 7) // 8 * 8
    entries = [(1, offset) for offset in offsets[1:]]    # DT_NEEDED
    entries += [(14, offsets[0]), (4, hashtab), (5, strings),
                (6, symtab), (10, len(strtab)), (11, 24), (0, 0)]
    size = dynamic + 16 * len(entries)
    out = struct.pack('<4s5B7x2HI3QI6H', b'\x7fELF', 2, 1, 1, 0, 0,
                      3, ELF_MACHINES[machine], 1, 0, header, 0, 0,
                      header, phdr, 3, 64, 0, 0)
    # PT_LOAD (read, write: old loaders adjust the dynamic section in
    # place), PT_DYNAMIC, PT_GNU_STACK (no executable stack)
    out += struct.pack('<2I6Q', 1, 6, 0, 0, 0, size, size, 0x10000)
    out += struct.pack('<2I6Q', 2, 6, dynamic, dynamic, dynamic,
                       size - dynamic, size - dynamic, 8)
    out += struct.pack('<2I6Q', 0x6474e551, 6, 0, 0, 0, 0, 0, 16)
    out += bytes(24) + struct.pack('<4I', 1, 1, 0, 0) + strtab
    out += bytes(dynamic - len(out))
    return out + b''.join(struct.pack('<qQ', *entry) for entry in entries)


def _load_bytes(name, data):
    """`ctypes.CDLL` of a library given as bytes, kept in memory.

    The library is opened as ``/proc/self/fd/N`` of a memory file that
    stays open for the life of the process: the loader knows a library
    by the path it was opened with, and a closed descriptor's number,
    given again, would name the library already loaded.
    """
    if hasattr(os, 'memfd_create'):
        fd = os.memfd_create(name)
        try:
            os.write(fd, data)
            library = ctypes.CDLL(f'/proc/self/fd/{fd}')
        except BaseException:
            os.close(fd)
            raise
        _LOADED.append(fd)
        return library
    with tempfile.TemporaryDirectory(prefix='d2l_bert-') as folder:
        path = os.path.join(folder, name)
        with open(path, 'wb') as f:
            f.write(data)
        return ctypes.CDLL(path)


def needs_arm_stand_ins(machine=None, system=None):
    """Whether MXNet's library here needs `load_arm_stand_ins`: on Linux
    on aarch64 without the Arm Performance Libraries."""
    machine = platform.machine() if machine is None else machine
    system = sys.platform if system is None else system
    if not system.startswith('linux') or machine not in ('aarch64', 'arm64'):
        return False
    try:
        for name in ARMPL_LIBRARIES:
            ctypes.CDLL(name)
    except OSError:
        return True
    return False


def missing_arm_libraries():
    """The entries of `ARM_SYSTEM_LIBRARIES` that do not load here."""
    missing = []
    for name in ARM_SYSTEM_LIBRARIES:
        try:
            ctypes.CDLL(name)
        except OSError:
            missing.append(name)
    return missing


def load_arm_stand_ins():
    """Load the stand-ins for the Arm Performance Libraries, once, where
    `needs_arm_stand_ins`; raise ImportError naming the packages to
    install when OpenBLAS or LAPACKE is missing.

    Returns
    -------
    tuple of str
        The names of the stand-ins loaded now (empty if none were).
    """
    if not needs_arm_stand_ins():
        return ()
    missing = missing_arm_libraries()
    if missing:
        packages = ' '.join(ARM_SYSTEM_LIBRARIES[name] for name in missing)
        raise ImportError(
            f"MXNet 1.9.1's aarch64 library needs {', '.join(missing)} "
            f'from the system; install them: sudo apt-get install '
            f'{packages} (Debian, Ubuntu; see docs/install.md for others)')
    for soname, needed in ARMPL_LIBRARIES.items():
        _load_bytes(soname, elf_stand_in(soname, needed))
        STOOD_IN.append(soname)
    return tuple(ARMPL_LIBRARIES)


#: The memory files of the libraries `_load_bytes` loaded, kept open
_LOADED = []
#: The Arm Performance Libraries stood in for in this process
STOOD_IN = []


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
    """A `sys.meta_path` finder that prepares for ``import mxnet``.

    It finds nothing itself: when asked for `mxnet` it calls
    `d2l_bert.threads.set_threads_quietly` (threads and kernels, before
    MXNet's libraries read them), `load_arm_stand_ins`, `give_back`,
    `fork_default` and `check_distutils`, removes itself, and lets the
    next finders import MXNet as usual.
    """

    def find_spec(self, fullname, path=None, target=None):
        if fullname == 'mxnet':
            remove_hook()
            from .threads import set_threads_quietly
            set_threads_quietly()
            load_arm_stand_ins()
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


def check_mxnet():
    """Import MXNet through the hook and multiply two small matrices.

    Returns
    -------
    str
        A line saying what ran, e.g. ``'MXNet 1.9.1 on x86_64: ok'``.
    """
    add_hook()
    import mxnet as mx
    product = mx.nd.dot(mx.nd.ones((2, 3)), mx.nd.ones((3, 2))).asnumpy()
    if product.tolist() != [[3.0, 3.0], [3.0, 3.0]]:
        raise RuntimeError(f'MXNet computed {product.tolist()} for a '
                           f'product of ones, not 3 everywhere')
    how = (' (the Arm Performance Libraries stood in for by OpenBLAS and '
           'LAPACKE)' if STOOD_IN else '')
    return f'MXNet {mx.__version__} on {platform.machine()}{how}: ok'


def check_numpy_blas():
    """Multiply by the identity with NumPy's BLAS, in both precisions.

    The tests' references are NumPy products. OpenBLAS picks its kernels by
    the CPU it finds, and one family can be wrong on one CPU: the OpenBLAS
    in NumPy 2.5's aarch64 wheels gives wrong float64 products where the
    CPU has SME (seen under qemu's ``max`` CPU); another family is right.

    Returns
    -------
    str or None
        A warning naming the remedy, or None when the products are exact.
    """
    import numpy
    wrong = []
    for dtype in ('float32', 'float64'):
        A = (numpy.arange(48.0) % 7 - 3).reshape(6, 8).astype(dtype)
        with numpy.errstate(all='ignore'):  # a wrong kernel overflows
            products = (A @ numpy.eye(8, dtype=dtype),
                        numpy.dot(numpy.eye(6, dtype=dtype), A))
        for product in products:
            if not numpy.array_equal(product, A):
                wrong.append(dtype)
                break
    if not wrong:
        return None
    family = ('NEOVERSEN1' if platform.machine() in ('aarch64', 'arm64')
              else 'Haswell')
    return (f'warning: NumPy {numpy.__version__} multiplies '
            f'{" and ".join(wrong)} matrices wrongly on this CPU (its '
            f'OpenBLAS kernels); results and tests that use NumPy products '
            f'will be wrong: set OPENBLAS_CORETYPE={family} (export it, or '
            f'put it before each command) to use another kernel family')


def main(argv=None):
    """``python -m d2l_bert.mxnet_compat [--install] [--check]``: say what
    the hook does; write its ``.pth``; import MXNet through it."""
    argv = sys.argv[1:] if argv is None else argv
    if not set(argv) <= {'--install', '--check'} or len(set(argv)) < len(
            argv):
        print('usage: python -m d2l_bert.mxnet_compat [--install] '
              '[--check]', file=sys.stderr)
        return 2
    if '--install' in argv:
        print(f'wrote {install()}')
    import numpy
    names = give_back()
    print(f'NumPy {numpy.__version__}: '
          + (f'gives back {", ".join(names)}' if names else
             'nothing to give back'))
    if '--check' in argv:
        try:
            print(check_mxnet())
        except (ImportError, OSError, RuntimeError) as error:
            print(f'import mxnet failed: {error}', file=sys.stderr)
            return 1
        warning = check_numpy_blas()
        if warning:
            print(warning, file=sys.stderr)
    return 0


if __name__ == '__main__':
    sys.exit(main())
