"""What building a twin needs, shared by `accelerate` (the package's
`__init__`), `inference`, the twins' blocks (`blocks`) and the
pretraining step (`step`): a parameter inside a graph, the contexts of a
model, hybridizing a twin without hybridizing the book's blocks, and the
small batch the twins are checked on.

It imports nothing of the fast layer, so that each of those modules
imports it and none imports another to reach these helpers.
"""
import mxnet as mx
from mxnet import np

_warned_late_import = []  # holds True once `warn_late_import` warned


def parameter(F, param, X):
    """A parameter inside `hybrid_forward`: a variable of the graph, or its
    data on `X`'s context."""
    return param.var() if F is mx.sym else param.data(X.ctx)


def walk(block):
    """`block`, then each of its children's blocks, depth first."""
    yield block
    for child in block._children.values():
        yield from walk(child)


def contexts(net):
    """The contexts of `net`'s parameters; a clear error if there are
    none yet."""
    for param in net.collect_params().values():
        try:
            return param.list_ctx()
        except RuntimeError:
            raise ValueError(
                f'accelerate: parameter {param.name} of {type(net).__name__}'
                ' is not initialized; call net.initialize(...) (or load '
                'parameters) first') from None
    raise ValueError(f'accelerate: {type(net).__name__} has no parameters')


def hybridize_twin(twin, *shared, backend=None):
    """Hybridize `twin` with static memory (and MXNet's graph `backend`,
    such as 'MKLDNN', if given), leaving the caller's blocks it shares
    (the book model, a loss) as they were: hybridizing recurses into
    shared children."""
    blocks = [b for root in shared for b in walk(root)]
    active = {id(b): b._active for b in blocks if hasattr(b, '_active')}
    options = {} if backend is None else {'backend': backend}
    twin.hybridize(static_alloc=True, static_shape=True, **options)
    for block in blocks:
        if id(block) in active:
            block._active = active[id(block)]


def tiny_batch(name, ctx, max_len):
    """Two sequences of up to 8 tokens, with lengths and positions: token
    ids 1 to 3, valid in any vocabulary of 4 or more; the inputs of the
    model kind `name` ('BERTModel', 'BERTClassifier', 'BERTEncoder')."""
    T = min(8, max_len)
    row = ([1, 2, 3] * 3)[:T]
    tokens = np.array([row, row[::-1]], dtype='int32', ctx=ctx)  # (2, T)
    segments = np.array([[0] * (T // 2) + [1] * (T - T // 2)] * 2,
                        dtype='int32', ctx=ctx)              # (2, T)
    valid_lens = np.array([T, max(T - 2, 1)], dtype='float32',
                          ctx=ctx)                           # (2,)
    pred_positions = np.array([[0, T - 1], [1, 0]], dtype='int32',
                              ctx=ctx)                       # (2, 2)
    if name == 'BERTModel':
        return tokens, segments, valid_lens, pred_positions
    if name == 'BERTClassifier':
        return ((tokens, segments, valid_lens),)
    return tokens, segments, valid_lens


def warn_late_import():
    """Warn once per process when MXNet runs on fewer cores than the
    machine has (`d2l_bert.threads.late_import_hint`): a twin is fast
    only with every core."""
    from ..threads import late_import_hint
    hint = late_import_hint()
    if hint and not _warned_late_import:
        import warnings
        _warned_late_import.append(True)
        warnings.warn(hint, RuntimeWarning, stacklevel=3)
