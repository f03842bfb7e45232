"""The custom operator of the compiled training attention:
`self_attention(F, qkv, valid_lens, num_heads, dropout)`, the scaled
dot-product attention of every head, with its masking and dropout,
forward and backward (MXNet's interleaved attention operators use one
thread only).

What it shares with the inference operator (`_inference_ops`): the call
(`attention_op`), the properties' arguments and shape checks
(`AttentionProp`) and the count of valid keys (`key_counts`).  The loops
are `_loops`'s, run by the runtime (`_ops`).
"""
import mxnet as mx
import numpy as onp

from ._ops import (all_arrays, assign, dropout_scalars, dropout_seed, host,
                   loop_arrays, loop_output, no_gradient, register, run)


def self_attention(F, qkv, valid_lens, num_heads, dropout,
                   query_lens=None):
    """Scaled dot-product attention of every head, from the fused
    projection `qkv`, as `MultiHeadAttention`'s book path computes it.

    MXNet's interleaved attention operators run on one thread only, and
    the masking and dropout around them cost as much again; here one
    custom operator does the products (BLAS on blocks of one example and
    head), the masked softmax and the dropout, pairs split among threads.
    The dropout mask is a hash of its position and a seed that MXNet's
    random generator draws (so `mx.random.seed` fixes it); it differs
    from the mask of the plain path's `Dropout`, with the same rate.

    Parameters
    ----------
    F : the operator namespace of `hybrid_forward`
    qkv : shape (B, T, 3*H)
        Queries, keys and values, head by head (`qkv_weight`'s layout).
    valid_lens : shape (B,) or None
    num_heads : int
    dropout : float
        Dropout rate on the attention weights, applied in training.
    query_lens : shape (B,), optional
        How many queries of each sequence to compute (the rest of its
        output and weights are 0, and no gradient comes from them): the
        rows a caller reads, such as the packed step's
        (`step.packed_tokens`).  None: all T.

    Returns
    -------
    output : shape (B, T, H)
    attention_weights : shape (B*h, T, T), before dropout
    """
    qkv = qkv.as_nd_ndarray()
    out = attention_op(F, 'd2l_bert_self_attention',
                       [qkv, dropout_seed(F, qkv)], valid_lens, num_heads,
                       query_lens, dropout=repr(float(dropout)))
    return out[0].as_np_ndarray(), out[1].as_np_ndarray()


def attention_op(F, op_type, inputs, valid_lens, num_heads, query_lens=None,
                 **attributes):
    """`F.Custom` of an attention operator (`op_type`, registered with an
    `AttentionProp`): its `inputs` (legacy arrays, `qkv` first), then
    `valid_lens` and `query_lens` if not None, with the heads and whether
    lengths are given among its `attributes`."""
    if valid_lens is not None:
        inputs = inputs + [valid_lens.as_nd_ndarray()]
    if query_lens is not None:
        inputs = inputs + [query_lens.as_nd_ndarray()]
        attributes['has_queries'] = 'True'
    return F.Custom(*inputs, heads=str(num_heads),
                    has_lens=str(valid_lens is not None), op_type=op_type,
                    **attributes)


def key_counts(valid_lens, B, T):
    """The keys each example attends to, for the compiled attention.

    Parameters
    ----------
    valid_lens : NDArray of shape (B,), or None
        The book's `valid_lens`; None: every key is valid.
    B, T : int

    Returns
    -------
    int32 numpy array, shape (B,)
        Counts in [0, T]: key j is valid when j < valid_len, as in the
        book's `masked_softmax`.
    """
    if valid_lens is None:
        return onp.full(B, T, onp.int32)                     # (B,)
    return onp.ceil(onp.clip(host(valid_lens).astype(onp.float64), 0,
                             T)).astype(onp.int32)           # (B,)


def _check_qkv_shapes(qkv, valid_lens, heads):
    """Raise a clear error unless self-attention's shapes fit.

    Parameters
    ----------
    qkv : shape (B, T, 3*H), H a multiple of `heads`
    valid_lens : shape (B,), or None when the operator takes none
    heads : int

    Returns
    -------
    tuple
        ``(B, T, 3*H)``
    """
    B, T, H3 = qkv
    if H3 % (3 * heads):
        raise ValueError(f'qkv must have 3 * num_heads * d columns, got '
                         f'{H3} columns for num_heads={heads}')
    if valid_lens is not None and tuple(valid_lens) != (B,):
        raise ValueError(f'valid_lens must have shape ({B},), one '
                         f'length per sequence, got {tuple(valid_lens)}')
    return B, T, H3


