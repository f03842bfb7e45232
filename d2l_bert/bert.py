"""sec_bert: the BERT model, read top to bottom in the book's order.

`get_tokens_and_segments`, then `BERTEncoder`, `MaskLM`,
`NextSentencePred` and `BERTModel`: plain Gluon blocks (`nn.Block`
with `forward`), the book's lines in the book's order.  Beyond the book, each
`forward` first checks its inputs (`d2l_bert.checks`), and keyword
options give the original BERT's architecture
(`d2l_bert.presets.ORIGINAL_BERT`), which the Hugging Face loader
(`d2l_bert.hf`) uses.  The fast twins of these classes live apart, in
`d2l_bert.fast`.

Dimension key used in the shape comments:

B: batch size, T: sequence length, H: num_hiddens, V: vocab_size,
P: predicted positions per sequence
"""
from mxnet import np, npx
from mxnet.gluon import nn

from .checks import (check_activation, check_dropout, check_encoder_inputs,
                     check_pred_positions, num_blks_of)
from .transformer import TransformerEncoderBlock, dense

# As the book's first cell: MXNet's NumPy semantics, for which every block
# here is written
npx.set_np()


def get_tokens_and_segments(tokens_a, tokens_b=None):
    """Build a BERT input sequence from one or two token lists.

    Defined in :numref:`subsec_bert_input_rep`.

    Parameters
    ----------
    tokens_a : list of str
        Tokens of the first text sequence.
    tokens_b : list of str, optional
        Tokens of the second text sequence.

    Returns
    -------
    tokens : list of str
        ``['<cls>'] + tokens_a + ['<sep>']``, followed by
        ``tokens_b + ['<sep>']`` when `tokens_b` is given.
    segments : list of int
        0 for `<cls>`, `tokens_a` and the first `<sep>`; 1 for `tokens_b`
        and the last `<sep>`.
    """
    tokens = ['<cls>'] + list(tokens_a) + ['<sep>']
    # Segment A is marked 0, segment B 1
    segments = [0] * (len(tokens_a) + 2)
    if tokens_b is not None:
        tokens += list(tokens_b) + ['<sep>']
        segments += [1] * (len(tokens_b) + 1)
    return tokens, segments


class BERTEncoder(nn.Block):
    """BERT's encoder: the summed embeddings, then transformer blocks.

    Token, segment and position embeddings are summed, then go through
    `num_blks` transformer encoder blocks.

    Defined in :numref:`subsec_bert_input_rep`.

    Parameters
    ----------
    vocab_size : int
        Size of the vocabulary (V in the shape comments).
    num_hiddens : int
        Size of each token's encoding (H in the shape comments).
    ffn_num_hiddens : int
        Hidden size of each block's position-wise FFN.
    num_heads : int
        Attention heads per block; must divide `num_hiddens`.
    num_blks : int
        Number of encoder blocks (`num_layers` in the 0.17 editions, also
        accepted as a keyword).
    dropout : float
        Dropout rate in [0, 1) in every encoder block (and on the
        embedding sum with `embedding_norm`).
    max_len : int, default 1000
        Number of learnable positions: the longest input accepted.
    activation, epsilon, embedding_norm : keyword-only options
        'relu', 1e-5 and False in the book; the original BERT's are in
        `d2l_bert.presets.ORIGINAL_BERT` (GELU, epsilon 1e-12, and a
        LayerNorm and dropout on the embedding sum).
    """
    def __init__(self, vocab_size, num_hiddens, ffn_num_hiddens, num_heads,
                 num_blks=None, dropout=None, max_len=1000, *,
                 activation='relu', epsilon=1e-5, embedding_norm=False,
                 num_layers=None, **kwargs):
        super(BERTEncoder, self).__init__(**kwargs)
        num_blks = num_blks_of(num_blks, num_layers)
        dropout = check_dropout(dropout)
        self.vocab_size, self.max_len = vocab_size, max_len
        self.token_embedding = nn.Embedding(vocab_size, num_hiddens)
        self.segment_embedding = nn.Embedding(2, num_hiddens)
        self.blks = nn.Sequential()
        for _ in range(num_blks):
            self.blks.add(TransformerEncoderBlock(
                num_hiddens, ffn_num_hiddens, num_heads, dropout, True,
                activation, epsilon))
        # Learnable positional embeddings, one per position up to `max_len`
        self.pos_embedding = self.params.get('pos_embedding',
                                             shape=(1, max_len, num_hiddens))
        self.embedding_norm = None
        if embedding_norm:  # the original BERT's, not the book's
            self.embedding_norm = nn.LayerNorm(epsilon=epsilon)
            self.embedding_dropout = nn.Dropout(dropout)

    def forward(self, tokens, segments, valid_lens=None):
        """Encode `tokens` and `segments` (B, T), int; `valid_lens` (B,)
        counts each sequence's real tokens (None: all T).  Returns the
        encodings, (B, T, H)."""
        check_encoder_inputs(tokens, segments, valid_lens, self.vocab_size,
                             self.max_len)
        X = self.token_embedding(tokens) + self.segment_embedding(
            segments)                                        # (B, T, H)
        X = X + self.pos_embedding.data(
            ctx=X.ctx)[:, :X.shape[1], :]                    # (B, T, H)
        if self.embedding_norm is not None:
            X = self.embedding_dropout(self.embedding_norm(X))  # (B, T, H)
        for blk in self.blks:
            X = blk(X, valid_lens)                           # (B, T, H)
        return X


