"""Tests of `d2l_bert._kernels` against the plain path it stands beside.

The plain path (MXNet's `log_softmax` + `pick`, `nn.LayerNorm`) is the
oracle: the custom operators must give the same losses and outputs and
the same gradients within rounding, imperative and hybridized, whatever
way the rows are split among threads, on the compiled loops and on the
fallback built from MXNet operators.  `_BatchLossBERT` with the kernels
must train like without them, on one context and on two; the kernels
must show in its graph only, never in a model exported on its own, and
must stay out when ``D2L_BERT_KERNELS=0`` or the compiled loops fail.
"""
import json
import os
import subprocess
import sys
import threading

import mxnet as mx
import numpy as onp
import pytest
from mxnet import autograd, gluon, np
from mxnet.gluon import nn

from d2l_bert import BERTModel
from d2l_bert import _kernels as K
from d2l_bert import _threads
from d2l_bert import pretraining as P
from d2l_bert.transformer import (AddNorm, LayerNorm,
                                  TransformerEncoderBlock)

from conftest import TINY

pytestmark = pytest.mark.skipif(not K.available(),
                                reason='the compiled kernels need numba')

# Loss: the error is in the log-sum-exp, about one float32 step of the
# largest score (about 40 here); gradient: softmax of a score minus that
# log-sum-exp, the same relative error
LOSS_TOL = dict(rtol=2e-6, atol=2e-5)
GRAD_TOL = dict(rtol=2e-5, atol=2e-5)
LN_GRAD_TOL = dict(rtol=2e-5, atol=2e-5)


class Traced(nn.HybridBlock):
    """Run `block` with the kernels' `training_graph` on or off."""

    def __init__(self, block, active):
        super().__init__()
        self.block, self.active = block, active

    def hybrid_forward(self, F, *args):
        with K.training_graph(self.active):
            return self.block(*args)


class SoftmaxCE(nn.HybridBlock):
    def hybrid_forward(self, F, scores, labels):
        return K.softmax_ce(F, scores, labels)


@pytest.fixture
def plain_calls(monkeypatch):
    """Count the calls of the operators' fallback built from MXNet's."""
    calls = []
    for cls, name in ((K._SoftmaxCE, '_forward_plain'),
                      (K._SoftmaxCE, '_backward_plain'),
                      (K._LayerNorm, '_backward_plain')):
        original = getattr(cls, name)

        def counted(self, *args, original=original, name=name):
            calls.append(name)
            return original(self, *args)
        monkeypatch.setattr(cls, name, counted)
    return calls


@pytest.fixture
def fallback_calls(monkeypatch, plain_calls):
    """Make the operators take their fallback; count its calls.

    The operators run on MXNet's custom-operator threads: `_compiled`,
    which they call there, is replaced.
    """
    monkeypatch.setattr(K, '_compiled', lambda arrays: False)
    return plain_calls


@pytest.fixture
def compiled_calls(monkeypatch):
    """Record the compiled loops `_run` runs."""
    calls = []
    original = K._run

    def recorded(kernel, *args, **kwargs):
        calls.append(kernel.__name__)
        return original(kernel, *args, **kwargs)
    monkeypatch.setattr(K, '_run', recorded)
    return calls


def wide_scores(N, V, scale=10.0, dtype='float32'):
    return np.array(onp.random.normal(0, scale, (N, V)).astype(dtype))


def head_weights(N):
    """A non-uniform head gradient: zeros, a negative, a large weight."""
    w = onp.random.uniform(0.1, 3.0, N).astype('float32')
    w[::3] = 0.0
    w[1::3] = -1.5
    return np.array(w)


def softmax_ce_run(scores, labels, head, active, hybridize=False,
                   grad_req='write', times=1):
    """Loss and gradient w.r.t. `scores` of `softmax_ce`."""
    block = Traced(SoftmaxCE(), active)
    if hybridize:
        block.hybridize()
    s = scores.copy()
    s.attach_grad(grad_req=grad_req)
    for _ in range(times):
        with autograd.record():
            loss = block(s, labels)
        loss.backward(head)
    return loss.asnumpy(), s.grad.asnumpy()


def plain_softmax_ce(scores, labels, head):
    """What `gluon.loss.SoftmaxCELoss` computes, and its gradient."""
    s = scores.copy()
    s.attach_grad()
    with autograd.record():
        loss = -mx.npx.pick(mx.npx.log_softmax(s, axis=-1), labels, axis=-1)
    loss.backward(head)
    return loss.asnumpy(), s.grad.asnumpy()


# --- softmax_ce ------------------------------------------------------------

@pytest.mark.parametrize('hybridize', [False, True])
@pytest.mark.parametrize('V', [5, 1003])
def test_softmax_ce_equals_log_softmax_and_pick(V, hybridize,
                                               compiled_calls):
    N = 11
    scores = wide_scores(N, V)
    labels = np.array(onp.random.randint(0, V, N).astype('int32'))
    head = head_weights(N)
    expected = plain_softmax_ce(scores, labels, head)
    # The Gluon loss the pretraining step replaces, before weighting
    gluon_loss = gluon.loss.SoftmaxCELoss()(scores, labels).asnumpy()
    onp.testing.assert_allclose(expected[0], gluon_loss, rtol=1e-6)
    loss, grad = softmax_ce_run(scores, labels, head, True, hybridize)
    assert loss.shape == (N,) and grad.shape == (N, V)
    onp.testing.assert_allclose(loss, expected[0], **LOSS_TOL)
    onp.testing.assert_allclose(grad, expected[1], **GRAD_TOL)
    assert not grad[::3].any()  # zero head gradient, zero gradient
    assert compiled_calls == ['softmax_ce_forward', 'softmax_ce_backward']


@pytest.mark.parametrize('V', [1024, 1027])
def test_softmax_ce_finds_the_row_maximum_in_any_column(V,
                                                        compiled_calls):
    # Each row's maximum is 130 above its other scores, in a column of
    # its own: the first, the last piece of 512 columns, the columns past
    # a multiple of four, the very last.  Shifting by anything but the
    # maximum would overflow the exponentials
    cols = [0, 1, 2, 3, 511, 512, 513, V - 4, V - 3, V - 2, V - 1]
    N = len(cols)
    scores = onp.random.uniform(-60.0, -50.0, (N, V)).astype('float32')
    scores[onp.arange(N), cols] = 80.0
    labels = np.array(onp.arange(N).astype('int32') * 7 % V)
    head = head_weights(N)
    expected = plain_softmax_ce(np.array(scores), labels, head)
    loss, grad = softmax_ce_run(np.array(scores), labels, head, True)
    assert onp.isfinite(loss).all() and onp.isfinite(grad).all()
    onp.testing.assert_allclose(loss, expected[0], **LOSS_TOL)
    onp.testing.assert_allclose(grad, expected[1], **GRAD_TOL)
    assert compiled_calls == ['softmax_ce_forward', 'softmax_ce_backward']


