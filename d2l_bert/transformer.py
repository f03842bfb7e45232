"""The transformer encoder block that BERT stacks (sec_transformer).

`PositionWiseFFN`, `AddNorm` and `TransformerEncoderBlock` as the book
defines them, with two options for the original BERT's architecture (the
book's choice stays the default):

- ``activation``: 'relu' (the book) or 'gelu' (the original BERT, the
  chapter's exercise);
- ``epsilon``: the LayerNorm epsilon, 1e-5 in Gluon (the book) and 1e-12 in
  the original BERT.

`EncoderBlock` is the block's name in the 0.17 editions of the book.

Dimension key used in the shape comments:

B: batch size, T: sequence length, H: num_hiddens, F: ffn_num_hiddens
"""
from mxnet.gluon import nn

from . import _kernels
from .attention import MultiHeadAttention

ACTIVATIONS = ('relu', 'gelu')


def _check_activation(activation):
    if activation not in ACTIVATIONS:
        raise ValueError(
            f'activation must be one of {ACTIVATIONS}, got {activation!r}')
    return activation


class PositionWiseFFN(nn.HybridBlock):
    """The same two-layer MLP applied at every position.

    Defined in :numref:`sec_transformer`.

    Parameters
    ----------
    ffn_num_hiddens : int
        Size of the hidden layer.
    ffn_num_outputs : int
        Size of the output (num_hiddens in the encoder).
    activation : {'relu', 'gelu'}, default 'relu'
        Activation of the hidden layer.
    """

    def __init__(self, ffn_num_hiddens, ffn_num_outputs, activation='relu',
                 **kwargs):
        super().__init__(**kwargs)
        _check_activation(activation)
        # Gluon's Dense knows 'relu' but not 'gelu': GELU is added as its
        # own layer, so the parameters keep the names dense1 and dense2
        self.dense1 = nn.Dense(
            ffn_num_hiddens, flatten=False,
            activation='relu' if activation == 'relu' else None)
        self.activation = nn.GELU() if activation == 'gelu' else None
        self.dense2 = nn.Dense(ffn_num_outputs, flatten=False)

    def hybrid_forward(self, F, X):
        """Parameters: X, shape (B, T, H_in). Returns shape (B, T, H_out)."""
        Y = self.dense1(X)                                   # (B, T, F)
        if self.activation is not None:
            Y = self.activation(Y)                           # (B, T, F)
        return self.dense2(Y)                                # (B, T, H)


class LayerNorm(nn.LayerNorm):
    """Gluon's `nn.LayerNorm`, with a faster gradient in `train_bert`.

    The same block, parameters (`gamma`, `beta`) and outputs as
    `nn.LayerNorm`.  In `train_bert`'s step and in a fine-tuning step
    (inside `_kernels.training_graph`), a LayerNorm over the last axis
    computes its backward pass with a compiled loop
    (`_kernels.layer_norm`): MXNet 1.9's own is about 20 times slower
    than its forward pass.  Anywhere else, `nn.LayerNorm` runs as it is.

    In that graph `AddNorm` calls it with two inputs, ``ln(Y, X)``: the
    LayerNorm of ``X + dropout(Y)``, with dropout at the rate
    `residual_dropout`, all in one compiled operator
    (`_kernels.add_norm`).

    Parameters
    ----------
    residual_dropout : float, default 0
        The dropout rate of ``ln(Y, X)``; keyword only.  Other arguments
        are `nn.LayerNorm`'s.
    """

    def __init__(self, *args, residual_dropout=0.0, **kwargs):
        super().__init__(*args, **kwargs)
        self.residual_dropout = residual_dropout

    def hybrid_forward(self, F, data, residual=None, gamma=None, beta=None):
        """Parameters: data, shape (..., H); residual, the same shape, for
        the LayerNorm of ``residual + dropout(data)``.  Returns shape
        (..., H)."""
        if residual is None and (not _kernels.in_training_graph()
                                 or self._axis != -1):
            return super().hybrid_forward(F, data, gamma, beta)
        if residual is None:
            return _kernels.layer_norm(F, data, gamma, beta,
                                       self._epsilon)        # (..., H)
        return _kernels.add_norm(F, residual, data, gamma, beta,
                                 self._epsilon,
                                 self.residual_dropout)      # (..., H)


class AddNorm(nn.HybridBlock):
    """Residual connection followed by layer normalization.

    Defined in :numref:`subsec_positionwise-ffn`.

    In `train_bert`'s step and in a fine-tuning step (inside
    `_kernels.training_graph`), the dropout, the addition and the
    LayerNorm run as one compiled operator (`_kernels.add_norm`), with a
    dropout mask of the same rate drawn differently.

    Parameters
    ----------
    dropout : float
        Dropout rate applied to the sublayer's output `Y`.
    epsilon : float, default 1e-5
        LayerNorm epsilon.
    """

    def __init__(self, dropout, epsilon=1e-5, **kwargs):
        super().__init__(**kwargs)
        self.dropout = nn.Dropout(dropout)
        self.ln = LayerNorm(epsilon=epsilon, residual_dropout=dropout)

    def hybrid_forward(self, F, X, Y):
        """Parameters: X, Y of shape (B, T, H). Returns shape (B, T, H)."""
        if (not _kernels.in_training_graph() or self.dropout._axes
                or self.ln._axis != -1):
            return self.ln(self.dropout(Y) + X)              # (B, T, H)
        return self.ln(Y, X)        # LayerNorm(X + dropout(Y)), (B, T, H)


class TransformerEncoderBlock(nn.HybridBlock):
    """One transformer encoder block: self-attention, then a position-wise
    FFN, each wrapped in `AddNorm`.

    Defined in :numref:`subsec_positionwise-ffn`.

    Parameters
    ----------
    num_hiddens : int
        H, the size of each position's representation.
    ffn_num_hiddens : int
        Hidden size of the position-wise FFN.
    num_heads : int
        Number of attention heads; must divide `num_hiddens`.
    dropout : float
        Dropout rate.
    use_bias : bool, default False
        Whether the attention projections have biases (BERT: True).
    activation : {'relu', 'gelu'}, default 'relu'
        Activation of the FFN.
    epsilon : float, default 1e-5
        LayerNorm epsilon of both `AddNorm` layers.
    """

    def __init__(self, num_hiddens, ffn_num_hiddens, num_heads, dropout,
                 use_bias=False, activation='relu', epsilon=1e-5, **kwargs):
        super().__init__(**kwargs)
        self.attention = MultiHeadAttention(num_hiddens, num_heads, dropout,
                                            use_bias)
        self.addnorm1 = AddNorm(dropout, epsilon)
        self.ffn = PositionWiseFFN(ffn_num_hiddens, num_hiddens, activation)
        self.addnorm2 = AddNorm(dropout, epsilon)

    def hybrid_forward(self, F, X, valid_lens=None):
        """Encode `X`; positions past `valid_lens` are not attended to.

        Parameters
        ----------
        X : shape (B, T, H)
        valid_lens : shape (B,), optional

        Returns
        -------
        shape (B, T, H)
        """
        Y = self.addnorm1(X, self.attention(X, X, X, valid_lens))  # (B, T, H)
        return self.addnorm2(Y, self.ffn(Y))                     # (B, T, H)


#: The 0.17 editions' name for `TransformerEncoderBlock` (same signature).
EncoderBlock = TransformerEncoderBlock
