"""The one-graph pretraining step: model and both losses in one graph.

`_get_batch_loss_bert` (sec_bert-pretraining) runs the model, then the
MLM and NSP losses, as separate calls.  `FastBatchLoss` computes the same
three losses for one shard as one hybridized graph around the fast twin
(`blocks.FastBERTModel`): reshaping the MLM scores (B, P, V) copies
nothing, no buffer is allocated again at each step, and on the CPU the
MLM loss's forward and backward passes are compiled loops
(`_ops.softmax_ce`).  `d2l-bert pretrain` trains with it.

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

Dimension key used in the shape comments:

B: batch size, T: sequence length, H: num_hiddens, V: vocab_size, P:
predicted positions per sequence, K: the predictions with a weight (a
multiple of `row_multiple`)
"""
import mxnet as mx
import numpy as onp
from mxnet.gluon import nn

from ..checks import check_encoder_inputs, check_pred_positions
from . import _ops
from .loss import is_plain_softmax_ce


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
    """
    def __init__(self, twin, loss, vocab_size, kernels, row_multiple=8):
        super().__init__()
        if isinstance(row_multiple, bool) or not (
                isinstance(row_multiple, int) and row_multiple >= 1):
            raise ValueError('row_multiple must be a positive int, got '
                             f'{row_multiple!r}')
        self.net, self.loss, self.vocab_size = twin, loss, vocab_size
        self.kernels = kernels and is_plain_softmax_ce(loss)
        self.row_multiple = row_multiple

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
        return super().forward(tokens_X, segments_X, valid_lens_x, rows,
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

    def hybrid_forward(self, F, tokens_X, segments_X, valid_lens_x, rows,
                       mlm_weights, mlm_Y, nsp_y):
        """`BERTModel`'s forward pass, its MLM head on the K rows, and
        both losses; returns ``(mlm_l, nsp_l, mlm_l + nsp_l)``, each of
        shape ()."""
        net = self.net
        encoded_X = net.encoder(tokens_X, segments_X,
                                valid_lens_x.reshape(-1))    # (B, T, H)
        # The NSP classifier reads the encoding of `<cls>`, at position 0
        nsp_Y_hat = net.nsp(net.hidden(encoded_X[:, 0, :]))  # (B, 2)
        # `MaskLM` on the weighted predictions only
        masked_X = F.npx.gather_nd(encoded_X, rows)          # (K, H)
        scores = net.mlm.mlp(masked_X)                       # (K, V)
        if self.kernels:
            # `self.loss`'s arithmetic, with compiled loops
            mlm_l = _ops.softmax_ce(F, scores, mlm_Y)        # (K,)
            mlm_l = mlm_l * mlm_weights                      # (K,)
        else:
            mlm_l = self.loss(scores, mlm_Y,                 # (K,)
                              mlm_weights.reshape((-1, 1)))
        mlm_l = mlm_l.sum() / (mlm_weights.sum() + 1e-8)     # ()
        nsp_l = self.loss(nsp_Y_hat, nsp_y).mean()           # ()
        return mlm_l, nsp_l, mlm_l + nsp_l


def batch_loss(net, loss, vocab_size, kernels=None, row_multiple=8):
    """Return ``f(*shards) -> (mlm_ls, nsp_ls, ls)``: what
    ``_get_batch_loss_bert(net, loss, vocab_size, *shards)`` returns,
    each shard's losses computed by one `FastBatchLoss` graph.

    Parameters
    ----------
    net : BERTModel or FastBERTModel
        The book model (made fast here) or its twin.
    loss : gluon.loss.SoftmaxCELoss
        The book's ``gluon.loss.SoftmaxCELoss()``, used for both tasks.
    vocab_size : int
        V, the number of classes of the MLM loss.
    kernels : bool, optional
        As for `accelerate`.
    row_multiple : int, default 8
        As for `FastBatchLoss`.
    """
    from . import _contexts, _hybridize_twin, accelerate
    if kernels is None:
        kernels = _ops.usable(_contexts(net))
    twin = accelerate(net, kernels=kernels, check=False)
    graph = FastBatchLoss(twin, loss, vocab_size, kernels, row_multiple)
    _hybridize_twin(graph, net, loss)     # `net` and `loss` stay as they were

    def compute(*shards):
        mlm_ls, nsp_ls, ls = [], [], []
        for shard in zip(*shards):
            mlm_l, nsp_l, l = graph(*shard)
            mlm_ls.append(mlm_l)
            nsp_ls.append(nsp_l)
            ls.append(l)
        return mlm_ls, nsp_ls, ls
    compute.graph = graph
    return compute