def test_softmax_ce_plain_path_outside_the_training_graph():
    scores = wide_scores(4, 9)
    labels = np.array([0, 3, 8, 1], dtype='int32')
    head = head_weights(4)
    expected = plain_softmax_ce(scores, labels, head)
    got = softmax_ce_run(scores, labels, head, active=False)
    onp.testing.assert_array_equal(got[0], expected[0])
    onp.testing.assert_array_equal(got[1], expected[1])


@pytest.mark.parametrize('dtype', ['int32', 'float32'])
def test_softmax_ce_clips_labels_as_pick_does(dtype):
    V = 37
    labels = np.array([-5, -1, 0, V - 1, V, 1000], dtype=dtype)
    scores = wide_scores(6, V)
    head = np.array([1.0, 0.5, 2.0, 1.0, -1.0, 3.0])
    expected = plain_softmax_ce(scores, labels, head)
    loss, grad = softmax_ce_run(scores, labels, head, True)
    onp.testing.assert_allclose(loss, expected[0], **LOSS_TOL)
    onp.testing.assert_allclose(grad, expected[1], **GRAD_TOL)
    # The one-hot term sits at the clipped label
    clipped = onp.argmin(grad / head.asnumpy()[:, None], axis=1)
    assert clipped.tolist() == [0, 0, 0, V - 1, V - 1, V - 1]


def test_softmax_ce_nan_in_a_row_gives_that_row_a_nan_loss():
    V = 29
    scores = wide_scores(6, V).asnumpy()
    labels = onp.array([4, 4, 4, 4, 4, 4], 'int32')
    scores[0, 4] = onp.nan        # at the label
    scores[2, 0] = onp.nan        # first score
    scores[3, 17] = onp.nan       # elsewhere
    scores[5, V - 1] = onp.nan    # last score
    scores, labels = np.array(scores), np.array(labels)
    head = np.ones(6)
    expected = plain_softmax_ce(scores, labels, head)
    loss, grad = softmax_ce_run(scores, labels, head, True)
    assert onp.isnan(loss).tolist() == [True, False, True, True, False,
                                        True]
    # The plain path gives a NaN loss for a NaN at the label; elsewhere
    # MXNet's `log_softmax` gives a finite loss (about 90): the compiled
    # path is stricter
    assert onp.isnan(expected[0][0])
    assert onp.isnan(grad[[0, 2, 3, 5]]).all()
    onp.testing.assert_allclose(loss[[1, 4]], expected[0][[1, 4]],
                                **LOSS_TOL)
    onp.testing.assert_allclose(grad[[1, 4]], expected[1][[1, 4]],
                                **GRAD_TOL)


def test_softmax_ce_adds_to_gradients_with_grad_req_add():
    scores = wide_scores(5, 13)
    labels = np.array([1, 2, 3, 4, 12], dtype='int32')
    head = head_weights(5)
    expected = plain_softmax_ce(scores, labels, head)
    _, grad = softmax_ce_run(scores, labels, head, True, grad_req='add',
                             times=2)
    onp.testing.assert_allclose(grad, 2 * expected[1], **GRAD_TOL)


@pytest.mark.parametrize('hybridize', [False, True])
def test_softmax_ce_fallback_equals_compiled_path(fallback_calls,
                                                  hybridize):
    V = 101
    scores = wide_scores(7, V)
    labels = np.array([0, -3, 50, 100, 200, 7, 8], dtype='int32')
    head = head_weights(7)
    expected = plain_softmax_ce(scores, labels, head)
    loss, grad = softmax_ce_run(scores, labels, head, True, hybridize)
    assert fallback_calls == ['_forward_plain', '_backward_plain']
    onp.testing.assert_allclose(loss, expected[0], **LOSS_TOL)
    onp.testing.assert_allclose(grad, expected[1], **GRAD_TOL)


def test_softmax_ce_takes_the_fallback_for_float64(compiled_calls,
                                                   plain_calls):
    scores = wide_scores(6, 23, dtype='float64')
    labels = np.array([0, 1, 2, 30, -1, 22], dtype='int32')
    head = head_weights(6).astype('float64')
    expected = plain_softmax_ce(scores, labels, head)
    loss, grad = softmax_ce_run(scores, labels, head, True)
    assert compiled_calls == []
    assert plain_calls == ['_forward_plain', '_backward_plain']
    assert loss.dtype == grad.dtype == onp.float64
    onp.testing.assert_allclose(loss, expected[0], rtol=1e-12, atol=1e-12)
    onp.testing.assert_allclose(grad, expected[1], rtol=1e-12, atol=1e-12)


# --- layer_norm ------------------------------------------------------------

def layer_norm_inputs(shape):
    """Rows of different means and spreads, one of them narrow (where
    epsilon 1e-5 matters), and a random head gradient."""
    C = shape[-1]
    X = onp.random.normal(0, 1, shape)
    X = X * onp.random.uniform(0.5, 4.0, shape[:-1] + (1,)) \
        + onp.random.uniform(-3, 3, shape[:-1] + (1,))
    X.reshape(-1, C)[0] = 2.0 + 1e-3 * onp.random.normal(0, 1, C)
    head = onp.random.normal(0, 1, shape)
    return np.array(X.astype('float32')), np.array(head.astype('float32'))


def make_layer_norm(cls, C, epsilon, gamma, beta):
    block = cls(epsilon=epsilon, in_channels=C)
    block.initialize()
    block.gamma.set_data(gamma)
    block.beta.set_data(beta)
    return block


def layer_norm_run(block, X, head, grad_req='write', times=1):
    """Output and gradients of data, gamma and beta."""
    for param in block.collect_params().values():
        param.grad_req = grad_req
        param.grad()[:] = 0
    X = X.copy()
    X.attach_grad(grad_req=grad_req)
    for _ in range(times):
        with autograd.record():
            Y = block(X)
        Y.backward(head)
    norm = block.block if isinstance(block, Traced) else block
    return [a.asnumpy() for a in (Y, X.grad, norm.gamma.grad(),
                                  norm.beta.grad())]


def layer_norm_case(shape, epsilon):
    C = shape[-1]
    X, head = layer_norm_inputs(shape)
    gamma = np.array(onp.random.uniform(-2, 2, C).astype('float32'))
    beta = np.array(onp.random.normal(0, 1, C).astype('float32'))
    plain = make_layer_norm(nn.LayerNorm, C, epsilon, gamma, beta)
    ours = Traced(make_layer_norm(LayerNorm, C, epsilon, gamma, beta), True)
    return X, head, plain, ours


def assert_layer_norm_close(got, expected):
    Y, dX, dgamma, dbeta = got
    # The forward pass is MXNet's own LayerNorm: the same bits
    onp.testing.assert_array_equal(Y, expected[0])
    onp.testing.assert_allclose(dX, expected[1], **LN_GRAD_TOL)
    onp.testing.assert_allclose(dgamma, expected[2], **LN_GRAD_TOL)
    onp.testing.assert_allclose(dbeta, expected[3], **LN_GRAD_TOL)


