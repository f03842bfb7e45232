"""How many threads MXNet's operators use on the CPU, how long they spin
when idle, and which kernels OpenBLAS uses: three choices a process can
only make before `mxnet` is imported.

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
training step (`d2l_bert._kernels`) run on threads of their own, between
MXNet's operators, and the spinning threads took cores from them: at the
book's pretraining sizes on 2 cores, a step used about 2.1 s of CPU for
1.1 s, against 1.9 s for 1.0 s with short spins.  `shorten_openmp_spin`
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


def mxnet_has_openmp():
    """Whether the MXNet that `import mxnet` will load runs its operators
    with OpenMP: its Linux wheels do (GNU libgomp), its macOS wheel does
    not."""
    return sys.platform != 'darwin'


def use_all_cores(num_threads=None):
    """Make MXNet use every core (or `num_threads`), if still possible.

    Parameters
    ----------
    num_threads : int, optional
        Thread count to use; default: `physical_cores()`, unless the
        environment already sets ``OMP_NUM_THREADS`` (then that is kept).

    Returns
    -------
    str
        One line saying what MXNet will use and why.
    """
    cores = physical_cores()
    default = max((os.cpu_count() or 1) // 2, 1)
    # Not `checks.check_positive_int`: importing `checks` imports `mxnet`,
    # and this must run before
    if num_threads is not None and (not isinstance(num_threads, int)
                                    or num_threads < 1):
        raise ValueError(f'num_threads must be a positive integer, got '
                         f'{num_threads!r}')
    if 'mxnet' in sys.modules:
        current = os.environ.get('OMP_NUM_THREADS')
        chosen = current if current else f'{default} (MXNet default)'
        return (f'CPU threads: {chosen}; MXNet was imported before the '
                'thread count could be set (set OMP_NUM_THREADS before '
                'starting Python to change it)')
    if num_threads is None and os.environ.get('OMP_NUM_THREADS'):
        return (f"CPU threads: {os.environ['OMP_NUM_THREADS']} "
                f'(OMP_NUM_THREADS from the environment; {cores} cores)')
    chosen = num_threads if num_threads is not None else cores
    os.environ['OMP_NUM_THREADS'] = str(chosen)
    if not mxnet_has_openmp():
        return (f'CPU threads: {chosen} of {cores} cores for the compiled '
                "loops (MXNet's macOS wheel has no OpenMP, so the count does "
                'not reach its operators; set OMP_NUM_THREADS to choose)')
    return (f'CPU threads: {chosen} of {cores} cores (MXNet alone would '
            f'use {default}; set OMP_NUM_THREADS to choose)')


#: The AVX-512 parts OpenBLAS's SkylakeX kernels are built with
AVX512_FLAGS = ('avx512f', 'avx512bw', 'avx512dq', 'avx512vl')


def avx512(cpuinfo='/proc/cpuinfo'):
    """Whether this CPU and its operating system run AVX-512 (the parts
    in `AVX512_FLAGS`).

    Read from Linux's `cpuinfo`, whose flags leave out what the kernel
    has not enabled; False where that file does not exist.
    """
    try:
        with open(cpuinfo) as f:
            for line in f:
                if line.startswith('flags'):
                    flags = set(line.split(':', 1)[1].split())
                    return all(flag in flags for flag in AVX512_FLAGS)
    except OSError:
        pass
    return False


def use_avx512_blas():
    """Ask OpenBLAS for its AVX-512 kernels, if this CPU has AVX-512 and
    OpenBLAS is not loaded yet.

    Sets ``OPENBLAS_CORETYPE=SkylakeX`` unless the environment already
    sets ``OPENBLAS_CORETYPE`` (that is kept).  An Intel CPU with AVX-512
    gets these kernels anyway; an AMD Zen 4 gets them only this way.

    Returns
    -------
    str
        One line saying what was chosen and why.
    """
    if os.environ.get('OPENBLAS_CORETYPE'):
        return (f"OpenBLAS kernels: {os.environ['OPENBLAS_CORETYPE']} "
                '(OPENBLAS_CORETYPE from the environment)')
    if not avx512():
        return "OpenBLAS kernels: OpenBLAS's own choice (no AVX-512 here)"
    if 'mxnet' in sys.modules or 'scipy.linalg' in sys.modules:
        return ("OpenBLAS kernels: OpenBLAS's own choice; it was loaded "
                'before d2l_bert could ask for the AVX-512 ones (import '
                'd2l_bert before mxnet and scipy, or set '
                'OPENBLAS_CORETYPE=SkylakeX before starting Python)')
    os.environ['OPENBLAS_CORETYPE'] = 'SkylakeX'
    return ('OpenBLAS kernels: SkylakeX (AVX-512, which this CPU has; set '
            'OPENBLAS_CORETYPE to choose)')


#: Rounds an idle OpenMP thread spins before it sleeps (`shorten_openmp_spin`)
OPENMP_SPINCOUNT = 1000


def spin_chosen_elsewhere():
    """The line `shorten_openmp_spin` gives when the spin is not its to
    choose: MXNet has no OpenMP (macOS), or the environment sets
    ``GOMP_SPINCOUNT`` or ``OMP_WAIT_POLICY``; None otherwise."""
    if not mxnet_has_openmp():
        return ("OpenMP idle threads: none (MXNet's macOS wheel is built "
                'without OpenMP)')
    for name in ('GOMP_SPINCOUNT', 'OMP_WAIT_POLICY'):
        if os.environ.get(name):
            return (f'OpenMP idle threads: {name}={os.environ[name]} (from '
                    'the environment)')
    return None


def shorten_openmp_spin():
    """Make MXNet's idle OpenMP threads sleep after a short spin, if
    MXNet is not loaded yet.

    Sets ``GOMP_SPINCOUNT`` to `OPENMP_SPINCOUNT` unless the environment
    sets ``GOMP_SPINCOUNT`` or ``OMP_WAIT_POLICY`` (those are kept).  Only
    GNU libgomp, which MXNet's Linux wheels use, reads the variable; on
    macOS, whose MXNet wheel has no OpenMP, nothing is set.

    Returns
    -------
    str
        One line saying what was chosen and why.
    """
    chosen = spin_chosen_elsewhere()
    if chosen is not None:
        return chosen
    if 'mxnet' in sys.modules:
        return ('OpenMP idle threads: libgomp\'s default spin; MXNet was '
                'imported before d2l_bert could shorten it (import d2l_bert '
                f'first, or set GOMP_SPINCOUNT={OPENMP_SPINCOUNT} before '
                'starting Python)')
    os.environ['GOMP_SPINCOUNT'] = str(OPENMP_SPINCOUNT)
    return (f'OpenMP idle threads: sleep after {OPENMP_SPINCOUNT} spins '
            "(GOMP_SPINCOUNT; libgomp's default 300000 takes cores from the "
            'compiled loops; set GOMP_SPINCOUNT to choose)')
