"""Fast twins of the book's blocks: the same parameters, one graph.

Each twin is a Gluon `HybridBlock` built from a book block
(`d2l_bert.book.bert`, `d2l_bert.book.transformer`,
`d2l_bert.book.attention`).  It holds the book block's own leaf layers
(`nn.Dense`, `nn.Embedding`, `nn.Dropout`) and its own parameters
(`Parameter` objects), so the twin and the book model train the same
weights, and `save_parameters` names them the same way
(``encoder.blks.0.attention.W_q.weight``).  What differs is how the
arithmetic runs:

- the whole model is one hybridized graph with static memory;
- self-attention projects queries, keys and values with one matrix
  product (`qkv_weight`), then attends by the path that
  `attention_path.choose_attention` chose for it when it was built: the
  compiled loops or MXNet's interleaved attention operators;
- AddNorm is one compiled operator (`_norm_ops.add_norm`), and the
  other LayerNorms get a compiled backward pass (`_norm_ops.layer_norm`);
- the three embeddings are summed by one `add_n`
  (`_norm_ops.add_embeddings`);
- the MLM head runs once per distinct predicted position
  (`distinct_positions`): the padding of `pred_positions` repeats a
  position, and the book computes its scores again for each repeat;
- the whole models' twins (`models`) pack the tokens they read.

Whether the compiled loops run (``kernels``) is decided once, when a twin
is built (`attention_path.use_kernels`, for the whole model); the
attention's `hybrid_forward` has no branch, the others' one `if` on it.
The book's blocks are the test oracle (`tests/test_fast_blocks.py`):
outputs, attention outputs and gradients agree within float32 rounding,
with dropout off.  With dropout on, the compiled loops draw other masks
than `nn.Dropout`, at the same rate.

Dimension key used in the shape comments:

B: batch size, T: sequence length, H: num_hiddens, V: vocab_size,
P: predicted positions per sequence, h: num_heads, d: H / h, D: the
input size of the projections
"""
import mxnet as mx
import numpy as onp
from mxnet.gluon import nn

from ..checks import check_encoder_inputs
from ._build import parameter
from ._norm_ops import add_embeddings, add_norm, layer_norm
from .attention_path import ATTENTION, choose_attention


class FastLayerNorm(nn.HybridBlock):
    """`nn.LayerNorm` with a compiled backward pass (MXNet 1.9's own is
    many times slower than its forward pass).

    Parameters
    ----------
    ln : nn.LayerNorm
        The book's layer; its `gamma` and `beta` are used, not copied.
    kernels : bool
        Use the compiled loop (only over the last axis).
    """
    def __init__(self, ln, kernels):
        # The book layer's prefix and parameters: `gamma` is its gamma
        super().__init__(prefix=ln.prefix, params=ln.params)
        self.gamma = self.params.get('gamma')
        self.beta = self.params.get('beta')
        self.axis, self.epsilon = ln._axis, ln._epsilon
        self.kernels = kernels and ln._axis == -1

    def hybrid_forward(self, F, X, gamma, beta):
        """`X` (..., H) -> (..., H)."""
        if self.kernels:
            return layer_norm(F, X, gamma, beta,
                                   self.epsilon)             # (..., H)
        return F.npx.layer_norm(X, gamma, beta, axis=self.axis,
                                eps=self.epsilon)            # (..., H)


class FastAddNorm(nn.HybridBlock):
    """`AddNorm`: ``LayerNorm(X + dropout(Y))``, as one compiled operator
    when `kernels`.

    Parameters
    ----------
    addnorm : AddNorm
        The book's block, whose layers the twin holds.
    kernels : bool
        Use the compiled loop (else MXNet's operators).
    """
    def __init__(self, addnorm, kernels):
        super().__init__()
        self.dropout = addnorm.dropout
        self.ln = FastLayerNorm(addnorm.ln, kernels)
        self.kernels = (kernels and not addnorm.dropout._axes
                        and addnorm.ln._axis == -1)

    def hybrid_forward(self, F, X, Y):
        """`X`, `Y` (B, T, H) -> (B, T, H)."""
        if self.kernels:
            return add_norm(
                F, X, Y, parameter(F, self.ln.gamma, X),
                parameter(F, self.ln.beta, X), self.ln.epsilon,
                self.dropout._rate)                          # (B, T, H)
        return self.ln(self.dropout(Y) + X)                  # (B, T, H)