@pytest.mark.parametrize('hybridize', [False, True])
@pytest.mark.parametrize('epsilon', [1e-12, 1e-5])
@pytest.mark.parametrize('shape', [(9, 33), (3, 5, 32)])
def test_layer_norm_equals_nn_layer_norm(shape, epsilon, hybridize,
                                         compiled_calls):
    X, head, plain, ours = layer_norm_case(shape, epsilon)
    if hybridize:
        ours.hybridize()
    expected = layer_norm_run(plain, X, head)
    got = layer_norm_run(ours, X, head)
    assert [a.shape for a in got] == [shape, shape, shape[-1:],
                                      shape[-1:]]
    assert_layer_norm_close(got, expected)
    assert compiled_calls == ['layer_norm_backward']


def test_layer_norm_epsilon_reaches_the_operator():
    X, head, plain, ours = layer_norm_case((4, 16), 1e-5)
    ours.block._epsilon = 1e-1   # a different epsilon must show
    assert not onp.allclose(layer_norm_run(ours, X, head)[0],
                            layer_norm_run(plain, X, head)[0], atol=1e-3)


def test_layer_norm_adds_to_gradients_with_grad_req_add():
    X, head, plain, ours = layer_norm_case((6, 24), 1e-5)
    expected = layer_norm_run(plain, X, head)
    got = layer_norm_run(ours, X, head, grad_req='add', times=2)
    assert_layer_norm_close(got, [expected[0]] + [2 * a for a in
                                                  expected[1:]])


@pytest.mark.parametrize('hybridize', [False, True])
def test_layer_norm_fallback_equals_compiled_path(fallback_calls,
                                                  hybridize):
    X, head, plain, ours = layer_norm_case((2, 5, 20), 1e-12)
    if hybridize:
        ours.hybridize()
    expected = layer_norm_run(plain, X, head)
    got = layer_norm_run(ours, X, head)
    assert fallback_calls == ['_backward_plain']
    assert_layer_norm_close(got, expected)


def test_layer_norm_takes_the_fallback_for_float64(compiled_calls,
                                                   plain_calls):
    X, head, plain, ours = layer_norm_case((3, 4, 10), 1e-5)
    X, head = X.astype('float64'), head.astype('float64')
    plain.cast('float64')
    ours.cast('float64')
    expected = layer_norm_run(plain, X, head)
    got = layer_norm_run(ours, X, head)
    assert compiled_calls == [] and plain_calls == ['_backward_plain']
    assert all(a.dtype == onp.float64 for a in got)
    onp.testing.assert_array_equal(got[0], expected[0])
    for a, b in zip(got[1:], expected[1:]):
        onp.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-10)


# --- add_norm --------------------------------------------------------------

def add_norm_case(shape=(3, 5, 16), dropout=0.0, dtype='float32'):
    """An AddNorm with random gamma and beta, and inputs X, Y."""
    C = shape[-1]
    block = AddNorm(dropout)
    block.initialize()
    block.cast(dtype)
    X = np.random.normal(0, 1, size=shape).astype(dtype)
    Y = np.random.normal(1, 2, size=shape).astype(dtype)
    block(X, Y)
    block.ln.gamma.set_data(np.random.uniform(-2, 2, size=C).astype(dtype))
    block.ln.beta.set_data(np.random.normal(0, 1, size=C).astype(dtype))
    return block, X, Y


def add_norm_run(block, X, Y, active, hybridize=False, train=True):
    """Output and the gradients of X, Y, gamma and beta."""
    traced = Traced(block, active)
    traced.hybridize(active=hybridize)
    X, Y = X.copy(), Y.copy()
    X.attach_grad()
    Y.attach_grad()
    head = np.array(onp.random.RandomState(2).normal(size=X.shape),
                    dtype=X.dtype)
    with autograd.record(train_mode=train):
        out = traced(X, Y)
    out.backward(head)
    return [a.asnumpy() for a in (out, X.grad, Y.grad, block.ln.gamma.grad(),
                                  block.ln.beta.grad())]


@pytest.mark.parametrize('hybridize', [False, True])
def test_add_norm_equals_the_book_path(hybridize, compiled_calls):
    block, X, Y = add_norm_case()
    expected = add_norm_run(block, X, Y, False)
    assert not compiled_calls
    got = add_norm_run(block, X, Y, True, hybridize)
    assert compiled_calls == ['add_norm_forward', 'add_norm_backward']
    for a, b, name in zip(got, expected, ('out', 'X', 'Y', 'gamma', 'beta')):
        onp.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5, err_msg=name)


@pytest.mark.parametrize('dtype, tol', [('float64', 1e-10),
                                        ('float16', 1e-2)])
def test_add_norm_in_other_types_equals_the_book_path(dtype, tol,
                                                      compiled_calls):
    # float64 in the loops themselves; float16 through float32, to
    # float16's resolution
    block, X, Y = add_norm_case((2, 3, 8), dtype=dtype)
    expected = add_norm_run(block, X, Y, False)
    got = add_norm_run(block, X, Y, True)
    assert compiled_calls == ['add_norm_forward', 'add_norm_backward']
    assert all(a.dtype == onp.dtype(dtype) for a in got)
    for a, b in zip(got, expected):
        onp.testing.assert_allclose(a.astype('float64'), b.astype('float64'),
                                    rtol=tol, atol=tol)


def test_add_norm_dropout_follows_mxnets_seed_and_training_mode():
    p = 0.3
    block, X, Y = add_norm_case((8, 64, 32), dropout=p)
    runs = []
    for seed in (3, 3, 4):
        mx.random.seed(seed)
        runs.append(add_norm_run(block, X, Y, True))
    for a, b in zip(runs[0], runs[1]):
        onp.testing.assert_array_equal(a, b)
    assert not onp.allclose(runs[0][0], runs[2][0])
    # Y's gradient is 0 exactly where Y was dropped: a share p of 16384
    dropped = (runs[0][2] == 0).mean()
    assert abs(dropped - p) < 5 * onp.sqrt(p * (1 - p) / X.size)
    # Not training: no dropout, as on the book's path
    got = add_norm_run(block, X, Y, True, train=False)
    expected = add_norm_run(block, X, Y, False, train=False)
    for a, b in zip(got, expected):
        onp.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


def add_norm_loops(X, Y, gamma, beta, p, seed, epsilon=1e-5):
    """The compiled loops called directly: output, mean, std, factors."""
    from d2l_bert import _numba_kernels as NK
    N, C = X.shape
    drop = (onp.uint64(seed), onp.uint64(int(p * 2 ** 32)), 1 / (1 - p))
    out = onp.empty_like(X)
    mean, std = onp.empty(N), onp.empty(N)
    NK.add_norm_forward(X, Y, gamma, beta, epsilon, *drop, out, mean, std,
                        0, N)
    factors = onp.empty_like(X)
    for i in range(N):
        NK._row_dropout(*drop, i, factors[i])
    return drop, out, mean, std, factors


