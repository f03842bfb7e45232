"""The compiled loops of inference, as MXNet custom operators.

`self_attention(F, qkv, valid_lens, num_heads)` computes what
`_attention_ops.self_attention` computes with dropout off, forward only,
with the loop of `_inference_loops`: it keeps no attention weights (the
training operator writes them all out, (B*h, T, T), for its backward
pass) and skips the keys past each valid length.  `add_norm(F, X, Y,
gamma, beta, epsilon)` is `_norm_ops.add_norm` without dropout: no seed
drawn in the graph, no mean and std kept.  `embed_norm(...)` sums the
original BERT's three embeddings and normalizes them in one pass.  None
has a gradient: a graph that trains uses the operators of
`_attention_ops` and `_norm_ops`.

The threads, BLAS settings and memory views are the runtime's (`_ops`).
"""
import mxnet as mx
import numpy as onp

from ._attention_ops import AttentionProp, attention_op, key_counts
from ._norm_ops import check_same_shape
from ._ops import (assign, host, loop_arrays, loop_output, register, run,
                   single_threaded_blas)


def self_attention(F, qkv, valid_lens, num_heads):
    """Scaled dot-product attention of every head, from the fused
    projection `qkv`, without dropout.

    Parameters
    ----------
    F, qkv, valid_lens, num_heads
        As `_attention_ops.self_attention` takes them: the operator
        namespace, the projection (B, T, 3*H), head by head, and the
        lengths (B,) or None.

    Returns
    -------
    shape (B, T, H)
    """
    out = attention_op(F, 'd2l_bert_self_attention_inference',
                            [qkv.as_nd_ndarray()], valid_lens, num_heads)
    return out.as_np_ndarray()                               # (B, T, H)


def add_norm(F, X, Y, gamma, beta, epsilon):
    """``LayerNorm(X + Y)`` over the last axis: `AddNorm` without dropout,
    as `_norm_ops.add_norm` computes it at inference, in one custom operator
    with no dropout seed drawn in the graph and no mean and std written
    out (nothing takes a gradient here).

    Parameters
    ----------
    F, X, Y, gamma, beta, epsilon
        As `_norm_ops.add_norm` takes them (which adds `dropout`): the
        operator namespace, the residual input and the sublayer's output
        (..., C), the LayerNorm's parameters (C,) and its epsilon.

    Returns
    -------
    shape (..., C)
    """
    if F is not mx.sym:
        check_same_shape(X.shape, Y.shape)
    out = F.Custom(X.as_nd_ndarray(), Y.as_nd_ndarray(),
                   gamma.as_nd_ndarray(), beta.as_nd_ndarray(),
                   epsilon=repr(float(epsilon)),
                   op_type='d2l_bert_add_norm_inference')
    return out.as_np_ndarray()                               # (..., C)


def embed_norm(F, tokens, segments, token_W, segment_W, pos, gamma, beta,
               epsilon):
    """``LayerNorm((token_W[tokens] + segment_W[segments]) + pos[:T])``:
    the original BERT's input encoding at inference (embeddings summed in
    the book's order, then its embedding LayerNorm), one custom operator
    in place of two `Embedding` blocks, the sum and the LayerNorm.

    Parameters
    ----------
    F : the operator namespace of `hybrid_forward`
    tokens, segments : shape (B, T), integer values
    token_W : shape (V, H)
    segment_W : shape (S, H)
    pos : shape (1, max_len, H)
    gamma, beta : shape (H,)
    epsilon : float

    Returns
    -------
    shape (B, T, H)
    """
    out = F.Custom(tokens.as_nd_ndarray(), segments.as_nd_ndarray(),
                   token_W.as_nd_ndarray(), segment_W.as_nd_ndarray(),
                   pos.as_nd_ndarray(), gamma.as_nd_ndarray(),
                   beta.as_nd_ndarray(), epsilon=repr(float(epsilon)),
                   op_type='d2l_bert_embed_norm_inference')
    return out.as_np_ndarray()                               # (B, T, H)


