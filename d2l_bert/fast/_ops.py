"""Compiled CPU loops for the pretraining step: self-attention, AddNorm,
LayerNorm and the MLM loss.

Four pieces of the book's pretraining step cost far more on a CPU than
their arithmetic: MXNet 1.9's LayerNorm backward goes through its generic
broadcast and reduce kernels (about 20 times its forward pass), the MLM
loss's `log_softmax` backward through oneDNN's reference loop over the
5120 x 20256 scores, the interleaved attention operators run on one
thread, and `Dropout` draws its mask one number at a time.  Here
compiled loops (`d2l_bert.fast._loops`) do that work,
wrapped as MXNet custom operators so that they run inside the hybridized
graph of `train_bert`'s step:

- `layer_norm(F, X, gamma, beta, epsilon)`: the forward pass is MXNet's
  own `LayerNorm` (the same numbers as the book's); the backward pass is
  one compiled loop over the rows.
- `softmax_ce(F, scores, labels)`: the per-row loss of Gluon's
  `SoftmaxCELoss` with integer labels (``-log_softmax(scores)[label]``),
  forward and backward each one pass over the scores.
- `self_attention(F, qkv, valid_lens, num_heads, dropout)`: the scaled
  dot-product attention of every head, with its masking and dropout,
  forward and backward; MXNet's interleaved attention operators use one
  thread only.
- `add_norm(F, X, Y, gamma, beta, epsilon, dropout)`: `AddNorm`'s
  ``LayerNorm(X + dropout(Y))`` in one operator; MXNet's `Dropout` draws
  its mask one number at a time.
- `add_embeddings(F, X, Y, row)`: BERT's sum of three embeddings in one
  `add_n`, the positional one's broadcast as a matrix product (MXNet
  operators only); the gradients are the sum's, passed on, and a product.

The fast blocks (`d2l_bert.fast.blocks`) decide once, when they are
built, whether to call these operators; the book's blocks stay their
test oracle (`tests/test_fast_blocks.py`, `tests/test_fast_loops.py`).

The kernels need numba; without it, on a device other than the CPU, or
with ``D2L_BERT_KERNELS=0`` in the environment, the fast blocks use
MXNet's operators.
Inside the LayerNorm and loss operators, arrays on another device or of
another type than float32 take a slower path built from MXNet operators,
with the same results; the attention and AddNorm loops take float32 and
float64 (other types go through float32).
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
    if _disabled():
        return False
    warm.wait()
    return passes_smoke_test('the compiled pretraining kernels are',
                             _smoke_test)


def _disabled():
    """Whether the environment turns the kernels off."""
    return os.environ.get('D2L_BERT_KERNELS', '1') == '0'


def usable(contexts):
    """Whether the compiled loops serve arrays on `contexts` (a list of
    `mxnet.Context`): all of them CPUs, and `available()`."""
    return all(c.device_type == 'cpu' for c in contexts) and available()


def describe(devices=None):
    """One line saying whether `train_bert` will use the compiled
    gradients on `devices` (a list of contexts; default: the CPU), and
    why not."""
    devices = list(devices) if devices is not None else [mx.cpu()]
    if _disabled():
        why = 'off (D2L_BERT_KERNELS=0)'
    elif any(d.device_type != 'cpu' for d in devices):
        why = "off on a GPU (MXNet's own operators run there)"
    elif not available():
        why = "off (numba is missing or failed; MXNet's operators run)"
    else:
        import numba
        why = (f'on (numba {numba.__version__}, {_threads()} threads, '
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


def _single_threaded_blas():
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
    _single_threaded_blas()
    _smoke.run(_loops)


# ---------------------------------------------------------------------------
# What the blocks call
# ---------------------------------------------------------------------------

def layer_norm(F, X, gamma, beta, epsilon):
    """LayerNorm over the last axis, as `nn.LayerNorm` computes it.

    Parameters
    ----------
    F : the operator namespace of `hybrid_forward`
    X : shape (..., C)
    gamma, beta : shape (C,)
    epsilon : float

    Returns
    -------
    shape (..., C)
    """
    Y = F.Custom(X.as_nd_ndarray(), gamma.as_nd_ndarray(),
                 beta.as_nd_ndarray(), epsilon=repr(float(epsilon)),
                 op_type='d2l_bert_layer_norm')[0]
    return Y.as_np_ndarray()                                 # (..., C)


def softmax_ce(F, scores, labels):
    """``-log_softmax(scores)[label]`` per row: `SoftmaxCELoss`'s loss
    before weighting.

    Parameters
    ----------
    F : the operator namespace of `hybrid_forward`
    scores : shape (N, V)
    labels : shape (N,), integer values (clipped to [0, V) as `pick`
        does)

    Returns
    -------
    shape (N,)
    """
    loss = F.Custom(scores.as_nd_ndarray(), labels.as_nd_ndarray(),
                    op_type='d2l_bert_softmax_ce')[0]
    return loss.as_np_ndarray()                              # (N,)


def self_attention(F, qkv, valid_lens, num_heads, dropout,
                   query_lens=None):
    """Scaled dot-product attention of every head, from the fused
    projection `qkv`, as `MultiHeadAttention`'s book path computes it.

    MXNet's interleaved attention operators run on one thread only, and
    the masking and dropout around them cost as much again; here one
    custom operator does the products (BLAS on blocks of one example and
    head), the masked softmax and the dropout, pairs split among threads.
    The dropout mask is a hash of its position and a seed that MXNet's
    random generator draws (so `mx.random.seed` fixes it); it differs
    from the mask of the plain path's `Dropout`, with the same rate.

    Parameters
    ----------
    F : the operator namespace of `hybrid_forward`
    qkv : shape (B, T, 3*H)
        Queries, keys and values, head by head (`qkv_weight`'s layout).
    valid_lens : shape (B,) or None
    num_heads : int
    dropout : float
        Dropout rate on the attention weights, applied in training.
    query_lens : shape (B,), optional
        How many queries of each sequence to compute (the rest of its
        output and weights are 0, and no gradient comes from them): the
        rows a caller reads, such as the packed step's
        (`step.packed_tokens`).  None: all T.

    Returns
    -------
    output : shape (B, T, H)
    attention_weights : shape (B*h, T, T), before dropout
    """
    qkv = qkv.as_nd_ndarray()
    out = attention_op(F, 'd2l_bert_self_attention',
                       [qkv, _dropout_seed(F, qkv)], valid_lens, num_heads,
                       query_lens, dropout=repr(float(dropout)))
    return out[0].as_np_ndarray(), out[1].as_np_ndarray()


def attention_op(F, op_type, inputs, valid_lens, num_heads, query_lens=None,
                 **attributes):
    """`F.Custom` of an attention operator (`op_type`, registered with an
    `AttentionProp`): its `inputs` (legacy arrays, `qkv` first), then
    `valid_lens` and `query_lens` if not None, with the heads and whether
    lengths are given among its `attributes`."""
    if valid_lens is not None:
        inputs = inputs + [valid_lens.as_nd_ndarray()]
    if query_lens is not None:
        inputs = inputs + [query_lens.as_nd_ndarray()]
        attributes['has_queries'] = 'True'
    return F.Custom(*inputs, heads=str(num_heads),
                    has_lens=str(valid_lens is not None), op_type=op_type,
                    **attributes)


def add_norm(F, X, Y, gamma, beta, epsilon, dropout):
    """``LayerNorm(X + dropout(Y))`` over the last axis, as `AddNorm`
    computes it, in one custom operator.

    On the book's path this is four operators and their gradients
    (`Dropout`, the addition, `LayerNorm`); MXNet's `Dropout` draws its
    mask one number at a time and the addition's gradient is a copy, so
    together they cost several times the LayerNorm.  Here one pass over
    the rows does it all forward and one backward.  The dropout mask is a
    hash of the position and a seed drawn by MXNet's generator, as in
    `self_attention`: the same rate, a different mask from `Dropout`'s.

    Parameters
    ----------
    F : the operator namespace of `hybrid_forward`
    X : shape (..., C)
        The residual input.
    Y : shape (..., C)
        The sublayer's output, to which dropout applies in training.
    gamma, beta : shape (C,)
    epsilon : float
    dropout : float

    Returns
    -------
    shape (..., C)
    """
    if F is not mx.sym:
        _check_same_shape(X.shape, Y.shape)  # a graph checks at inference
    X = X.as_nd_ndarray()
    out = F.Custom(X, Y.as_nd_ndarray(), gamma.as_nd_ndarray(),
                   beta.as_nd_ndarray(), _dropout_seed(F, X),
                   epsilon=repr(float(epsilon)), dropout=repr(float(dropout)),
                   op_type='d2l_bert_add_norm')
    return out[0].as_np_ndarray()                            # (..., C)


def key_counts(valid_lens, B, T):
    """The keys each example attends to, for the compiled attention.

    Parameters
    ----------
    valid_lens : NDArray of shape (B,), or None
        The book's `valid_lens`; None: every key is valid.
    B, T : int

    Returns
    -------
    int32 numpy array, shape (B,)
        Counts in [0, T]: key j is valid when j < valid_len, as in the
        book's `masked_softmax`.
    """
    if valid_lens is None:
        return onp.full(B, T, onp.int32)                     # (B,)
    return onp.ceil(onp.clip(_host(valid_lens).astype(onp.float64), 0,
                             T)).astype(onp.int32)           # (B,)


def _check_same_shape(X, Y):
    """Raise a clear error unless `AddNorm`'s shapes X and Y are equal."""
    if tuple(X) != tuple(Y):
        raise ValueError(f'AddNorm needs X and Y of the same shape, got X '
                         f'{tuple(X)} and Y {tuple(Y)}')


def _check_qkv_shapes(qkv, valid_lens, heads):
    """Raise a clear error unless self-attention's shapes fit.

    Parameters
    ----------
    qkv : shape (B, T, 3*H), H a multiple of `heads`
    valid_lens : shape (B,), or None when the operator takes none
    heads : int

    Returns
    -------
    tuple
        ``(B, T, 3*H)``
    """
    B, T, H3 = qkv
    if H3 % (3 * heads):
        raise ValueError(f'qkv must have 3 * num_heads * d columns, got '
                         f'{H3} columns for num_heads={heads}')
    if valid_lens is not None and tuple(valid_lens) != (B,):
        raise ValueError(f'valid_lens must have shape ({B},), one '
                         f'length per sequence, got {tuple(valid_lens)}')
    return B, T, H3


def add_embeddings(F, X, Y, row):
    """``X + Y + row``, with `row` broadcast over the batch, as the book
    sums the token, segment and positional embeddings.

    One `add_n` of the three: its gradient goes to
    each term as it is, where MXNet's gradient of ``+`` copies it to both
    of its terms, and the sum reads and writes the (B, T, H) arrays once,
    not twice.  The broadcast is a product with a column of ones, so that
    the gradient of `row` is a matrix product as well: MXNet's gradient of
    a broadcast sums over the batch with its generic reduction, about 30
    ms at the book's pretraining sizes against a few for the product.
    The values are the same (1 times each entry, summed in the book's
    order).

    Parameters
    ----------
    F : the operator namespace of `hybrid_forward`
    X, Y : shape (B, T, H)
    row : shape (1, T, H)

    Returns
    -------
    shape (B, T, H)
    """
    ones = F.np.ones_like(X[:, 0, 0:1])                      # (B, 1)
    outer = F.np.dot(ones, F.npx.reshape(row, (1, -1)))      # (B, T*H)
    outer = F.npx.reshape_like(outer, X)                     # (B, T, H)
    # MXNet's add_n(a, b, c) computes (b + c) + a: the book's order
    total = F.add_n(outer.as_nd_ndarray(), X.as_nd_ndarray(),
                    Y.as_nd_ndarray())
    return total.as_np_ndarray()                             # (B, T, H)


def _dropout_seed(F, like):
    """A dropout mask's seed: two random integers below 2**16, drawn in
    the graph so that `mx.random.seed` governs them, on `like`'s
    device."""
    if F is mx.sym:
        return F.random.uniform(0, 2 ** 16, shape=(2,))
    return F.random.uniform(0, 2 ** 16, shape=(2,), ctx=like.context)


def _dropout_scalars(seed, rate, on, dtype):
    """The seed, threshold and keep scale (``1 / (1 - rate)``, of type
    `dtype`) as the loops take them, from the seed array drawn by
    `_dropout_seed`; threshold 0 (no dropout) when not `on`."""
    if not on:
        return onp.uint64(0), onp.uint64(0), dtype.type(1)
    halves = _host(seed).astype(onp.int64)                   # (2,)
    seed = onp.uint64((halves[0] << 16) + halves[1])
    threshold = onp.uint64(min(int(rate * 2 ** 32), 2 ** 32))
    keep = 1 / (1 - rate) if rate < 1 else 0.0
    return seed, threshold, dtype.type(keep)


# ---------------------------------------------------------------------------
# Running the compiled loops
# ---------------------------------------------------------------------------

def _threads():
    """Threads for the loops: ``OMP_NUM_THREADS`` if set (as MXNet's
    operators), else every physical core."""
    try:
        return max(1, int(os.environ.get('OMP_NUM_THREADS', '')))
    except ValueError:
        from ..threads import physical_cores
        return physical_cores()


def _split(num_rows):
    """Row ranges, one per thread."""
    n = min(_threads(), max(num_rows, 1))
    bounds = onp.linspace(0, num_rows, n + 1).astype(int)
    return list(zip(bounds[:-1], bounds[1:]))


def _run(kernel, num_rows, *args, per_chunk=None):
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
            _pool = ThreadPoolExecutor(_threads(),
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


def _host(arr):
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


def _compiled(arrays):
    """Whether the compiled loops can serve these arrays: float32 on the
    CPU, with numba present."""
    return (arrays[0].dtype == onp.float32
            and usable([a.context for a in arrays]))


def _loop_arrays(arrays, op_type):
    """NumPy views of `arrays` in the type the attention and AddNorm loops
    take: the first array's if float32 or float64, else float32 (copies).
    Raises RuntimeError off the CPU or without numba."""
    if not usable([a.context for a in arrays]):
        raise RuntimeError(f'{op_type} runs on the CPU with numba only')
    hosted = [_host(a) for a in arrays]
    t = hosted[0].dtype
    if t not in (onp.float32, onp.float64):
        t = onp.dtype(onp.float32)
    return [a.astype(t, copy=False) for a in hosted]


def _loop_output(arr, req, shape, dtype):
    """The NumPy array (of `shape`) a loop writes an output into: the
    MXNet array `arr`'s own memory when the request is to write it and its
    type is `dtype`, else a new array, which `_assign` then stores as `req`
    asks."""
    if req in ('write', 'inplace') and arr.dtype == dtype:
        return _host(arr).reshape(shape)
    return onp.empty(shape, dtype)


def _assign(dst, req, value):
    """Store `value` (a NumPy array) into the MXNet array `dst` as `req`
    asks ('null', 'write', 'inplace' or 'add'); nothing to do when `value`
    is `dst`'s own memory, written in place (`_loop_output`)."""
    if req == 'null':
        return
    out = _host(dst).reshape(value.shape)
    if out.ctypes.data == value.ctypes.data:
        return
    if req == 'add':
        out += value
    else:
        out[...] = value


def _run_summing(kernel, N, C, *args):
    """`_run(kernel, N, *args, acc_gamma, acc_beta)`, each chunk of rows
    with its own float64 accumulators (C,); returns their totals, (2, C)
    (the gamma and beta gradients of the LayerNorm loops)."""
    acc = onp.zeros((len(_split(N)), 2, C), onp.float64)
    _run(kernel, N, *args, per_chunk=lambda k: (acc[k, 0], acc[k, 1]))
    return acc.sum(axis=0)                                   # (2, C)


def _no_gradient(op, req, in_data, in_grad, ks):
    """Zero gradients for the inputs `ks` of a custom operator (seeds,
    lengths, labels), which have none."""
    for k in ks:
        if req[k] != 'null':
            op.assign(in_grad[k], req[k], mx.np.zeros_like(in_data[k]))


# ---------------------------------------------------------------------------
# The custom operators
# ---------------------------------------------------------------------------

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


atexit.register(_finish_pending_work)


def _all_arrays(out_grad, in_data, out_data):
    """Every array as a backward dependency.

    MXNet 1.9 keeps the dependencies of the custom operator declared last
    for all of them (`_registry.result_deps`), and fails on an array left
    out by one operator but named by another; declaring every array keeps
    the two operators here from tripping each other.
    """
    return list(out_grad) + list(in_data) + list(out_data)


class _LayerNorm(mx.operator.CustomOp):
    def __init__(self, epsilon):
        super().__init__()
        self.epsilon = epsilon

    def forward(self, is_train, req, in_data, out_data, aux):
        X, gamma, beta = [a.as_nd_ndarray() for a in in_data]
        if all(r in ('write', 'inplace') for r in req):
            # Y (..., C), mean and std (..., 1) written in place
            mx.nd.LayerNorm(X, gamma, beta, axis=-1, eps=self.epsilon,
                            output_mean_var=True,
                            out=[o.as_nd_ndarray() for o in out_data])
            return
        results = mx.nd.LayerNorm(X, gamma, beta, axis=-1, eps=self.epsilon,
                                  output_mean_var=True)
        for k in range(3):
            self.assign(out_data[k], req[k], results[k].as_np_ndarray())

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        X, gamma = in_data[0], in_data[1]
        mean, std = out_data[1], out_data[2]
        if not _compiled([X, gamma, out_grad[0]]):
            return self._backward_plain(req, out_grad[0], X, gamma, mean,
                                        std, in_grad)
        from . import _loops as K
        C = X.shape[-1]
        dY = _host(out_grad[0]).reshape(-1, C)               # (N, C)
        X2 = _host(X).reshape(-1, C)                         # (N, C)
        mean1, std1 = _host(mean).reshape(-1), _host(std).reshape(-1)
        N = X2.shape[0]
        dX = _loop_output(in_grad[0], req[0], (N, C), onp.float32)
        sums = _run_summing(K.layer_norm_backward, N, C, dY, X2, mean1,
                            std1, _host(gamma), dX).astype(onp.float32)
        _assign(in_grad[0], req[0], dX)
        _assign(in_grad[1], req[1], sums[0])
        _assign(in_grad[2], req[2], sums[1])

    def _backward_plain(self, req, dY, X, gamma, mean, std, in_grad):
        """The same gradient from MXNet operators (any device, type)."""
        nd = mx.nd
        dY, X, gamma = dY.as_nd_ndarray(), X.as_nd_ndarray(), \
            gamma.as_nd_ndarray()
        mean, std = mean.as_nd_ndarray(), std.as_nd_ndarray()
        xhat = nd.broadcast_div(nd.broadcast_sub(X, mean), std)
        dxhat = nd.broadcast_mul(dY, gamma)
        a = nd.mean(dxhat, axis=-1, keepdims=True)
        b = nd.mean(dxhat * xhat, axis=-1, keepdims=True)
        dX = nd.broadcast_div(
            nd.broadcast_sub(dxhat, a) - nd.broadcast_mul(xhat, b), std)
        axes = tuple(range(X.ndim - 1))
        self.assign(in_grad[0], req[0], dX.as_np_ndarray())
        self.assign(in_grad[1], req[1],
                    nd.sum(dY * xhat, axis=axes).as_np_ndarray())
        self.assign(in_grad[2], req[2], nd.sum(dY, axis=axes).as_np_ndarray())


def _register(name):
    """`mx.operator.register`, under NumPy semantics whatever the caller's.

    MXNet fixes, when an operator is registered, which array type its
    callbacks receive (legacy `NDArray` or `mx.np.ndarray`, by
    `is_np_array()` at that moment, in `mxnet/operator.py`); the operators
    here are written for `mx.np` arrays, and this module may be imported
    before the caller's ``npx.set_np()``.
    """
    def decorate(prop):
        with mx.util.np_array(True):
            return mx.operator.register(name)(prop)
    return decorate


@_register('d2l_bert_layer_norm')
class _LayerNormProp(mx.operator.CustomOpProp):
    def __init__(self, epsilon='1e-05'):
        super().__init__(need_top_grad=True)
        self.epsilon = float(epsilon)

    def list_arguments(self):
        return ['data', 'gamma', 'beta']

    def list_outputs(self):
        return ['output', 'mean', 'std']

    def infer_shape(self, in_shape):
        data = tuple(in_shape[0])
        C = data[-1]
        stat = data[:-1] + (1,)
        return [data, (C,), (C,)], [data, stat, stat], []

    def infer_type(self, in_type):
        t = in_type[0]
        return [t, t, t], [t, t, t], []

    def declare_backward_dependency(self, out_grad, in_data, out_data):
        return _all_arrays(out_grad, in_data, out_data)

    def create_operator(self, ctx, shapes, dtypes):
        return _LayerNorm(self.epsilon)


class _SoftmaxCE(mx.operator.CustomOp):
    def forward(self, is_train, req, in_data, out_data, aux):
        scores, labels = in_data
        if not _compiled([scores]):
            return self._forward_plain(req, scores, labels, out_data)
        from . import _loops as K
        X = _host(scores)                                    # (N, V)
        N = X.shape[0]
        y = _host(labels).astype(onp.int32)                  # (N,)
        loss, lse = [_loop_output(out_data[k], req[k], (N,), onp.float32)
                     for k in range(2)]                      # (N,), (N,)
        _run(K.softmax_ce_forward, N, X, y, loss, lse)
        _assign(out_data[0], req[0], loss)
        _assign(out_data[1], req[1], lse)

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        scores, labels = in_data
        _no_gradient(self, req, in_data, in_grad, [1])
        if req[0] == 'null':
            return
        if not _compiled([scores, out_grad[0]]):
            return self._backward_plain(req, out_grad[0], scores, labels,
                                        in_grad)
        from . import _loops as K
        X = _host(scores)                                    # (N, V)
        N = X.shape[0]
        y = _host(labels).astype(onp.int32)                  # (N,)
        g = onp.ascontiguousarray(_host(out_grad[0]))        # (N,)
        lse = _host(out_data[1])                             # (N,)
        dX = _loop_output(in_grad[0], req[0], X.shape, X.dtype)
        _run(K.softmax_ce_backward, N, X, y, lse, g, dX)
        _assign(in_grad[0], req[0], dX)

    def _forward_plain(self, req, scores, labels, out_data):
        nd = mx.nd
        X, y = scores.as_nd_ndarray(), labels.as_nd_ndarray()
        loss = -nd.pick(nd.log_softmax(X, axis=-1), y, axis=-1)
        lse = loss + nd.pick(X, y, axis=-1)
        self.assign(out_data[0], req[0], loss.as_np_ndarray())
        self.assign(out_data[1], req[1], lse.as_np_ndarray())

    def _backward_plain(self, req, g, scores, labels, in_grad):
        nd = mx.nd
        X, y = scores.as_nd_ndarray(), labels.as_nd_ndarray()
        V = X.shape[-1]
        y = nd.clip(y, 0, V - 1)
        dX = nd.broadcast_mul(
            nd.softmax(X, axis=-1) - nd.one_hot(y, V, dtype=X.dtype),
            g.as_nd_ndarray().reshape((-1, 1)))
        self.assign(in_grad[0], req[0], dX.as_np_ndarray())


@_register('d2l_bert_softmax_ce')
class _SoftmaxCEProp(mx.operator.CustomOpProp):
    def __init__(self):
        super().__init__(need_top_grad=True)

    def list_arguments(self):
        return ['scores', 'labels']

    def list_outputs(self):
        return ['loss', 'lse']

    def infer_shape(self, in_shape):
        N = in_shape[0][0]
        return [tuple(in_shape[0]), (N,)], [(N,), (N,)], []

    def infer_type(self, in_type):
        return in_type, [in_type[0], in_type[0]], []

    def declare_backward_dependency(self, out_grad, in_data, out_data):
        return _all_arrays(out_grad, in_data, out_data)

    def create_operator(self, ctx, shapes, dtypes):
        return _SoftmaxCE()


class _SelfAttention(mx.operator.CustomOp):
    """Inputs: qkv (B, T, 3*H), the dropout seed (2,), valid_lens (B,)
    and query_lens (B,) if given.  Outputs: the attention output (B, T,
    H), the weights (B*h, T, T) and whether dropout was applied (1,),
    which the backward pass needs."""

    def __init__(self, heads, dropout, has_lens, has_queries):
        super().__init__()
        self.heads, self.dropout, self.has_lens = heads, dropout, has_lens
        self.has_queries = has_queries

    def _lens(self, in_data, B, T):
        """The valid length of each example as an int32 count of keys in
        [0, T], then the queries to compute, likewise (all T without
        `query_lens`)."""
        queries = in_data[2 + self.has_lens] if self.has_queries else None
        return (key_counts(in_data[2] if self.has_lens else None, B, T),
                key_counts(queries, B, T))

    def _scalars(self, X, seed, dropout_on):
        """scale, seed, threshold and keep scale as the loops take them."""
        d = X.shape[2] // (3 * self.heads)
        scale = X.dtype.type(1 / onp.sqrt(d))
        return (scale,) + _dropout_scalars(seed, self.dropout, dropout_on,
                                           X.dtype)

    def forward(self, is_train, req, in_data, out_data, aux):
        from . import _loops as K
        B, T, H3 = in_data[0].shape
        X, = _loop_arrays(in_data[:1], 'd2l_bert_self_attention')
        dropout_on = bool(is_train and self.dropout > 0)
        O = _loop_output(out_data[0], req[0], (B, T, H3 // 3), X.dtype)
        P = _loop_output(out_data[1], req[1], (B * self.heads, T, T),
                         X.dtype)
        _run(K.self_attention_forward, B * self.heads, X,
             *self._lens(in_data, B, T), self.heads,
             *self._scalars(X, in_data[1], dropout_on), P, O)
        _assign(out_data[0], req[0], O)
        _assign(out_data[1], req[1], P)
        _assign(out_data[2], req[2], onp.array([dropout_on], onp.float32))

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        from . import _loops as K
        _no_gradient(self, req, in_data, in_grad,
                     range(1, len(in_data)))                 # seed, lens
        if req[0] == 'null':
            return
        B, T = in_data[0].shape[:2]
        # qkv (B, T, 3*H), P (B*h, T, T), dO (B, T, H), dP (B*h, T, T)
        X, P, dO, dP = _loop_arrays(
            [in_data[0], out_data[1], out_grad[0], out_grad[1]],
            'd2l_bert_self_attention')
        dropout_on = bool(_host(out_data[2])[0])
        dX = _loop_output(in_grad[0], req[0], X.shape, X.dtype)
        _run(K.self_attention_backward, B * self.heads, X,
             *self._lens(in_data, B, T), self.heads,
             *self._scalars(X, in_data[1], dropout_on), P, dO, dP, dX)
        _assign(in_grad[0], req[0], dX)


class AttentionProp(mx.operator.CustomOpProp):
    """What the properties of the attention operators (training's here,
    inference's in `_inference_ops`) share: the `heads` and `has_lens`
    attributes, the arguments `leading` then ``valid_lens`` when given,
    and their shapes checked.

    Parameters
    ----------
    heads : str
    has_lens : str
        'True' or 'False'.
    need_top_grad : bool
    """
    leading = ('qkv',)

    def __init__(self, heads, has_lens='True', need_top_grad=True):
        super().__init__(need_top_grad=need_top_grad)
        self.heads = int(heads)
        self.has_lens = has_lens == 'True'

    def list_arguments(self):
        return list(self.leading) + (['valid_lens'] if self.has_lens else [])

    def checked_qkv_shape(self, in_shape):
        """``(B, T, 3*H)``, once `_check_qkv_shapes` accepts the shapes."""
        lens = in_shape[len(self.leading)] if self.has_lens else None
        return _check_qkv_shapes(in_shape[0], lens, self.heads)


@_register('d2l_bert_self_attention')
class _SelfAttentionProp(AttentionProp):
    leading = ('qkv', 'seed')

    def __init__(self, heads, dropout='0.0', has_lens='True',
                 has_queries='False'):
        super().__init__(heads, has_lens)
        self.dropout = float(dropout)
        self.has_queries = has_queries == 'True'

    def list_arguments(self):
        return super().list_arguments() + (
            ['query_lens'] if self.has_queries else [])

    def list_outputs(self):
        return ['output', 'attention_weights', 'dropout_on']

    def infer_shape(self, in_shape):
        B, T, H3 = self.checked_qkv_shape(in_shape)          # (B, T, 3*H)
        if self.has_queries and tuple(in_shape[-1]) != (B,):
            raise ValueError(f'query_lens must have shape ({B},), one '
                             f'count per sequence, got '
                             f'{tuple(in_shape[-1])}')
        return (list(map(tuple, in_shape)),
                [(B, T, H3 // 3), (B * self.heads, T, T), (1,)], [])

    def infer_type(self, in_type):
        t = in_type[0]
        return in_type, [t, t, onp.float32], []

    def declare_backward_dependency(self, out_grad, in_data, out_data):
        return _all_arrays(out_grad, in_data, out_data)

    def create_operator(self, ctx, shapes, dtypes):
        return _SelfAttention(self.heads, self.dropout, self.has_lens,
                              self.has_queries)


class _AddNorm(mx.operator.CustomOp):
    """Inputs: X, Y (..., C), gamma, beta (C,), the dropout seed (2,).
    Outputs: the normalized ``X + dropout(Y)`` (..., C), its mean and std
    (..., 1) and whether dropout was applied (1,), which the backward pass
    needs."""

    def __init__(self, epsilon, dropout):
        super().__init__()
        self.epsilon, self.dropout = epsilon, dropout

    def forward(self, is_train, req, in_data, out_data, aux):
        from . import _loops as K
        X, Y, gamma, beta = _loop_arrays(in_data[:4], 'd2l_bert_add_norm')
        C = X.shape[-1]
        X, Y = X.reshape(-1, C), Y.reshape(-1, C)            # (N, C)
        N, t = X.shape[0], X.dtype
        dropout_on = bool(is_train and self.dropout > 0)
        out, mean, std = [_loop_output(out_data[k], req[k], shape, t)
                          for k, shape in enumerate([(N, C), (N,), (N,)])]
        _run(K.add_norm_forward, N, X, Y, gamma, beta, t.type(self.epsilon),
             *_dropout_scalars(in_data[4], self.dropout, dropout_on, t),
             out, mean, std)
        for k, value in enumerate((out, mean, std)):
            _assign(out_data[k], req[k], value)
        _assign(out_data[3], req[3], onp.array([dropout_on], onp.float32))

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        from . import _loops as K
        _no_gradient(self, req, in_data, in_grad, [4])       # seed
        X, Y, gamma, dout, mean, std = _loop_arrays(
            in_data[:3] + [out_grad[0], out_data[1], out_data[2]],
            'd2l_bert_add_norm')
        C = X.shape[-1]
        X, Y, dout = [a.reshape(-1, C) for a in (X, Y, dout)]  # (N, C)
        mean, std = mean.reshape(-1), std.reshape(-1)        # (N,)
        N, t = X.shape[0], X.dtype
        dropout_on = bool(_host(out_data[3])[0])
        dX, dY = [_loop_output(in_grad[k], req[k], (N, C), t)
                  for k in range(2)]
        sums = _run_summing(
            K.add_norm_backward, N, C, dout, X, Y, mean, std, gamma,
            *_dropout_scalars(in_data[4], self.dropout, dropout_on, t),
            dX, dY).astype(t)                                # (2, C)
        _assign(in_grad[0], req[0], dX)
        _assign(in_grad[1], req[1], dY)
        _assign(in_grad[2], req[2], sums[0])
        _assign(in_grad[3], req[3], sums[1])


@_register('d2l_bert_add_norm')
class _AddNormProp(mx.operator.CustomOpProp):
    def __init__(self, epsilon='1e-05', dropout='0.0'):
        super().__init__(need_top_grad=True)
        self.epsilon = float(epsilon)
        self.dropout = float(dropout)

    def list_arguments(self):
        return ['X', 'Y', 'gamma', 'beta', 'seed']

    def list_outputs(self):
        return ['output', 'mean', 'std', 'dropout_on']

    def infer_shape(self, in_shape):
        X, Y = tuple(in_shape[0]), tuple(in_shape[1])
        _check_same_shape(X, Y)
        C = X[-1]
        stat = X[:-1] + (1,)
        return ([X, X, (C,), (C,), tuple(in_shape[4])],
                [X, stat, stat, (1,)], [])

    def infer_type(self, in_type):
        t = in_type[0]
        return [t, t, t, t, in_type[4]], [t, t, t, onp.float32], []

    def declare_backward_dependency(self, out_grad, in_data, out_data):
        return _all_arrays(out_grad, in_data, out_data)

    def create_operator(self, ctx, shapes, dtypes):
        return _AddNorm(self.epsilon, self.dropout)
