"""Compiled CPU loops for the two slowest pieces of a pretraining step.

Imported by `d2l_bert._kernels` only when the kernels are used: importing
this module imports numba, and the first call of each loop compiles it
(a few seconds, once; numba keeps the result in its cache).

Each loop works on the rows ``r0 <= i < r1`` of its arrays, so that
`d2l_bert._kernels` can split the rows among threads (the loops release
the GIL).  Arrays are float32 and C-contiguous; labels are int32.

- `softmax_ce_forward` / `softmax_ce_backward`: the softmax cross-entropy
  of the MLM scores, one row (V scores) at a time, so that a row stays in
  the cache between its passes: the (N, V) scores are read once forward
  and once backward, and the gradient written once.
- `layer_norm_backward`: the gradient of a LayerNorm over the last axis,
  one row (C values) at a time, with per-chunk sums for gamma and beta.

Dimension key: N rows, V vocabulary size, C channels (num_hiddens).
"""
import numba
import numpy as onp

# fastmath without 'nnan' and 'ninf': a NaN or an infinity anywhere in a
# row of scores gives that row a NaN loss and gradient (MXNet's
# `log_softmax` gives NaN only where the label's score is NaN), so a
# diverging run shows at once
FASTMATH = {'reassoc', 'contract', 'arcp', 'nsz', 'afn'}

_LOG2E = onp.float32(1.4426950408889634)
_LN2 = onp.float32(0.6931471805599453)
_LOWEST = onp.float32(-87.0)   # exp(-87) is still a normal float32


@numba.njit(nogil=True, fastmath=FASTMATH, cache=True, inline='always')
def _exp_shifted(src, shift, out, bits):
    """``out[j] = exp(src[j] - shift)`` for a row, vectorizable.

    `src - shift` is at most 0 here (a row's maximum or its log-sum-exp is
    subtracted); values below -87 give exp(-87), below float32's smallest
    normal number anyway.  exp(t) = 2**k * exp(f) with k = round(t /
    ln 2) and |f| <= ln(2) / 2; exp(f) by its Taylor polynomial of degree
    7 (relative error below 1e-7), 2**k by writing k into the exponent
    bits of a float32.
    """
    n = src.shape[0]
    for j in range(n):
        t = src[j] - shift                                   # t <= 0
        t = _LOWEST if t < _LOWEST else t                    # keeps NaN
        k = onp.floor(t * _LOG2E + onp.float32(0.5))
        f = t - k * _LN2
        p = onp.float32(1.0 / 5040)
        p = p * f + onp.float32(1.0 / 720)
        p = p * f + onp.float32(1.0 / 120)
        p = p * f + onp.float32(1.0 / 24)
        p = p * f + onp.float32(1.0 / 6)
        p = p * f + onp.float32(0.5)
        p = p * f + onp.float32(1.0)
        out[j] = p * f + onp.float32(1.0)
        bits[j] = (onp.int32(k) + onp.int32(127)) << onp.int32(23)
    scale = bits.view(onp.float32)                           # 2 ** k
    for j in range(n):
        out[j] *= scale[j]


@numba.njit(nogil=True, fastmath=FASTMATH, cache=True)
def softmax_ce_forward(X, y, loss, lse, r0, r1):
    """Per-row softmax cross-entropy of scores `X` (N, V) and labels `y`
    (N,): ``loss[i] = lse[i] - X[i, y[i]]`` with ``lse[i]`` the row's
    log-sum-exp.  Labels outside [0, V) are clipped, as `pick` does."""
    V = X.shape[1]
    e = onp.empty(V, onp.float32)
    bits = onp.empty(V, onp.int32)
    for i in range(r0, r1):
        row = X[i]
        m = row[0]
        for j in range(V):
            m = row[j] if row[j] > m else m
        _exp_shifted(row, m, e, bits)
        s = onp.float32(0.0)
        for j in range(V):
            s += e[j]
        label = min(max(y[i], 0), V - 1)
        lse[i] = m + onp.log(s)
        loss[i] = lse[i] - row[label]


@numba.njit(nogil=True, fastmath=FASTMATH, cache=True)
def softmax_ce_backward(X, y, lse, g, dX, r0, r1):
    """The gradient of ``sum(g * loss)`` with respect to the scores:
    ``dX[i] = g[i] * (softmax(X[i]) - one_hot(y[i]))``."""
    V = X.shape[1]
    bits = onp.empty(V, onp.int32)
    for i in range(r0, r1):
        out = dX[i]
        _exp_shifted(X[i], lse[i], out, bits)                # softmax
        gi = g[i]
        for j in range(V):
            out[j] *= gi
        label = min(max(y[i], 0), V - 1)
        out[label] -= gi


@numba.njit(nogil=True, fastmath=FASTMATH, cache=True)
def layer_norm_backward(dY, X, mean, std, gamma, dX, dgamma, dbeta, r0, r1):
    """The gradient of ``Y = (X - mean) / std * gamma + beta`` over the
    last axis, for rows r0 to r1 of `X` (N, C).

    Writes ``dX`` (N, C); adds the rows' contributions to `dgamma` and
    `dbeta` (C,), float64 accumulators of this chunk of rows.
    """
    C = X.shape[1]
    xhat = onp.empty(C, onp.float32)
    for i in range(r0, r1):
        m = mean[i]
        inv = onp.float32(1.0) / std[i]
        a = onp.float32(0.0)          # sum of dY * gamma
        b = onp.float32(0.0)          # sum of dY * gamma * xhat
        for j in range(C):
            xh = (X[i, j] - m) * inv
            xhat[j] = xh
            d = dY[i, j]
            a += d * gamma[j]
            b += d * gamma[j] * xh
            dgamma[j] += d * xh
            dbeta[j] += d
        a /= C
        b /= C
        for j in range(C):
            dX[i, j] = (dY[i, j] * gamma[j] - a - xhat[j] * b) * inv
