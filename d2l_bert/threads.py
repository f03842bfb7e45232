"""How many threads MXNet's operators use on the CPU, how long they spin
when idle, and which kernels OpenBLAS uses: three choices a process can
only make before `mxnet` is imported.  `set_threads` makes them, quietly
where you need not ask:

- in the project's ``.venv``, when `mxnet` is first imported (the
  `d2l_bert.mxnet_compat` hook, loaded by a ``.pth`` file, calls
  `set_threads_quietly` before MXNet's library is loaded);
- on a hosted runtime, in the notebooks' set-up cell
  (`d2l_bert.chapter.hosted.set_up`);
- anywhere else, by calling it first::

    from d2l_bert.threads import set_threads
    print(set_threads())    # first: before `mxnet` is imported
    import d2l_bert

A variable you set yourself (``OMP_NUM_THREADS``, ``GOMP_SPINCOUNT`` or
``OMP_WAIT_POLICY``, ``OPENBLAS_CORETYPE``) is kept.  ``python -m
d2l_bert.threads`` (or `report()`, in a running kernel) prints the
three choices and who made them.

Importing `d2l_bert` alone chooses nothing and sets no environment
variable.  The functions here write to the mapping they are given
(`os.environ` by default) and read which modules are loaded from the
one they are given (`sys.modules`), so that they can be tested on
dictionaries.

MXNet reads the OpenMP thread count once, when it is imported.  Unless
``OMP_NUM_THREADS`` is set, it takes half the processors, assuming that
every core runs two hardware threads: on a laptop or a virtual machine
without them (2 cores, 2 processors), one core sits idle.  `use_all_cores`
sets ``OMP_NUM_THREADS`` to the number of physical cores this process may
run on, before MXNet is imported, and says what it chose.

OpenBLAS picks its kernels for the CPU it finds when it is loaded, and
importing `mxnet` loads SciPy's (through `scipy.sparse`).  SciPy 1.10's
OpenBLAS (0.3.18) does not know AMD's Zen 4 and later and takes them for
AVX2-only CPUs; the attention loops, which multiply 64 x 64 blocks with
it, then run at half speed.  `use_avx512_blas` asks for OpenBLAS's
AVX-512 kernels on a CPU that has AVX-512, before the library is loaded.

MXNet's OpenMP library (GNU libgomp) reads its settings when it is loaded,
with `mxnet`.  By default, a thread left idle at the end of an operator
spins for up to 300,000 rounds before it sleeps.  The compiled loops of a
training step (`d2l_bert.fast`) run on threads of their own, between
MXNet's operators, and the spinning threads took cores from them: a
step used more CPU time and took longer than with short spins
(`docs/performance.md`, "Threads and the CPU").  `shorten_openmp_spin`
sets ``GOMP_SPINCOUNT`` to 1000 rounds, still long enough for one
operator to follow another without a wake-up.

MXNet 1.9.1's one macOS wheel (x86_64) is built without OpenMP: its
library links no OpenMP runtime (its matrix products call Apple's
Accelerate, which has threads of its own), so ``OMP_NUM_THREADS`` does
not change its operators.  There the thread count only sizes the
compiled loops, no spin is set, and the messages say so.

This module must not import `mxnet`.
"""
import os
import platform
import sys


def physical_cores():
    """Return the number of physical cores this process may run on.

    Hardware threads of one core (hyper-threading, SMT) count once.  Read
    from Linux's ``/sys``; elsewhere, the number of logical processors.
    """
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1
    cores = set()
    for cpu in cpus:
        path = (f'/sys/devices/system/cpu/cpu{cpu}/topology/'
                'thread_siblings_list')
        try:
            with open(path) as f:
                cores.add(f.read().strip())
        except OSError:
            cores.add(str(cpu))
    return max(len(cores), 1)


def mxnet_has_openmp(platform=None):
    """Whether the MXNet that `import mxnet` will load runs its operators
    with OpenMP: its Linux wheels do (GNU libgomp), its macOS wheel does
    not.  `platform` defaults to `sys.platform`."""
    return (sys.platform if platform is None else platform) != 'darwin'


def _too_late(modules, names=('mxnet',)):
    """Whether one of `names` is loaded already (in `modules`, default
    `sys.modules`)."""
    modules = sys.modules if modules is None else modules
    return any(name in modules for name in names)