class FastSelfAttention(nn.HybridBlock):
    """`MultiHeadAttention` called as self-attention,
    ``attention(X, X, X, valid_lens)``, with the heads' projections fused.

    Parameters
    ----------
    attention : MultiHeadAttention
        The book's block, whose projections the twin holds.
    kernels : bool
        Whether the twin uses the compiled loops
        (`attention_path.use_kernels`).
    inference : bool, default False
        For the inference twin: no dropout, no gradient.

    Notes
    -----
    The path it attends by is chosen here, once
    (`attention_path.choose_attention`): its name is `path`, its
    implementation `implementation` (of `attention_path.ATTENTION`).
    `valid_lens` must hold one length per sequence, shape (B,), as BERT's
    do.  The attention weights are not kept (`attention_weights` is the
    book block's, from its last imperative call).
    """
    def __init__(self, attention, kernels, inference=False):
        super().__init__()
        self.num_heads = attention.num_heads
        self.num_hiddens = attention.W_o._units
        self.W_q, self.W_k = attention.W_q, attention.W_k
        self.W_v, self.W_o = attention.W_v, attention.W_o
        self.dropout = attention.attention.dropout
        self.path = choose_attention(attention, kernels, inference)
        self.implementation = ATTENTION[self.path]

    def hybrid_forward(self, F, X, valid_lens=None):
        """`X` (B, T, D), `valid_lens` (B,) or None -> (B, T, H)."""
        output = self.implementation(self, F, X, valid_lens)  # (B, T, H)
        return self.W_o(output)                              # (B, T, H)

    def qkv(self, F, X):
        """The queries, keys and values of every position, by one product
        with `qkv_weight`: `X` (..., D) -> (..., 3*H)."""
        weight, bias = self.qkv_weight(F, X)     # (3*H, D), (3*H,) or None
        return F.npx.fully_connected(
            X, weight, bias, num_hidden=3 * self.num_hiddens,
            no_bias=bias is None, flatten=False)             # (..., 3*H)

    def qkv_weight(self, F, X):
        """Stack `W_q`, `W_k` and `W_v` into one projection, head by head.

        The interleaved layout the attention operators read: for each head
        in turn, its query, key and value rows (d each).

        Returns
        -------
        weight : shape (3*H, D)
        bias : shape (3*H,), or None without biases
        """
        h, denses = self.num_heads, (self.W_q, self.W_k, self.W_v)
        weights = [F.npx.reshape(parameter(F, dense.weight, X),
                                 (-6, h, -1, -2))            # (h, d, D)
                   for dense in denses]
        weight = F.np.stack(weights, axis=1)                 # (h, 3, d, D)
        weight = F.npx.reshape(weight, (-5, -2, -2))         # (h*3, d, D)
        weight = F.npx.reshape(weight, (-5, -2))             # (3*H, D)
        if self.W_q.bias is None:
            return weight, None
        biases = [F.npx.reshape(parameter(F, dense.bias, X),
                                (-6, h, -1))                 # (h, d)
                  for dense in denses]
        bias = F.npx.reshape(F.np.stack(biases, axis=1), (-1,))  # (3*H,)
        return weight, bias


class FastPositionWiseFFN(nn.HybridBlock):
    """`PositionWiseFFN`, in the graph."""
    def __init__(self, ffn):
        super().__init__()
        self.dense1, self.dense2 = ffn.dense1, ffn.dense2

    def hybrid_forward(self, F, X):
        """`X` (B, T, H) -> (B, T, H)."""
        return self.dense2(self.dense1(X))                   # (B, T, H)


class FastTransformerEncoderBlock(nn.HybridBlock):
    """`TransformerEncoderBlock`, from its fast parts: `attention_block`
    and `addnorm_block` (the inference twin's block names its own)."""
    attention_block, addnorm_block = FastSelfAttention, FastAddNorm
    #: The inference twin's blocks attend without dropout or gradient
    inference = False

    def __init__(self, blk, kernels):
        super().__init__()
        self.attention = self.attention_block(blk.attention, kernels,
                                              self.inference)
        self.addnorm1 = self.addnorm_block(blk.addnorm1, kernels)
        self.ffn = FastPositionWiseFFN(blk.ffn)
        self.addnorm2 = self.addnorm_block(blk.addnorm2, kernels)

    def hybrid_forward(self, F, X, valid_lens=None):
        """`X` (B, T, H), `valid_lens` (B,) or None -> (B, T, H)."""
        Y = self.addnorm1(X, self.attention(X, valid_lens))  # (B, T, H)
        return self.addnorm2(Y, self.ffn(Y))                 # (B, T, H)