def smoke_test():
    """Compile (or load from numba's cache) the loop and check it on one
    sequence of two positions, one head, d = 1, one valid key."""
    from . import _inference_loops as K
    single_threaded_blas()
    qkv = onp.array([[[1, 1, 1], [1, 1, 3]]], onp.float32)  # (1, 2, 3)
    O = onp.zeros((1, 2, 1), onp.float32)
    K.self_attention_inference(qkv, onp.array([1], onp.int32), 1,
                               onp.float32(1), O, 0, 1)
    if O.ravel().tolist() != [1.0, 1.0]:
        raise RuntimeError('the compiled inference attention gave '
                           f'{O.ravel().tolist()}, expected [1.0, 1.0]')
    X = onp.array([[0.0, 1.0]], onp.float32)                 # (1, 2)
    out = onp.zeros((1, 2), onp.float32)
    K.add_norm_inference(X, X, onp.ones(2, onp.float32),
                         onp.zeros(2, onp.float32), onp.float32(0), out,
                         0, 1)
    if out.ravel().tolist() != [-1.0, 1.0]:
        raise RuntimeError('the compiled inference AddNorm gave '
                           f'{out.ravel().tolist()}, expected [-1.0, 1.0]')


class _InferenceOp(mx.operator.CustomOp):
    """A forward-only operator: its `backward` says to train the twin of
    `d2l_bert.fast.accelerate`, whose operators have gradients.

    `no_gradient` names the operator, with its verb, in that error."""
    no_gradient = 'the inference operator has'

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        raise RuntimeError(
            f'{self.no_gradient} no gradient; train the twin of '
            'd2l_bert.fast.accelerate, not the inference one')


class _NormInference(_InferenceOp):
    """A forward-only operator ending in a LayerNorm of `epsilon`."""

    def __init__(self, epsilon):
        super().__init__()
        self.epsilon = epsilon


class _NormInferenceProp(mx.operator.CustomOpProp):
    """What the properties of the `_NormInference` operators share: an
    `epsilon` argument, one output, no gradient; `op` is the operator's
    class."""
    op = None

    def __init__(self, epsilon='1e-05'):
        super().__init__(need_top_grad=False)
        self.epsilon = float(epsilon)

    def list_outputs(self):
        return ['output']

    def create_operator(self, ctx, shapes, dtypes):
        return self.op(self.epsilon)


