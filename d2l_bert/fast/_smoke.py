"""The compiled loops' smoke test: each loop of `_loops` once, on a tiny
input, checking one number of each.

NumPy and numba only, so that `warm`'s child process can load this file
and `_loops.py` by their paths and compile the loops into numba's cache
without importing MXNet; `_ops._smoke_test` runs it in the process that
trains.
"""
import numpy as onp


def run(K, parts=None):
    """Compile (or load from numba's cache) and run each loop of `K`, the
    module `_loops`, once: those of `parts` (names of `PARTS`; default
    all).  Raise RuntimeError naming the loop that gives a wrong number.
    """
    for name in PARTS if parts is None else parts:
        PARTS[name](K)


def _check(ok, loop):
    if not ok:
        raise RuntimeError(f'the compiled loop {loop} gave a wrong result')


def loss_and_norms(K):
    """The MLM loss's, LayerNorm's and AddNorm's loops."""
    X = onp.array([[0.0, 1.0, 2.0]], onp.float32)
    y = onp.array([2], onp.int32)
    loss, lse = onp.empty(1, onp.float32), onp.empty(1, onp.float32)
    K.softmax_ce_forward(X, y, loss, lse, 0, 1)
    expected = onp.log(onp.exp(X[0].astype(onp.float64)).sum()) - 2.0
    _check(abs(loss[0] - expected) < 1e-5, 'softmax_ce_forward')
    dX = onp.empty_like(X)
    K.softmax_ce_backward(X, y, lse, onp.ones(1, onp.float32), dX, 0, 1)
    _check(abs(dX.sum()) < 1e-5, 'softmax_ce_backward')
    dY, gamma = onp.ones((1, 3), onp.float32), onp.ones(3, onp.float32)
    acc = onp.zeros((2, 3))
    K.layer_norm_backward(dY, X, onp.ones(1, onp.float32),
                          onp.ones(1, onp.float32), gamma, dX.copy(),
                          acc[0], acc[1], 0, 1)
    _check(acc[1].tolist() == [1.0, 1.0, 1.0], 'layer_norm_backward')
    # AddNorm of one row, no dropout: X + 0 normalized, then its gradient
    no_dropout = (onp.uint64(0), onp.uint64(0), onp.float32(1))
    Y, beta = onp.zeros_like(X), onp.zeros(3, onp.float32)
    out, mean, std = (onp.empty_like(X), onp.empty(1, onp.float32),
                      onp.empty(1, onp.float32))
    K.add_norm_forward(X, Y, gamma, beta, onp.float32(1e-5), *no_dropout,
                       out, mean, std, 0, 1)
    _check(mean.tolist() == [1.0], 'add_norm_forward')
    add_acc = onp.zeros((2, 3))
    K.add_norm_backward(dY, X, Y, mean, std, gamma, *no_dropout,
                        onp.empty_like(X), onp.empty_like(X), add_acc[0],
                        add_acc[1], 0, 1)
    _check(add_acc[1].tolist() == [1.0] * 3, 'add_norm_backward')


def attention(K):
    """Self-attention's loops, forward and backward."""
    # One sequence, one head, d = 1: q = k = v = 1, length 1
    qkv = onp.ones((1, 2, 3), onp.float32)
    P, O = onp.empty((1, 2, 2), onp.float32), onp.empty((1, 2, 1), onp.float32)
    args = (qkv, onp.array([1], onp.int32), onp.array([2], onp.int32), 1,
            onp.float32(1), onp.uint64(0), onp.uint64(0), onp.float32(1))
    K.self_attention_forward(*args, P, O, 0, 1)
    _check(P[:, :, 0].tolist() == [[1.0, 1.0]]
           and O.ravel().tolist() == [1.0, 1.0], 'self_attention_forward')
    dqkv = onp.empty_like(qkv)
    K.self_attention_backward(*args, P, onp.ones_like(O), onp.zeros_like(P),
                              dqkv, 0, 1)
    _check(dqkv[0, :, 2].tolist() == [2.0, 0.0], 'self_attention_backward')


#: The smoke test in two parts of about equal compile time, which
#: `warm` compiles in two processes
PARTS = {'loss_and_norms': loss_and_norms, 'attention': attention}
