"""The original BERT's architecture, as subclasses of the book's classes.

The book's BERT (sec_bert) simplifies the original one (Devlin et al.,
2019), whose checkpoints `load_pretrained_bert` reads: GELU in place of
ReLU, LayerNorm epsilon 1e-12, a LayerNorm and a dropout on the sum of
the embeddings, and an MLM output layer that shares the token
embedding's weight.  These subclasses of the book's classes
(`OriginalPositionWiseFFN`, `OriginalAddNorm`, `OriginalEncoderBlock`,
`OriginalBERTEncoder`, `OriginalMaskLM`, `OriginalBERTModel`) add just
that, with the book's parameter names (plus
``encoder.embedding_norm.gamma`` and ``.beta``), so that the Hugging
Face name map (`convert`), the ``.params`` files and the fast twins
(`d2l_bert.fast`) read them as they read the book's.

Dimension key used in the shape comments:

B: batch size, T: sequence length, H: num_hiddens, V: vocab_size
"""
import math

from mxnet.gluon import nn

from ..book.attention import MultiHeadAttention
from ..book.bert import BERTEncoder, BERTModel, MaskLM, NextSentencePred
from ..book.transformer import (AddNorm, PositionWiseFFN,
                                TransformerEncoderBlock)
from ..checks import check_activation, check_dropout, check_num_heads


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


# Each subclass builds its children itself, with the book's names, in
# place of the book's `__init__` (which would build the book's children
# only for them to be replaced): `super(BookClass, self).__init__()` is
# `nn.Block`'s; `forward` is the book's

class OriginalPositionWiseFFN(PositionWiseFFN):
    """The book's `PositionWiseFFN` with another nonlinearity.

    Parameters
    ----------
    ffn_num_hiddens, ffn_num_outputs : int
        As for `PositionWiseFFN`.
    activation : {'gelu', 'gelu_tanh', 'relu'}, default 'gelu'
        GELU as the original BERT, its tanh approximation as checkpoints
        with ``hidden_act='gelu_new'``, ReLU as the book.
    """
    def __init__(self, ffn_num_hiddens, ffn_num_outputs, activation='gelu'):
        super(PositionWiseFFN, self).__init__()
        self.dense1 = dense(ffn_num_hiddens, flatten=False,
                            activation=check_activation(activation))
        self.dense2 = nn.Dense(ffn_num_outputs, flatten=False)


class OriginalAddNorm(AddNorm):
    """The book's `AddNorm` with another LayerNorm epsilon.

    Parameters
    ----------
    dropout : float
        As for `AddNorm`.
    epsilon : float, default 1e-12
        The LayerNorm's epsilon (the book's, Gluon's, is 1e-5).
    """
    def __init__(self, dropout, epsilon=1e-12):
        super(AddNorm, self).__init__()
        self.dropout = nn.Dropout(dropout)
        self.ln = nn.LayerNorm(epsilon=epsilon)


class OriginalEncoderBlock(TransformerEncoderBlock):
    """The book's `TransformerEncoderBlock` with the original BERT's
    activation and LayerNorm epsilon.

    Parameters
    ----------
    num_hiddens, ffn_num_hiddens, num_heads, dropout, use_bias
        As for `TransformerEncoderBlock`.
    activation : {'gelu', 'gelu_tanh', 'relu'}, default 'gelu'
        The FFN's nonlinearity (`OriginalPositionWiseFFN`).
    epsilon : float, default 1e-12
        Both AddNorm's LayerNorm epsilon (`OriginalAddNorm`).
    """
    def __init__(self, num_hiddens, ffn_num_hiddens, num_heads, dropout,
                 use_bias=False, activation='gelu', epsilon=1e-12):
        super(TransformerEncoderBlock, self).__init__()
        self.attention = MultiHeadAttention(
            num_hiddens, num_heads, dropout, use_bias)
        self.addnorm1 = OriginalAddNorm(dropout, epsilon)
        self.ffn = OriginalPositionWiseFFN(ffn_num_hiddens, num_hiddens,
                                           activation)
        self.addnorm2 = OriginalAddNorm(dropout, epsilon)


