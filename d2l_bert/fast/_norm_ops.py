"""The custom operators of the twins' normalizations and embedding sum.

- `layer_norm(F, X, gamma, beta, epsilon)`: the forward pass is MXNet's
  own `LayerNorm` (the same numbers as the book's); the backward pass is
  one compiled loop over the rows.
- `add_norm(F, X, Y, gamma, beta, epsilon, dropout)`: `AddNorm`'s
  ``LayerNorm(X + dropout(Y))`` in one operator; MXNet's `Dropout` draws
  its mask one number at a time.
- `add_embeddings(F, X, Y, row)`: BERT's sum of three embeddings in one
  `add_n`, the positional one's broadcast as a matrix product (MXNet
  operators only); the gradients are the sum's, passed on, and a product.

The loops are `_loops`'s, run by the runtime (`_ops`).
"""
import mxnet as mx
import numpy as onp

from ._ops import (all_arrays, assign, dropout_scalars, dropout_seed, host,
                   loop_arrays, loop_output, loops_serve, no_gradient,
                   register, run, run_summing)


def layer_norm(F, X, gamma, beta, epsilon):
    """LayerNorm over the last axis, as `nn.LayerNorm` computes it.

    Parameters
    ----------
    F : the operator namespace of `hybrid_forward`
    X : shape (..., C)
    gamma, beta : shape (C,)
    epsilon : float

    Returns
    -------
    shape (..., C)
    """
    Y = F.Custom(X.as_nd_ndarray(), gamma.as_nd_ndarray(),
                 beta.as_nd_ndarray(), epsilon=repr(float(epsilon)),
                 op_type='d2l_bert_layer_norm')[0]
    return Y.as_np_ndarray()                                 # (..., C)


def add_norm(F, X, Y, gamma, beta, epsilon, dropout):
    """``LayerNorm(X + dropout(Y))`` over the last axis, as `AddNorm`
    computes it, in one custom operator.

    On the book's path this is four operators and their gradients
    (`Dropout`, the addition, `LayerNorm`); MXNet's `Dropout` draws its
    mask one number at a time and the addition's gradient is a copy, so
    together they cost several times the LayerNorm.  Here one pass over
    the rows does it all forward and one backward.  The dropout mask is a
    hash of the position and a seed drawn by MXNet's generator, as in
    `self_attention`: the same rate, a different mask from `Dropout`'s.

    Parameters
    ----------
    F : the operator namespace of `hybrid_forward`
    X : shape (..., C)
        The residual input.
    Y : shape (..., C)
        The sublayer's output, to which dropout applies in training.
    gamma, beta : shape (C,)
    epsilon : float
    dropout : float

    Returns
    -------
    shape (..., C)
    """
    if F is not mx.sym:
        check_same_shape(X.shape, Y.shape)  # a graph checks at inference
    X = X.as_nd_ndarray()
    out = F.Custom(X, Y.as_nd_ndarray(), gamma.as_nd_ndarray(),
                   beta.as_nd_ndarray(), dropout_seed(F, X),
                   epsilon=repr(float(epsilon)), dropout=repr(float(dropout)),
                   op_type='d2l_bert_add_norm')
    return out[0].as_np_ndarray()                            # (..., C)


def check_same_shape(X, Y):
    """Raise a clear error unless `AddNorm`'s shapes X and Y are equal."""
    if tuple(X) != tuple(Y):
        raise ValueError(f'AddNorm needs X and Y of the same shape, got X '
                         f'{tuple(X)} and Y {tuple(Y)}')


