"""The original BERT's architecture, as subclasses of the book's classes.

The book's BERT (sec_bert) simplifies the original one (Devlin et al.,
2019), whose checkpoints `load_pretrained_bert` reads: GELU in place of
ReLU, LayerNorm epsilon 1e-12, a LayerNorm and a dropout on the sum of
the embeddings, and an MLM output layer that shares the token
embedding's weight.  These subclasses add just that to the book's
classes, with the book's parameter names (plus
``encoder.embedding_norm.gamma`` and ``.beta``), so that the Hugging
Face name map (`convert`), the ``.params`` files and the fast twins
(`d2l_bert.fast`) read them as they read the book's.

Dimension key used in the shape comments:

B: batch size, T: sequence length, H: num_hiddens, V: vocab_size
"""
from mxnet.gluon import nn

from ..book.bert import BERTEncoder, BERTModel, MaskLM
from ..checks import check_activation, check_dropout
from ..book.transformer import TransformerEncoderBlock, dense


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
    Beyond the book's encoder: its blocks use `activation` and `epsilon`,
    and the embedding sum goes through `embedding_norm` (a LayerNorm) and
    `embedding_dropout` before the blocks.
    """
    def __init__(self, vocab_size, num_hiddens, ffn_num_hiddens, num_heads,
                 num_blks, dropout, max_len=1000, activation='gelu',
                 epsilon=1e-12, **kwargs):
        super().__init__(vocab_size, num_hiddens, ffn_num_hiddens,
                         num_heads, num_blks, check_dropout(dropout),
                         max_len, **kwargs)
        check_activation(activation)
        # The book's blocks, rebuilt with the original activation and
        # epsilon (same structural names: blks.0, blks.1, ...)
        self.blks = nn.Sequential()
        for _ in range(num_blks):
            self.blks.add(TransformerEncoderBlock(
                num_hiddens, ffn_num_hiddens, num_heads, dropout, True,
                activation, epsilon))
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
        super().__init__(vocab_size, num_hiddens, **kwargs)
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
    `hidden`, `nsp` and `forward` are the book's.
    """
    def __init__(self, vocab_size, num_hiddens, ffn_num_hiddens, num_heads,
                 num_blks, dropout, max_len=1000, activation='gelu',
                 epsilon=1e-12, tie_weights=False):
        super().__init__(vocab_size, num_hiddens, ffn_num_hiddens,
                         num_heads, num_blks, check_dropout(dropout),
                         max_len)
        self.encoder = OriginalBERTEncoder(
            vocab_size, num_hiddens, ffn_num_hiddens, num_heads, num_blks,
            dropout, max_len, activation, epsilon)
        self.mlm = OriginalMaskLM(
            vocab_size, num_hiddens, activation, epsilon,
            self.encoder.token_embedding if tie_weights else None)
