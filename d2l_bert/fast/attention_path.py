"""The attention switch: which self-attention each twin's blocks run,
chosen once, when the twin is built.

Self-attention has four implementations.  The book's
`MultiHeadAttention` (`d2l_bert.book.attention`) is the first: the book
model runs it, and so does every model that `d2l_bert.fast.accelerate`
was not called on.  The fast twins (`blocks.FastSelfAttention`) run one
of the other three, registered here by name in `ATTENTION`, as Hugging
Face's `modeling_bert` registers its attention functions by
``config._attn_implementation``:

'interleaved'
    MXNet's interleaved attention operators (`interleaved_attention`):
    any device, with the book's `nn.Dropout` on the weights.
'compiled'
    The compiled training loops (`_attention_ops.self_attention`): the
    CPU, with numba; dropout and gradients.  MXNet 1.9's CPU attention
    runs on one thread, these loops on every core.
'compiled_inference'
    The compiled inference loop (`_inference_ops.self_attention`): the
    CPU, with numba; no dropout, no gradient (`fast.inference`).

One function chooses the path, and nothing else does:
`choose_attention`, once for each block when it is built.  Its input
`kernels` is what `use_kernels` said once for the model (`accelerate`,
`inference`, `batch_loss`): whether the compiled loops serve it at all
(they also run its AddNorm, LayerNorm and MLM loss).  A block keeps its implementation
(`FastSelfAttention.implementation`); its `hybrid_forward` has no
branch, and a hybridized twin runs the traced graph, not Python.

Where the paths differ, with dropout off:

- every path gives the book's outputs and gradients within float32
  rounding (the fused projection and the loops sum in another order);
- a row whose keys are all masked (a valid length of 0) gets uniform
  weights over all keys on every path, as the book's `masked_softmax`
  gives them (its fill of -1e6);
- the twins take `valid_lens` of shape (B,), one length per sequence
  (the book also takes (B, T));
- the twins keep no `attention_weights` (the book's block keeps those of
  its last imperative call).

With dropout on, 'interleaved' draws its masks with the book's
`nn.Dropout` and 'compiled' with a hash of the position and a seed that
MXNet's generator draws (`mx.random.seed` fixes it): the same rate,
other masks.

Dimension key used in the shape comments:

B: batch size, T: sequence length, H: num_hiddens, h: num_heads,
D: the input size of the projections, N: packed rows, S: the length of
the packed layout
"""
from . import _attention_ops, _inference_ops, _ops


def use_kernels(contexts, kernels=None, inference=False):
    """Whether a twin whose parameters lie on `contexts` uses the compiled
    loops (attention, AddNorm, LayerNorm, the MLM loss).

    Parameters
    ----------
    contexts : list of mxnet.Context
        Where the twin's parameters lie.
    kernels : bool, optional
        The caller's choice; None: when numba works here, every context
        is a CPU, and ``D2L_BERT_KERNELS`` is not '0' (`_ops.usable`).
    inference : bool, default False
        For the inference twin: its loop also passes its own smoke test.

    Returns
    -------
    bool
    """
    if kernels is not None:
        return bool(kernels)
    if not inference:
        return _ops.usable(contexts)
    return _ops.usable(contexts) and _ops.passes_smoke_test(
        'the compiled inference attention is', _inference_ops.smoke_test)


def choose_attention(attention, kernels, inference=False):
    """The name in `ATTENTION` of the path of the book's block
    `attention`, called as self-attention by a twin.

    Parameters
    ----------
    attention : MultiHeadAttention
        The book's block.
    kernels : bool
        Whether the twin uses the compiled loops (`use_kernels`).
    inference : bool, default False
        For the inference twin (no dropout, no gradient).

    Returns
    -------
    str
        'compiled_inference' or 'compiled' with the loops (which draw
        their dropout masks over every weight: a `Dropout` of `axes`
        keeps MXNet's operators), else 'interleaved'.
    """
    if not kernels or attention.attention.dropout._axes:
        return 'interleaved'
    return 'compiled_inference' if inference else 'compiled'


def reads_query_lens(path):
    """Whether the path `path` computes only each sequence's first
    `query_lens` queries (the packed step's, `step.packed_tokens`); the
    others take no `query_lens` (a graph input nothing reads warns)."""
    return path == 'compiled'


