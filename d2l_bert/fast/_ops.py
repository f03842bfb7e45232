"""The runtime of the fast layer's custom operators: whether the
compiled loops run here, on how many threads, and how an operator runs
a loop over its rows in MXNet's own memory.

Four pieces of the book's pretraining step cost far more on a CPU than
their arithmetic: MXNet 1.9's LayerNorm backward goes through its generic
broadcast and reduce kernels (about 20 times its forward pass), the MLM
loss's `log_softmax` backward through oneDNN's reference loop over the
5120 x 20256 scores, the interleaved attention operators run on one
thread, and `Dropout` draws its mask one number at a time.  Compiled
loops (`d2l_bert.fast._loops`, `d2l_bert.fast._inference_loops`) do that
work, wrapped as MXNet custom operators so that they run inside the
hybridized graph of `train_bert`'s step.  The operators live in their
own modules, which this one serves:

- `_norm_ops`: `layer_norm`, `add_norm` and `add_embeddings`;
- `_loss_ops`: `softmax_ce`, the MLM loss;
- `_attention_ops`: `self_attention`, with dropout and gradients;
- `_inference_ops`: the forward-only operators of the inference twin.

Here:

- whether the loops serve (`available`, `usable`, `describe`): numba
  imports, each loop passes its smoke test (`_smoke`), and
  ``D2L_BERT_KERNELS`` (`presets.KERNELS_ENV`) is not '0';
- SciPy's OpenBLAS held to one thread (`single_threaded_blas`), as the
  loops split the work among threads themselves;
- running a loop over row ranges in parallel (`run`, `run_summing`) on
  NumPy views of MXNet's arrays (`host`, `loop_arrays`, `loop_output`,
  `assign`);
- the dropout seed and scalars the loops share (`dropout_seed`,
  `dropout_scalars`);
- registering an operator (`register`), and the wait for MXNet's queue
  at the interpreter's exit, registered with the first operator made.

The fast blocks (`d2l_bert.fast.blocks`) decide once, when they are
built, whether to call the operators (`attention_path`); the book's
blocks stay their test oracle (`tests/test_fast_blocks.py`,
`tests/test_fast_loops.py`).  Inside the LayerNorm and loss operators,
arrays on another device or of another type than float32 take a slower
path built from MXNet operators, with the same results; the attention
and AddNorm loops take float32 and float64 (other types go through
float32).
"""
import atexit
import ctypes
import os
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor

import mxnet as mx
import numpy as onp
from mxnet.base import _LIB, check_call

from ..presets import KERNELS_ENV
from . import warm

_pool = None
_pool_lock = threading.Lock()
#: The outcome of each smoke test run in this process, by what it tests
_smoke_results = {}


def passes_smoke_test(what, smoke_test):
    """Run `smoke_test` once per process and say whether it passed.

    A failure (no numba, or a loop that does not compile here) warns
    once, naming `what` ('the compiled pretraining kernels are', ...),
    and MXNet's own operators are used instead.
    """
    if what not in _smoke_results:
        try:
            smoke_test()
            _smoke_results[what] = True
        except Exception as e:  # no numba, or it cannot compile here
            warnings.warn(f'd2l_bert: {what} not available '
                          f'({type(e).__name__}: {e}); '
                          f"MXNet's operators are used instead (slower)",
                          RuntimeWarning, stacklevel=3)
            _smoke_results[what] = False
    return _smoke_results[what]


def available():
    """Whether the compiled kernels can be used: numba imports and
    ``D2L_BERT_KERNELS`` is not '0'.  A compile started ahead
    (`warm.start`) is waited for first, so that the loops load from
    numba's cache."""
    if disabled():
        return False
    warm.wait()
    return passes_smoke_test('the compiled pretraining kernels are',
                             _smoke_test)


def disabled():
    """Whether the environment turns the kernels off."""
    return os.environ.get(KERNELS_ENV, '1') == '0'