def add_embeddings(F, X, Y, row):
    """``X + Y + row``, with `row` broadcast over the batch, as the book
    sums the token, segment and positional embeddings.

    One `add_n` of the three: its gradient goes to
    each term as it is, where MXNet's gradient of ``+`` copies it to both
    of its terms, and the sum reads and writes the (B, T, H) arrays once,
    not twice.  The broadcast is a product with a column of ones, so that
    the gradient of `row` is a matrix product as well: MXNet's gradient of
    a broadcast sums over the batch with its generic reduction, about 30
    ms at the book's pretraining sizes against a few for the product.
    The values are the same (1 times each entry, summed in the book's
    order).

    Parameters
    ----------
    F : the operator namespace of `hybrid_forward`
    X, Y : shape (B, T, H)
    row : shape (1, T, H)

    Returns
    -------
    shape (B, T, H)
    """
    ones = F.np.ones_like(X[:, 0, 0:1])                      # (B, 1)
    outer = F.np.dot(ones, F.npx.reshape(row, (1, -1)))      # (B, T*H)
    outer = F.npx.reshape_like(outer, X)                     # (B, T, H)
    # MXNet's add_n(a, b, c) computes (b + c) + a: the book's order
    total = F.add_n(outer.as_nd_ndarray(), X.as_nd_ndarray(),
                    Y.as_nd_ndarray())
    return total.as_np_ndarray()                             # (B, T, H)


class _LayerNorm(mx.operator.CustomOp):
    def __init__(self, epsilon):
        super().__init__()
        self.epsilon = epsilon

    def forward(self, is_train, req, in_data, out_data, aux):
        X, gamma, beta = [a.as_nd_ndarray() for a in in_data]
        if all(r in ('write', 'inplace') for r in req):
            # Y (..., C), mean and std (..., 1) written in place
            mx.nd.LayerNorm(X, gamma, beta, axis=-1, eps=self.epsilon,
                            output_mean_var=True,
                            out=[o.as_nd_ndarray() for o in out_data])
            return
        results = mx.nd.LayerNorm(X, gamma, beta, axis=-1, eps=self.epsilon,
                                  output_mean_var=True)
        for k in range(3):
            self.assign(out_data[k], req[k], results[k].as_np_ndarray())

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        X, gamma = in_data[0], in_data[1]
        mean, std = out_data[1], out_data[2]
        if not loops_serve([X, gamma, out_grad[0]]):
            return self._backward_plain(req, out_grad[0], X, gamma, mean,
                                        std, in_grad)
        from . import _loops as K
        C = X.shape[-1]
        dY = host(out_grad[0]).reshape(-1, C)               # (N, C)
        X2 = host(X).reshape(-1, C)                         # (N, C)
        mean1, std1 = host(mean).reshape(-1), host(std).reshape(-1)
        N = X2.shape[0]
        dX = loop_output(in_grad[0], req[0], (N, C), onp.float32)
        sums = run_summing(K.layer_norm_backward, N, C, dY, X2, mean1,
                            std1, host(gamma), dX).astype(onp.float32)
        assign(in_grad[0], req[0], dX)
        assign(in_grad[1], req[1], sums[0])
        assign(in_grad[2], req[2], sums[1])

    def _backward_plain(self, req, dY, X, gamma, mean, std, in_grad):
        """The same gradient from MXNet operators (any device, type)."""
        nd = mx.nd
        dY, X, gamma = dY.as_nd_ndarray(), X.as_nd_ndarray(), \
            gamma.as_nd_ndarray()
        mean, std = mean.as_nd_ndarray(), std.as_nd_ndarray()
        xhat = nd.broadcast_div(nd.broadcast_sub(X, mean), std)
        dxhat = nd.broadcast_mul(dY, gamma)
        a = nd.mean(dxhat, axis=-1, keepdims=True)
        b = nd.mean(dxhat * xhat, axis=-1, keepdims=True)
        dX = nd.broadcast_div(
            nd.broadcast_sub(dxhat, a) - nd.broadcast_mul(xhat, b), std)
        axes = tuple(range(X.ndim - 1))
        self.assign(in_grad[0], req[0], dX.as_np_ndarray())
        self.assign(in_grad[1], req[1],
                    nd.sum(dY * xhat, axis=axes).as_np_ndarray())
        self.assign(in_grad[2], req[2], nd.sum(dY, axis=axes).as_np_ndarray())


