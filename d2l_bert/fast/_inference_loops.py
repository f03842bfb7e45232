"""Compiled CPU loops for inference: self-attention (no dropout, no
attention weights kept, padded keys skipped), AddNorm without dropout,
and the original BERT's embeddings with their LayerNorm.

Imported by `d2l_bert.fast._inference_ops` only when the kernels are
used (importing this module imports numba).  The training loop
(`_loops.self_attention_forward`) writes every pair's (T, T) weights out
for its backward pass, 50 MB a block for all-MiniLM-L6-v2 on 64 x 128
tokens; at inference nothing reads them, so here each pair's scores stay
in two (T, T) buffers of the thread (scores, then weights), in the
cache, from the product with the keys to the product with the values.
The softmax writes its weights beside the scores, not over them: LLVM
vectorizes the exponentials only when their input and output do not
overlap, and over them it ran three times slower.

Dimension key: B examples, T positions, h heads of d columns, H = h*d,
L the valid length of an example (its first L keys are attended).
"""
import numba
import numpy as onp

from ._loops import (FASTMATH, _matmul, _normalize_row, _pair_qkv,
                     _softmax_row)


@numba.njit(nogil=True, fastmath=FASTMATH, cache=True)
def self_attention_inference(qkv, lens, h, scale, O, r0, r1):
    """The attention output of pairs (example, head) r0 to r1.

    ``O[b, :, head i] = softmax(Q K^T * scale) V`` over the first
    ``lens[b]`` keys, as the book's `masked_softmax` gives it: the keys
    past the valid length get weight exp(-1e6 - max) = 0 there, so here
    they are left out of both products (padding costs nothing).  A
    sequence with no valid position attends uniformly to all T keys, as
    the book's masking gives.  Every query row is computed, the padded
    ones included, so `O` equals the book's output everywhere.

    Parameters
    ----------
    qkv : float32 or float64, shape (B, T, 3*H)
        Queries, keys and values, head by head (q, k, v of head 0, then of
        head 1, ...), as the fused projection writes them.
    lens : int32, shape (B,)
        Valid keys per example, in [0, T].
    h : int
    scale : the type of `qkv`
        1 / sqrt(d).
    O : shape (B, T, H)
        Written.
    r0, r1 : int
        The pairs ``bh = b * h + i`` to compute.
    """
    T = qkv.shape[1]
    d = qkv.shape[2] // (3 * h)
    dt = qkv.dtype
    coef = onp.array([scale, 0.0], dt)   # BLAS scales the scores
    one = onp.array([1.0, 0.0], dt)
    buf = onp.empty(T * T, dt)                               # scores
    wbuf = onp.empty(T * T, dt)                              # weights
    bits = onp.empty(T, onp.int32)
    for bh in range(r0, r1):
        b, i = bh // h, bh % h
        _, Q, K, V = _pair_qkv(qkv, b, i, d)         # Q, K, V: (T, d)
        L = onp.intp(lens[b])
        if L == 0:
            # Every score masked alike: uniform weights over all T keys
            L = T
            W = wbuf.reshape((T, T))                         # (T, T)
            W[:, :] = 1.0 / T
        else:
            # Contiguous (T, L) scores and weights, so that the row loops
            # vectorize
            S = buf[:T * L].reshape((T, L))                  # (T, L)
            W = wbuf[:T * L].reshape((T, L))                 # (T, L)
            _matmul(Q, False, K[:L], True, S, coef)          # (T, L)
            for q in range(T):
                _softmax_row(S[q], W[q], bits)               # (L,)
        _matmul(W, False, V[:L], False,
                O[b, :, i * d:(i + 1) * d], one)             # (T, d)


@numba.njit(nogil=True, fastmath=FASTMATH, cache=True)
def add_norm_inference(X, Y, gamma, beta, epsilon, out, r0, r1):
    """``Z = X + Y``, then ``out = (Z - mean) / std * gamma + beta`` over
    the last axis, for rows r0 to r1 of `X`, `Y` (N, C): AddNorm without
    dropout, the arithmetic of `_loops.add_norm_forward` (its dropout
    factor there is exactly 1) without its dropout factors, and without
    the mean and std the training operator keeps for its backward pass.

    Parameters
    ----------
    X, Y : float32 or float64, shape (N, C)
    gamma, beta : shape (C,)
    epsilon : the type of `X`
    out : shape (N, C)
        Written.
    r0, r1 : int
        The rows to compute.
    """
    C = X.shape[1]
    z = onp.empty(C, X.dtype)
    for i in range(r0, r1):
        for j in range(C):
            z[j] = X[i, j] + Y[i, j]
        _normalize_row(z, gamma, beta, epsilon, out[i])


@numba.njit(nogil=True, fastmath=FASTMATH, cache=True)
def embed_norm_inference(tokens, segments, token_W, segment_W, pos, gamma,
                         beta, epsilon, out, r0, r1):
    """BERT's input encoding for rows r0 to r1 of the batch's positions:
    ``Z = (token_W[token] + segment_W[segment]) + pos[t]``, summed in the
    book's order, then ``out = (Z - mean) / std * gamma + beta`` (the
    original BERT's embedding LayerNorm; its dropout is off).

    Parameters
    ----------
    tokens, segments : int64, shape (B, T)
        In [0, V) and [0, S) (`check_encoder_inputs` checked them).
    token_W : shape (V, H)
    segment_W : shape (S, H)
    pos : shape (max_len, H), max_len >= T
    gamma, beta : shape (H,)
    epsilon : the type of `token_W`
    out : shape (B*T, H)
        Written, row ``b * T + t`` for position t of example b.
    r0, r1 : int
        The rows to compute.
    """
    T = tokens.shape[1]
    C = token_W.shape[1]
    z = onp.empty(C, token_W.dtype)
    for n in range(r0, r1):
        b, p = n // T, n % T
        tok, seg = tokens[b, p], segments[b, p]
        for j in range(C):
            z[j] = (token_W[tok, j] + segment_W[seg, j]) + pos[p, j]
        _normalize_row(z, gamma, beta, epsilon, out[n])
