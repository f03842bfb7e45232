"""The MLM loss's operator (`d2l_bert.fast._loss_ops.softmax_ce`) against
Gluon's `SoftmaxCELoss`: the per-row loss within `REORDERED` and its
gradient within `GRADIENTS`, with the compiled loops and, for arrays
they do not serve (float64), MXNet's operators.
"""
import mxnet as mx
import pytest
from mxnet import autograd, gluon, np

from d2l_bert.fast import _loss_ops

from helpers import GRADIENTS, REORDERED, assert_close


@pytest.mark.parametrize('dtype', ['float32', 'float64'])
def test_softmax_ce_is_gluons_loss_with_its_gradient(dtype):
    scores = np.random.normal(0, 3, size=(6, 11)).astype(dtype)  # (N, V)
    labels = np.array([0, 3, 10, 7, 7, 2], dtype='int32')       # (N,)
    head_grad = np.random.normal(size=(6,)).astype(dtype)
    results = []
    for loss in (lambda S: _loss_ops.softmax_ce(mx.nd, S, labels),
                 lambda S: gluon.loss.SoftmaxCELoss()(S, labels)):
        S = scores.copy()
        S.attach_grad()
        with autograd.record():
            value = loss(S)                                  # (N,)
            (value * head_grad).sum().backward()
        results.append((value, S.grad))
    (ours, our_grad), (book, book_grad) = results
    assert ours.shape == (6,)
    assert_close(ours, book, REORDERED)
    assert_close(our_grad, book_grad, GRADIENTS)