def usable(contexts):
    """Whether the compiled loops serve arrays on `contexts` (a list of
    `mxnet.Context`): all of them CPUs, and `available()`."""
    return all(c.device_type == 'cpu' for c in contexts) and available()


def describe(devices=None):
    """One line saying whether `train_bert` will use the compiled
    gradients on `devices` (a list of contexts; default: the CPU), and
    why not."""
    devices = list(devices) if devices is not None else [mx.cpu()]
    if disabled():
        why = f'off ({KERNELS_ENV}=0)'
    elif any(d.device_type != 'cpu' for d in devices):
        why = "off on a GPU (MXNet's own operators run there)"
    elif not available():
        why = "off (numba is missing or failed; MXNet's operators run)"
    else:
        import numba
        why = (f'on (numba {numba.__version__}, {threads()} threads, '
               f'OpenBLAS {blas_kernels() or "not found"} kernels)')
    return f'compiled attention, AddNorm, LayerNorm and MLM-loss loops: {why}'


class _OpenBLAS:
    """An OpenBLAS library, whatever prefix its symbols carry: SciPy 1.10
    bundles a plain ``libopenblas`` (``openblas_set_num_threads``), SciPy
    1.13 and later ``libscipy_openblas`` (``scipy_openblas_...``)."""

    def __init__(self, lib, prefix):
        self.lib, self.prefix = lib, prefix

    def set_num_threads(self, n):
        getattr(self.lib, self.prefix + 'openblas_set_num_threads')(n)

    def corename(self):
        function = getattr(self.lib, self.prefix + 'openblas_get_corename')
        function.restype = ctypes.c_char_p
        return function().decode()


def _scipy_openblas():
    """SciPy's OpenBLAS libraries (`_OpenBLAS`), which the attention
    loops call through numba's `np.dot`; none if SciPy uses another
    BLAS."""
    import glob
    import scipy
    root = os.path.dirname(os.path.abspath(scipy.__file__))
    found = []
    for pattern in ('../scipy.libs/libopenblas*', '.dylibs/libopenblas*',
                    '.libs/libopenblas*', '../scipy.libs/libopenblas*.dll',
                    '../scipy.libs/libscipy_openblas*',
                    '.dylibs/libscipy_openblas*'):
        for path in glob.glob(os.path.join(root, pattern)):
            prefix = 'scipy_' if 'libscipy_openblas' in path else ''
            try:
                lib = ctypes.CDLL(path)
                getattr(lib, prefix + 'openblas_set_num_threads')
            except (OSError, AttributeError):
                continue   # another BLAS: only the speed differs
            found.append(_OpenBLAS(lib, prefix))
    return found


def single_threaded_blas():
    """Give SciPy's OpenBLAS one thread: the attention loops already
    split the work among threads, and OpenBLAS's own threads (for
    products above 64 x 64 x 64) would fight them and MXNet's for the
    cores.  SciPy's `scipy.linalg` gets one
    thread too; MXNet's own OpenBLAS is another library and keeps its
    threads.  Returns the libraries set."""
    libs = _scipy_openblas()
    for lib in libs:
        lib.set_num_threads(1)
    return libs


def blas_kernels():
    """The kernels SciPy's OpenBLAS runs ('SkylakeX', 'Haswell', 'Zen',
    ...), which `d2l_bert.threads.use_avx512_blas` may have chosen;
    None if SciPy uses another BLAS."""
    for lib in _scipy_openblas():
        try:
            return lib.corename()
        except AttributeError:
            continue
    return None


def _smoke_test():
    """Compile (or load from numba's cache) and run each loop once on a
    tiny input, checking one number of each (`_smoke.run`)."""
    from . import _loops, _smoke
    single_threaded_blas()
    _smoke.run(_loops)



def dropout_seed(F, like):
    """A dropout mask's seed: two random integers below 2**16, drawn in
    the graph so that `mx.random.seed` governs them, on `like`'s
    device."""
    if F is mx.sym:
        return F.random.uniform(0, 2 ** 16, shape=(2,))
    return F.random.uniform(0, 2 ** 16, shape=(2,), ctx=like.context)