class _Checked(nn.HybridBlock):
    """What the top-level twins share: the book's input checks before the
    graph runs, and a new graph when an optional input turns None or
    back (a graph is traced for one pattern of given inputs)."""

    def _prepare(self, encoder, tokens, segments, valid_lens, optional):
        """Check the encoder's inputs as the book does (`encoder`: the
        twin encoder, which has the book's sizes), then drop the graph if
        the pattern of given `optional` inputs changed."""
        check_encoder_inputs(tokens, segments, valid_lens,
                             encoder.vocab_size, encoder.max_len)
        structure = tuple(arg is None for arg in optional)
        if getattr(self, '_input_structure', structure) != structure:
            self._clear_cached_op()
        self._input_structure = structure

    def optimize_for(self, x, *args, **kwargs):
        """Gluon's `optimize_for`, after one call with these inputs: it
        reuses the graph traced last, which may be that of another
        pattern of given inputs (`pred_positions` or not)."""
        self(x, *args)
        return super().optimize_for(x, *args, **kwargs)


class FastBERTEncoder(_Checked):
    """`BERTEncoder` as one graph.

    Parameters
    ----------
    encoder : BERTEncoder
        The book's encoder, whose layers and parameters the twin holds.
    kernels : bool
        Use the compiled loops (else MXNet's operators).
    """
    def __init__(self, encoder, kernels):
        # The book encoder's prefix and parameters: `pos_embedding` is its
        super().__init__(prefix=encoder.prefix, params=encoder.params)
        # V and the positions: the book's encoder keeps them in its layers
        self.vocab_size = encoder.token_embedding.weight.shape[0]
        self.max_len = encoder.pos_embedding.shape[1]
        self.token_embedding = encoder.token_embedding
        self.segment_embedding = encoder.segment_embedding
        self.blks = nn.HybridSequential()
        for blk in encoder.blks:
            self.blks.add(FastTransformerEncoderBlock(blk, kernels))
        self.pos_embedding = self.params.get('pos_embedding')
        # The original BERT's LayerNorm on the embedding sum
        # (`d2l_bert.hf.original`); the book's encoder has none
        self.embedding_norm = None
        if getattr(encoder, 'embedding_norm', None) is not None:
            self.embedding_norm = FastLayerNorm(encoder.embedding_norm,
                                                kernels)
            self.embedding_dropout = encoder.embedding_dropout

    def forward(self, tokens, segments, valid_lens=None):
        """Check the inputs (arrays, not a graph's symbols), then encode."""
        if not isinstance(tokens, mx.sym.Symbol):
            self._prepare(self, tokens, segments, valid_lens, [valid_lens])
        return super().forward(tokens, segments, valid_lens)

    def hybrid_forward(self, F, tokens, segments, valid_lens=None,
                       pos_embedding=None):
        """`tokens`, `segments` (B, T), `valid_lens` (B,) -> (B, T, H)."""
        positions = F.npx.arange_like(tokens, axis=1)        # (T,)
        # The book's `BERTEncoder.forward` in a graph: the twin repeats
        # its lines (the book's stay as the book writes them), the sum of
        # the embeddings in one operator
        X = add_embeddings(
            F, self.token_embedding(tokens),                 # (B, T, H)
            self.segment_embedding(segments),                # (B, T, H)
            F.np.take(pos_embedding, positions.astype('int32'),
                      axis=1))                               # (1, T, H)
        if self.embedding_norm is not None:
            X = self.embedding_dropout(self.embedding_norm(X))  # (B, T, H)
        for blk in self.blks:
            X = blk(X, valid_lens)                           # (B, T, H)
        return X