def use_all_cores(num_threads=None, environ=None, modules=None,
                  platform=None):
    """Make MXNet use every core (or `num_threads`), if still possible.

    Parameters
    ----------
    num_threads : int, optional
        Thread count to use; default: `physical_cores()`, unless the
        environment already sets ``OMP_NUM_THREADS`` (then that is kept).
    environ : mutable mapping, optional
        Where ``OMP_NUM_THREADS`` is read and written; `os.environ` by
        default.
    modules : mapping, optional
        The loaded modules; `sys.modules` by default.
    platform : str, optional
        `sys.platform` by default.

    Returns
    -------
    str
        One line saying what MXNet will use and why.
    """
    environ = os.environ if environ is None else environ
    cores = physical_cores()
    default = max((os.cpu_count() or 1) // 2, 1)
    # Not `checks.check_positive_int`: importing `checks` imports `mxnet`,
    # and this must run before
    if num_threads is not None and (not isinstance(num_threads, int)
                                    or isinstance(num_threads, bool)
                                    or num_threads < 1):
        raise ValueError(f'num_threads must be a positive integer, got '
                         f'{num_threads!r}')
    if _too_late(modules):
        current = environ.get('OMP_NUM_THREADS')
        chosen = current if current else f'{default} (MXNet default)'
        return (f'CPU threads: {chosen}; MXNet was imported before the '
                'thread count could be set (call set_threads() before '
                '`import mxnet`, or set OMP_NUM_THREADS before starting '
                'Python)')
    if num_threads is None and environ.get('OMP_NUM_THREADS'):
        return (f"CPU threads: {environ['OMP_NUM_THREADS']} "
                f'(OMP_NUM_THREADS from the environment; {cores} cores)')
    chosen = num_threads if num_threads is not None else cores
    environ['OMP_NUM_THREADS'] = str(chosen)
    if not mxnet_has_openmp(platform):
        return (f'CPU threads: {chosen} of {cores} cores for the compiled '
                "loops (MXNet's macOS wheel has no OpenMP, so the count does "
                'not reach its operators; set OMP_NUM_THREADS to choose)')
    return (f'CPU threads: {chosen} of {cores} cores (MXNet alone would '
            f'use {default}; set OMP_NUM_THREADS to choose)')


def late_import_hint(environ=None, modules=None, platform=None):
    """Say so when MXNet, imported already, runs on fewer cores than the
    machine has because nobody chose its thread count.

    MXNet's operators take half the processors unless ``OMP_NUM_THREADS``
    was set when it was imported, and nothing changes that afterwards (its
    engine threads reset their OpenMP count when they start).  A script
    that imports `mxnet` before calling `set_threads` then runs its matrix
    products on one core of a 2-core laptop.

    Parameters
    ----------
    environ, modules : mappings, optional
        `os.environ` and `sys.modules` by default.
    platform : str, optional
        `sys.platform` by default.

    Returns
    -------
    str or None
        One sentence to show the user, or None when MXNet is not imported,
        has no OpenMP (macOS), ``OMP_NUM_THREADS`` is set, or MXNet's
        default already covers every core.
    """
    environ = os.environ if environ is None else environ
    if not _too_late(modules) or not mxnet_has_openmp(platform) \
            or environ.get('OMP_NUM_THREADS'):
        return None
    cores = physical_cores()
    default = max((os.cpu_count() or 1) // 2, 1)
    if default >= cores:
        return None
    return (f"MXNet runs its operators on {default} of this machine's "
            f'{cores} cores: it was imported before '
            'd2l_bert.threads.set_threads() and without OMP_NUM_THREADS, '
            'and its thread count cannot change afterwards.  For up to '
            f'{cores / default:g}x faster matrix products, call '
            'set_threads() before `import mxnet` (in the project\'s .venv '
            'importing mxnet does it) or start Python with '
            f'OMP_NUM_THREADS={cores}.')


#: The AVX-512 parts OpenBLAS's SkylakeX kernels are built with
AVX512_FLAGS = ('avx512f', 'avx512bw', 'avx512dq', 'avx512vl')


def avx512(cpuinfo='/proc/cpuinfo', machine=None):
    """Whether this CPU and its operating system run AVX-512 (the parts
    in `AVX512_FLAGS`).

    Read from Linux's `cpuinfo`, whose flags leave out what the kernel
    has not enabled; False where that file does not exist, and on any
    `machine` (`platform.machine()`) but x86-64 (an arm64 program run by
    an emulator reads the x86 host's file).
    """
    machine = platform.machine() if machine is None else machine
    if machine not in ('x86_64', 'AMD64'):
        return False
    try:
        with open(cpuinfo) as f:
            for line in f:
                if line.startswith('flags'):
                    flags = set(line.split(':', 1)[1].split())
                    return all(flag in flags for flag in AVX512_FLAGS)
    except OSError:
        pass
    return False


def use_avx512_blas(environ=None, modules=None, cpuinfo='/proc/cpuinfo'):
    """Ask OpenBLAS for its AVX-512 kernels, if this CPU has AVX-512 and
    OpenBLAS is not loaded yet.

    Sets ``OPENBLAS_CORETYPE=SkylakeX`` in `environ` (`os.environ` by
    default) unless it already sets ``OPENBLAS_CORETYPE`` (that is kept:
    ``OPENBLAS_CORETYPE=Haswell`` gives the AVX2 kernels on any x86 CPU).
    An Intel CPU with AVX-512 gets these kernels anyway; an AMD Zen 4
    gets them only this way.  `modules` (`sys.modules` by default) tells
    whether OpenBLAS is loaded; `cpuinfo` is read by `avx512`.

    Returns
    -------
    str
        One line saying what was chosen and why.
    """
    environ = os.environ if environ is None else environ
    if environ.get('OPENBLAS_CORETYPE'):
        return (f"OpenBLAS kernels: {environ['OPENBLAS_CORETYPE']} "
                '(OPENBLAS_CORETYPE from the environment)')
    if not avx512(cpuinfo):
        return "OpenBLAS kernels: OpenBLAS's own choice (no AVX-512 here)"
    if _too_late(modules, ('mxnet', 'scipy.linalg')):
        return ("OpenBLAS kernels: OpenBLAS's own choice; it was loaded "
                'before the AVX-512 ones could be asked for (call '
                'set_threads() before `import mxnet` and scipy, or set '
                'OPENBLAS_CORETYPE=SkylakeX before starting Python)')
    environ['OPENBLAS_CORETYPE'] = 'SkylakeX'
    return ('OpenBLAS kernels: SkylakeX (AVX-512, which this CPU has; set '
            'OPENBLAS_CORETYPE to choose)')


#: Rounds an idle OpenMP thread spins before it sleeps (`shorten_openmp_spin`)
OPENMP_SPINCOUNT = 1000


def spin_chosen_elsewhere(environ=None, platform=None):
    """The line `shorten_openmp_spin` gives when the spin is not its to
    choose: MXNet has no OpenMP (macOS), or `environ` (`os.environ` by
    default) sets ``GOMP_SPINCOUNT`` or ``OMP_WAIT_POLICY``; None
    otherwise."""
    environ = os.environ if environ is None else environ
    if not mxnet_has_openmp(platform):
        return ("OpenMP idle threads: none (MXNet's macOS wheel is built "
                'without OpenMP)')
    for name in ('GOMP_SPINCOUNT', 'OMP_WAIT_POLICY'):
        if environ.get(name):
            return (f'OpenMP idle threads: {name}={environ[name]} (from '
                    'the environment)')
    return None


def shorten_openmp_spin(environ=None, modules=None, platform=None):
    """Make MXNet's idle OpenMP threads sleep after a short spin, if
    MXNet is not loaded yet.

    Sets ``GOMP_SPINCOUNT`` to `OPENMP_SPINCOUNT` in `environ`
    (`os.environ` by default) unless it sets ``GOMP_SPINCOUNT`` or
    ``OMP_WAIT_POLICY`` (those are kept).  Only GNU libgomp, which
    MXNet's Linux wheels use, reads the variable; on macOS, whose MXNet
    wheel has no OpenMP, nothing is set.

    Returns
    -------
    str
        One line saying what was chosen and why.
    """
    environ = os.environ if environ is None else environ
    chosen = spin_chosen_elsewhere(environ, platform)
    if chosen is not None:
        return chosen
    if _too_late(modules):
        return ('OpenMP idle threads: libgomp\'s default spin; MXNet was '
                'imported before it could be shortened (call set_threads() '
                f'first, or set GOMP_SPINCOUNT={OPENMP_SPINCOUNT} before '
                'starting Python)')
    environ['GOMP_SPINCOUNT'] = str(OPENMP_SPINCOUNT)
    return (f'OpenMP idle threads: sleep after {OPENMP_SPINCOUNT} spins '
            "(GOMP_SPINCOUNT; libgomp's default 300000 takes cores from the "
            'compiled loops; set GOMP_SPINCOUNT to choose)')


#: The variables `set_threads` may write
VARIABLES = ('OMP_NUM_THREADS', 'GOMP_SPINCOUNT', 'OPENBLAS_CORETYPE')
#: What `set_threads` wrote to this process's `os.environ`, by name
_wrote = {}
#: The lines of its last call there before `mxnet` was loaded (`report`)
_chosen = None


def _choose(num_threads, short_spin, environ, modules):
    """The three choices of `set_threads`, made in `environ`; their lines."""
    if short_spin:
        spin = shorten_openmp_spin(environ, modules)
    else:
        spin = spin_chosen_elsewhere(environ) or (
            "OpenMP idle threads: libgomp's default spin")
    return '\n'.join([use_all_cores(num_threads, environ, modules), spin,
                      use_avx512_blas(environ, modules)])


def set_threads(num_threads=None, short_spin=True, environ=None,
                modules=None):
    """Make the three choices above, for this process and the processes it
    starts; call it before `import mxnet` (and before `import d2l_bert`'s
    models, which import `mxnet`).

    In `os.environ` it can be called again: what an earlier call set
    counts as unset, so the new call's arguments decide (the same ones
    make the same choices), and a variable set by anyone else is kept.
    Once `mxnet` is loaded it changes nothing and returns the lines of
    the last call made before.

    Parameters
    ----------
    num_threads : int, optional
        MXNet's CPU threads; default every physical core (`use_all_cores`).
    short_spin : bool, default True
        Let idle OpenMP threads sleep soon (`shorten_openmp_spin`), which
        the compiled loops of `d2l_bert.fast` need; False keeps libgomp's
        default.
    environ : mutable mapping, optional
        Where the choices are written; `os.environ` by default.
    modules : mapping, optional
        The loaded modules; `sys.modules` by default.

    Returns
    -------
    str
        Three lines saying what was chosen and why (threads, OpenMP spin,
        OpenBLAS kernels); a choice made too late says so.
    """
    global _chosen
    if environ is not None and environ is not os.environ:
        return _choose(num_threads, short_spin, environ, modules)
    late = _too_late(modules)
    if late and _chosen is not None:
        return _chosen
    ours = {name: value for name, value in _wrote.items()
            if os.environ.get(name) == value}
    view = {name: value for name, value in os.environ.items()
            if name not in ours}
    before = dict(view)
    lines = _choose(num_threads, short_spin, view, modules)
    if late:
        return lines
    _wrote.clear()
    for name in VARIABLES:
        if name in view and view[name] != before.get(name):
            os.environ[name] = _wrote[name] = view[name]
        elif name in ours and name not in view:
            del os.environ[name]
    _chosen = lines
    return lines


def set_threads_quietly():
    """`set_threads()`, printing nothing, unless it ran in this process.

    What the `d2l_bert.mxnet_compat` hook calls when `mxnet` is first
    imported, and the hosted set-up before that: an earlier explicit
    call's choices stay.  `report` says what was chosen.
    """
    if _chosen is None:
        set_threads()


def report(modules=None):
    """What this process chose, three lines, or what it would choose.

    Each line says who chose: the environment (you, or the process that
    started this one) or d2l-bert.  Before any choice (`mxnet` not
    imported yet), the lines are what `set_threads()`, or importing
    `mxnet` in the project's ``.venv``, would choose now; `modules` is
    `sys.modules` by default.
    """
    if _chosen is not None:
        return _chosen
    return set_threads(environ=dict(os.environ), modules=modules)


def main(argv=None):
    """``python -m d2l_bert.threads``: print `report()`."""
    argv = sys.argv[1:] if argv is None else argv
    if argv:
        print('usage: python -m d2l_bert.threads', file=sys.stderr)
        return 2
    print(report())
    return 0


if __name__ == '__main__':
    sys.exit(main())