def dropout_scalars(seed, rate, on, dtype):
    """The seed, threshold and keep scale (``1 / (1 - rate)``, of type
    `dtype`) as the loops take them, from the seed array drawn by
    `dropout_seed`; threshold 0 (no dropout) when not `on`."""
    if not on:
        return onp.uint64(0), onp.uint64(0), dtype.type(1)
    halves = host(seed).astype(onp.int64)                   # (2,)
    seed = onp.uint64((halves[0] << 16) + halves[1])
    threshold = onp.uint64(min(int(rate * 2 ** 32), 2 ** 32))
    keep = 1 / (1 - rate) if rate < 1 else 0.0
    return seed, threshold, dtype.type(keep)


# ---------------------------------------------------------------------------
# Running the compiled loops
# ---------------------------------------------------------------------------

def threads():
    """Threads for the loops: ``OMP_NUM_THREADS`` if set (as MXNet's
    operators), else every physical core."""
    try:
        return max(1, int(os.environ.get('OMP_NUM_THREADS', '')))
    except ValueError:
        from ..threads import physical_cores
        return physical_cores()


def _split(num_rows):
    """Row ranges, one per thread."""
    n = min(threads(), max(num_rows, 1))
    bounds = onp.linspace(0, num_rows, n + 1).astype(int)
    return list(zip(bounds[:-1], bounds[1:]))


def run(kernel, num_rows, *args, per_chunk=None):
    """Run `kernel(*args, r0, r1)` over the rows, chunks in parallel.

    With `per_chunk`, chunk k gets ``*per_chunk(k)`` (its own
    accumulators) between `args` and its row range."""
    global _pool
    chunks = _split(num_rows)
    if len(chunks) == 1:
        extra = per_chunk(0) if per_chunk else ()
        kernel(*args, *extra, *chunks[0])
        return
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(threads(),
                                       thread_name_prefix='d2l_bert')
    futures = []
    for k, (r0, r1) in enumerate(chunks):
        extra = per_chunk(k) if per_chunk else ()
        try:
            futures.append(_pool.submit(kernel, *args, *extra, r0, r1))
        except RuntimeError:
            # The pool refuses work once the interpreter is shutting down,
            # while MXNet may still run a pending step: finish it here
            kernel(*args, *extra, r0, r1)
    for f in futures:
        f.result()


def host(arr):
    """A NumPy view of a CPU array's memory (no copy), same shape.

    The custom operator runs once its inputs are ready and before anyone
    reads its outputs, so the memory can be used directly.
    """
    shape = arr.shape
    dtype = onp.dtype(arr.dtype)
    size = int(onp.prod(shape)) if shape else 1
    if size == 0:
        return onp.empty(shape, dtype)
    ptr = ctypes.c_void_p()
    check_call(_LIB.MXNDArrayGetData(arr.handle, ctypes.byref(ptr)))
    buf = (ctypes.c_char * (size * dtype.itemsize)).from_address(ptr.value)
    return onp.frombuffer(buf, dtype=dtype).reshape(shape)


def loops_serve(arrays):
    """Whether the compiled loops can serve these arrays: float32 on the
    CPU, with numba present."""
    return (arrays[0].dtype == onp.float32
            and usable([a.context for a in arrays]))


def loop_arrays(arrays, op_type):
    """NumPy views of `arrays` in the type the attention and AddNorm loops
    take: the first array's if float32 or float64, else float32 (copies).
    Raises RuntimeError off the CPU or without numba."""
    if not usable([a.context for a in arrays]):
        raise RuntimeError(f'{op_type} runs on the CPU with numba only')
    hosted = [host(a) for a in arrays]
    t = hosted[0].dtype
    if t not in (onp.float32, onp.float64):
        t = onp.dtype(onp.float32)
    return [a.astype(t, copy=False) for a in hosted]


