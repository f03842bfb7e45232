"""Compiled CPU loops for the pieces of a pretraining step that MXNet's
operators run far slower than their arithmetic.

Imported by the operators (`_attention_ops`, `_norm_ops`, `_loss_ops`)
only when the kernels are used: importing this module imports numba,
and the first call of each loop compiles it (a few seconds, once; numba
keeps the result in its cache).

Each loop works on the rows ``r0 <= i < r1`` of its arrays, so that
`d2l_bert.fast._ops` can split the rows among threads (the loops release
the GIL).  Arrays are C-contiguous, float32 (the attention and AddNorm
loops take float64 too); labels are int32.

- `softmax_ce_forward` / `softmax_ce_backward`: the softmax cross-entropy
  of the MLM scores, one row (V scores) at a time, so that a row stays in
  the cache between its passes: the (N, V) scores are read once forward
  and once backward, and the gradient written once.
- `layer_norm_backward`: the gradient of a LayerNorm over the last axis,
  one row (C values) at a time, with per-chunk sums for gamma and beta.
- `self_attention_forward` / `self_attention_backward`: the attention of
  one (example, head) pair at a time, with its masking and dropout; BLAS
  (`_matmul`) reads the pair's queries, keys and values where they lie in
  the projection and writes its results into their columns.
- `add_norm_forward` / `add_norm_backward`: `AddNorm`'s
  ``LayerNorm(X + dropout(Y))``, one row at a time.

The dropout masks are hashes of the position and a seed
(`_uniform_bits`), so a backward pass rebuilds its mask.

The row helpers (`_softmax_row`, `_normalize_row`, `_matmul`, ...) are
plain ``njit`` functions: LLVM inlines them into their callers.  Numba's
own ``inline='always'`` copies the callee's IR statement by statement with
`copy.deepcopy`, and made compiling the loops four times slower, for
kernels no faster.

Dimension key: N rows, V vocabulary size, C channels (num_hiddens); in
the attention, B examples, T positions, h heads of d columns, H = h*d.
"""
import numba
import numpy as onp
from numba import types
from numba.np.linalg import ensure_blas

# fastmath without 'nnan' and 'ninf': a NaN or an infinity anywhere in a
# row of scores gives that row a NaN loss and gradient (MXNet's
# `log_softmax` gives NaN only where the label's score is NaN), so a
# diverging run shows at once
FASTMATH = {'reassoc', 'contract', 'arcp', 'nsz', 'afn'}

_LOG2E = onp.float32(1.4426950408889634)
_LN2 = onp.float32(0.6931471805599453)
_LOWEST = onp.float32(-87.0)   # exp(-87) is still a normal float32


