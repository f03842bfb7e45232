"""A `SoftmaxCELoss` whose softmax cross-entropy is a compiled loop.

The book's `_get_batch_loss_bert` calls Gluon's `SoftmaxCELoss` on the MLM
scores, (B*P, V): 5120 x 20256 at the book's settings.  MXNet computes it
as `log_softmax`, then `pick`; oneDNN's `log_softmax` backward is a
reference loop that also allocates its 415 MB result at every step.
`FastSoftmaxCELoss` computes the same numbers with
`_loss_ops.softmax_ce`: one pass over the scores forward and one
backward, a row at a time.

``d2l_bert.fast.accelerate(loss)`` returns it for a plain
`SoftmaxCELoss` (integer labels over the last axis, no class weight);
anything else is returned unchanged.

Dimension key: N: rows (predictions), V: classes (the vocabulary)
"""
import mxnet as mx
from mxnet import gluon

from . import _ops
from ._loss_ops import softmax_ce


class FastSoftmaxCELoss(gluon.loss.SoftmaxCELoss):
    """`gluon.loss.SoftmaxCELoss` with integer labels, computed by the
    compiled loops for scores of shape (N, V).

    Called as the book calls its loss: ``loss(pred, label)`` or
    ``loss(pred, label, sample_weight)``.  Scores of another rank go to
    Gluon's own computation.
    """
    def forward(self, pred, label, sample_weight=None):
        """`pred` (N, V), `label` (N,), `sample_weight` (N, 1) or None ->
        per-row losses (N,), as `SoftmaxCELoss` returns them."""
        if pred.ndim != 2:
            return super().forward(pred, label, sample_weight)
        loss = softmax_ce(mx.nd, pred, label)                # (N,)
        if sample_weight is not None:
            loss = loss * sample_weight.reshape(-1)          # (N,)
        return loss                                          # (N,)


def is_plain_softmax_ce(loss):
    """Whether `loss` is a `SoftmaxCELoss` with integer labels over the
    last axis and no class weight: what `_loss_ops.softmax_ce` computes."""
    return (type(loss) is gluon.loss.SoftmaxCELoss
            and loss._axis in (-1, 1) and loss._sparse_label
            and not loss._from_logits and loss._weight is None
            and loss._batch_axis == 0)


def accelerate_loss(loss):
    """`FastSoftmaxCELoss` for a plain `SoftmaxCELoss`, when the compiled
    loops work here; `loss` itself otherwise."""
    if not (is_plain_softmax_ce(loss) and _ops.available()):
        return loss
    return FastSoftmaxCELoss(axis=loss._axis, batch_axis=loss._batch_axis)
