"""The compiled attention loops (`d2l_bert.fast._loops`) against a
float64 NumPy reference that computes every product over all T keys.

The loops multiply only the keys of a sequence's valid positions (its
length rounded up to whole BLAS panels): these tests give lengths of 0
(uniform weights), 1, in between, at a panel's edge and T, with dropout
off and on (the reference rebuilds the mask from `dropout_scale`), and
compare weights, outputs and the gradient of ``sum(dO * O) + sum(dW *
P)`` with respect to the projection, float64 in and float64 out: the
loops' sums differ from the reference's only in order.  Given fewer
queries than T (the packed step's), the loops compute the first ones
only (rounded up as the keys): the rest of the weights and outputs are
0, and so is the gradient that comes from them.
"""
import numpy as onp
import pytest

K = pytest.importorskip('d2l_bert.fast._loops',
                        reason='the compiled loops need numba')

B, T, h, d = 6, 40, 2, 8


def reference(qkv, lens, scale, drop, dO, dW):
    """Weights P, output O and d(qkv) of the book's masked attention,
    every product over all T keys; `drop` (B*h, T, T) the dropout
    factors."""
    P = onp.zeros((B * h, T, T))
    O = onp.zeros((B, T, h * d))
    dqkv = onp.zeros_like(qkv)
    for bh in range(B * h):
        b, i = divmod(bh, h)
        q0 = 3 * i * d
        Q, Kk, V = (qkv[b, :, q0:q0 + d], qkv[b, :, q0 + d:q0 + 2 * d],
                    qkv[b, :, q0 + 2 * d:q0 + 3 * d])
        S = Q @ Kk.T * scale
        # The book's masking: scores past the length replaced by -1e6
        S[:, lens[b]:] = -1e6
        E = onp.exp(S - S.max(axis=1, keepdims=True))
        P[bh] = E / E.sum(axis=1, keepdims=True)
        Pd = P[bh] * drop[bh]
        O[b, :, i * d:(i + 1) * d] = Pd @ V
        G = dO[b, :, i * d:(i + 1) * d]
        dP = (G @ V.T) * drop[bh] + dW[bh]
        dS = P[bh] * (dP - (P[bh] * dP).sum(axis=1, keepdims=True))
        dS[:, lens[b]:] = 0                  # replaced scores: no gradient
        dqkv[b, :, q0:q0 + d] = dS @ Kk * scale
        dqkv[b, :, q0 + d:q0 + 2 * d] = dS.T @ Q * scale
        dqkv[b, :, q0 + 2 * d:q0 + 3 * d] = Pd.T @ G
    return P, O, dqkv


