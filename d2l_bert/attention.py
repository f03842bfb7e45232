"""Attention, as the book builds it before the transformer.

sec_attention-scoring-functions gives `masked_softmax` and
`DotProductAttention`; sec_multihead-attention gives `MultiHeadAttention`.
The blocks are Gluon `HybridBlock`s: used as they are they run imperatively,
exactly like the book's `nn.Block`s; after `hybridize()` the same code builds
one symbolic graph.  In `hybrid_forward`, `F` is `mxnet.ndarray` or
`mxnet.symbol`, and `F.np` / `F.npx` are the NumPy-style operators.

Self-attention (queries, keys and values one and the same array, as in
every transformer encoder block) takes a fused path beside the book's:
one projection computes the queries, keys and values of all heads from
`W_q`, `W_k` and `W_v`, MXNet's interleaved attention operators attend
without splitting the heads apart, and an additive mask replaces the
book's masking.  Same parameters, same
numbers; the book's path stays as the test oracle (``fused = False``).

Dimension key used in the shape comments:

B: batch size, Q: number of queries, K: number of key-value pairs,
D: query/key size, Dv: value size, H: num_hiddens, h: num_heads,
d: H / h, the size of one head, T: sequence length (self-attention)
"""
import mxnet as mx
from mxnet.gluon import nn

from . import _kernels


def _is_symbol(X):
    """Return whether `X` is a symbol (the block is building its graph)."""
    return isinstance(X, mx.sym.Symbol)


def _F(X):
    """Return the operator namespace for `X`: `mxnet.symbol` or `ndarray`."""
    return mx.sym if _is_symbol(X) else mx.nd


def _valid_lens_for_scores(F, X, valid_lens):
    """Broadcast `valid_lens` against scores `X` of shape (B, Q, K).

    A 1-D `valid_lens` (B,) holds one length per example; a 2-D one (B, Q)
    one length per query.  A symbol has no known rank, so in a graph the
    1-D form (the one BERT uses) is taken.
    """
    if not _is_symbol(valid_lens) and valid_lens.ndim == 2:
        return F.np.expand_dims(valid_lens, -1)          # (B, Q, 1)
    return F.npx.reshape(valid_lens, (-1, 1, 1))         # (B, 1, 1)


def masked_softmax(X, valid_lens):
    """Softmax over the last axis, ignoring the positions past `valid_lens`.

    Defined in :numref:`sec_attention-scoring-functions`.

    Masked scores are replaced by -1e6 before the softmax, as in the book,
    so their weights are 0 (and a row with length 0 gets uniform weights).

    Parameters
    ----------
    X : mxnet.np.ndarray or Symbol, shape (B, Q, K)
        Attention scores.
    valid_lens : mxnet.np.ndarray or Symbol or None, shape (B,) or (B, Q)
        Number of valid key positions, per example or per query.  None
        means every position is valid.

    Returns
    -------
    mxnet.np.ndarray or Symbol, shape (B, Q, K)
        Attention weights: each row sums to 1 over its valid positions.
    """
    F = _F(X)
    if valid_lens is None:
        return F.npx.softmax(X)                              # (B, Q, K)
    positions = F.npx.arange_like(X, axis=-1)                # (K,)
    lens = _valid_lens_for_scores(F, X, valid_lens)          # (B, ., 1)
    # Replace the scores past the valid length by -1e6 (an array, not a
    # scalar: `np.where` with a scalar has a wrong gradient in MXNet 1.9.1)
    X = F.np.where(positions < lens, X,
                   F.np.full_like(X, -1e6))                  # (B, Q, K)
    return F.npx.softmax(X)                                  # (B, Q, K)


def _param_value(F, param, X):
    """A child's parameter inside `hybrid_forward`: a variable of the
    graph, or its data on `X`'s context."""
    return param.var() if F is mx.sym else param.data(X.ctx)