def test_add_norm_loops_with_dropout_give_numpys_result_and_gradient():
    # float64, so that central differences check the backward pass
    from d2l_bert import _numba_kernels as NK
    N, C, p = 6, 5, 0.4
    rng = onp.random.RandomState(0)
    X, Y, G = rng.normal(size=(N, C)), rng.normal(size=(N, C)), \
        rng.normal(size=(N, C))
    gamma, beta = rng.uniform(-2, 2, C), rng.normal(size=C)
    drop, out, mean, std, f = add_norm_loops(X, Y, gamma, beta, p, 41)
    assert set(onp.unique(f)) == {0.0, 1 / (1 - p)}
    Z = X + Y * f
    sd = onp.sqrt(Z.var(axis=1) + 1e-5)
    onp.testing.assert_allclose(mean, Z.mean(axis=1), atol=1e-12)
    onp.testing.assert_allclose(std, sd, atol=1e-12)
    onp.testing.assert_allclose(
        out, (Z - Z.mean(1, keepdims=True)) / sd[:, None] * gamma + beta,
        atol=1e-12)
    inputs = [X, Y, gamma, beta]
    grads = [onp.empty_like(X), onp.empty_like(Y), onp.zeros(C),
             onp.zeros(C)]
    NK.add_norm_backward(G, X, Y, mean, std, gamma, *drop, *grads, 0, N)

    def loss(args):
        return (G * add_norm_loops(*args, p, 41)[1]).sum()
    for k, a in enumerate(inputs):
        numeric = onp.empty_like(a)
        for idx in onp.ndindex(*a.shape):
            plus = [b.copy() for b in inputs]
            minus = [b.copy() for b in inputs]
            plus[k][idx] += 1e-6
            minus[k][idx] -= 1e-6
            numeric[idx] = (loss(plus) - loss(minus)) / 2e-6
        onp.testing.assert_allclose(grads[k], numeric, rtol=1e-6, atol=1e-7,
                                    err_msg=f'input {k}')


def test_add_norm_refuses_inputs_of_different_shapes():
    block, X, _ = add_norm_case((2, 3, 4))
    with pytest.raises(Exception, match=r'AddNorm needs X and Y of the same '
                       r'shape, got X \(2, 3, 4\) and Y \(2, 3, 5\)'):
        add_norm_run(block, X, np.ones((2, 3, 5)), True)


def _float64_row_arithmetic(kernel, args):
    """The float64 subtractions, products and divisions in `kernel`'s
    machine code for `args` (compiled afresh: numba shows no code it read
    from its cache)."""
    import re
    import numba
    from d2l_bert import _numba_kernels as NK
    fresh = numba.njit(nogil=True, fastmath=NK.FASTMATH)(kernel.py_func)
    fresh(*args)
    ir = list(fresh.inspect_llvm().values())[0]
    return re.findall(r'= (?:fsub|fmul|fdiv)(?: [a-z]+)* '
                      r'(?:double|<\d+ x double>) ', ir)


def test_layer_norm_loops_compute_float32_rows_in_float32():
    # Python's 0.0 and 1 / std are float64 in numba too: with them the
    # loops ran at half speed (AddNorm backward 7.9 against 4.2 ms on
    # 32768 x 128 rows).  Only the gamma and beta sums are float64, and
    # they only add
    from d2l_bert import _numba_kernels as NK
    N, C = 4, 8
    rng = onp.random.default_rng(0)
    X, Y, dout = [rng.standard_normal((N, C), dtype=onp.float32)
                  for _ in range(3)]
    gamma, beta = onp.ones(C, onp.float32), onp.zeros(C, onp.float32)
    out, dX, dY = [onp.empty((N, C), onp.float32) for _ in range(3)]
    mean, std = onp.zeros(N, onp.float32), onp.ones(N, onp.float32)
    acc = onp.zeros((2, C))
    drop = (onp.uint64(7), onp.uint64(2 ** 30), onp.float32(4 / 3))
    cases = {
        'add_norm_forward': (X, Y, gamma, beta, onp.float32(1e-5), *drop,
                             out, mean, std, 0, N),
        'add_norm_backward': (dout, X, Y, mean, std, gamma, *drop, dX, dY,
                              acc[0], acc[1], 0, N),
        'layer_norm_backward': (dout, X, mean, std, gamma, dX, acc[0],
                                acc[1], 0, N),
    }
    for name, args in cases.items():
        assert _float64_row_arithmetic(getattr(NK, name), args) == [], name


# --- add_embeddings --------------------------------------------------------

class AddEmbeddings(nn.HybridBlock):
    def hybrid_forward(self, F, X, Y, row):
        return K.add_embeddings(F, X, Y, row)


@pytest.mark.parametrize('hybridize', [False, True])
def test_add_embeddings_equals_the_books_sum_and_its_gradients(hybridize):
    X = np.random.normal(size=(5, 3, 4))
    Y = np.random.normal(size=(5, 3, 4))
    row = np.random.normal(size=(1, 3, 4))
    head = np.random.normal(size=(5, 3, 4))
    results = []
    for active in (False, True):
        block = Traced(AddEmbeddings(), active)
        block.hybridize(active=hybridize)
        inputs = [a.copy() for a in (X, Y, row)]
        for a in inputs:
            a.attach_grad()
        with autograd.record():
            out = block(*inputs)
        out.backward(head)
        results.append([out.asnumpy()] + [a.grad.asnumpy() for a in inputs])
    (out0, dx0, dy0, dr0), (out1, dx1, dy1, dr1) = results
    onp.testing.assert_array_equal(out1, out0)       # same sums, same order
    onp.testing.assert_array_equal(dx1, head.asnumpy())
    onp.testing.assert_array_equal(dy1, head.asnumpy())
    onp.testing.assert_allclose(dr1, head.asnumpy().sum(0, keepdims=True),
                                rtol=1e-5, atol=1e-6)
    onp.testing.assert_allclose(dr1, dr0, rtol=1e-5, atol=1e-6)


def test_add_embeddings_is_one_add_n_in_the_training_graph():
    block = Traced(AddEmbeddings(), True)
    block.hybridize()
    block(np.ones((2, 3, 4)), np.ones((2, 3, 4)), np.ones((1, 3, 4)))
    ops = [n['op'] for n in json.loads(block._cached_graph[1].tojson())
           ['nodes']]
    assert ops.count('add_n') == 1
    assert '_npi_add' not in ops


# --- self_attention --------------------------------------------------------