def loop_output(arr, req, shape, dtype):
    """The NumPy array (of `shape`) a loop writes an output into: the
    MXNet array `arr`'s own memory when the request is to write it and its
    type is `dtype`, else a new array, which `assign` then stores as `req`
    asks."""
    if req in ('write', 'inplace') and arr.dtype == dtype:
        return host(arr).reshape(shape)
    return onp.empty(shape, dtype)


def assign(dst, req, value):
    """Store `value` (a NumPy array) into the MXNet array `dst` as `req`
    asks ('null', 'write', 'inplace' or 'add'); nothing to do when `value`
    is `dst`'s own memory, written in place (`loop_output`)."""
    if req == 'null':
        return
    out = host(dst).reshape(value.shape)
    if out.ctypes.data == value.ctypes.data:
        return
    if req == 'add':
        out += value
    else:
        out[...] = value


def run_summing(kernel, N, C, *args):
    """`run(kernel, N, *args, acc_gamma, acc_beta)`, each chunk of rows
    with its own float64 accumulators (C,); returns their totals, (2, C)
    (the gamma and beta gradients of the LayerNorm loops)."""
    acc = onp.zeros((len(_split(N)), 2, C), onp.float64)
    run(kernel, N, *args, per_chunk=lambda k: (acc[k, 0], acc[k, 1]))
    return acc.sum(axis=0)                                   # (2, C)


def no_gradient(op, req, in_data, in_grad, ks):
    """Zero gradients for the inputs `ks` of a custom operator (seeds,
    lengths, labels), which have none."""
    for k in ks:
        if req[k] != 'null':
            op.assign(in_grad[k], req[k], mx.np.zeros_like(in_data[k]))



def _finish_pending_work():
    """Wait for MXNet's queued work; run at the interpreter's exit.

    MXNet's own exit handler stops the custom operators' threads before it
    waits for the engine.  A script that ends right after
    ``l.backward(); trainer.step(1)`` (reading a loss waits for the forward
    pass only) still has custom operators of the backward pass queued
    then, and the wait never ends: the process hangs at exit.  Registered
    after MXNet's handler, this one runs before it (`atexit` runs the last
    registered first) and lets the queue drain while the threads live.
    """
    mx.nd.waitall()


_waits_at_exit = []  # holds True once `_finish_pending_work` is registered


def finish_pending_work_at_exit():
    """Register `_finish_pending_work` with `atexit`, once per process:
    when the first custom operator is made (`register`), not at import,
    so that importing the fast layer changes nothing."""
    if not _waits_at_exit:
        atexit.register(_finish_pending_work)
        _waits_at_exit.append(True)


def all_arrays(out_grad, in_data, out_data):
    """Every array as a backward dependency.

    MXNet 1.9 keeps the dependencies of the custom operator declared last
    for all of them (`_registry.result_deps`), and fails on an array left
    out by one operator but named by another; declaring every array keeps
    the two operators here from tripping each other.
    """
    return list(out_grad) + list(in_data) + list(out_data)


def register(name):
    """`mx.operator.register`, under NumPy semantics whatever the caller's.

    MXNet fixes, when an operator is registered, which array type its
    callbacks receive (legacy `NDArray` or `mx.np.ndarray`, by
    `is_np_array()` at that moment, in `mxnet/operator.py`); the operators
    here are written for `mx.np` arrays, and this module may be imported
    before the caller's ``npx.set_np()``.  The first operator that
    MXNet makes from a registered property registers the wait at exit
    (`finish_pending_work_at_exit`).
    """
    def decorate(prop):
        create = prop.create_operator

        def create_operator(self, ctx, shapes, dtypes):
            finish_pending_work_at_exit()  # a custom operator may queue
            return create(self, ctx, shapes, dtypes)
        prop.create_operator = create_operator
        with mx.util.np_array(True):
            return mx.operator.register(name)(prop)
    return decorate