class _SelfAttentionInference(_InferenceOp):
    """Inputs: qkv (B, T, 3*H), valid_lens (B,) if given.  Output: the
    attention output (B, T, H)."""
    no_gradient = 'the inference attention has'

    def __init__(self, heads, has_lens):
        super().__init__()
        self.heads, self.has_lens = heads, has_lens

    def forward(self, is_train, req, in_data, out_data, aux):
        from . import _inference_loops as K
        B, T, H3 = in_data[0].shape
        X, = loop_arrays(in_data[:1],
                               'd2l_bert_self_attention_inference')
        lens = key_counts(in_data[1] if self.has_lens else None, B,
                               T)                            # (B,)
        d = H3 // (3 * self.heads)
        O = loop_output(out_data[0], req[0], (B, T, H3 // 3),
                              X.dtype)                       # (B, T, H)
        run(K.self_attention_inference, B * self.heads, X, lens,
                  self.heads, X.dtype.type(1 / onp.sqrt(d)), O)
        assign(out_data[0], req[0], O)


@register('d2l_bert_self_attention_inference')
class _SelfAttentionInferenceProp(AttentionProp):
    def __init__(self, heads, has_lens='True'):
        super().__init__(heads, has_lens, need_top_grad=False)

    def list_outputs(self):
        return ['output']

    def infer_shape(self, in_shape):
        B, T, H3 = self.checked_qkv_shape(in_shape)          # (B, T, 3*H)
        return list(map(tuple, in_shape)), [(B, T, H3 // 3)], []

    def infer_type(self, in_type):
        return in_type, [in_type[0]], []

    def create_operator(self, ctx, shapes, dtypes):
        return _SelfAttentionInference(self.heads, self.has_lens)


class _AddNormInference(_NormInference):
    """Inputs: X, Y (..., C), gamma, beta (C,).  Output: the normalized
    ``X + Y`` (..., C)."""
    no_gradient = 'the inference AddNorm has'

    def forward(self, is_train, req, in_data, out_data, aux):
        from . import _inference_loops as K
        X, Y, gamma, beta = loop_arrays(
            in_data, 'd2l_bert_add_norm_inference')
        C = X.shape[-1]
        X, Y = X.reshape(-1, C), Y.reshape(-1, C)            # (N, C)
        N, t = X.shape[0], X.dtype
        out = loop_output(out_data[0], req[0], (N, C), t)  # (N, C)
        run(K.add_norm_inference, N, X, Y, gamma, beta,
                  t.type(self.epsilon), out)
        assign(out_data[0], req[0], out)


@register('d2l_bert_add_norm_inference')
class _AddNormInferenceProp(_NormInferenceProp):
    op = _AddNormInference

    def list_arguments(self):
        return ['X', 'Y', 'gamma', 'beta']

    def infer_shape(self, in_shape):
        X, Y, gamma, beta = map(tuple, in_shape)
        check_same_shape(X, Y)
        C = X[-1]
        if gamma != (C,) or beta != (C,):
            raise ValueError(f'gamma and beta must have shape ({C},), got '
                             f'{gamma} and {beta}')
        return [X, Y, gamma, beta], [X], []

    def infer_type(self, in_type):
        return in_type, [in_type[0]], []


class _EmbedNormInference(_NormInference):
    """Inputs: tokens, segments (B, T), token_W (V, H), segment_W (S, H),
    pos (1, max_len, H), gamma, beta (H,).  Output: the normalized sum of
    the embeddings (B, T, H)."""
    no_gradient = 'the inference embeddings have'

    def forward(self, is_train, req, in_data, out_data, aux):
        from . import _inference_loops as K
        B, T = in_data[0].shape
        # Ids as int64, clipped as `Embedding` clips them
        ids = [onp.clip(host(a).astype(onp.int64), 0, w.shape[0] - 1)
               for a, w in zip(in_data[:2], in_data[2:4])]   # (B, T) each
        token_W, segment_W, pos, gamma, beta = loop_arrays(
            in_data[2:], 'd2l_bert_embed_norm_inference')
        t = token_W.dtype
        H = token_W.shape[1]
        out = loop_output(out_data[0], req[0], (B * T, H),
                                t)                           # (B*T, H)
        run(K.embed_norm_inference, B * T, *ids, token_W, segment_W,
                  pos[0], gamma, beta, t.type(self.epsilon), out)
        assign(out_data[0], req[0], out)


@register('d2l_bert_embed_norm_inference')
class _EmbedNormInferenceProp(_NormInferenceProp):
    op = _EmbedNormInference

    def list_arguments(self):
        return ['tokens', 'segments', 'token_W', 'segment_W', 'pos',
                'gamma', 'beta']

    def infer_shape(self, in_shape):
        tokens, segments, token_W, segment_W, pos = map(tuple, in_shape[:5])
        H = token_W[1]
        if segments != tokens or len(tokens) != 2:
            raise ValueError(f'tokens and segments must have one shape '
                             f'(B, T), got {tokens} and {segments}')
        if len(pos) != 3 or pos[2] != H or pos[1] < tokens[1]:
            raise ValueError(f'pos must have shape (1, max_len, {H}) with '
                             f'max_len >= T = {tokens[1]}, got {pos}')
        return list(map(tuple, in_shape)), [tokens + (H,)], []

    def infer_type(self, in_type):
        return in_type, [in_type[2]], []