def interleaved_attention(block, F, X, valid_lens, unpacked=None,
                          query_lens=None):
    """MXNet's interleaved attention operators, which read the sequence
    axis first.

    Parameters
    ----------
    block : FastSelfAttention
        The twin block, whose projections and dropout are used.
    F : module
        The operator namespace of `hybrid_forward`.
    X : ndarray, shape (B, T, D), or (N, D) with `unpacked`
        The block's input.
    valid_lens : ndarray, shape (B,), or None
        Each sequence's valid length; None: every key is valid.
    unpacked : function, optional
        (N, C) -> (B, S, C): the packed rows in the attention's layout.
    query_lens : None
        Not read (`reads_query_lens`).

    Returns
    -------
    shape (B, T, H), or (B, S, H): the heads' outputs, before `W_o`
    """
    if unpacked is not None:
        X = unpacked(X)                                      # (B, S, D)
    weight, bias = block.qkv_weight(F, X)    # (3*H, D), (3*H,) or None
    h = block.num_heads
    X = F.np.transpose(X, (1, 0, 2))                         # (T, B, D)
    qkv = F.npx.fully_connected(
        X, weight, bias, num_hidden=3 * block.num_hiddens,
        no_bias=bias is None, flatten=False)                 # (T, B, 3*H)
    qkv = qkv.as_nd_ndarray()  # the operators are not NumPy-style
    # The queries are divided by sqrt(d) inside the product
    scores = F.contrib.interleaved_matmul_selfatt_qk(
        qkv, heads=h).as_np_ndarray()                        # (B*h, T, T)
    weights = masked_softmax_of_scores(F, scores, valid_lens, h)
    dropped = block.dropout(weights)                         # (B*h, T, T)
    output = F.contrib.interleaved_matmul_selfatt_valatt(
        qkv, dropped.as_nd_ndarray(), heads=h).as_np_ndarray()  # (T, B, H)
    return F.np.transpose(output, (1, 0, 2))                 # (B, T, H)


def masked_softmax_of_scores(F, scores, valid_lens, num_heads):
    """The book's `masked_softmax` of self-attention scores.

    As the book's, the scores past each valid length are replaced by
    -1e6 (their weight is exp(-1e6 - max) = 0 in float32, and a row with
    no valid key gets uniform weights), and no gradient reaches them.
    The mask is spread to the scores' shape, so that `where` takes three
    arrays of one shape (NumPy-style broadcasting would reduce over the
    gradient in the backward pass).

    Parameters
    ----------
    scores : ndarray, shape (B*h, T, T)
        The scaled dot products of the queries and keys, head by head.
    valid_lens : ndarray, shape (B,), or None
        Each sequence's valid length; None: every key is valid.
    num_heads : int
        h, the heads of each sequence.

    Returns
    -------
    shape (B*h, T, T)
    """
    if valid_lens is None:
        return F.npx.softmax(scores)                         # (B*h, T, T)
    positions = F.npx.arange_like(scores, axis=-1)           # (T,)
    lens = F.np.repeat(valid_lens.astype('float32'), num_heads,
                       axis=0)                               # (B*h,)
    lens = F.npx.reshape(lens, (-1, 1, 1))                   # (B*h, 1, 1)
    fill = (positions >= lens).astype('float32') * -1e6      # (B*h, 1, T)
    scores = scores.as_nd_ndarray()
    fill = F.broadcast_like(fill.as_nd_ndarray(), scores)    # (B*h, T, T)
    # -1e6 where the fill is (a key past the length), else the score
    scores = F.where(fill, fill, scores).as_np_ndarray()     # (B*h, T, T)
    return F.npx.softmax(scores)                             # (B*h, T, T)


def compiled_attention(block, F, X, valid_lens, unpacked=None,
                       query_lens=None):
    """The compiled training loops, with dropout: the projection of
    every row by one product (`FastSelfAttention.qkv`), then
    `_attention_ops.self_attention`.

    Parameters
    ----------
    block, F, X, valid_lens, unpacked
        As `interleaved_attention` takes them; the packed rows are
        projected before they are laid out.
    query_lens : shape (B,), optional
        Compute only each sequence's first queries (the rest of the
        output is 0).

    Returns
    -------
    shape (B, T, H), or (B, S, H): the heads' outputs, before `W_o`
    """
    qkv = block.qkv(F, X)                            # (B, T or N, 3*H)
    if unpacked is not None:
        qkv = unpacked(qkv)                                  # (B, S, 3*H)
    output, _ = _attention_ops.self_attention(
        F, qkv, valid_lens, block.num_heads, block.dropout._rate,
        query_lens)                                          # (B, T, H)
    return output


def compiled_inference_attention(block, F, X, valid_lens, unpacked=None,
                                 query_lens=None):
    """The compiled inference loop, without dropout: the projection by
    one product, then `_inference_ops.self_attention`; the arguments and
    result as `interleaved_attention`'s."""
    qkv = block.qkv(F, X)                            # (B, T or N, 3*H)
    if unpacked is not None:
        qkv = unpacked(qkv)                                  # (B, S, 3*H)
    return _inference_ops.self_attention(
        F, qkv, valid_lens, block.num_heads)                 # (B, T, H)


#: The implementations of a twin's self-attention, by the name
#: `choose_attention` gives: each takes ``(block, F, X, valid_lens,
#: unpacked=None, query_lens=None)`` and returns the heads' outputs
#: before `W_o`
ATTENTION = {
    'interleaved': interleaved_attention,
    'compiled': compiled_attention,
    'compiled_inference': compiled_inference_attention,
}
