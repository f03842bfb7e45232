"""The one-graph pretraining step: model and both losses in one graph.

`_get_batch_loss_bert` (sec_bert-pretraining) runs the model, then the
MLM and NSP losses, as separate calls.  `FastBatchLoss` computes the same
three losses for one shard as one hybridized graph around the fast twin
(`blocks.FastBERTModel`): reshaping the MLM scores (B, P, V) copies
nothing, no buffer is allocated again at each step, and on the CPU the
MLM loss's forward and backward passes are compiled loops
(`_ops.softmax_ce`).  `d2l-bert pretrain` trains with it.

Dimension key used in the shape comments:

B: batch size, T: sequence length, V: vocab_size, P: predicted positions
per sequence
"""
import mxnet as mx
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
    vocab_size : int
    kernels : bool
        Compute the MLM loss with the compiled loops (when `loss` is a
        plain `SoftmaxCELoss`).
    """
    def __init__(self, twin, loss, vocab_size, kernels):
        super().__init__()
        self.net, self.loss, self.vocab_size = twin, loss, vocab_size
        self.kernels = kernels and is_plain_softmax_ce(loss)

    def forward(self, tokens_X, segments_X, valid_lens_x, pred_positions_X,
                *args):
        """Check the inputs (arrays), then run the graph."""
        if not isinstance(tokens_X, mx.sym.Symbol):
            check_encoder_inputs(tokens_X, segments_X,
                                 valid_lens_x.reshape(-1),
                                 self.net.encoder.vocab_size,
                                 self.net.encoder.max_len)
            check_pred_positions(pred_positions_X, *tokens_X.shape)
        return super().forward(tokens_X, segments_X, valid_lens_x,
                               pred_positions_X, *args)

    def hybrid_forward(self, F, tokens_X, segments_X, valid_lens_x,
                       pred_positions_X, mlm_weights_X, mlm_Y, nsp_y):
        """Return ``(mlm_l, nsp_l, mlm_l + nsp_l)``, each of shape ()."""
        _, mlm_Y_hat, nsp_Y_hat = self.net(
            tokens_X, segments_X, valid_lens_x.reshape(-1),
            pred_positions_X)                        # (B, P, V), (B, 2)
        scores = mlm_Y_hat.reshape((-1, self.vocab_size))  # (B*P, V)
        if self.kernels:
            # `self.loss`'s arithmetic, with compiled loops
            mlm_l = _ops.softmax_ce(F, scores, mlm_Y.reshape(-1))  # (B*P,)
            mlm_l = mlm_l * mlm_weights_X.reshape(-1)      # (B*P,)
        else:
            mlm_l = self.loss(scores, mlm_Y.reshape(-1),   # (B*P,)
                              mlm_weights_X.reshape((-1, 1)))
        mlm_l = mlm_l.sum() / (mlm_weights_X.sum() + 1e-8)  # ()
        nsp_l = self.loss(nsp_Y_hat, nsp_y).mean()           # ()
        return mlm_l, nsp_l, mlm_l + nsp_l


def batch_loss(net, loss, vocab_size, kernels=None):
    """Return ``f(*shards) -> (mlm_ls, nsp_ls, ls)``: what
    ``_get_batch_loss_bert(net, loss, vocab_size, *shards)`` returns,
    each shard's losses computed by one `FastBatchLoss` graph.

    Parameters
    ----------
    net : BERTModel or FastBERTModel
        The book model (made fast here) or its twin.
    loss : gluon.loss.SoftmaxCELoss
    vocab_size : int
    kernels : bool, optional
        As for `accelerate`.
    """
    from . import _contexts, _hybridize_twin, accelerate
    if kernels is None:
        kernels = _ops.usable(_contexts(net))
    twin = accelerate(net, kernels=kernels, check=False)
    graph = FastBatchLoss(twin, loss, vocab_size, kernels)
    _hybridize_twin(graph, net)

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
