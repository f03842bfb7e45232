"""The one-graph pretraining step: model and both losses in one graph.

`_get_batch_loss_bert` (sec_bert-pretraining) runs the model, then the
MLM and NSP losses, as separate calls.  `FastBatchLoss` computes the same
three losses for one shard as one hybridized graph around the fast twin
(`models.FastBERTModel`): reshaping the MLM scores (B, P, V) copies
nothing, no buffer is allocated again at each step, and on the CPU the
MLM loss's forward and backward passes are compiled loops
(`_loss_ops.softmax_ce`).  `d2l-bert pretrain` trains with it.

The MLM head runs only on the predictions whose weight is not 0.  The
book computes scores for every one of the B*P predicted positions and
multiplies the loss of a padded one (weight 0) by 0: its scores, its
loss's gradient and so its terms in every gradient are 0.  In a batch
of sentence pairs of spread lengths many of them are padding, and the
MLM head's output layer, (B*P, H) x (H, V), is more than half of the
step's arithmetic.  `FastBatchLoss` gathers the K
weighted predictions instead (K rounded up to a multiple of
`row_multiple`, the extra rows weighted 0) and computes the same losses
and gradients: only a score that is infinite or NaN at a padded
position, and finite elsewhere, would have made the book's gradients
NaN.  A batch with another K costs the graph a new memory plan, small
against the step (`docs/performance-history.md`).

The encoder likewise runs its position-wise layers (the projections, the
feed-forward networks, AddNorm) on the tokens the losses depend on only
(`packed_tokens`): each sequence's positions below its valid length,
packed into N rows (N rounded up to a multiple of `token_multiple`).
The attention reads them in the book's layout cut to the longest packed
sequence, (B, S) with S rounded up to a multiple of `LENGTH_STEP` (the
positions past S are padding in every sequence), in which the padded
positions' keys have weight exactly 0; the heads read `<cls>` and
the predicted positions, all valid.  So a padded position's encoding
changes no loss, its gradient is exactly 0, and leaving it out changes no
number: it saves half of the blocks' arithmetic in the book's data, whose
sentence pairs fill 46% of `max_len` on average.  The compiled attention
likewise computes the queries of the packed positions only (each
sequence's first `query_lens`), as nothing reads the others' outputs.
The book's model still computes every position (its `encoded_X` holds
them all); the twin of `accelerate` packs likewise under the book's own
`train_bert` (called while autograd records, with valid lengths and
predicted positions), and computes every position otherwise.

Dimension key used in the shape comments:

B: batch size, T: sequence length, H: num_hiddens, V: vocab_size, P:
predicted positions per sequence, K: the predictions with a weight (a
multiple of `row_multiple`), N: the packed tokens (a multiple of
`token_multiple`), S: the attention's length (at most T), D: the input
size of a projection
"""
import mxnet as mx
import numpy as onp
from mxnet.gluon import nn

from ..checks import check_encoder_inputs, check_pred_positions
from ._build import parameter
from ._loss_ops import softmax_ce
from .attention_path import reads_query_lens
from .loss import is_plain_softmax_ce

#: The default multiple of the packed tokens' count (`packed_tokens`)
TOKEN_MULTIPLE = 1024
#: The attention's length S is the longest packed sequence rounded up to
#: a multiple of this (`packed_tokens`; each new S costs the graph a
#: memory plan)
LENGTH_STEP = 16