class OriginalBERTEncoder(BERTEncoder):
    """The book's `BERTEncoder` with the original BERT's architecture.

    Parameters
    ----------
    vocab_size, num_hiddens, ffn_num_hiddens, num_heads, num_blks : int
        As for `BERTEncoder`.
    dropout : float
        Dropout rate in [0, 1) in every block and on the embedding sum.
    max_len : int, default 1000
        Number of learnable positions.
    activation : {'gelu', 'gelu_tanh', 'relu'}, default 'gelu'
        The FFNs' nonlinearity.
    epsilon : float, default 1e-12
        Epsilon of every LayerNorm.

    Notes
    -----
    Beyond the book's encoder: its blocks are of `OriginalEncoderBlock`,
    with `activation` and `epsilon`, and the embedding sum goes through
    `embedding_norm` (a LayerNorm) and `embedding_dropout` before the
    blocks.
    """
    def __init__(self, vocab_size, num_hiddens, ffn_num_hiddens, num_heads,
                 num_blks, dropout, max_len=1000, activation='gelu',
                 epsilon=1e-12, **kwargs):
        check_dropout(dropout)
        check_activation(activation)
        check_num_heads(num_hiddens, num_heads)
        super(BERTEncoder, self).__init__(**kwargs)
        self.token_embedding = nn.Embedding(vocab_size, num_hiddens)
        self.segment_embedding = nn.Embedding(2, num_hiddens)
        self.blks = nn.Sequential()
        for _ in range(num_blks):
            self.blks.add(OriginalEncoderBlock(
                num_hiddens, ffn_num_hiddens, num_heads, dropout, True,
                activation, epsilon))
        self.pos_embedding = self.params.get('pos_embedding',
                                             shape=(1, max_len, num_hiddens))
        self.embedding_norm = nn.LayerNorm(epsilon=epsilon)
        self.embedding_dropout = nn.Dropout(dropout)

    def forward(self, tokens, segments, valid_lens):
        X = self.token_embedding(tokens) + self.segment_embedding(segments)
        X = X + self.pos_embedding.data(ctx=X.ctx)[:, :X.shape[1], :]
        X = self.embedding_dropout(self.embedding_norm(X))   # (B, T, H)
        for blk in self.blks:
            X = blk(X, valid_lens)                           # (B, T, H)
        return X


class OriginalMaskLM(MaskLM):
    """The book's `MaskLM` with the original BERT's activation, epsilon
    and, optionally, output layer tied to the token embedding.

    Parameters
    ----------
    vocab_size, num_hiddens : int
        As for `MaskLM`.
    activation : {'gelu', 'gelu_tanh', 'relu'}, default 'gelu'
        The nonlinearity of the MLP's hidden layer.
    epsilon : float, default 1e-12
        The LayerNorm's epsilon.
    tied_embedding : nn.Embedding, optional
        If given, the output layer uses this embedding's weight (V, H),
        as the original BERT does.
    """
    def __init__(self, vocab_size, num_hiddens, activation='gelu',
                 epsilon=1e-12, tied_embedding=None, **kwargs):
        super(MaskLM, self).__init__(**kwargs)
        # The book's MLP (same structural names: mlp.0, mlp.1, mlp.2)
        self.mlp = nn.Sequential()
        self.mlp.add(dense(num_hiddens, flatten=False,
                           activation=check_activation(activation)))
        self.mlp.add(nn.LayerNorm(epsilon=epsilon))
        if tied_embedding is None:
            self.mlp.add(nn.Dense(vocab_size, flatten=False))
        else:  # the embedding's prefix makes `weight` its weight
            self.mlp.add(nn.Dense(vocab_size, flatten=False,
                                  prefix=tied_embedding.prefix,
                                  params=tied_embedding.params))


class OriginalBERTModel(BERTModel):
    """The book's `BERTModel` with the original BERT's architecture.

    Parameters
    ----------
    vocab_size, num_hiddens, ffn_num_hiddens, num_heads, num_blks : int
        As for `BERTModel`.
    dropout : float
        As for `OriginalBERTEncoder`.
    max_len : int, default 1000
        Number of learnable positions.
    activation, epsilon : str, float
        As for `OriginalBERTEncoder` ('gelu', 1e-12:
        `d2l_bert.presets.ORIGINAL_BERT`).
    tie_weights : bool, default False
        Use the token embedding's weight in the MLM output layer, as the
        original BERT does.

    Notes
    -----
    `encoder` is an `OriginalBERTEncoder`, `mlm` an `OriginalMaskLM`;
    `hidden`, `nsp` and `forward` are the book's (its `__init__`'s lines,
    with the original encoder and MLM).
    """
    def __init__(self, vocab_size, num_hiddens, ffn_num_hiddens, num_heads,
                 num_blks, dropout, max_len=1000, activation='gelu',
                 epsilon=1e-12, tie_weights=False):
        super(BERTModel, self).__init__()
        self.encoder = OriginalBERTEncoder(
            vocab_size, num_hiddens, ffn_num_hiddens, num_heads, num_blks,
            dropout, max_len, activation, epsilon)
        self.hidden = nn.Dense(num_hiddens, activation='tanh')
        self.mlm = OriginalMaskLM(
            vocab_size, num_hiddens, activation, epsilon,
            self.encoder.token_embedding if tie_weights else None)
        self.nsp = NextSentencePred()