@numba.njit(nogil=True, fastmath=FASTMATH, cache=True)
def _exp_shifted(src, shift, mult, out, bits):
    """``out[j] = mult * exp(src[j] - shift)`` for a row, vectorizable.

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
        out[j] = (p * f + onp.float32(1.0)) * mult
        bits[j] = (onp.int32(k) + onp.int32(127)) << onp.int32(23)
    scale = bits.view(onp.float32)                           # 2 ** k
    for j in range(n):
        out[j] *= scale[j]


@numba.njit(nogil=True, fastmath=FASTMATH, cache=True)
def _row_max(row):
    """The largest value of a row.  A NaN is passed over unless it comes
    first; either way a NaN score makes its row's exponentials, and so
    its loss, NaN.

    Four running maxima, so that the compares do not wait on each other:
    LLVM does not vectorize a max reduction without the 'nnan' flag, and
    one running maximum took four times as long as reading the row.
    """
    n4 = row.shape[0] // 4 * 4
    a = b = c = d = row[0]
    for j in range(0, n4, 4):
        a = row[j] if row[j] > a else a
        b = row[j + 1] if row[j + 1] > b else b
        c = row[j + 2] if row[j + 2] > c else c
        d = row[j + 3] if row[j + 3] > d else d
    for j in range(n4, row.shape[0]):
        a = row[j] if row[j] > a else a
    a = b if b > a else a
    c = d if d > c else c
    return c if c > a else a


@numba.njit(nogil=True, fastmath=FASTMATH, cache=True)
def _softmax_row(row, p, bits):
    """``p = softmax(row)`` over one row of scores: the vectorized exp
    of `_exp_shifted` in float32, `np.exp` (to float64's precision)
    otherwise; `bits` (at least the row's length) is int32 scratch.  The
    attention loops of training and of inference both call it.

    `p` may be `row` itself, but then LLVM leaves the exponentials
    unvectorized (their input and output overlap): give it other memory.
    """
    n = row.shape[0]
    t = p.dtype.type
    m = _row_max(row)
    if p.itemsize == 4:      # float32: the vectorized exp
        _exp_shifted(row, m, t(1.0), p, bits[:n])
    else:                    # float64: exp to float64's precision
        for k in range(n):
            p[k] = onp.exp(row[k] - m)
    total = t(0.0)
    for k in range(n):
        total += p[k]
    inv = t(1.0) / total
    for k in range(n):
        p[k] *= inv


# Columns per piece of a row in the softmax loops: a piece of scores, its
# exponentials and their exponent bits stay in the L1 cache (6 KB)
_TILE = 512


@numba.njit(nogil=True, fastmath=FASTMATH, cache=True)
def softmax_ce_forward(X, y, loss, lse, r0, r1):
    """Per-row softmax cross-entropy of scores `X` (N, V) and labels `y`
    (N,): ``loss[i] = lse[i] - X[i, y[i]]`` with ``lse[i]`` the row's
    log-sum-exp.  Labels outside [0, V) are clipped, as `pick` does."""
    V = X.shape[1]
    e = onp.empty(_TILE, onp.float32)
    bits = onp.empty(_TILE, onp.int32)
    for i in range(r0, r1):
        row = X[i]
        m = _row_max(row)
        s = onp.float32(0.0)
        for j0 in range(0, V, _TILE):
            n = min(_TILE, V - j0)
            _exp_shifted(row[j0:j0 + n], m, onp.float32(1.0), e[:n],
                         bits[:n])
            for j in range(n):
                s += e[j]
        label = min(max(y[i], 0), V - 1)
        lse[i] = m + onp.log(s)
        loss[i] = lse[i] - row[label]


@numba.njit(nogil=True, fastmath=FASTMATH, cache=True)
def softmax_ce_backward(X, y, lse, g, dX, r0, r1):
    """The gradient of ``sum(g * loss)`` with respect to the scores:
    ``dX[i] = g[i] * (softmax(X[i]) - one_hot(y[i]))``.

    A row with ``g[i] == 0`` (a padded prediction, weight 0) and a finite
    log-sum-exp is all zeros, the numbers the product gives: it is
    written without computing its exponentials.  A non-finite row still
    goes through them, so that a NaN or infinite score propagates as in
    the book."""
    V = X.shape[1]
    bits = onp.empty(_TILE, onp.int32)
    for i in range(r0, r1):
        row, out, gi = X[i], dX[i], g[i]
        if gi == 0 and onp.isfinite(lse[i]):
            out[:] = 0
            continue
        for j0 in range(0, V, _TILE):                       # g * softmax
            n = min(_TILE, V - j0)
            _exp_shifted(row[j0:j0 + n], lse[i], gi, out[j0:j0 + n],
                         bits[:n])
        label = min(max(y[i], 0), V - 1)
        out[label] -= gi


@numba.njit(nogil=True, fastmath=FASTMATH, cache=True)
def _layer_norm_row_grad(g, gamma, xhat, inv, dgamma, dbeta, dz):
    """LayerNorm's input gradient for one row: from the output's gradient
    `g`, the normalized input `xhat` and ``inv = 1 / std``, writes `dz`
    (C,) and adds the row's terms to `dgamma` and `dbeta` (C,)."""
    C = g.shape[0]
    t = g.dtype.type                  # g's type: no float64 arithmetic
    a = t(0.0)                        # sum of g * gamma
    b = t(0.0)                        # sum of g * gamma * xhat
    for j in range(C):
        a += g[j] * gamma[j]
        b += g[j] * gamma[j] * xhat[j]
        dgamma[j] += g[j] * xhat[j]
        dbeta[j] += g[j]
    a = a / t(C)
    b = b / t(C)
    for j in range(C):
        dz[j] = (g[j] * gamma[j] - a - xhat[j] * b) * inv


@numba.njit(nogil=True, fastmath=FASTMATH, cache=True)
def layer_norm_backward(dY, X, mean, std, gamma, dX, dgamma, dbeta, r0, r1):
    """The gradient of ``Y = (X - mean) / std * gamma + beta`` over the
    last axis, for rows r0 to r1 of `X` (N, C).

    Writes ``dX`` (N, C); adds the rows' contributions to `dgamma` and
    `dbeta` (C,), float64 accumulators of this chunk of rows.
    """
    C = X.shape[1]
    xhat = onp.empty(C, X.dtype)
    for i in range(r0, r1):
        m = mean[i]
        inv = X.dtype.type(1.0) / std[i]
        for j in range(C):
            xhat[j] = (X[i, j] - m) * inv
        _layer_norm_row_grad(dY[i], gamma, xhat, inv, dgamma, dbeta, dX[i])


# ---------------------------------------------------------------------------
# Self-attention of one (example, head) pair at a time
# ---------------------------------------------------------------------------
#
# `qkv` (B, T, 3*H) holds, for each position, the query, key and value of
# head 0 (d columns each), then those of head 1, and so on (the layout of
# `MultiHeadAttention.qkv_weight`).  Pair ``bh = b * h + i`` is example b,
# head i; its weights are row bh of `P` (B*h, T, T), its output columns
# i*d to (i+1)*d of `O` (B, T, H).  A thread owns whole pairs, so no two
# threads write the same memory.  The products of T x d and T x T blocks
# go to BLAS (`np.dot`, through SciPy's BLAS), the rest is loops.

_GOLDEN = 0x9E3779B1
_MIX1 = 0x85EBCA6B
_MIX2 = 0xC2B2AE35
_LOW32 = 0xFFFFFFFF


@numba.njit(nogil=True, cache=True)
def _uniform_bits(seed, index):
    """32 random-looking bits from a seed and an index (MurmurHash3's
    finaliser of ``index * golden + seed``): the dropout mask is a pure
    function of its position, so the backward pass rebuilds it, and any
    split of the pairs among threads draws the same mask."""
    x = (onp.uint64(index) * onp.uint64(_GOLDEN) + onp.uint64(seed)) \
        & onp.uint64(_LOW32)
    x ^= x >> onp.uint64(16)
    x = (x * onp.uint64(_MIX1)) & onp.uint64(_LOW32)
    x ^= x >> onp.uint64(13)
    x = (x * onp.uint64(_MIX2)) & onp.uint64(_LOW32)
    x ^= x >> onp.uint64(16)
    return x


@numba.njit(nogil=True, cache=True)
def _row_dropout(seed, threshold, keep_scale, i, out):
    """The dropout factors of row i of an (N, C) array into `out` (C,):
    `keep_scale` (1 / (1 - p)) where kept, 0 where dropped, 1 everywhere
    when `threshold` is 0; entry (i, j) is dropped when the bits of index
    ``i * C + j`` fall below `threshold` (p * 2**32)."""
    C = out.shape[0]
    if threshold == 0:
        out[:] = 1.0
        return
    base = i * C
    for j in range(C):
        bits = _uniform_bits(seed, base + j)
        out[j] = 0.0 if bits < threshold else keep_scale


@numba.njit(nogil=True, cache=True)
def dropout_scale(seed, threshold, keep_scale, bh, T, out):
    """The dropout factors of pair `bh`'s T x T weights, into `out`: row
    q is row ``bh * T + q`` of the (B*h*T, T) weights (`_row_dropout`)."""
    for q in range(T):
        _row_dropout(seed, threshold, keep_scale, bh * T + q, out[q])


# BLAS's matrix product through numba's own gateway to SciPy's BLAS (what
# `numpy.dot` compiles to in numba), called with the row strides of the
# arrays: a head's queries, keys and values are read where they lie in
# the (B, T, 3H) projection, and its outputs written into their columns,
# without copies
ensure_blas()
_xxgemm = types.ExternalFunction('numba_xxgemm', types.intc(
    types.char, types.char, types.char,                      # kind, trans
    types.intp, types.intp, types.intp,                      # m, n, k
    types.voidptr, types.voidptr, types.intp,                # alpha, a, lda
    types.voidptr, types.intp,                               # b, ldb
    types.voidptr, types.voidptr, types.intp))               # beta, c, ldc
_NO_T, _T = ord('N'), ord('T')


@numba.njit(nogil=True, cache=True)
def _matmul(A, a_t, B, b_t, C, coef):
    """``C = op(A) op(B)``, op transposing when `a_t` / `b_t`; A, B, C
    are 2-D (rows may be strided, columns contiguous), of one type, float32
    or float64; `coef` is ``[1, 0]`` of that type.

    BLAS counts in columns: the row-major C is the column-major C^T =
    op(B)^T op(A)^T, and a row-major array is its own transpose read by
    columns.
    """
    m, n = C.shape
    k = A.shape[0] if a_t else A.shape[1]
    kind = ord('s') if C.itemsize == 4 else ord('d')
    _xxgemm(kind, _T if b_t else _NO_T, _T if a_t else _NO_T, n, m, k,
            coef[0:].ctypes, B.ctypes, B.strides[0] // B.itemsize,
            A.ctypes, A.strides[0] // A.itemsize,
            coef[1:].ctypes, C.ctypes, C.strides[0] // C.itemsize)


@numba.njit(nogil=True, cache=True)
def _pair_qkv(qkv, b, i, d):
    """Example b, head i's first column in `qkv` (B, T, 3*H), and views
    of its queries, keys and values there, (T, d) each (no copies)."""
    q0 = 3 * i * d
    return (q0, qkv[b, :, q0:q0 + d], qkv[b, :, q0 + d:q0 + 2 * d],
            qkv[b, :, q0 + 2 * d:q0 + 3 * d])


@numba.njit(nogil=True, cache=True)
def _dropped(P, bh, seed, threshold, keep_scale, drop, Pd, Lq, Lk):
    """The first `Lq` rows (queries) and `Lk` columns (keys) of pair
    bh's weights after dropout: ``Pd[:Lq, :Lk] = P[bh, :Lq, :Lk] *
    drop[:Lq, :Lk]`` with the pair's dropout factors (`dropout_scale`'s,
    entry by entry), or ``P[bh, :Lq, :Lk]`` itself when `threshold` is 0
    (no dropout); (Lq, Lk)."""
    T = Pd.shape[0]
    if threshold > 0:
        for q in range(Lq):
            base = (bh * T + q) * T                # `_row_dropout`'s index
            for k in range(Lk):
                bits = _uniform_bits(seed, base + k)
                drop[q, k] = 0.0 if bits < threshold else keep_scale
                Pd[q, k] = P[bh, q, k] * drop[q, k]
        return Pd[:Lq, :Lk]
    return P[bh, :Lq, :Lk]


@numba.njit(nogil=True, cache=True)
def _pair_scratch(qkv, h, n):
    """What the attention loops start a chunk of pairs from: T, d, the
    BLAS coefficients ``[1, 0]`` in `qkv`'s type, and `n` (T, T) buffers
    of that type, (n, T, T)."""
    T = qkv.shape[1]
    return (T, qkv.shape[2] // (3 * h), onp.array([1.0, 0.0], qkv.dtype),
            onp.empty((n, T, T), qkv.dtype))


@numba.njit(nogil=True, fastmath=FASTMATH, cache=True)
def _zero_rows(A, r0, r1):
    """``A[r0:r1] = 0`` for a 2-D `A` (rows may be strided), a row at a
    time.  The attention loops zero the rows past an example's computed
    ones through it, whole rows of the (B, T, C) arrays (all heads at
    once), so the stores run on contiguous memory: zeroing each head's
    d-column slice of them instead (256 bytes every 3*H floats) took five
    times as long, most of the backward pass at fine-tuning's lengths."""
    for t in range(r0, r1):
        row = A[t]
        for j in range(row.shape[0]):
            row[j] = 0.0


# BLAS runs its products in panels of a few columns: a length rounded up
# to a multiple of 8 keeps them whole (the extra keys' weights are 0);
# 8 was faster than no rounding and than 16 or 32, forward and backward
# (`docs/performance-history.md`)
_KEY_STEP = 8


@numba.njit(nogil=True, cache=True)
def _keys_used(L, T):
    """How many keys a pair's products take: its valid length `L` (the
    weights of the others are exactly 0, so their products add nothing)
    rounded up to a multiple of `_KEY_STEP`, at most T; all T when ``L ==
    0`` (uniform weights, as the book's masking gives)."""
    if L == 0:
        return T
    return min(T, (L + _KEY_STEP - 1) // _KEY_STEP * _KEY_STEP)


@numba.njit(nogil=True, fastmath=FASTMATH, cache=True)
def self_attention_forward(qkv, lens, queries, h, scale, seed, threshold,
                           keep_scale, P, O, r0, r1):
    """Weights and output of pairs r0 to r1.

    ``P[bh] = softmax(Q K^T * scale)`` over the first ``lens[b]`` keys
    (0 elsewhere; uniform over all T when ``lens[b] == 0``, as the book's
    masking gives), then ``O = (P * dropout) V``.  `threshold` 0 means no
    dropout.  The products read only the keys and values of the valid
    positions: the others' weights are exactly 0, so leaving them out
    changes no sum (with lengths spread over [12, T], about 40% of the
    attention's arithmetic).  Only the first ``queries[b]`` queries
    (rounded up as the keys, `_keys_used`) are computed; the rows of P
    and O past them are 0.
    """
    T, d, coef, work = _pair_scratch(qkv, h, 3)
    S, Pd, drop = work[0], work[1], work[2]                  # (T, T) each
    bits = onp.empty(T, onp.int32)
    for bh in range(r0, r1):
        b, i = bh // h, bh % h
        _, Q, K, V = _pair_qkv(qkv, b, i, d)         # Q, K, V: (T, d)
        L = lens[b]
        Lk = _keys_used(L, T)
        Lq = _keys_used(queries[b], T)
        _matmul(Q[:Lq], False, K[:Lk], True, S[:Lq, :Lk], coef)  # (Lq, Lk)
        P[bh, Lq:] = 0.0
        if i == 0:
            # every head of example b computes the same Lq rows: the pair
            # of head 0 zeroes the rows past them, for all heads
            _zero_rows(O[b], Lq, T)                          # (T-Lq, H)
        for q in range(Lq):
            if L == 0:
                for k in range(T):
                    P[bh, q, k] = 1.0 / T
                continue
            row = S[q, :L]
            for k in range(L):
                row[k] *= scale
            _softmax_row(row, P[bh, q, :L], bits)
            for k in range(L, T):
                P[bh, q, k] = 0.0
        W = _dropped(P, bh, seed, threshold, keep_scale, drop, Pd, Lq,
                     Lk)                                     # (Lq, Lk)
        _matmul(W, False, V[:Lk], False, O[b, :Lq, i * d:(i + 1) * d],
                coef)                                        # (Lq, d)


@numba.njit(nogil=True, fastmath=FASTMATH, cache=True)
def self_attention_backward(qkv, lens, queries, h, scale, seed, threshold,
                            keep_scale, P, dO, dW, dqkv, r0, r1):
    """The gradient of ``sum(dO * O) + sum(dW * P)`` with respect to
    `qkv`, for pairs r0 to r1, written into their columns of `dqkv`
    (B, T, 3*H); `dW` (B*h, T, T) is the gradient reaching the weights
    directly (zeros when only the output is used).  The rows of P and O
    past the queries computed (`self_attention_forward`) are 0 whatever
    `qkv` is: their rows of `dO` and `dW` are not read.

    With ``Pd = P * dropout``: ``dV = Pd^T dO``; ``dP = (dO V^T) *
    dropout + dW``; ``dS = P * (dP - rowsum(P * dP))`` on the valid keys, 0 on
    the masked ones (the book's masking replaces their scores, so no
    gradient reaches them); ``dQ = scale * dS K``, ``dK = scale * dS^T Q``.
    As forward, the products skip the keys past the valid length, whose
    rows of dK and dV are 0.
    """
    T, d, coef, work = _pair_scratch(qkv, h, 4)
    Pd, drop, dP, dS = work[0], work[1], work[2], work[3]    # (T, T) each
    for bh in range(r0, r1):
        b, i = bh // h, bh % h
        q0, Q, K, V = _pair_qkv(qkv, b, i, d)        # Q, K, V: (T, d)
        G = dO[b, :, i * d:(i + 1) * d]                      # dO of the pair
        dQ = dqkv[b, :, q0:q0 + d]                           # (T, d)
        dK = dqkv[b, :, q0 + d:q0 + 2 * d]                   # (T, d)
        dV = dqkv[b, :, q0 + 2 * d:q0 + 3 * d]               # (T, d)
        L = lens[b]
        # Keys past Lk have weight 0: no gradient reaches their K and V
        Lk = _keys_used(L, T)
        Lq = _keys_used(queries[b], T)
        # Rows past both counts are 0 in every head's dQ, dK and dV: the
        # pair of head 0 zeroes them whole (no other pair writes them)
        R = max(Lk, Lq)
        if i == 0:
            _zero_rows(dqkv[b], R, T)                        # (T-R, 3*H)
        _zero_rows(dK, Lk, R)
        _zero_rows(dV, Lk, R)
        _zero_rows(dQ, Lq, R)
        W = _dropped(P, bh, seed, threshold, keep_scale, drop, Pd, Lq,
                     Lk)                                     # (Lq, Lk)
        _matmul(W, True, G[:Lq], False, dV[:Lk], coef)       # (Lk, d)
        _matmul(G[:Lq], False, V[:Lk], True, dP[:Lq, :Lk],
                coef)                                        # (Lq, Lk)
        if threshold > 0:
            for q in range(Lq):
                for k in range(Lk):
                    dP[q, k] *= drop[q, k]
        for q in range(Lq):
            for k in range(Lk):
                dP[q, k] += dW[bh, q, k]
        for q in range(Lq):
            a = qkv.dtype.type(0.0)
            for k in range(L):
                a += P[bh, q, k] * dP[q, k]
            for k in range(L):
                dS[q, k] = P[bh, q, k] * (dP[q, k] - a) * scale
            for k in range(L, Lk):
                dS[q, k] = 0.0
        _matmul(dS[:Lq, :Lk], False, K[:Lk], False, dQ[:Lq],
                coef)                                        # (Lq, d)
        _matmul(dS[:Lq, :Lk], True, Q[:Lq], False, dK[:Lk],
                coef)                                        # (Lk, d)


# ---------------------------------------------------------------------------
# AddNorm: LayerNorm(X + dropout(Y)) one row at a time
# ---------------------------------------------------------------------------
#
# Row i of `X`, `Y` (N, C) is position i of the batch; Y's dropout mask
# is `_row_dropout`'s, as the attention's, so the backward pass rebuilds
# the mask and any split of the rows draws the same one.


@numba.njit(nogil=True, fastmath=FASTMATH, cache=True)
def _normalize_row(z, gamma, beta, epsilon, out):
    """``out = (z - mean) / std * gamma + beta`` for one row `z` (C,),
    with ``std = sqrt(var + epsilon)`` as MXNet's LayerNorm gives it;
    returns the row's mean and std.  The AddNorm loops of training and
    of inference and the embeddings' LayerNorm call it."""
    C = z.shape[0]
    t = z.dtype.type                  # z's type: no float64 arithmetic
    s = t(0.0)
    for j in range(C):
        s += z[j]
    m = s / t(C)
    v = t(0.0)
    for j in range(C):
        v += (z[j] - m) * (z[j] - m)
    sd = onp.sqrt(v / t(C) + epsilon)
    inv = t(1.0) / sd
    for j in range(C):
        out[j] = (z[j] - m) * inv * gamma[j] + beta[j]
    return m, sd


@numba.njit(nogil=True, fastmath=FASTMATH, cache=True)
def add_norm_forward(X, Y, gamma, beta, epsilon, seed, threshold,
                     keep_scale, out, mean, std, r0, r1):
    """``Z = X + Y * dropout``, then ``out = (Z - mean) / std * gamma +
    beta`` over the last axis, for rows r0 to r1 of `X`, `Y` (N, C).

    Writes `out` (N, C) and each row's `mean` and `std` (N,), with ``std
    = sqrt(var + epsilon)`` as MXNet's LayerNorm gives it.
    """
    C = X.shape[1]
    f = onp.empty(C, X.dtype)
    z = onp.empty(C, X.dtype)
    for i in range(r0, r1):
        _row_dropout(seed, threshold, keep_scale, i, f)
        for j in range(C):
            z[j] = X[i, j] + Y[i, j] * f[j]
        mean[i], std[i] = _normalize_row(z, gamma, beta, epsilon, out[i])


@numba.njit(nogil=True, fastmath=FASTMATH, cache=True)
def add_norm_backward(dout, X, Y, mean, std, gamma, seed, threshold,
                      keep_scale, dX, dY, dgamma, dbeta, r0, r1):
    """The gradient of `add_norm_forward` for rows r0 to r1: ``dX = dZ``
    and ``dY = dZ * dropout`` (N, C), with dZ LayerNorm's input gradient;
    adds the rows' contributions to `dgamma` and `dbeta` (C,), float64
    accumulators of this chunk of rows."""
    C = X.shape[1]
    f = onp.empty(C, X.dtype)
    xhat = onp.empty(C, X.dtype)
    for i in range(r0, r1):
        _row_dropout(seed, threshold, keep_scale, i, f)
        m = mean[i]
        inv = X.dtype.type(1.0) / std[i]
        for j in range(C):
            xhat[j] = (X[i, j] + Y[i, j] * f[j] - m) * inv
        _layer_norm_row_grad(dout[i], gamma, xhat, inv, dgamma, dbeta, dX[i])
        for j in range(C):
            dY[i, j] = dX[i, j] * f[j]