def attention_case(valid_lens, dropout=0.0, heads=4, T=5, D=16):
    """A transformer block with random parameters, an input and lengths."""
    block = TransformerEncoderBlock(D, 24, heads, dropout, use_bias=True)
    block.initialize()
    X = np.random.normal(size=(3, T, D))
    lens = None if valid_lens is None else np.array(valid_lens, 'float32')
    block(X, lens)                     # gives the projections their shape
    for param in block.collect_params().values():
        param.set_data(np.random.normal(0, 0.5, size=param.shape))
    return block, X, lens


def attention_run(block, X, lens, active, fused=True, hybridize=False,
                  train=True):
    """Output, input and parameter gradients, and attention weights of
    `block`, the book's path (``active=False, fused=False``) or the
    compiled one (``active=True``)."""
    block.attention.fused = fused
    traced = Traced(block, active)
    traced.hybridize(active=hybridize)
    X = X.copy()
    X.attach_grad()
    head = np.array(onp.random.RandomState(1).normal(size=X.shape)
                    .astype('float32'))
    args = (X,) if lens is None else (X, lens)
    with autograd.record(train_mode=train):
        Y = traced(*args)
    Y.backward(head)
    grads = {name: p.grad().asnumpy()
             for name, p in block.collect_params().items()}
    weights = block.attention.attention.__dict__.get('attention_weights')
    return Y.asnumpy(), X.grad.asnumpy(), grads, weights


def assert_attention_close(got, expected):
    onp.testing.assert_allclose(got[0], expected[0], rtol=1e-5, atol=1e-5)
    onp.testing.assert_allclose(got[1], expected[1], rtol=1e-4, atol=1e-5)
    assert sorted(got[2]) == sorted(expected[2])
    for name in got[2]:
        onp.testing.assert_allclose(got[2][name], expected[2][name],
                                    rtol=1e-4, atol=1e-5, err_msg=name)


@pytest.mark.parametrize('hybridize', [False, True])
@pytest.mark.parametrize('valid_lens', [None, [5, 2, 3], [5, 0, 2.5]])
def test_self_attention_equals_the_book_path(hybridize, valid_lens,
                                             compiled_calls):
    # Length 0: uniform weights, as the book's masking gives; 2.5: three
    # keys, as the book's `position < valid_len`
    block, X, lens = attention_case(valid_lens)
    expected = attention_run(block, X, lens, False, fused=False)
    assert not compiled_calls
    got = attention_run(block, X, lens, True, hybridize=hybridize)
    assert [c for c in compiled_calls if 'attention' in c] == [
        'self_attention_forward', 'self_attention_backward']
    assert_attention_close(got, expected)
    if not hybridize:
        assert got[3].shape == (3 * 4, 5, 5)
        onp.testing.assert_allclose(got[3].asnumpy(), expected[3].asnumpy(),
                                    rtol=1e-5, atol=1e-6)
    if valid_lens == [5, 0, 2.5] and not hybridize:
        weights = got[3].asnumpy().reshape(3, 4, 5, 5)
        onp.testing.assert_allclose(weights[1], 0.2, rtol=1e-6)
        assert (weights[2, :, :, 3:] == 0).all()


def test_self_attention_with_lengths_per_query_keeps_mxnets_operators(
        compiled_calls):
    block, X, _ = attention_case(None)
    lens = np.array([[1, 2, 3, 4, 5], [5, 5, 5, 5, 5], [3, 1, 4, 1, 5]],
                    'float32')
    expected = attention_run(block, X, lens, False, fused=False)
    got = attention_run(block, X, lens, True)
    assert compiled_calls and not [c for c in compiled_calls
                                   if 'attention' in c]
    assert_attention_close(got, expected)


def book_attention(qkv, lens, h):
    """Output and weights of the book's attention, from `qkv` (B, T,
    3*H) in `qkv_weight`'s layout, built from MXNet operators."""
    from d2l_bert.attention import masked_softmax
    B, T, H3 = qkv.shape
    d = H3 // (3 * h)
    x = qkv.reshape(B, T, h, 3, d)
    Q, K_, V = [x[:, :, :, k, :].transpose(0, 2, 1, 3).reshape(B * h, T, d)
                for k in range(3)]                           # (B*h, T, d)
    scores = mx.npx.batch_dot(Q, K_, transpose_b=True) / onp.sqrt(d)
    W = masked_softmax(scores, np.repeat(lens, h, axis=0))   # (B*h, T, T)
    O = mx.npx.batch_dot(W, V).reshape(B, h, T, d)
    return O.transpose(0, 2, 1, 3).reshape(B, T, h * d), W


