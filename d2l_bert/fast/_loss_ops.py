"""The custom operator of the MLM loss: `softmax_ce(F, scores, labels)`,
the per-row loss of Gluon's `SoftmaxCELoss` with integer labels
(``-log_softmax(scores)[label]``), forward and backward each one pass
over the scores.

The loops are `_loops`'s, run by the runtime (`_ops`).
"""
import mxnet as mx
import numpy as onp

from ._ops import (all_arrays, assign, host, loop_output, loops_serve,
                   no_gradient, register, run)


def softmax_ce(F, scores, labels):
    """``-log_softmax(scores)[label]`` per row: `SoftmaxCELoss`'s loss
    before weighting.

    Parameters
    ----------
    F : the operator namespace of `hybrid_forward`
    scores : shape (N, V)
    labels : shape (N,), integer values (clipped to [0, V) as `pick`
        does)

    Returns
    -------
    shape (N,)
    """
    loss = F.Custom(scores.as_nd_ndarray(), labels.as_nd_ndarray(),
                    op_type='d2l_bert_softmax_ce')[0]
    return loss.as_np_ndarray()                              # (N,)


class _SoftmaxCE(mx.operator.CustomOp):
    def forward(self, is_train, req, in_data, out_data, aux):
        scores, labels = in_data
        if not loops_serve([scores]):
            return self._forward_plain(req, scores, labels, out_data)
        from . import _loops as K
        X = host(scores)                                    # (N, V)
        N = X.shape[0]
        y = host(labels).astype(onp.int32)                  # (N,)
        loss, lse = [loop_output(out_data[k], req[k], (N,), onp.float32)
                     for k in range(2)]                      # (N,), (N,)
        run(K.softmax_ce_forward, N, X, y, loss, lse)
        assign(out_data[0], req[0], loss)
        assign(out_data[1], req[1], lse)

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        scores, labels = in_data
        no_gradient(self, req, in_data, in_grad, [1])
        if req[0] == 'null':
            return
        if not loops_serve([scores, out_grad[0]]):
            return self._backward_plain(req, out_grad[0], scores, labels,
                                        in_grad)
        from . import _loops as K
        X = host(scores)                                    # (N, V)
        N = X.shape[0]
        y = host(labels).astype(onp.int32)                  # (N,)
        g = onp.ascontiguousarray(host(out_grad[0]))        # (N,)
        lse = host(out_data[1])                             # (N,)
        dX = loop_output(in_grad[0], req[0], X.shape, X.dtype)
        run(K.softmax_ce_backward, N, X, y, lse, g, dX)
        assign(in_grad[0], req[0], dX)

    def _forward_plain(self, req, scores, labels, out_data):
        nd = mx.nd
        X, y = scores.as_nd_ndarray(), labels.as_nd_ndarray()
        loss = -nd.pick(nd.log_softmax(X, axis=-1), y, axis=-1)
        lse = loss + nd.pick(X, y, axis=-1)
        self.assign(out_data[0], req[0], loss.as_np_ndarray())
        self.assign(out_data[1], req[1], lse.as_np_ndarray())

    def _backward_plain(self, req, g, scores, labels, in_grad):
        nd = mx.nd
        X, y = scores.as_nd_ndarray(), labels.as_nd_ndarray()
        V = X.shape[-1]
        y = nd.clip(y, 0, V - 1)
        dX = nd.broadcast_mul(
            nd.softmax(X, axis=-1) - nd.one_hot(y, V, dtype=X.dtype),
            g.as_nd_ndarray().reshape((-1, 1)))
        self.assign(in_grad[0], req[0], dX.as_np_ndarray())


@register('d2l_bert_softmax_ce')
class _SoftmaxCEProp(mx.operator.CustomOpProp):
    def __init__(self):
        super().__init__(need_top_grad=True)

    def list_arguments(self):
        return ['scores', 'labels']

    def list_outputs(self):
        return ['loss', 'lse']

    def infer_shape(self, in_shape):
        N = in_shape[0][0]
        return [tuple(in_shape[0]), (N,)], [(N,), (N,)], []

    def infer_type(self, in_type):
        return in_type, [in_type[0], in_type[0]], []

    def declare_backward_dependency(self, out_grad, in_data, out_data):
        return all_arrays(out_grad, in_data, out_data)

    def create_operator(self, ctx, shapes, dtypes):
        return _SoftmaxCE()