class MaskLM(nn.Block):
    """The masked language model task: predict the masked tokens.

    Each prediction reads the encoding at its position.

    Defined in :numref:`subsec_mlm`.

    Parameters
    ----------
    vocab_size : int
        Size of the vocabulary (V in the shape comments): one score
        per token.
    num_hiddens : int
        H, the size of the MLP's hidden layer.
    activation, epsilon : keyword-only options
        'relu' and 1e-5 in the book, 'gelu' and 1e-12 in the original BERT.
    tied_embedding : nn.Embedding, keyword-only, optional
        If given, the output layer uses this embedding's weight (V, H),
        as the original BERT does.
    """
    def __init__(self, vocab_size, num_hiddens, *, activation='relu',
                 epsilon=1e-5, tied_embedding=None, **kwargs):
        super(MaskLM, self).__init__(**kwargs)
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

    def forward(self, X, pred_positions):
        """Predict the tokens at `pred_positions` (B, P), int, of the
        encoded sequences `X` (B, T, H).  Returns scores (B, P, V)."""
        check_pred_positions(pred_positions, X.shape[0], X.shape[1])
        num_pred_positions = pred_positions.shape[1]
        pred_positions = pred_positions.reshape(-1)          # (B*P,)
        batch_size = X.shape[0]
        batch_idx = np.arange(0, batch_size, ctx=X.ctx)      # (B,)
        # For B = 2 and P = 3, `batch_idx` becomes [0, 0, 0, 1, 1, 1]
        batch_idx = np.repeat(batch_idx, num_pred_positions)  # (B*P,)
        masked_X = X[batch_idx, pred_positions]              # (B*P, H)
        masked_X = masked_X.reshape(
            (batch_size, num_pred_positions, -1))            # (B, P, H)
        mlm_Y_hat = self.mlp(masked_X)                       # (B, P, V)
        return mlm_Y_hat


class NextSentencePred(nn.Block):
    """The next sentence prediction task: did the second sentence follow?

    Two scores per sequence: whether its second sentence is the one that
    followed the first in the corpus.

    Defined in :numref:`subsec_nsp`.

    `output` is Gluon's ``nn.Dense(2)``, which flattens all but the first
    axis: given `encoded_X` (B, T, H) it still returns (B, 2), as the
    book's demo prints.
    """
    def __init__(self, **kwargs):
        super(NextSentencePred, self).__init__(**kwargs)
        self.output = nn.Dense(2)

    def forward(self, X):
        """`X` (B, H) (or (B, ...), flattened) -> scores (B, 2)."""
        return self.output(X)                                # (B, 2)


class BERTModel(nn.Block):
    """BERT for pretraining: the encoder, the MLM head and the NSP head.

    Defined in :numref:`subsec_nsp`.

    Parameters
    ----------
    vocab_size, num_hiddens, ffn_num_hiddens, num_heads, num_blks : int
        As for `BERTEncoder` (`num_layers` is accepted for `num_blks`).
    dropout : float
        As for `BERTEncoder`.
    max_len : int, default 1000
        Number of learnable positions, as for `BERTEncoder`.
    activation, epsilon, embedding_norm : keyword-only options
        As for `BERTEncoder`; see `d2l_bert.presets.ORIGINAL_BERT`.
    tie_weights : bool, keyword-only, default False
        Use the token embedding's weight in the MLM output layer, as the
        original BERT does.

    Notes
    -----
    `hidden` is the dense tanh layer on the `<cls>` encoding that the
    original BERT calls its pooler.
    """
    def __init__(self, vocab_size, num_hiddens, ffn_num_hiddens, num_heads,
                 num_blks=None, dropout=None, max_len=1000, *,
                 activation='relu', epsilon=1e-5, embedding_norm=False,
                 tie_weights=False, num_layers=None):
        super(BERTModel, self).__init__()
        self.encoder = BERTEncoder(
            vocab_size, num_hiddens, ffn_num_hiddens, num_heads,
            num_blks_of(num_blks, num_layers), dropout, max_len,
            activation=activation, epsilon=epsilon,
            embedding_norm=embedding_norm)
        self.hidden = nn.Dense(num_hiddens, activation='tanh')
        self.mlm = MaskLM(
            vocab_size, num_hiddens, activation=activation, epsilon=epsilon,
            tied_embedding=self.encoder.token_embedding if tie_weights
            else None)
        self.nsp = NextSentencePred()

    def forward(self, tokens, segments, valid_lens=None,
                pred_positions=None):
        """Encode the sequences and run both pretraining heads.

        Parameters
        ----------
        tokens, segments : int arrays, shape (B, T)
            Token indices and segment ids (0 or 1) of each sequence.
        valid_lens : array, shape (B,), optional
            Number of real tokens of each sequence; None: all T.
        pred_positions : int array, shape (B, P), optional
            Positions whose tokens the MLM head predicts; None: no MLM
            prediction.

        Returns
        -------
        encoded_X : shape (B, T, H)
        mlm_Y_hat : shape (B, P, V), or None without `pred_positions`
        nsp_Y_hat : shape (B, 2)
        """
        encoded_X = self.encoder(tokens, segments, valid_lens)  # (B, T, H)
        if pred_positions is not None:
            mlm_Y_hat = self.mlm(encoded_X, pred_positions)  # (B, P, V)
        else:
            mlm_Y_hat = None
        # The NSP classifier's hidden layer reads `<cls>`, at position 0
        nsp_Y_hat = self.nsp(self.hidden(encoded_X[:, 0, :]))  # (B, 2)
        return encoded_X, mlm_Y_hat, nsp_Y_hat
