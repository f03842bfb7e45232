"""The transformer encoder block that BERT stacks (sec_transformer).

`PositionWiseFFN`, `AddNorm` and `TransformerEncoderBlock` as the book
defines them: plain Gluon blocks (`nn.Block` with `forward`), with the
book's signatures.  The original BERT's options (GELU, LayerNorm epsilon
1e-12) are subclasses of these in `d2l_bert.hf.original`.

`EncoderBlock` is the block's name in the 0.17 editions of the book.

Dimension key used in the shape comments:

B: batch size, T: sequence length, H: num_hiddens, F: ffn_num_hiddens
"""
from mxnet.gluon import nn

from .attention import MultiHeadAttention


class PositionWiseFFN(nn.Block):
    """The same two-layer MLP applied at every position.

    Defined in :numref:`sec_transformer`.

    Parameters
    ----------
    ffn_num_hiddens : int
        F, the size of the hidden layer.
    ffn_num_outputs : int
        Size of the output (H in the encoder).
    """
    def __init__(self, ffn_num_hiddens, ffn_num_outputs):
        super().__init__()
        self.dense1 = nn.Dense(ffn_num_hiddens, flatten=False,
                               activation='relu')
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
    """
    def __init__(self, dropout):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.ln = nn.LayerNorm()

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
    """
    def __init__(self, num_hiddens, ffn_num_hiddens, num_heads, dropout,
                 use_bias=False):
        super().__init__()
        self.attention = MultiHeadAttention(
            num_hiddens, num_heads, dropout, use_bias)
        self.addnorm1 = AddNorm(dropout)
        self.ffn = PositionWiseFFN(ffn_num_hiddens, num_hiddens)
        self.addnorm2 = AddNorm(dropout)

    def forward(self, X, valid_lens):
        """`X` (B, T, H), `valid_lens` (B,) or None -> (B, T, H)."""
        Y = self.addnorm1(X, self.attention(X, X, X, valid_lens))  # (B, T, H)
        return self.addnorm2(Y, self.ffn(Y))                 # (B, T, H)


#: The 0.17 editions' name for `TransformerEncoderBlock` (same signature)
EncoderBlock = TransformerEncoderBlock
