"""Attention, as the book builds it before the transformer.

sec_attention-scoring-functions gives `masked_softmax` and
`DotProductAttention`; sec_multihead-attention gives `MultiHeadAttention`.
They are plain Gluon blocks (`nn.Block` with `forward`), line for line
the book's code.  Their fused, compiled twin lives apart, in `d2l_bert.fast`.

Dimension key used in the shape comments:

B: batch size, Q: number of queries, K: number of key-value pairs,
D: query/key size, Dv: value size, H: num_hiddens, h: num_heads,
d: H / h, the size of one head
"""
import math

from mxnet import npx
from mxnet.gluon import nn

# As the book's first cell: MXNet's NumPy semantics, for which every block
# here is written
npx.set_np()


def masked_softmax(X, valid_lens):
    """Softmax over the last axis, ignoring the positions past `valid_lens`.

    Defined in :numref:`sec_attention-scoring-functions`.

    Parameters
    ----------
    X : ndarray, shape (B, Q, K)
        Attention scores.
    valid_lens : ndarray of shape (B,) or (B, Q), or None
        Number of valid key positions, per example or per query.  None
        means every position is valid.

    Returns
    -------
    ndarray, shape (B, Q, K)
        Each row sums to 1 over its valid positions; masked positions get
        weight 0 (a row with no valid position gets uniform weights).
    """
    if valid_lens is None:
        return npx.softmax(X)                                # (B, Q, K)
    else:
        shape = X.shape
        if valid_lens.ndim == 1:
            valid_lens = valid_lens.repeat(shape[1])         # (B*Q,)
        else:
            valid_lens = valid_lens.reshape(-1)              # (B*Q,)
        # On the last axis, replace masked elements with a very large negative
        # value, whose exponentiation outputs 0
        X = npx.sequence_mask(X.reshape(-1, shape[-1]), valid_lens, True,
                              value=-1e6, axis=1)            # (B*Q, K)
        return npx.softmax(X).reshape(shape)                 # (B, Q, K)


class DotProductAttention(nn.Block):
    """Scaled dot-product attention.

    Defined in :numref:`subsec_batch_dot`.

    Parameters
    ----------
    dropout : float
        Dropout rate on the attention weights, in training.

    Attributes
    ----------
    attention_weights : ndarray, shape (B, Q, K)
        The weights of the last call, before dropout.
    """
    def __init__(self, dropout):
        super().__init__()
        self.dropout = nn.Dropout(dropout)

    def forward(self, queries, keys, values, valid_lens=None):
        """Attend from `queries` (B, Q, D) to `keys` (B, K, D) and average
        `values` (B, K, Dv); `valid_lens` (B,) or (B, Q).  Returns
        (B, Q, Dv)."""
        d = queries.shape[-1]
        # Set transpose_b=True to swap the last two dimensions of keys
        scores = npx.batch_dot(queries, keys,
                               transpose_b=True) / math.sqrt(d)  # (B, Q, K)
        self.attention_weights = masked_softmax(scores, valid_lens)
        return npx.batch_dot(self.dropout(self.attention_weights),
                             values)                         # (B, Q, Dv)


class MultiHeadAttention(nn.Block):
    """Multi-head attention: `num_heads` dot-product attentions in parallel.

    Defined in :numref:`sec_multihead-attention`.

    Parameters
    ----------
    num_hiddens : int
        H, the size of the projected queries, keys, values and output;
        divisible by `num_heads`.
    num_heads : int
        h; each head attends in d = H / h dimensions.
    dropout : float
        Dropout rate on the attention weights.
    use_bias : bool, default False
        Whether `W_q`, `W_k`, `W_v` and `W_o` have biases.
    """
    def __init__(self, num_hiddens, num_heads, dropout, use_bias=False,
                 **kwargs):
        super().__init__()
        self.num_heads = num_heads
        self.attention = DotProductAttention(dropout)
        self.W_q = nn.Dense(num_hiddens, use_bias=use_bias, flatten=False)
        self.W_k = nn.Dense(num_hiddens, use_bias=use_bias, flatten=False)
        self.W_v = nn.Dense(num_hiddens, use_bias=use_bias, flatten=False)
        self.W_o = nn.Dense(num_hiddens, use_bias=use_bias, flatten=False)

    def forward(self, queries, keys, values, valid_lens):
        """Project, attend in every head, concatenate the heads, project.

        `queries` (B, Q, Dq), `keys` (B, K, Dk), `values` (B, K, Dv);
        `valid_lens` (B,) or (B, Q) or None.  Returns (B, Q, H).
        """
        queries = self.transpose_qkv(self.W_q(queries))      # (B*h, Q, d)
        keys = self.transpose_qkv(self.W_k(keys))            # (B*h, K, d)
        values = self.transpose_qkv(self.W_v(values))        # (B*h, K, d)
        if valid_lens is not None:
            # On axis 0, copy the first item (scalar or vector) for num_heads
            # times, then copy the next item, and so on
            valid_lens = valid_lens.repeat(self.num_heads, axis=0)
        output = self.attention(queries, keys, values,
                                valid_lens)                  # (B*h, Q, d)
        output_concat = self.transpose_output(output)        # (B, Q, H)
        return self.W_o(output_concat)                       # (B, Q, H)

    def transpose_qkv(self, X):
        """Split the last axis into heads and fold the heads into the batch.

        Defined in :numref:`sec_multihead-attention`.

        `X` (B, T, H) becomes (B*h, T, d).
        """
        X = X.reshape(X.shape[0], X.shape[1], self.num_heads,
                      -1)                                    # (B, T, h, d)
        X = X.transpose(0, 2, 1, 3)                          # (B, h, T, d)
        return X.reshape(-1, X.shape[2], X.shape[3])         # (B*h, T, d)

    def transpose_output(self, X):
        """Undo `transpose_qkv`: unfold the heads and concatenate them.

        Defined in :numref:`sec_multihead-attention`.

        `X` (B*h, T, d) becomes (B, T, H).
        """
        X = X.reshape(-1, self.num_heads, X.shape[1],
                      X.shape[2])                            # (B, h, T, d)
        X = X.transpose(0, 2, 1, 3)                          # (B, T, h, d)
        return X.reshape(X.shape[0], X.shape[1], -1)         # (B, T, H)