class _SelfAttention(mx.operator.CustomOp):
    """Inputs: qkv (B, T, 3*H), the dropout seed (2,), valid_lens (B,)
    and query_lens (B,) if given.  Outputs: the attention output (B, T,
    H), the weights (B*h, T, T) and whether dropout was applied (1,),
    which the backward pass needs."""

    def __init__(self, heads, dropout, has_lens, has_queries):
        super().__init__()
        self.heads, self.dropout, self.has_lens = heads, dropout, has_lens
        self.has_queries = has_queries

    def _lens(self, in_data, B, T):
        """The valid length of each example as an int32 count of keys in
        [0, T], then the queries to compute, likewise (all T without
        `query_lens`)."""
        queries = in_data[2 + self.has_lens] if self.has_queries else None
        return (key_counts(in_data[2] if self.has_lens else None, B, T),
                key_counts(queries, B, T))

    def _scalars(self, X, seed, dropout_on):
        """scale, seed, threshold and keep scale as the loops take them."""
        d = X.shape[2] // (3 * self.heads)
        scale = X.dtype.type(1 / onp.sqrt(d))
        return (scale,) + dropout_scalars(seed, self.dropout, dropout_on,
                                           X.dtype)

    def forward(self, is_train, req, in_data, out_data, aux):
        from . import _loops as K
        B, T, H3 = in_data[0].shape
        X, = loop_arrays(in_data[:1], 'd2l_bert_self_attention')
        dropout_on = bool(is_train and self.dropout > 0)
        O = loop_output(out_data[0], req[0], (B, T, H3 // 3), X.dtype)
        P = loop_output(out_data[1], req[1], (B * self.heads, T, T),
                         X.dtype)
        run(K.self_attention_forward, B * self.heads, X,
             *self._lens(in_data, B, T), self.heads,
             *self._scalars(X, in_data[1], dropout_on), P, O)
        assign(out_data[0], req[0], O)
        assign(out_data[1], req[1], P)
        assign(out_data[2], req[2], onp.array([dropout_on], onp.float32))

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        from . import _loops as K
        no_gradient(self, req, in_data, in_grad,
                     range(1, len(in_data)))                 # seed, lens
        if req[0] == 'null':
            return
        B, T = in_data[0].shape[:2]
        # qkv (B, T, 3*H), P (B*h, T, T), dO (B, T, H), dP (B*h, T, T)
        X, P, dO, dP = loop_arrays(
            [in_data[0], out_data[1], out_grad[0], out_grad[1]],
            'd2l_bert_self_attention')
        dropout_on = bool(host(out_data[2])[0])
        dX = loop_output(in_grad[0], req[0], X.shape, X.dtype)
        run(K.self_attention_backward, B * self.heads, X,
             *self._lens(in_data, B, T), self.heads,
             *self._scalars(X, in_data[1], dropout_on), P, dO, dP, dX)
        assign(in_grad[0], req[0], dX)


class AttentionProp(mx.operator.CustomOpProp):
    """What the properties of the attention operators (training's here,
    inference's in `_inference_ops`) share: the `heads` and `has_lens`
    attributes, the arguments `leading` then ``valid_lens`` when given,
    and their shapes checked.

    Parameters
    ----------
    heads : str
    has_lens : str
        'True' or 'False'.
    need_top_grad : bool
    """
    leading = ('qkv',)

    def __init__(self, heads, has_lens='True', need_top_grad=True):
        super().__init__(need_top_grad=need_top_grad)
        self.heads = int(heads)
        self.has_lens = has_lens == 'True'

    def list_arguments(self):
        return list(self.leading) + (['valid_lens'] if self.has_lens else [])

    def checked_qkv_shape(self, in_shape):
        """``(B, T, 3*H)``, once `_check_qkv_shapes` accepts the shapes."""
        lens = in_shape[len(self.leading)] if self.has_lens else None
        return _check_qkv_shapes(in_shape[0], lens, self.heads)


@register('d2l_bert_self_attention')
class _SelfAttentionProp(AttentionProp):
    leading = ('qkv', 'seed')

    def __init__(self, heads, dropout='0.0', has_lens='True',
                 has_queries='False'):
        super().__init__(heads, has_lens)
        self.dropout = float(dropout)
        self.has_queries = has_queries == 'True'

    def list_arguments(self):
        return super().list_arguments() + (
            ['query_lens'] if self.has_queries else [])

    def list_outputs(self):
        return ['output', 'attention_weights', 'dropout_on']

    def infer_shape(self, in_shape):
        B, T, H3 = self.checked_qkv_shape(in_shape)          # (B, T, 3*H)
        if self.has_queries and tuple(in_shape[-1]) != (B,):
            raise ValueError(f'query_lens must have shape ({B},), one '
                             f'count per sequence, got '
                             f'{tuple(in_shape[-1])}')
        return (list(map(tuple, in_shape)),
                [(B, T, H3 // 3), (B * self.heads, T, T), (1,)], [])

    def infer_type(self, in_type):
        t = in_type[0]
        return in_type, [t, t, onp.float32], []

    def declare_backward_dependency(self, out_grad, in_data, out_data):
        return all_arrays(out_grad, in_data, out_data)

    def create_operator(self, ctx, shapes, dtypes):
        return _SelfAttention(self.heads, self.dropout, self.has_lens,
                              self.has_queries)
