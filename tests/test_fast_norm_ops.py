"""The operators of the twins' normalizations and embedding sum
(`d2l_bert.fast._norm_ops`) against the book's arithmetic, written out
with MXNet's operators: outputs within `REORDERED`, gradients within
`GRADIENTS`, float32, dropout off.  Without the compiled loops the
LayerNorm operator's backward pass takes MXNet's operators; with them,
the loops.
"""
import mxnet as mx
import pytest
from mxnet import autograd, np, npx

from d2l_bert.fast import _norm_ops, _ops

from helpers import GRADIENTS, REORDERED, assert_close

needs_loops = pytest.mark.skipif(
    not _ops.available(), reason='numba is missing or cannot compile here')


def gradients(f, *arrays, head_grad):
    """`f(*arrays)` and the gradients of ``sum(f(...) * head_grad)``."""
    arrays = [a.copy() for a in arrays]
    for a in arrays:
        a.attach_grad()
    with autograd.record():
        out = f(*arrays)
        (out * head_grad).sum().backward()
    return out, [a.grad for a in arrays]


def book_add_norm(X, Y, gamma, beta):
    """`AddNorm` with dropout off: ``LayerNorm(Y + X)``."""
    return npx.layer_norm(Y + X, gamma, beta, axis=-1, eps=1e-5)


def test_layer_norm_gives_the_books_numbers_and_gradients():
    X = np.random.normal(0, 2, size=(2, 3, 8))
    gamma, beta = np.random.normal(size=(8,)), np.random.normal(size=(8,))
    head_grad = np.random.normal(size=(2, 3, 8))
    ours = gradients(lambda *a: _norm_ops.layer_norm(mx.nd, *a, 1e-5),
                     X, gamma, beta, head_grad=head_grad)
    book = gradients(lambda X, g, b: npx.layer_norm(X, g, b, axis=-1,
                                                    eps=1e-5),
                     X, gamma, beta, head_grad=head_grad)
    assert ours[0].shape == (2, 3, 8)
    assert_close(ours[0], book[0], REORDERED)
    for a, b in zip(ours[1], book[1]):
        assert_close(a, b, GRADIENTS)


@needs_loops
def test_add_norm_gives_the_books_numbers_and_gradients():
    X, Y = (np.random.normal(size=(2, 3, 8)) for _ in range(2))
    gamma, beta = np.random.normal(size=(8,)), np.random.normal(size=(8,))
    head_grad = np.random.normal(size=(2, 3, 8))
    ours = gradients(lambda *a: _norm_ops.add_norm(mx.nd, *a, 1e-5, 0.0),
                     X, Y, gamma, beta, head_grad=head_grad)
    book = gradients(book_add_norm, X, Y, gamma, beta, head_grad=head_grad)
    assert ours[0].shape == (2, 3, 8)
    assert_close(ours[0], book[0], REORDERED)
    for a, b in zip(ours[1], book[1]):
        assert_close(a, b, GRADIENTS)


def test_add_norm_names_both_shapes_when_they_differ():
    X, Y = np.ones((2, 3, 8)), np.ones((2, 4, 8))
    with pytest.raises(ValueError, match=r'AddNorm needs X and Y of the '
                       r'same shape, got X \(2, 3, 8\) and Y \(2, 4, 8\)'):
        _norm_ops.add_norm(mx.nd, X, Y, np.ones(8), np.zeros(8), 1e-5, 0.0)


def test_add_embeddings_sums_in_the_books_order_with_its_gradients():
    # the book's `X = token + segment; X = X + pos[:, :T, :]`
    X, Y = (np.random.normal(size=(3, 4, 8)) for _ in range(2))
    row = np.random.normal(size=(1, 4, 8))
    head_grad = np.random.normal(size=(3, 4, 8))
    ours = gradients(lambda *a: _norm_ops.add_embeddings(mx.nd, *a),
                     X, Y, row, head_grad=head_grad)
    book = gradients(lambda X, Y, row: (X + Y) + row, X, Y, row,
                     head_grad=head_grad)
    assert ours[0].shape == (3, 4, 8)
    assert_close(ours[0], book[0], REORDERED)
    assert ours[1][2].shape == (1, 4, 8)
    for a, b in zip(ours[1], book[1]):
        assert_close(a, b, GRADIENTS)
