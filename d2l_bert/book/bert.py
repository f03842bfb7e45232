"""sec_bert: the BERT model, read top to bottom in the book's order.

`get_tokens_and_segments`, then `BERTEncoder`, `MaskLM`,
`NextSentencePred` and `BERTModel`: plain Gluon blocks (`nn.Block`
with `forward`), the book's lines in the book's order.  Their inputs are
checked from outside, by `d2l_bert.checks.check_inputs(net)`; the
original BERT's architecture, which the Hugging Face loader needs, is in
`d2l_bert.hf.original`; the fast twins of these classes live apart, in
`d2l_bert.fast`.

Dimension key used in the shape comments:

B: batch size, T: sequence length, H: num_hiddens, V: vocab_size,
P: predicted positions per sequence
"""
from mxnet import np, npx
from mxnet.gluon import nn

from .transformer import TransformerEncoderBlock

# As the book's first cell: MXNet's NumPy semantics, for which every block
# here is written
npx.set_np()


def get_tokens_and_segments(tokens_a, tokens_b=None):
    """Get tokens of the BERT input sequence and their segment IDs.

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
    tokens = ['<cls>'] + tokens_a + ['<sep>']
    # 0 and 1 are marking segment A and B, respectively
    segments = [0] * (len(tokens_a) + 2)
    if tokens_b is not None:
        tokens += tokens_b + ['<sep>']
        segments += [1] * (len(tokens_b) + 1)
    return tokens, segments


class BERTEncoder(nn.Block):
    """BERT encoder.

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
        Number of encoder blocks.
    dropout : float
        Dropout rate in [0, 1) in every encoder block.
    max_len : int, default 1000
        Number of learnable positions: the longest input accepted.

    Notes
    -----
    `forward` takes `tokens` and `segments` (B, T), int, and `valid_lens`
    (B,), each sequence's real tokens (None: all T); it returns the
    encodings, (B, T, H).  `d2l_bert.checks.check_inputs` checks them.
    The original BERT's encoder (GELU, a LayerNorm on the embedding sum)
    is `d2l_bert.hf.original.OriginalBERTEncoder`.
    """
    def __init__(self, vocab_size, num_hiddens, ffn_num_hiddens, num_heads,
                 num_blks, dropout, max_len=1000, **kwargs):
        super(BERTEncoder, self).__init__(**kwargs)
        self.token_embedding = nn.Embedding(vocab_size, num_hiddens)
        self.segment_embedding = nn.Embedding(2, num_hiddens)
        self.blks = nn.Sequential()
        for _ in range(num_blks):
            self.blks.add(TransformerEncoderBlock(
                num_hiddens, ffn_num_hiddens, num_heads, dropout, True))
        # In BERT, positional embeddings are learnable, thus we create a
        # parameter of positional embeddings that are long enough
        self.pos_embedding = self.params.get('pos_embedding',
                                             shape=(1, max_len, num_hiddens))

    def forward(self, tokens, segments, valid_lens):
        # Shape of `X` remains unchanged in the following code snippet:
        # (batch size, max sequence length, `num_hiddens`)
        X = self.token_embedding(tokens) + self.segment_embedding(segments)
        X = X + self.pos_embedding.data(ctx=X.ctx)[:, :X.shape[1], :]
        for blk in self.blks:
            X = blk(X, valid_lens)                           # (B, T, H)
        return X


class MaskLM(nn.Block):
    """The masked language model task of BERT.

    Each prediction reads the encoding at its position.

    Defined in :numref:`subsec_mlm`.

    Parameters
    ----------
    vocab_size : int
        Size of the vocabulary (V in the shape comments): one score
        per token.
    num_hiddens : int
        H, the size of the MLP's hidden layer.

    Notes
    -----
    `forward` predicts the tokens at `pred_positions` (B, P), int, of the
    encoded sequences `X` (B, T, H), and returns scores (B, P, V).
    """
    def __init__(self, vocab_size, num_hiddens, **kwargs):
        super(MaskLM, self).__init__(**kwargs)
        self.mlp = nn.Sequential()
        self.mlp.add(
            nn.Dense(num_hiddens, flatten=False, activation='relu'))
        self.mlp.add(nn.LayerNorm())
        self.mlp.add(nn.Dense(vocab_size, flatten=False))

    def forward(self, X, pred_positions):
        num_pred_positions = pred_positions.shape[1]
        pred_positions = pred_positions.reshape(-1)          # (B*P,)
        batch_size = X.shape[0]
        batch_idx = np.arange(0, batch_size, ctx=X.ctx)      # (B,)
        # Suppose that `batch_size` = 2, `num_pred_positions` = 3, then
        # `batch_idx` is `np.array([0, 0, 0, 1, 1, 1])`
        batch_idx = np.repeat(batch_idx, num_pred_positions)  # (B*P,)
        masked_X = X[batch_idx, pred_positions]              # (B*P, H)
        masked_X = masked_X.reshape((batch_size, num_pred_positions, -1))
        mlm_Y_hat = self.mlp(masked_X)                       # (B, P, V)
        return mlm_Y_hat


class NextSentencePred(nn.Block):
    """The next sentence prediction task of BERT.

    Two scores per sequence: whether its second sentence is the one that
    followed the first in the corpus.

    Defined in :numref:`subsec_nsp`.

    Notes
    -----
    `output` is Gluon's ``nn.Dense(2)``, which flattens all but the first
    axis: given `encoded_X` (B, T, H) it still returns (B, 2), as the
    book's demo prints.
    """
    def __init__(self, **kwargs):
        super(NextSentencePred, self).__init__(**kwargs)
        self.output = nn.Dense(2)

    def forward(self, X):
        # `X` shape: (batch size, `num_hiddens`)
        return self.output(X)                                # (B, 2)


class BERTModel(nn.Block):
    """The BERT model.

    The encoder, the MLM head and the NSP head, for pretraining.

    Defined in :numref:`subsec_nsp`.

    Parameters
    ----------
    vocab_size, num_hiddens, ffn_num_hiddens, num_heads, num_blks : int
        As for `BERTEncoder`.
    dropout : float
        As for `BERTEncoder`.
    max_len : int, default 1000
        Number of learnable positions, as for `BERTEncoder`.

    Notes
    -----
    `forward` takes `tokens` and `segments` (B, T), int; `valid_lens`
    (B,), the real tokens of each sequence (None: all T); and
    `pred_positions` (B, P), int, the positions whose tokens the MLM head
    predicts (None: no MLM prediction).  It returns `encoded_X`
    (B, T, H), `mlm_Y_hat` (B, P, V) or None, and `nsp_Y_hat` (B, 2).

    `hidden` is the dense tanh layer on the `<cls>` encoding that the
    original BERT calls its pooler.  The original BERT's model (GELU, a
    LayerNorm on the embedding sum, the MLM output tied to the token
    embedding) is `d2l_bert.hf.original.OriginalBERTModel`.
    """
    def __init__(self, vocab_size, num_hiddens, ffn_num_hiddens, num_heads,
                 num_blks, dropout, max_len=1000):
        super(BERTModel, self).__init__()
        self.encoder = BERTEncoder(vocab_size, num_hiddens, ffn_num_hiddens,
                                   num_heads, num_blks, dropout, max_len)
        self.hidden = nn.Dense(num_hiddens, activation='tanh')
        self.mlm = MaskLM(vocab_size, num_hiddens)
        self.nsp = NextSentencePred()

    def forward(self, tokens, segments, valid_lens=None, pred_positions=None):
        encoded_X = self.encoder(tokens, segments, valid_lens)  # (B, T, H)
        if pred_positions is not None:
            mlm_Y_hat = self.mlm(encoded_X, pred_positions)  # (B, P, V)
        else:
            mlm_Y_hat = None
        # The hidden layer of the MLP classifier for next sentence prediction.
        # 0 is the index of the '<cls>' token
        nsp_Y_hat = self.nsp(self.hidden(encoded_X[:, 0, :]))  # (B, 2)
        return encoded_X, mlm_Y_hat, nsp_Y_hat