def queries_computed(queries):
    """The queries the loops compute: each count rounded up to a panel
    (8), at most T; all T for 0."""
    return [T if q == 0 else min(T, -(-q // 8) * 8) for q in queries]


@pytest.mark.parametrize('queries', [None, [0, 5, 16, 20, 33, T]],
                         ids=['all-queries', 'first-queries'])
@pytest.mark.parametrize('rate', [0.0, 0.3])
def test_attention_loops_skip_masked_keys_and_match_all_keys(rate, queries):
    rng = onp.random.default_rng(0)
    qkv = rng.normal(size=(B, T, 3 * h * d))
    # 0: uniform weights; 16 and 17: a panel's edge (8 keys); T: nothing
    # skipped
    lens = onp.array([0, 1, 16, 17, 29, T], onp.int32)
    queries = onp.array(queries or [T] * B, onp.int32)
    dO = rng.normal(size=(B, T, h * d))
    dW = rng.normal(size=(B * h, T, T))
    # the rows past the queries computed give no gradient: the reference
    # gets zeros there
    dO_read, dW_read = dO.copy(), dW.copy()
    for b, Lq in enumerate(queries_computed(queries)):
        dO_read[b, Lq:] = 0
        dW_read[b * h:(b + 1) * h, Lq:] = 0
    scale = onp.float64(1 / onp.sqrt(d))
    seed = onp.uint64(12345)
    threshold = onp.uint64(int(rate * 2 ** 32))
    keep = onp.float64(1 / (1 - rate))
    drop = onp.ones((B * h, T, T))
    if rate:
        for bh in range(B * h):
            K.dropout_scale(seed, threshold, keep, bh, T, drop[bh])
        assert 0.25 < (drop == 0).mean() < 0.35
    args = (qkv, lens, queries, h, scale, seed, threshold, keep)
    P = onp.full((B * h, T, T), onp.nan)  # every entry must be written
    O = onp.full((B, T, h * d), onp.nan)
    K.self_attention_forward(*args, P, O, 0, B * h)
    dqkv = onp.full_like(qkv, onp.nan)
    K.self_attention_backward(*args, P, dO, dW, dqkv, 0, B * h)
    P_ref, O_ref, dqkv_ref = reference(qkv, lens, scale, drop, dO_read,
                                       dW_read)
    for b, Lq in enumerate(queries_computed(queries)):
        P_ref[b * h:(b + 1) * h, Lq:] = 0
        O_ref[b, Lq:] = 0
    # Length 0: uniform weights over all T keys, as the book's masking
    onp.testing.assert_allclose(P[:h], 1 / T, rtol=1e-12)
    onp.testing.assert_allclose(P, P_ref, rtol=1e-10, atol=1e-12)
    onp.testing.assert_allclose(O, O_ref, rtol=1e-10, atol=1e-12)
    onp.testing.assert_allclose(dqkv, dqkv_ref, rtol=1e-9, atol=1e-12)
    # No gradient reaches the keys and values past a length (b = 2: 16)
    assert (dqkv[2, 16:, d:3 * d] == 0).all()


def test_attention_loops_split_among_threads_as_one():
    # Any split of the (example, head) pairs gives the same numbers
    rng = onp.random.default_rng(1)
    qkv = rng.normal(size=(B, T, 3 * h * d)).astype(onp.float32)
    lens = onp.array([3, 40, 16, 0, 33, 9], onp.int32)
    queries = onp.array([3, 40, 17, 40, 33, 40], onp.int32)
    args = (qkv, lens, queries, h, onp.float32(0.3), onp.uint64(7),
            onp.uint64(2 ** 30), onp.float32(4 / 3))
    outs = []
    for cuts in ([0, B * h], [0, 5, B * h], [0, 1, 2, 7, B * h]):
        # NaN where nothing writes: array_equal fails on any NaN left
        P = onp.full((B * h, T, T), onp.nan, onp.float32)
        O = onp.full((B, T, h * d), onp.nan, onp.float32)
        dqkv = onp.full_like(qkv, onp.nan)
        dO = onp.ones_like(O)
        for r0, r1 in zip(cuts[:-1], cuts[1:]):
            K.self_attention_forward(*args, P, O, r0, r1)
        for r0, r1 in zip(cuts[:-1], cuts[1:]):
            K.self_attention_backward(*args, P, dO, onp.zeros_like(P), dqkv,
                                      r0, r1)
        outs.append((P, O, dqkv))
    for P, O, dqkv in outs[1:]:
        for a, b in zip((P, O, dqkv), outs[0]):
            assert onp.array_equal(a, b)


# --- The MLM loss's loops ---------------------------------------------------

def test_softmax_ce_gradient_of_weight_0_rows_is_zero_and_nan_propagates():
    """A row with gradient weight 0 (a padded prediction) is written as
    zeros without its exponentials: the same numbers as ``0 * (softmax -
    one_hot)``; a row with a NaN score still gives NaN, as in the book."""
    rng = onp.random.RandomState(0)
    N, V = 6, 1100                         # more than two 512-column pieces
    X = rng.normal(0, 3, (N, V)).astype(onp.float32)       # (N, V)
    X[4, 700] = onp.nan
    y = onp.array([0, 5, 1099, 7, 3, 2], dtype=onp.int32)  # (N,)
    g = onp.array([0.5, 0, 0.25, 0, 0, 1], dtype=onp.float32)
    loss, lse = onp.empty(N, onp.float32), onp.empty(N, onp.float32)
    K.softmax_ce_forward(X, y, loss, lse, 0, N)
    dX = onp.full((N, V), 7.0, dtype=onp.float32)          # stale values
    K.softmax_ce_backward(X, y, lse, g, dX, 0, N)
    X64 = X.astype(onp.float64)
    p = onp.exp(X64 - X64.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    p[onp.arange(N), y] -= 1
    expected = g[:, None] * p                              # (N, V)
    for i in (1, 3):
        assert (dX[i] == 0).all()                          # exact zeros
    assert onp.isnan(dX[4]).any()
    for i in (0, 2, 5):
        onp.testing.assert_allclose(dX[i], expected[i], rtol=1e-5,
                                    atol=1e-7)