def _softmax_with_lens(F, scores, valid_lens, num_heads):
    """`masked_softmax` for self-attention scores, with an additive mask.

    The book replaces the scores past the valid length by -1e6; here -1e6
    is added to them.  Either way their weight is exp(-1e6 - max) = 0 in
    float32, and the other weights are the same.  Only a row with no valid
    position differs: the book's weights are then uniform, these are the
    softmax of the unmasked scores (BERT's inputs always hold `<cls>`).

    The mask is spread to the scores' shape and added elementwise, so the
    backward pass hands the gradient through unchanged (NumPy-style
    broadcasting would reduce over it); the softmax then runs on MXNet's
    oneDNN kernel.

    Parameters
    ----------
    scores : shape (B*h, T, T)
    valid_lens : shape (B,) or (B, T) or None
        Lengths of the B sequences (or of each query); a graph takes the
        1-D form.

    Returns
    -------
    shape (B*h, T, T)
    """
    if valid_lens is None:
        return F.npx.softmax(scores)                            # (B*h, T, T)
    positions = F.npx.arange_like(scores, axis=-1)              # (T,)
    lens = F.np.repeat(valid_lens.astype('float32'), num_heads,
                       axis=0)                                  # (B*h, .)
    if F is mx.sym or lens.ndim == 1:
        lens = F.npx.reshape(lens, (-1, 1, 1))                  # (B*h, 1, 1)
    else:
        lens = F.np.expand_dims(lens, -1)                       # (B*h, T, 1)
    # As in the book, position j is valid when j < valid_len
    mask = (positions >= lens).astype('float32') * -1e6        # (B*h, ., T)
    scores = scores.as_nd_ndarray()
    mask = F.broadcast_like(mask.as_nd_ndarray(), scores)       # (B*h, T, T)
    scores = F.elemwise_add(scores, mask).as_np_ndarray()       # (B*h, T, T)
    return F.npx.softmax(scores)                                # (B*h, T, T)


class DotProductAttention(nn.HybridBlock):
    """Scaled dot-product attention.

    Defined in :numref:`subsec_batch_dot`.

    Parameters
    ----------
    dropout : float
        Dropout rate applied to the attention weights in training.

    Notes
    -----
    ``attention_weights`` holds the weights of the last imperative call,
    shape (B, Q, K), as in the book.
    """

    def __init__(self, dropout, **kwargs):
        super().__init__(**kwargs)
        self.dropout = nn.Dropout(dropout)

    def hybrid_forward(self, F, queries, keys, values, valid_lens=None):
        """Attend from `queries` to `keys`, averaging `values`.

        Parameters
        ----------
        queries : shape (B, Q, D)
        keys : shape (B, K, D)
        values : shape (B, K, Dv)
        valid_lens : shape (B,) or (B, Q), optional

        Returns
        -------
        shape (B, Q, Dv)
        """
        # Divide by sqrt(D), D read from the queries' last axis
        d = F.npx.shape_array(queries)[2:].astype('float32')     # (1,)
        scores = F.npx.batch_dot(queries, keys,
                                 transpose_b=True) / F.np.sqrt(d)  # (B, Q, K)
        attention_weights = masked_softmax(scores, valid_lens)     # (B, Q, K)
        if not _is_symbol(attention_weights):
            self.attention_weights = attention_weights
        return F.npx.batch_dot(self.dropout(attention_weights),
                               values)                             # (B, Q, Dv)