class FastBatchLoss(nn.HybridBlock):
    """`_get_batch_loss_bert` for one shard, as one graph.

    Parameters
    ----------
    twin : FastBERTModel
        The fast twin of the model (`d2l_bert.fast.accelerate`).
    loss : gluon.loss.SoftmaxCELoss
        The book's ``gluon.loss.SoftmaxCELoss()``, used for both tasks.
    vocab_size : int
        V, the number of classes of the MLM loss.
    kernels : bool
        Compute the MLM loss with the compiled loops (when `loss` is a
        plain `SoftmaxCELoss`).
    row_multiple : int, default 8
        The MLM head runs on the weighted predictions, their number
        rounded up to a multiple of this (at most B*P).
    token_multiple : int, default 1024
        The encoder's position-wise layers run on the valid tokens
        (`packed_tokens`), their number rounded up to a multiple of this
        (at most B*T): each new number costs the graph a memory plan.
    """
    def __init__(self, twin, loss, vocab_size, kernels, row_multiple=8,
                 token_multiple=TOKEN_MULTIPLE):
        super().__init__()
        for name, value in (('row_multiple', row_multiple),
                            ('token_multiple', token_multiple)):
            if isinstance(value, bool) or not (
                    isinstance(value, int) and value >= 1):
                raise ValueError(f'{name} must be a positive int, got '
                                 f'{value!r}')
        self.net, self.loss, self.vocab_size = twin, loss, vocab_size
        self.kernels = kernels and is_plain_softmax_ce(loss)
        self.row_multiple, self.token_multiple = row_multiple, token_multiple

    def forward(self, tokens_X, segments_X, valid_lens_x, pred_positions_X,
                mlm_weights_X, mlm_Y, nsp_y):
        """Check the inputs (arrays), gather the weighted predictions,
        then run the graph.  The arguments are those of one shard of
        `_get_batch_loss_bert`; returns ``(mlm_l, nsp_l, mlm_l + nsp_l)``,
        each of shape ()."""
        check_encoder_inputs(tokens_X, segments_X, valid_lens_x.reshape(-1),
                             self.net.encoder.vocab_size,
                             self.net.encoder.max_len)
        check_pred_positions(pred_positions_X, *tokens_X.shape)
        rows, weights, labels = self.weighted_predictions(
            pred_positions_X, mlm_weights_X, mlm_Y)
        tokens = packed_inputs(self.net.encoder, valid_lens_x, rows,
                               tokens_X.shape, self.token_multiple)
        return super().forward(tokens_X, segments_X, valid_lens_x, *tokens,
                               weights, labels, nsp_y)

    def weighted_predictions(self, pred_positions_X, mlm_weights_X, mlm_Y):
        """The predictions whose weight is not 0, then rows of weight 0
        up to K, a multiple of `row_multiple` (at most B*P).

        Parameters
        ----------
        pred_positions_X : ndarray, int, shape (B, P)
            The predicted positions of each sequence.
        mlm_weights_X : ndarray, float32, shape (B, P)
            1 for a real prediction, 0 for padding.
        mlm_Y : ndarray, int, shape (B, P)
            The tokens to predict.

        Returns
        -------
        rows : ndarray, int32, shape (2, K)
            Each prediction's example and position, for `gather_nd`.
        weights : ndarray, float32, shape (K,)
        labels : ndarray, int32, shape (K,)
        """
        ctx = mlm_weights_X.ctx
        B, P = pred_positions_X.shape
        w = mlm_weights_X.asnumpy().reshape(-1)              # (B*P,)
        keep = onp.flatnonzero(w != 0)                       # (n,)
        m = self.row_multiple
        K = min(B * P, max(1, -(-len(keep) // m)) * m)
        keep = onp.concatenate([keep, onp.flatnonzero(w == 0)])[:K]  # (K,)
        positions = pred_positions_X.asnumpy().reshape(-1)   # (B*P,)
        rows = onp.stack([keep // P, positions[keep]])       # (2, K)
        weights = w[keep]                                    # (K,)
        labels = mlm_Y.asnumpy().reshape(-1)[keep]           # (K,)
        return (mx.np.array(rows, dtype='int32', ctx=ctx),   # (2, K)
                mx.np.array(weights, dtype='float32', ctx=ctx),  # (K,)
                mx.np.array(labels, dtype='int32', ctx=ctx))     # (K,)

    def hybrid_forward(self, F, tokens_X, segments_X, valid_lens_x, pack,
                       positions, unpack, kept_rows, query_lens, cls_rows,
                       mlm_rows, mlm_weights, mlm_Y, nsp_y):
        """`BERTModel`'s forward pass on the packed tokens
        (`packed_tokens`'s seven arrays; `query_lens` None where no
        attention is compiled), its MLM head on the K weighted
        predictions, and both losses; returns ``(mlm_l, nsp_l, mlm_l +
        nsp_l)``, each of shape ()."""
        net = self.net
        valid_lens = valid_lens_x.reshape(-1)                # (B,)
        X = encode_packed(F, net.encoder, tokens_X, segments_X,
                          valid_lens, pack, positions, unpack, kept_rows,
                          query_lens)                        # (N, H)
        # The NSP classifier reads the encoding of `<cls>`, at position 0
        cls = F.np.take(X, cls_rows, axis=0)                 # (B, H)
        nsp_Y_hat = net.nsp(net.hidden(cls))                 # (B, 2)
        # `MaskLM` on the weighted predictions only
        masked_X = F.np.take(X, mlm_rows, axis=0)            # (K, H)
        scores = net.mlm.mlp(masked_X)                       # (K, V)
        if self.kernels:
            # `self.loss`'s arithmetic, with compiled loops
            mlm_l = softmax_ce(F, scores, mlm_Y)        # (K,)
            mlm_l = mlm_l * mlm_weights                      # (K,)
        else:
            mlm_l = self.loss(scores, mlm_Y,                 # (K,)
                              mlm_weights.reshape((-1, 1)))
        mlm_l = mlm_l.sum() / (mlm_weights.sum() + 1e-8)     # ()
        nsp_l = self.loss(nsp_Y_hat, nsp_y).mean()           # ()
        return mlm_l, nsp_l, mlm_l + nsp_l


def packed_tokens(valid_lens, rows, B, T, multiple, book_layout=False):
    """The tokens the losses depend on, packed: each sequence's positions
    below its valid length (all T for a length of 0, whose attention the
    book spreads over every position; and up to its last predicted
    position, should one lie past the length).

    Parameters
    ----------
    valid_lens : ndarray, shape (B,) or (B, 1)
        Each sequence's valid length, as the book passes it.
    rows : ndarray, int32, shape (2, K)
        The example and position of each MLM prediction the step reads.
    B, T : int
        The batch's shape.
    multiple : int
        N, the number of packed rows, is rounded up to a multiple of
        this (at most B*T); the extra rows repeat token (0, 0) and are
        read by nothing.
    book_layout : bool, default False
        Also return `book_rows`.

    Returns
    -------
    pack : ndarray, int32, shape (N,)
        The index of each packed row in the batch's B*T positions.
    positions : ndarray, int32, shape (N,)
        Each packed row's position in its sequence.
    unpack : ndarray, int32, shape (B, S)
        The packed row of each of a sequence's first S positions (S: the
        longest sequence's packed positions rounded up to a multiple of
        `LENGTH_STEP`, at most T), the attention's layout; a position left
        out gets its sequence's `<cls>` row (its key is masked, its query
        unread).
    kept_rows : ndarray, int32, shape (N,)
        The index of each packed row in that layout's B*S positions.
    query_lens : ndarray, int32, shape (B,)
        How many of each sequence's positions are packed, its first ones:
        the queries whose attention output is read.
    cls_rows : ndarray, int32, shape (B,)
        The packed row of each sequence's position 0.
    mlm_rows : ndarray, int32, shape (K,)
        The packed row of each prediction of `rows`.
    book_rows : ndarray, int32, shape (B, T)
        With `book_layout`: the packed row of each of the book's B*T
        positions, `<cls>`'s for one left out.
    """
    ctx = rows.ctx
    lens = onp.rint(valid_lens.asnumpy().reshape(-1)).astype('int64')
    lens = onp.where(lens <= 0, T, onp.minimum(lens, T))    # (B,)
    examples, positions = rows.asnumpy().astype('int64')     # (K,), (K,)
    onp.maximum.at(lens, examples, positions + 1)           # (B,)
    kept = onp.arange(T)[None, :] < lens[:, None]           # (B, T)
    pack = onp.flatnonzero(kept)                             # (n,)
    n = len(pack)
    N = min(B * T, -(-max(n, 1) // multiple) * multiple)
    pack = onp.concatenate([pack, onp.zeros(N - n, 'int64')])  # (N,)
    packed_row = onp.full(B * T, -1, 'int64')                # (B*T,)
    packed_row[pack[:n]] = onp.arange(n)
    cls_rows = packed_row[onp.arange(B) * T]                 # (B,)
    mlm_rows = packed_row[examples * T + positions]          # (K,)
    S = min(T, -(-int(lens.max()) // LENGTH_STEP) * LENGTH_STEP)
    book_rows = onp.where(packed_row >= 0, packed_row,
                          onp.repeat(cls_rows, T)).reshape(B, T)  # (B, T)
    unpack = book_rows[:, :S]                                # (B, S)
    kept_rows = pack // T * S + pack % T                     # (N,)
    arrays = (pack, pack % T, unpack, kept_rows, lens, cls_rows, mlm_rows)
    return tuple(mx.np.array(a, dtype='int32', ctx=ctx) for a in
                 arrays + ((book_rows,) if book_layout else ()))


def packed_inputs(encoder, valid_lens, rows, shape, multiple,
                  book_layout=False):
    """`packed_tokens`'s arrays as a twin's graph takes them: its
    `query_lens` None where `encoder`'s attention is not compiled
    (`queries_read`).  `shape` is the batch's (B, T)."""
    arrays = packed_tokens(valid_lens, rows, *shape, multiple, book_layout)
    return arrays[:4] + (queries_read(encoder, arrays[4]),) + arrays[5:]


def queries_read(encoder, query_lens):
    """`query_lens` if the path of the twin `encoder`'s attention reads
    it (`attention_path.reads_query_lens`); else None (Gluon warns of a
    graph input that nothing reads)."""
    read = any(reads_query_lens(blk.attention.path) for blk in encoder.blks)
    return query_lens if read else None


def encode_packed(F, encoder, tokens, segments, valid_lens, pack,
                  positions, unpack, kept_rows, query_lens, cls_rows=None):
    """The twin encoder's `hybrid_forward` on the packed tokens only.

    `tokens`, `segments` (B, T), `valid_lens` (B,), and `pack`,
    `positions`, `kept_rows` (N,), `unpack` (B, S) and `query_lens` (B,)
    from
    `packed_tokens` -> the encodings of the packed tokens, (N, H): the
    rows of the book's `encoded_X` (B, T, H) at `pack`.  Given
    `cls_rows` (B,) from `packed_tokens`, the encodings of `<cls>` only,
    (B, H): the last block computes no other row.
    """
    pos_embedding = parameter(F, encoder.pos_embedding, tokens)  # (1, L, H)
    pos_embedding = F.npx.reshape(pos_embedding, (-5, -2))   # (L, H)
    token_ids = F.np.take(F.npx.reshape(tokens, (-1,)), pack)       # (N,)
    segment_ids = F.np.take(F.npx.reshape(segments, (-1,)), pack)   # (N,)
    # The book's sum, in its order: (tokens + segments) + positions
    X = encoder.token_embedding(token_ids) + \
        encoder.segment_embedding(segment_ids)               # (N, H)
    X = X + F.np.take(pos_embedding, positions, axis=0)      # (N, H)
    if encoder.embedding_norm is not None:
        X = encoder.embedding_dropout(encoder.embedding_norm(X))  # (N, H)
    last = len(encoder.blks) - 1
    for i, blk in enumerate(encoder.blks):
        X = _packed_block(F, blk, X, valid_lens, unpack, kept_rows,
                          query_lens, cls_rows if i == last else None)
    return X                                         # (N, H) or (B, H)


def _packed_block(F, blk, X, valid_lens, unpack, kept_rows, query_lens,
                  cls_rows=None):
    """`FastTransformerEncoderBlock` on packed rows, `X` (N, D) -> (N, H);
    the attention, by the block's path, in the (B, S) layout of `unpack`
    (the compiled one projects the packed rows, and computes the packed
    queries only, `query_lens`).  Given `cls_rows` (B,),
    the rows of `<cls>` only, (B, H), its query alone computed."""
    attention = blk.attention
    if cls_rows is not None and query_lens is not None:
        query_lens = F.np.ones_like(valid_lens)              # (B,)

    def unpacked(Z):                                         # (N, C)
        return F.np.take(Z, unpack, axis=0)                  # (B, S, C)

    def kept(Z):                                             # (B, S, C)
        if cls_rows is not None:
            return Z[:, 0, :]                                # (B, C)
        Z = F.npx.reshape(Z, (-5, -2))                       # (B*S, C)
        return F.np.take(Z, kept_rows, axis=0)               # (N, C)

    O = attention.implementation(attention, F, X, valid_lens, unpacked,
                                 query_lens)                 # (B, S, H)
    O = attention.W_o(kept(O))                               # (N or B, H)
    if cls_rows is not None:
        X = F.np.take(X, cls_rows, axis=0)                   # (B, D)
    Y = blk.addnorm1(X, O)                                   # (N or B, H)
    return blk.addnorm2(Y, blk.ffn(Y))                       # (N or B, H)
