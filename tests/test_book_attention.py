"""Tests of d2l_bert.book.attention: parity with d2l 1.0.3, including
gradients through the mask.  The fast twin of the self-attention is
tested against these blocks in test_fast_blocks.py."""
import mxnet as mx
import numpy as onp
import pytest
from d2l import mxnet as d2l
from mxnet import autograd, np

from d2l_bert import DotProductAttention, MultiHeadAttention, masked_softmax

from helpers import EXACT, assert_close, copy_params


@pytest.mark.parametrize('valid_lens', [None, [2, 3], [[1, 3, 2], [4, 0, 1]]])
def test_masked_softmax_and_its_gradient_equal_d2l(valid_lens):
    X = np.random.normal(size=(2, 3, 4))
    weights = np.random.normal(size=(2, 3, 4))
    lens = None if valid_lens is None else np.array(valid_lens, 'float32')
    results = []
    for fn in (masked_softmax, d2l.masked_softmax):
        X.attach_grad()
        with autograd.record():
            Y = fn(X, lens)
            (Y * weights).sum().backward()
        results.append((Y, X.grad.copy()))
    assert_close(results[0][0], results[1][0])
    # A scalar `np.where` once gave wrong gradients here
    assert_close(results[0][1], results[1][1])


def test_masked_softmax_zeroes_positions_past_valid_lens():
    Y = masked_softmax(np.random.normal(size=(2, 2, 5)), np.array([2, 4]))
    # zero, or on aarch64 below float32's smallest normal number: MXNet's
    # aarch64 softmax computes exp(-1e6) as about 8.7e-39 (its exp clamps
    # its argument where float32 stops being normal), x86-64's as 0
    tiny = float(onp.finfo(onp.float32).tiny)
    assert 0 <= float(Y[0, :, 2:].max()) < tiny
    assert 0 <= float(Y[1, :, 4:].max()) < tiny
    onp.testing.assert_allclose(Y.sum(axis=-1).asnumpy(), onp.ones((2, 2)),
                                atol=1e-6)


def test_dot_product_attention_equals_d2l():
    queries = np.random.normal(size=(2, 3, 8))
    keys = np.random.normal(size=(2, 5, 8))
    values = np.random.normal(size=(2, 5, 6))
    valid_lens = np.array([2, 5])
    ours, ref = DotProductAttention(0.0), d2l.DotProductAttention(0.0)
    ours.initialize()
    assert_close(ours(queries, keys, values, valid_lens),
                 ref(queries, keys, values, valid_lens))
    assert_close(ours.attention_weights, ref.attention_weights)


@pytest.mark.parametrize('valid_lens', [None, [3, 2], [[1, 3, 4, 2],
                                                    [4, 0, 1, 3]]])
def test_multi_head_attention_equals_d2l(valid_lens):
    ours = MultiHeadAttention(16, 4, 0.0, use_bias=True)
    ref = d2l.MultiHeadAttention(16, 4, 0.0, use_bias=True)
    for net in (ours, ref):
        net.initialize(mx.init.Normal(0.3))
    X = np.random.normal(size=(2, 4, 16))
    lens = None if valid_lens is None else np.array(valid_lens)
    ours(X, X, X, lens)
    ref(X, X, X, lens)
    copy_params(ours, ref)
    assert_close(ours(X, X, X, lens), ref(X, X, X, lens))


def test_transpose_qkv_round_trips():
    attention = MultiHeadAttention(12, 3, 0.0)
    X = np.random.normal(size=(2, 5, 12))
    heads = attention.transpose_qkv(X)
    assert heads.shape == (6, 5, 4)
    assert_close(heads[1], X[0, :, 4:8])  # head 1 of example 0
    assert_close(attention.transpose_output(heads), X, EXACT)