class MultiHeadAttention(nn.HybridBlock):
    """Multi-head attention: `num_heads` dot-product attentions in parallel.

    Defined in :numref:`sec_multihead-attention`.

    Parameters
    ----------
    num_hiddens : int
        H, the size of the queries, keys and values after projection and
        of the output; must be divisible by `num_heads`.
    num_heads : int
        h, the number of heads; each attends in d = H / h dimensions.
    dropout : float
        Dropout rate on the attention weights.
    use_bias : bool, default False
        Whether the projections `W_q`, `W_k`, `W_v`, `W_o` have biases.

    Attributes
    ----------
    fused : bool, default True
        Self-attention (``queries is keys is values``) takes the fused path
        (`fused_self_attention`); False keeps the book's path for every
        call.  Set it before `hybridize()`, or hybridize again after.
    """

    fused = True

    def __init__(self, num_hiddens, num_heads, dropout, use_bias=False,
                 **kwargs):
        super().__init__(**kwargs)
        if num_hiddens % num_heads:
            raise ValueError(
                f'num_hiddens must be divisible by num_heads, got '
                f'num_hiddens={num_hiddens} and num_heads={num_heads}')
        self.num_hiddens, self.num_heads = num_hiddens, num_heads
        self.attention = DotProductAttention(dropout)
        self.W_q = nn.Dense(num_hiddens, use_bias=use_bias, flatten=False)
        self.W_k = nn.Dense(num_hiddens, use_bias=use_bias, flatten=False)
        self.W_v = nn.Dense(num_hiddens, use_bias=use_bias, flatten=False)
        self.W_o = nn.Dense(num_hiddens, use_bias=use_bias, flatten=False)

    def hybrid_forward(self, F, queries, keys, values, valid_lens=None):
        """Project, attend in each head, concatenate the heads, project.

        Parameters
        ----------
        queries : shape (B, Q, Dq)
        keys : shape (B, K, Dk)
        values : shape (B, K, Dv)
        valid_lens : shape (B,) or (B, Q), optional

        Returns
        -------
        shape (B, Q, H)
        """
        if (self.fused and queries is keys and keys is values
                and self._input_size_known()):
            return self.fused_self_attention(F, queries, valid_lens)
        queries = self.transpose_qkv(self.W_q(queries))     # (B*h, Q, d)
        keys = self.transpose_qkv(self.W_k(keys))           # (B*h, K, d)
        values = self.transpose_qkv(self.W_v(values))       # (B*h, K, d)
        if valid_lens is not None:
            # Each example's length serves all of its h heads
            valid_lens = F.np.repeat(valid_lens, self.num_heads,
                                     axis=0)                   # (B*h, .)
        output = self.attention(queries, keys, values,
                                valid_lens)                    # (B*h, Q, d)
        output_concat = self.transpose_output(output)       # (B, Q, H)
        return self.W_o(output_concat)                         # (B, Q, H)

    def _input_size_known(self):
        """Whether `W_q`, `W_k`, `W_v` know their input size.

        Without it (``Dense`` defers it to the first call) the fused
        weight cannot be assembled; the book's path runs instead, and
        gives the projections their size.
        """
        return all(size > 0 for dense in (self.W_q, self.W_k, self.W_v)
                   for size in dense.weight.shape)

    def qkv_weight(self, F, X):
        """Stack `W_q`, `W_k` and `W_v` into one projection, head by head.

        The interleaved attention operators expect, for each head in turn,
        its query, key and value columns side by side: output rows
        q_0, k_0, v_0, q_1, k_1, v_1, ... (d rows each).

        Returns
        -------
        weight : shape (3*H, D)
        bias : shape (3*H,), or None without biases
        """
        h, denses = self.num_heads, (self.W_q, self.W_k, self.W_v)
        weights = [F.npx.reshape(_param_value(F, dense.weight, X),
                                 (-6, h, -1, -2))            # (h, d, D)
                   for dense in denses]
        weight = F.np.stack(weights, axis=1)                 # (h, 3, d, D)
        weight = F.npx.reshape(weight, (-5, -2, -2))         # (h*3, d, D)
        weight = F.npx.reshape(weight, (-5, -2))             # (3*H, D)
        if self.W_q.bias is None:
            return weight, None
        biases = [F.npx.reshape(_param_value(F, dense.bias, X),
                                (-6, h, -1))                 # (h, d)
                  for dense in denses]
        bias = F.npx.reshape(F.np.stack(biases, axis=1), (-1,))  # (3*H,)
        return weight, bias

    def fused_self_attention(self, F, X, valid_lens=None):
        """Self-attention of `X` with the fused operators.

        Computes what the book's path computes for ``(X, X, X)``: the
        same projections, scores divided by sqrt(d), softmax over the
        valid positions, dropout on the weights, the output projection.

        Parameters
        ----------
        X : shape (B, T, D)
        valid_lens : shape (B,) or (B, T), optional

        Returns
        -------
        shape (B, T, H)
        """
        h = self.num_heads
        weight, bias = self.qkv_weight(F, X)
        compiled = self._kernel_serves(valid_lens)
        if not compiled:
            # The interleaved operators take the sequence axis first
            X = F.np.transpose(X, (1, 0, 2))                 # (T, B, D)
        qkv = F.npx.fully_connected(
            X, weight, bias, num_hidden=3 * self.num_hiddens,
            no_bias=bias is None, flatten=False)   # (B, T, 3*H) or (T, B, 3*H)
        if compiled:
            output, attention_weights = _kernels.self_attention(
                F, qkv, valid_lens, h, self.attention.dropout._rate)
        else:
            output, attention_weights = self._interleaved_attention(
                F, qkv, valid_lens)
        if not _is_symbol(attention_weights):
            self.attention.attention_weights = attention_weights
        return self.W_o(output)                              # (B, T, H)

    def _interleaved_attention(self, F, qkv, valid_lens):
        """MXNet's interleaved attention operators on `qkv` (T, B, 3*H),
        with the additive mask and the dropout of the weights.

        Returns
        -------
        output : shape (B, T, H)
        attention_weights : shape (B*h, T, T), before dropout
        """
        h = self.num_heads
        qkv = qkv.as_nd_ndarray()  # the operators are not NumPy-style
        # Queries are divided by sqrt(d) before the product
        scores = F.contrib.interleaved_matmul_selfatt_qk(
            qkv, heads=h).as_np_ndarray()                    # (B*h, T, T)
        attention_weights = _softmax_with_lens(F, scores, valid_lens, h)
        dropped = self.attention.dropout(attention_weights)  # (B*h, T, T)
        output = F.contrib.interleaved_matmul_selfatt_valatt(
            qkv, dropped.as_nd_ndarray(), heads=h).as_np_ndarray()  # (T, B, H)
        output = F.np.transpose(output, (1, 0, 2))           # (B, T, H)
        return output, attention_weights

    def _kernel_serves(self, valid_lens):
        """Whether the compiled attention loops (`_kernels.self_attention`)
        run: inside `_kernels.training_graph`, with one valid length per
        sequence (a graph's `valid_lens` is taken to be 1-D) and dropout
        on whole weights."""
        return (_kernels.in_training_graph()
                and not self.attention.dropout._axes
                and (valid_lens is None or _is_symbol(valid_lens)
                     or valid_lens.ndim == 1))

    def transpose_qkv(self, X):
        """Split the last axis into heads and fold the heads into the batch.

        Defined in :numref:`sec_multihead-attention`.

        Parameters
        ----------
        X : shape (B, T, H)

        Returns
        -------
        shape (B*h, T, d)
        """
        F = _F(X)
        X = F.npx.reshape(X, (-2, -2, self.num_heads, -1))     # (B, T, h, d)
        X = F.np.transpose(X, (0, 2, 1, 3))                    # (B, h, T, d)
        return F.npx.reshape(X, (-5, -2, -2))                  # (B*h, T, d)

    def transpose_output(self, X):
        """Undo `transpose_qkv`: unfold the heads and concatenate them.

        Defined in :numref:`sec_multihead-attention`.

        Parameters
        ----------
        X : shape (B*h, T, d)

        Returns
        -------
        shape (B, T, H)
        """
        F = _F(X)
        X = F.npx.reshape(X, (-6, -1, self.num_heads,
                              -2, -2))                         # (B, h, T, d)
        X = F.np.transpose(X, (0, 2, 1, 3))                    # (B, T, h, d)
        return F.npx.reshape(X, (-2, -2, -5))                  # (B, T, H)