def test_self_attention_passes_on_the_gradient_of_its_weights():
    B, T, h, d = 2, 4, 2, 3
    qkv = np.random.normal(size=(B, T, 3 * h * d))
    lens = np.array([4, 2], 'float32')
    G = np.random.normal(size=(B, T, h * d))
    R = np.random.normal(size=(B * h, T, T))
    results = []
    for attend in (lambda x: K.self_attention(mx.nd, x, lens, h, 0.0),
                   lambda x: book_attention(x, lens, h)):
        x = qkv.copy()
        x.attach_grad()
        with autograd.record():
            O, W = attend(x)
            loss = (O * G).sum() + (W * R).sum()
        loss.backward()
        results.append((O.asnumpy(), W.asnumpy(), x.grad.asnumpy()))
    for got, expected in zip(*results):
        onp.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def attention_loops(qkv, lens, h, p, seed):
    """The compiled loops called directly: weights, output, dropout
    factors."""
    from d2l_bert import _numba_kernels as NK
    B, T, H3 = qkv.shape
    d = H3 // (3 * h)
    t = qkv.dtype.type
    threshold = onp.uint64(int(p * 2 ** 32))
    args = (qkv, lens, h, t(d ** -0.5), onp.uint64(seed), threshold,
            t(1 / (1 - p)))
    P = onp.empty((B * h, T, T), qkv.dtype)
    O = onp.empty((B, T, H3 // 3), qkv.dtype)
    NK.self_attention_forward(*args, P, O, 0, B * h)
    drop = onp.stack([onp.ones((T, T), qkv.dtype) for _ in range(B * h)])
    if p > 0:
        for bh in range(B * h):
            NK.dropout_scale(onp.uint64(seed), threshold, t(1 / (1 - p)),
                             bh, T, drop[bh])
    return args, P, O, drop


def test_attention_loops_with_dropout_give_numpys_result_and_gradient():
    # float64 (the loops take any float type), so that central
    # differences check the backward pass to 1e-6
    from d2l_bert import _numba_kernels as NK
    B, T, h, d, p = 2, 5, 2, 3, 0.3
    rng = onp.random.RandomState(0)
    qkv = rng.normal(size=(B, T, 3 * h * d))
    lens = onp.array([5, 3], onp.int32)
    G = rng.normal(size=(B, T, h * d))
    R = rng.normal(size=(B * h, T, T))
    args, P, O, drop = attention_loops(qkv, lens, h, p, 777)
    assert set(onp.unique(drop)) == {0.0, 1 / (1 - p)}
    # NumPy: the book's masked softmax, the dropout factors, the product
    x = qkv.reshape(B, T, h, 3, d).transpose(0, 2, 3, 1, 4)  # (B, h, 3, T, d)
    Q, K_, V = x[:, :, 0], x[:, :, 1], x[:, :, 2]           # (B, h, T, d)
    S = Q @ K_.transpose(0, 1, 3, 2) / onp.sqrt(d)          # (B, h, T, T)
    S = onp.where(onp.arange(T) < lens[:, None, None, None], S, -1e6)
    E = onp.exp(S - S.max(-1, keepdims=True))
    W = E / E.sum(-1, keepdims=True)
    Y = (W * drop.reshape(B, h, T, T)) @ V                  # (B, h, T, d)
    onp.testing.assert_allclose(P, W.reshape(B * h, T, T), atol=1e-12)
    onp.testing.assert_allclose(
        O, Y.transpose(0, 2, 1, 3).reshape(B, T, h * d), atol=1e-12)

    def f(q):
        _, P2, O2, _ = attention_loops(q, lens, h, p, 777)
        return (G * O2).sum() + (R * P2).sum()
    dqkv = onp.empty_like(qkv)
    NK.self_attention_backward(*args, P, G, R, dqkv, 0, B * h)
    numeric = onp.empty_like(qkv)
    for idx in onp.ndindex(*qkv.shape):
        plus, minus = qkv.copy(), qkv.copy()
        plus[idx] += 1e-6
        minus[idx] -= 1e-6
        numeric[idx] = (f(plus) - f(minus)) / 2e-6
    onp.testing.assert_allclose(dqkv, numeric, rtol=1e-6, atol=1e-7)


def test_dropout_mask_keeps_one_minus_p_and_depends_on_the_seed():
    from d2l_bert import _numba_kernels as NK
    T, p = 64, 0.2
    threshold = onp.uint64(int(p * 2 ** 32))
    masks = {}
    for seed in (1, 2):
        m = onp.empty((256, T, T), onp.float32)
        for bh in range(256):
            NK.dropout_scale(onp.uint64(seed), threshold, onp.float32(1.25),
                             bh, T, m[bh])
        masks[seed] = m
    for m in masks.values():
        assert set(onp.unique(m)) == {0.0, 1.25}
        # 1M draws: the dropped share within 5 standard deviations
        assert abs((m == 0).mean() - p) < 5 * onp.sqrt(p * (1 - p) / m.size)
    assert 0.3 < (masks[1] != masks[2]).mean() < 0.34   # 2 p (1 - p)


def test_self_attention_dropout_follows_mxnets_seed_and_training_mode():
    block, X, lens = attention_case([5, 2, 3], dropout=0.5)
    runs = []
    for seed in (3, 3, 4):
        mx.random.seed(seed)
        runs.append(attention_run(block, X, lens, True))
    onp.testing.assert_array_equal(runs[0][0], runs[1][0])
    onp.testing.assert_array_equal(runs[0][1], runs[1][1])
    assert not onp.allclose(runs[0][0], runs[2][0])
    # Not training: no dropout, as on the book's path
    got = attention_run(block, X, lens, True, train=False)
    expected = attention_run(block, X, lens, False, fused=False, train=False)
    assert_attention_close(got, expected)


# --- Rows split among threads ----------------------------------------------

@pytest.mark.parametrize('N', [1, 2, 7])
def test_threads_give_the_results_of_one_chunk(monkeypatch, N):
    V, C = 19, 12
    scores = wide_scores(N, V)
    labels = np.array(onp.random.randint(0, V, N).astype('int32'))
    head = head_weights(N)
    X, ln_head, _, ours = layer_norm_case((N, C), 1e-5)
    results, attention, add_norm = {}, {}, {}
    block, A, lens = attention_case([5, 2, 3], dropout=0.5)
    an_block, AX, AY = add_norm_case((N, 3, 12), dropout=0.5)
    for threads in (1, 3):
        monkeypatch.setattr(K, '_threads', lambda: threads)
        assert len(K._split(N)) == min(threads, N)
        results[threads] = (softmax_ce_run(scores, labels, head, True),
                            layer_norm_run(ours, X, ln_head))
        mx.random.seed(5)
        attention[threads] = attention_run(block, A, lens, True)[:2]
        mx.random.seed(5)
        add_norm[threads] = add_norm_run(an_block, AX, AY, True)
    # Each (example, head) pair in one thread, the mask from its position
    for a, b in zip(attention[1], attention[3]):
        onp.testing.assert_array_equal(a, b)
    # AddNorm: each row in one thread, the mask from its position
    for a, b in zip(add_norm[1][:3], add_norm[3][:3]):
        onp.testing.assert_array_equal(a, b)
    for a, b in zip(add_norm[1][3:], add_norm[3][3:]):
        onp.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
    (ce1, ln1), (ce3, ln3) = results[1], results[3]
    # Row by row, the same arithmetic: the same bits
    for a, b in zip(ce1 + tuple(ln1[:2]), ce3 + tuple(ln3[:2])):
        onp.testing.assert_array_equal(a, b)
    # gamma and beta: per-chunk sums added up
    onp.testing.assert_allclose(ln1[2], ln3[2], rtol=1e-6, atol=1e-7)
    onp.testing.assert_allclose(ln1[3], ln3[3], rtol=1e-6, atol=1e-7)


def test_split_covers_every_row_once(monkeypatch):
    monkeypatch.setattr(K, '_threads', lambda: 3)
    for N in (1, 2, 3, 5, 100):
        chunks = K._split(N)
        assert chunks[0][0] == 0 and chunks[-1][1] == N
        assert all(r0 < r1 for r0, r1 in chunks)
        assert all(a[1] == b[0] for a, b in zip(chunks, chunks[1:]))


# --- The pretraining step --------------------------------------------------

def batch_shards(tiny_batch, num_shards=1):
    tokens, segments, valid_lens, pred_positions = tiny_batch
    mlm_weights = np.array([[1, 1, 1], [1, 1, 0], [1, 0, 0]], 'float32')
    mlm_Y = np.random.randint(0, TINY['vocab_size'], (3, 3)).astype('int32')
    nsp_y = np.array([0, 1, 1], 'float32')
    batch = (tokens, segments, valid_lens, pred_positions, mlm_weights,
             mlm_Y, nsp_y)
    if num_shards == 1:
        return [[a] for a in batch]
    devices = [mx.cpu(k) for k in range(num_shards)]
    return [gluon.utils.split_and_load(a, devices, even_split=False)
            for a in batch]


def make_net(tiny_batch, devices=(mx.cpu(),), **kwargs):
    net = BERTModel(**TINY, **kwargs)
    net.initialize(ctx=list(devices))
    net(*[a.as_in_ctx(devices[0]) for a in tiny_batch])
    for param in net.collect_params().values():
        param.set_data(np.random.normal(0, 0.2, size=param.shape))
    return net


def make_graph(net, use_kernels, loss=None):
    graph = P._BatchLossBERT(net, loss or gluon.loss.SoftmaxCELoss(),
                             TINY['vocab_size'], use_kernels=use_kernels)
    graph.hybridize(static_alloc=True, static_shape=True)
    return graph


def step(graph, shard):
    """Losses and every parameter's gradient (per context) of a shard."""
    with autograd.record():
        losses = graph(*shard)
    losses[2].backward()
    params = graph.net._collect_params_with_prefix()
    return ([float(x) for x in losses],
            {name: [g.asnumpy() for g in p.list_grad()]
             for name, p in params.items() if p.grad_req != 'null'})


def assert_steps_close(got, expected):
    onp.testing.assert_allclose(got[0], expected[0], rtol=1e-5)
    assert sorted(got[1]) == sorted(expected[1])
    for name in got[1]:
        for a, b in zip(got[1][name], expected[1][name]):
            onp.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5,
                                        err_msg=name)


def graph_json(graph):
    return graph._cached_graph[1].tojson()


def custom_ops(graph):
    """The `op_type` of every custom operator in the traced graph."""
    nodes = json.loads(graph_json(graph))['nodes']
    return sorted(n['attrs']['op_type'] for n in nodes
                  if n['op'] == 'Custom')


def num_layer_norms(net):
    count = []
    net.apply(lambda b: count.append(1) if isinstance(b, LayerNorm)
              else None)
    return len(count)


@pytest.mark.parametrize('kwargs', [{}, dict(epsilon=1e-12,
                                             embedding_norm=True)])
def test_pretraining_step_with_kernels_equals_without(tiny_batch, kwargs):
    net = make_net(tiny_batch, **kwargs)
    shard = [a[0] for a in batch_shards(tiny_batch)]
    plain, fast = make_graph(net, False), make_graph(net, True)
    expected = step(plain, shard)
    got = step(fast, shard)
    assert plain._kernels_on is False and fast._kernels_on is True
    assert 'Custom' not in graph_json(plain)
    # Two AddNorm per block, each one operator; the other LayerNorms
    # (the MLM head's, the embeddings') get the LayerNorm kernel
    add_norms = 2 * TINY['num_blks']
    assert custom_ops(fast) == (['d2l_bert_add_norm'] * add_norms
                                + ['d2l_bert_layer_norm']
                                * (num_layer_norms(net) - add_norms)
                                + ['d2l_bert_self_attention']
                                * TINY['num_blks']
                                + ['d2l_bert_softmax_ce'])
    assert_steps_close(got, expected)


def test_pretraining_step_keeps_a_weighted_loss(tiny_batch):
    # A loss with a weight is not the plain `SoftmaxCELoss`: it is
    # kept; the LayerNorms still get their kernel
    net = make_net(tiny_batch)
    shard = [a[0] for a in batch_shards(tiny_batch)]
    loss = gluon.loss.SoftmaxCELoss(weight=0.5)
    expected = step(make_graph(net, False, loss), shard)
    fast = make_graph(net, True, loss)
    got = step(fast, shard)
    assert 'd2l_bert_softmax_ce' not in custom_ops(fast)
    assert 'd2l_bert_layer_norm' in custom_ops(fast)
    assert_steps_close(got, expected)


def test_two_cpu_contexts_with_kernels_equal_one(tiny_batch,
                                                 compiled_calls):
    devices = [mx.cpu(0), mx.cpu(1)]
    net2 = make_net(tiny_batch, devices)
    net1 = make_net(tiny_batch)
    for name, param in net1._collect_params_with_prefix().items():
        param.set_data(
            net2._collect_params_with_prefix()[name].data(mx.cpu(0)))
    shards = batch_shards(tiny_batch, num_shards=2)
    batch_loss = P._batch_loss_function(net2, gluon.loss.SoftmaxCELoss(),
                                        TINY['vocab_size'])
    with autograd.record():
        mlm_ls, nsp_ls, ls = batch_loss(*shards)
    autograd.backward(ls)
    mx.nd.waitall()
    # One loss per shard, on its own context
    assert compiled_calls.count('softmax_ce_backward') == 2
    assert [l.context for l in ls] == devices
    got_grads = {name: [g.asnumpy() for g in p.list_grad()]
                 for name, p in net2._collect_params_with_prefix().items()
                 if p.grad_req != 'null'}
    one = make_graph(net1, True)
    for k in range(2):
        shard = [a[k].as_in_ctx(mx.cpu(0)) for a in shards]
        expected = step(one, shard)
        assert one._kernels_on
        got = ([float(x[k]) for x in (mlm_ls, nsp_ls, ls)],
               {name: [g[k]] for name, g in got_grads.items()})
        assert_steps_close(got, expected)


def test_kernels_stay_out_when_the_environment_says_0(tiny_batch,
                                                      monkeypatch):
    monkeypatch.setenv('D2L_BERT_KERNELS', '0')
    monkeypatch.setattr(K, '_available', None)
    assert not K.available()
    net = make_net(tiny_batch)
    graph = make_graph(net, True)
    step(graph, [a[0] for a in batch_shards(tiny_batch)])
    assert graph._kernels_on is False
    assert 'Custom' not in graph_json(graph)
    # Back on: the graph is traced again, with the kernels
    monkeypatch.setenv('D2L_BERT_KERNELS', '1')
    step(graph, [a[0] for a in batch_shards(tiny_batch)])
    assert graph._kernels_on is True
    assert 'd2l_bert_softmax_ce' in custom_ops(graph)


def test_exported_model_has_no_custom_operator(tiny_batch, tmp_path):
    net = make_net(tiny_batch, epsilon=1e-12, embedding_norm=True)
    graph = make_graph(net, True)
    step(graph, [a[0] for a in batch_shards(tiny_batch)])
    assert 'd2l_bert_layer_norm' in custom_ops(graph)
    assert not K.in_training_graph()
    net.hybridize()
    net(*tiny_batch)
    net.export(str(tmp_path / 'bert'))
    with open(tmp_path / 'bert-symbol.json') as f:
        exported = f.read()
    assert 'Custom' not in exported
    assert 'LayerNorm' in exported


def test_training_graph_is_restored_after_an_error():
    with pytest.raises(ZeroDivisionError):
        with K.training_graph():
            assert K.in_training_graph()
            with K.training_graph(False):
                assert not K.in_training_graph()
            assert K.in_training_graph()
            1 / 0
    assert not K.in_training_graph()


def test_training_graph_is_thread_local():
    seen = []
    with K.training_graph():
        thread = threading.Thread(
            target=lambda: seen.append(K.in_training_graph()))
        thread.start()
        thread.join()
    assert seen == [False]


# --- Availability ----------------------------------------------------------

def test_unavailable_kernels_warn_with_the_reason(monkeypatch, tiny_batch):
    def broken():
        raise RuntimeError('a compiled loop gave a wrong result')
    monkeypatch.delenv('D2L_BERT_KERNELS', raising=False)
    monkeypatch.setattr(K, '_smoke_test', broken)
    monkeypatch.setattr(K, '_available', None)
    with pytest.warns(RuntimeWarning, match='not available .RuntimeError: '
                      'a compiled loop gave a wrong result'):
        assert K.available() is False
    assert K.available() is False   # decided once
    graph = make_graph(make_net(tiny_batch), True)
    step(graph, [a[0] for a in batch_shards(tiny_batch)])
    assert graph._kernels_on is False
    assert 'Custom' not in graph_json(graph)


def test_smoke_test_passes_here():
    K._smoke_test()


def test_describe_says_whether_the_kernels_run(monkeypatch):
    assert K.describe().startswith(
        'compiled attention, AddNorm, LayerNorm and MLM-loss loops: on (numba ')
    assert 'off on a GPU' in K.describe([mx.cpu(), mx.gpu(0)])
    monkeypatch.setenv('D2L_BERT_KERNELS', '0')
    assert K.describe().endswith('off (D2L_BERT_KERNELS=0)')


def test_loops_run_in_the_calling_thread_once_the_pool_refuses_work(
        monkeypatch):
    # At interpreter exit the thread pool refuses new work while MXNet may
    # still run a pending step: the rows are then done in the caller
    scores = wide_scores(5, 7)
    labels = np.array([0, 1, 2, 3, 4], dtype='int32')
    head = np.ones(5)
    expected = softmax_ce_run(scores, labels, head, True)
    monkeypatch.setattr(K, '_threads', lambda: 2)
    K._run(lambda *a: None, 4)               # make sure the pool exists
    ran = []

    def refuse(*args, **kwargs):
        ran.append(1)
        raise RuntimeError('cannot schedule new futures after interpreter '
                           'shutdown')
    monkeypatch.setattr(K._pool, 'submit', refuse)
    got = softmax_ce_run(scores, labels, head, True)
    assert ran                               # the pool was asked, refused
    for a, b in zip(got, expected):
        onp.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


_EXIT_SCRIPT = """
import sys
import mxnet as mx
import d2l_bert  # noqa: F401

class Mark(mx.operator.CustomOp):
    def forward(self, is_train, req, in_data, out_data, aux):
        with open(sys.argv[1], 'w') as f:
            f.write('ran')
        self.assign(out_data[0], req[0], in_data[0])

@mx.operator.register('exit_test_mark')
class MarkProp(mx.operator.CustomOpProp):
    def create_operator(self, ctx, shapes, dtypes):
        return Mark()

X = mx.nd.ones((1500, 1500)) / 1500
for _ in range(10):
    X = mx.nd.dot(X, X)          # queued work, still running at exit
mx.nd.Custom(X, op_type='exit_test_mark')
print('queued', flush=True)
"""


def test_a_custom_operator_queued_at_exit_runs_and_the_process_ends(
        tmp_path):
    # MXNet's exit handler stops the custom operators' threads before it
    # waits for the engine: a custom operator still queued behind other
    # work was dropped, or the process aborted or hung (a script ending
    # right after `l.backward(); trainer.step(1)`).  d2l_bert's handler
    # lets the queue drain first
    script, mark = tmp_path / 'exit.py', tmp_path / 'mark'
    script.write_text(_EXIT_SCRIPT)
    done = subprocess.run([sys.executable, str(script), str(mark)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == 'queued'
    assert mark.read_text() == 'ran'


def test_scipys_openblas_gets_one_thread_for_the_attention_loops():
    libs = K._single_threaded_blas()
    if not libs:
        pytest.skip('this SciPy has no OpenBLAS of its own')
    assert all(lib.openblas_get_num_threads() == 1 for lib in libs)


def _new_python(code, unset=(), environ=None):
    """The lines a new Python prints running `code`, with the variables
    `unset` taken out of this environment and `environ` added."""
    env = {k: v for k, v in os.environ.items() if k not in unset}
    env.update(environ or {})
    done = subprocess.run([sys.executable, '-c', code], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.splitlines()


@pytest.mark.skipif(not os.path.exists('/proc/self/maps'),
                    reason='needs Linux to see which libraries are loaded')
def test_libgomp_is_loaded_after_d2l_bert_shortens_its_spin():
    # libgomp reads GOMP_SPINCOUNT once, when `import mxnet` loads it
    loaded, line = _new_python(
        'import os\n'
        "def gomp(): return 'libgomp' in open('/proc/self/maps').read()\n"
        'before = gomp()\nimport d2l_bert\n'
        "print(before, gomp(), os.environ['GOMP_SPINCOUNT'])\n"
        'print(d2l_bert.OPENMP_SPIN)',
        unset=('GOMP_SPINCOUNT', 'OMP_WAIT_POLICY'))
    assert loaded == 'False True 1000'
    assert line.startswith('OpenMP idle threads: sleep after 1000 spins')


def _blas_kernels_in_a_new_process(environ, imports):
    """The kernels SciPy's OpenBLAS runs in a new Python that imports
    `imports` first, then d2l_bert, and the kernels line."""
    return _new_python(
        f'{imports}\nimport d2l_bert\nfrom d2l_bert import _kernels\n'
        'print(_kernels.blas_kernels())\nprint(d2l_bert.BLAS_KERNELS)',
        unset=('OPENBLAS_CORETYPE',), environ=environ)


@pytest.mark.skipif(not K._scipy_openblas(),
                    reason='this SciPy has no OpenBLAS of its own')
def test_importing_d2l_bert_first_gives_openblas_its_avx512_kernels():
    kernels, line = _blas_kernels_in_a_new_process({}, '')
    if not _threads.avx512():
        assert line == "OpenBLAS kernels: OpenBLAS's own choice (no " \
                       "AVX-512 here)"
        pytest.skip('no AVX-512 on this CPU: nothing to choose')
    assert kernels == 'SkylakeX'
    assert line.startswith('OpenBLAS kernels: SkylakeX (AVX-512')


@pytest.mark.skipif(not K._scipy_openblas(),
                    reason='this SciPy has no OpenBLAS of its own')
def test_the_environments_openblas_kernels_are_kept():
    kernels, line = _blas_kernels_in_a_new_process(
        {'OPENBLAS_CORETYPE': 'Sandybridge'}, '')
    assert kernels == 'Sandybridge'
    assert line == ('OpenBLAS kernels: Sandybridge (OPENBLAS_CORETYPE '
                    'from the environment)')


@pytest.mark.skipif(not K._scipy_openblas() or not _threads.avx512(),
                    reason='needs SciPy with OpenBLAS and an AVX-512 CPU')
def test_too_late_for_avx512_kernels_once_mxnet_is_imported():
    kernels, line = _blas_kernels_in_a_new_process({}, 'import mxnet')
    assert kernels != 'SkylakeX'
    assert 'it was loaded before d2l_bert could ask' in line