class FastMaskLM(nn.HybridBlock):
    """`MaskLM` on each gathered position once.

    The book's `MaskLM` runs its MLP on all B*P gathered encodings.  A
    position named twice in a sequence (as the padding of
    `pred_positions` names position 0 again and again) gives the same
    scores twice; the twin runs the MLP on the K distinct positions
    (`distinct_positions`) and copies each row of scores to where the
    book's would be.  The scores are the same numbers; the backward pass
    sums the gradients of a row's copies, as the book's sums them into
    the weights.
    """
    def __init__(self, mlm, kernels):
        super().__init__()
        self.mlp = nn.HybridSequential()
        self.mlp.add(mlm.mlp[0], FastLayerNorm(mlm.mlp[1], kernels),
                     mlm.mlp[2])

    def hybrid_forward(self, F, X, rows, copies):
        """`X` (B, T, H), `rows` (2, K), `copies` (B, P) -> the scores
        with their first two axes merged, (B*P, V) (`MLMScores`)."""
        masked_X = F.npx.gather_nd(X, rows)                  # (K, H)
        return self.scores(F, masked_X, copies)              # (B*P, V)

    def scores(self, F, masked_X, copies):
        """The MLP on the K distinct encodings `masked_X` (K, H), each
        row of scores copied where `copies` (B, P) names it; (B*P, V)."""
        scores = self.mlp(masked_X)                          # (K, V)
        copies = F.npx.reshape(copies, (-1,))                # (B*P,)
        return F.np.take(scores, copies, axis=0)             # (B*P, V)


class MLMScores(mx.np.ndarray):
    """The twin's MLM scores, (B, P, V) as the book's: a view of the
    graph's output, (B*P, V).

    The book's loop reshapes the scores to (B*P, V) for its loss.  An
    `mxnet.numpy` reshape copies, and in the backward pass the copy's
    gradient is a second new array of the scores' size (415 MB at the
    book's settings, each a step).  `reshape` to that shape returns the
    graph's output itself, sharing memory as NumPy's reshape does; the
    loss's gradient then goes straight into the graph.  Any other
    reshape is `mxnet.numpy`'s.
    """

    @classmethod
    def view(cls, rows_view, B, P):
        """`rows_view` (B*P, V), the graph's output -> its (B, P, V) view,
        recorded for autograd when recording."""
        scores = rows_view.reshape_view(B, P, -1)            # (B, P, V)
        scores.__class__ = cls
        scores.rows_view = rows_view
        return scores

    def reshape(self, *args, **kwargs):
        shape = args[0] if len(args) == 1 and isinstance(
            args[0], (tuple, list)) else args
        rows_view = self.__dict__.get('rows_view')
        if rows_view is not None and not kwargs and len(shape) == 2 \
                and tuple(shape) in ((-1, rows_view.shape[1]),
                                     rows_view.shape):
            return rows_view
        return super().reshape(*args, **kwargs)


def distinct_positions(pred_positions, row_multiple=256):
    """The distinct (example, position) pairs of `pred_positions`, and for
    each prediction the index of its pair.

    Parameters
    ----------
    pred_positions : ndarray, int, shape (B, P)
        The positions `MaskLM` gathers from each sequence, as the book
        passes them (padding repeats a position).
    row_multiple : int, default 256
        K is rounded up to a multiple of this, at most B*P (the extra
        pairs are example 0's position 0, which no prediction reads), so
        that the graph meets few shapes: K changes with every batch of
        the book's data, each larger K makes the static graph plan its
        memory again, and the process keeps the larger plans' memory
        (measured in docs/performance-history.md).

    Returns
    -------
    rows : ndarray, int32, shape (2, K)
        Each pair's example and position, for `gather_nd`.
    copies : ndarray, int32, shape (B, P)
        The pair of each prediction, an index into the K rows.
    """
    ctx = pred_positions.ctx
    positions = pred_positions.asnumpy().astype('int64')    # (B, P)
    B, P = positions.shape
    T = int(positions.max()) + 1 if positions.size else 1
    keys = onp.arange(B)[:, None] * T + positions           # (B, P)
    pairs, copies = onp.unique(keys, return_inverse=True)   # (n,), (B*P,)
    K = min(max(1, -(-len(pairs) // row_multiple)) * row_multiple,
            max(B * P, 1))
    pairs = onp.concatenate([pairs, onp.zeros(K - len(pairs),
                                              pairs.dtype)])  # (K,)
    rows = onp.stack([pairs // T, pairs % T])               # (2, K)
    return (mx.np.array(rows, dtype='int32', ctx=ctx),      # (2, K)
            mx.np.array(copies.reshape(B, P), dtype='int32',
                        ctx=ctx))                           # (B, P)


class FastNextSentencePred(nn.HybridBlock):
    """`NextSentencePred`, in the graph."""
    def __init__(self, nsp):
        super().__init__()
        self.output = nsp.output

    def hybrid_forward(self, F, X):
        """`X` (B, H) -> (B, 2)."""
        return self.output(X)                                # (B, 2)
