"""The transformer encoder block that BERT stacks (sec_transformer).

`PositionWiseFFN`, `AddNorm` and `TransformerEncoderBlock` as the book
defines them: plain Gluon blocks (`nn.Block` with `forward`).  Two keyword
options give the original BERT's architecture (the book's choice stays
the default):

- ``activation``: 'relu' (the book), 'gelu' (the original BERT, the
  chapter's exercise) or 'gelu_tanh' (GELU's tanh approximation, which
  some pretrained BERTs use: Hugging Face's 'gelu_new');
- ``epsilon``: the LayerNorm epsilon, 1e-5 in Gluon (the book) and 1e-12
  in the original BERT.

`EncoderBlock` is the block's name in the 0.17 editions of the book.

Dimension key used in the shape comments:

B: batch size, T: sequence length, H: num_hiddens, F: ffn_num_hiddens
"""
import math

from mxnet.gluon import nn

from .attention import MultiHeadAttention
from ..checks import check_activation


class TanhGELU(nn.HybridBlock):
    """GELU's tanh approximation (Hendrycks and Gimpel, 2016):
    ``0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))``, Hugging Face's
    'gelu_new' and 'gelu_pytorch_tanh'."""

    def hybrid_forward(self, F, X):
        """`X` (any shape) -> the same shape."""
        inner = math.sqrt(2 / math.pi) * (X + 0.044715 * X * X * X)
        return 0.5 * X * (1 + F.np.tanh(inner))


def dense(units, activation=None, **kwargs):
    """`nn.Dense(units, activation=...)`, also for 'gelu' and 'gelu_tanh',
    which Gluon's `Dense` does not know: its activation is then an
    `nn.GELU` or a `TanhGELU`, so the parameters keep the Dense's names."""
    if activation not in ('gelu', 'gelu_tanh'):
        return nn.Dense(units, activation=activation, **kwargs)
    layer = nn.Dense(units, **kwargs)
    layer.act = nn.GELU() if activation == 'gelu' else TanhGELU()
    return layer


class PositionWiseFFN(nn.Block):
    """The same two-layer MLP applied at every position.

    Defined in :numref:`sec_transformer`.

    Parameters
    ----------
    ffn_num_hiddens : int
        F, the size of the hidden layer.
    ffn_num_outputs : int
        Size of the output (H in the encoder).
    activation : {'relu', 'gelu', 'gelu_tanh'}, default 'relu'
        The nonlinearity between the two layers: ReLU as the book, GELU
        as the original BERT, its tanh approximation as checkpoints with
        ``hidden_act='gelu_new'``.
    """
    def __init__(self, ffn_num_hiddens, ffn_num_outputs, activation='relu'):
        super().__init__()
        self.dense1 = dense(ffn_num_hiddens, flatten=False,
                            activation=check_activation(activation))
        self.dense2 = nn.Dense(ffn_num_outputs, flatten=False)

    def forward(self, X):
        """`X` (B, T, H) -> (B, T, H)."""
        return self.dense2(self.dense1(X))                   # (B, T, H)


class AddNorm(nn.Block):
    """Residual connection followed by layer normalization.

    Defined in :numref:`subsec_positionwise-ffn`.

    Parameters
    ----------
    dropout : float
        Dropout rate on the sublayer's output `Y`.
    epsilon : float, default 1e-5
        LayerNorm epsilon.
    """
    def __init__(self, dropout, epsilon=1e-5):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.ln = nn.LayerNorm(epsilon=epsilon)

    def forward(self, X, Y):
        """`X`, `Y` (B, T, H) -> LayerNorm(X + dropout(Y)), (B, T, H)."""
        return self.ln(self.dropout(Y) + X)                  # (B, T, H)


class TransformerEncoderBlock(nn.Block):
    """One transformer encoder block: self-attention, then a position-wise
    FFN, each wrapped in `AddNorm`.

    Defined in :numref:`subsec_positionwise-ffn`.

    Parameters
    ----------
    num_hiddens : int
        Size of each token's encoding (H in the shape comments).
    ffn_num_hiddens : int
        F, the hidden size of the position-wise FFN.
    num_heads : int
        Attention heads; must divide `num_hiddens`.
    dropout : float
        Dropout rate on the attention weights and in both AddNorm.
    use_bias : bool, default False
        Whether the attention projections have biases (BERT: True).
    activation : {'relu', 'gelu', 'gelu_tanh'}, default 'relu'
        The FFN's nonlinearity (`PositionWiseFFN`).
    epsilon : float, default 1e-5
        Both AddNorm's LayerNorm epsilon (1e-12 in the original BERT).
    """
    def __init__(self, num_hiddens, ffn_num_hiddens, num_heads, dropout,
                 use_bias=False, activation='relu', epsilon=1e-5):
        super().__init__()
        self.attention = MultiHeadAttention(
            num_hiddens, num_heads, dropout, use_bias)
        self.addnorm1 = AddNorm(dropout, epsilon)
        self.ffn = PositionWiseFFN(ffn_num_hiddens, num_hiddens, activation)
        self.addnorm2 = AddNorm(dropout, epsilon)

    def forward(self, X, valid_lens):
        """`X` (B, T, H), `valid_lens` (B,) or None -> (B, T, H)."""
        Y = self.addnorm1(X, self.attention(X, X, X, valid_lens))  # (B, T, H)
        return self.addnorm2(Y, self.ffn(Y))                 # (B, T, H)


#: The 0.17 editions' name for `TransformerEncoderBlock` (same signature)
EncoderBlock = TransformerEncoderBlock