@register('d2l_bert_layer_norm')
class _LayerNormProp(mx.operator.CustomOpProp):
    def __init__(self, epsilon='1e-05'):
        super().__init__(need_top_grad=True)
        self.epsilon = float(epsilon)

    def list_arguments(self):
        return ['data', 'gamma', 'beta']

    def list_outputs(self):
        return ['output', 'mean', 'std']

    def infer_shape(self, in_shape):
        data = tuple(in_shape[0])
        C = data[-1]
        stat = data[:-1] + (1,)
        return [data, (C,), (C,)], [data, stat, stat], []

    def infer_type(self, in_type):
        t = in_type[0]
        return [t, t, t], [t, t, t], []

    def declare_backward_dependency(self, out_grad, in_data, out_data):
        return all_arrays(out_grad, in_data, out_data)

    def create_operator(self, ctx, shapes, dtypes):
        return _LayerNorm(self.epsilon)


class _AddNorm(mx.operator.CustomOp):
    """Inputs: X, Y (..., C), gamma, beta (C,), the dropout seed (2,).
    Outputs: the normalized ``X + dropout(Y)`` (..., C), its mean and std
    (..., 1) and whether dropout was applied (1,), which the backward pass
    needs."""

    def __init__(self, epsilon, dropout):
        super().__init__()
        self.epsilon, self.dropout = epsilon, dropout

    def forward(self, is_train, req, in_data, out_data, aux):
        from . import _loops as K
        X, Y, gamma, beta = loop_arrays(in_data[:4], 'd2l_bert_add_norm')
        C = X.shape[-1]
        X, Y = X.reshape(-1, C), Y.reshape(-1, C)            # (N, C)
        N, t = X.shape[0], X.dtype
        dropout_on = bool(is_train and self.dropout > 0)
        out, mean, std = [loop_output(out_data[k], req[k], shape, t)
                          for k, shape in enumerate([(N, C), (N,), (N,)])]
        run(K.add_norm_forward, N, X, Y, gamma, beta, t.type(self.epsilon),
             *dropout_scalars(in_data[4], self.dropout, dropout_on, t),
             out, mean, std)
        for k, value in enumerate((out, mean, std)):
            assign(out_data[k], req[k], value)
        assign(out_data[3], req[3], onp.array([dropout_on], onp.float32))

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        from . import _loops as K
        no_gradient(self, req, in_data, in_grad, [4])       # seed
        X, Y, gamma, dout, mean, std = loop_arrays(
            in_data[:3] + [out_grad[0], out_data[1], out_data[2]],
            'd2l_bert_add_norm')
        C = X.shape[-1]
        X, Y, dout = [a.reshape(-1, C) for a in (X, Y, dout)]  # (N, C)
        mean, std = mean.reshape(-1), std.reshape(-1)        # (N,)
        N, t = X.shape[0], X.dtype
        dropout_on = bool(host(out_data[3])[0])
        dX, dY = [loop_output(in_grad[k], req[k], (N, C), t)
                  for k in range(2)]
        sums = run_summing(
            K.add_norm_backward, N, C, dout, X, Y, mean, std, gamma,
            *dropout_scalars(in_data[4], self.dropout, dropout_on, t),
            dX, dY).astype(t)                                # (2, C)
        assign(in_grad[0], req[0], dX)
        assign(in_grad[1], req[1], dY)
        assign(in_grad[2], req[2], sums[0])
        assign(in_grad[3], req[3], sums[1])


@register('d2l_bert_add_norm')
class _AddNormProp(mx.operator.CustomOpProp):
    def __init__(self, epsilon='1e-05', dropout='0.0'):
        super().__init__(need_top_grad=True)
        self.epsilon = float(epsilon)
        self.dropout = float(dropout)

    def list_arguments(self):
        return ['X', 'Y', 'gamma', 'beta', 'seed']

    def list_outputs(self):
        return ['output', 'mean', 'std', 'dropout_on']

    def infer_shape(self, in_shape):
        X, Y = tuple(in_shape[0]), tuple(in_shape[1])
        check_same_shape(X, Y)
        C = X[-1]
        stat = X[:-1] + (1,)
        return ([X, X, (C,), (C,), tuple(in_shape[4])],
                [X, stat, stat, (1,)], [])

    def infer_type(self, in_type):
        t = in_type[0]
        return [t, t, t, t, in_type[4]], [t, t, t, onp.float32], []

    def declare_backward_dependency(self, out_grad, in_data, out_data):
        return all_arrays(out_grad, in_data, out_data)

    def create_operator(self, ctx, shapes, dtypes):
        return _AddNorm(self.epsilon, self.dropout)
