"""The attention switch (`d2l_bert.fast.attention_path`): each twin block
names one path, chosen once when it is built, and every path computes
the book's `MultiHeadAttention`, a sequence of valid length 0 included
(uniform weights over all keys, as the book's `masked_softmax` gives).
"""
import mxnet as mx
import pytest
from mxnet import autograd, np

from d2l_bert.book.attention import MultiHeadAttention, masked_softmax
from d2l_bert.fast import _ops, attention_path, blocks

from helpers import REORDERED, assert_close, kernel_params

KERNELS = kernel_params()


def book_attention(num_hiddens=16, num_heads=4, dropout=0.0):
    """The book's block, every weight random, its shapes known."""
    attention = MultiHeadAttention(num_hiddens, num_heads, dropout,
                                   use_bias=True)
    attention.initialize()
    X = np.random.normal(size=(3, 5, num_hiddens))
    attention(X, X, X, None)
    for param in attention.collect_params().values():
        param.set_data(np.random.normal(0, 0.3, size=param.shape))
    return attention


@pytest.mark.parametrize('kernels, inference, expected', [
    (False, False, 'interleaved'), (False, True, 'interleaved'),
    (True, False, 'compiled'), (True, True, 'compiled_inference')])
def test_choose_attention_names_one_registered_path(kernels, inference,
                                                    expected):
    attention = book_attention()
    path = attention_path.choose_attention(attention, kernels, inference)
    assert path == expected
    assert path in attention_path.ATTENTION
    twin = blocks.FastSelfAttention(attention, kernels, inference)
    assert twin.path == expected
    assert twin.implementation is attention_path.ATTENTION[expected]


def test_a_dropout_over_axes_keeps_mxnets_operators():
    attention = book_attention()
    attention.attention.dropout._axes = (1,)
    assert attention_path.choose_attention(attention, True) == 'interleaved'


def test_only_the_compiled_training_path_reads_query_lens():
    assert [name for name in attention_path.ATTENTION
            if attention_path.reads_query_lens(name)] == ['compiled']


def test_use_kernels_takes_the_callers_choice_else_asks_the_runtime():
    cpu = [mx.cpu()]
    assert attention_path.use_kernels(cpu, True) is True
    assert attention_path.use_kernels(cpu, 0) is False
    assert attention_path.use_kernels(cpu) == _ops.usable(cpu)


@pytest.mark.parametrize('valid_lens', [[5, 0, 2], [0, 0, 0]])
def test_masked_softmax_of_scores_is_the_books_with_its_gradient(
        valid_lens):
    # (B*h, T, T) scores of B = 3 sequences, h = 2 heads; a length of 0
    # gives uniform weights over the T keys in the book
    h, T = 2, 5
    scores = np.random.normal(0, 3, size=(3 * h, T, T))
    lens = np.array(valid_lens, dtype='float32')
    head_grad = np.random.normal(size=scores.shape)
    results = []
    for softmax in (
            lambda S: masked_softmax(S, np.repeat(lens, h, axis=0)),
            lambda S: attention_path.masked_softmax_of_scores(
                mx.nd, S, lens, h)):
        S = scores.copy()
        S.attach_grad()
        with autograd.record():
            weights = softmax(S)                             # (B*h, T, T)
            (weights * head_grad).sum().backward()
        results.append((weights, S.grad))
    (book_weights, book_grad), (weights, grad) = results
    assert weights.shape == (3 * h, T, T)
    assert_close(weights, book_weights, REORDERED)
    assert_close(grad, book_grad, REORDERED)
    for b, n in enumerate(valid_lens):
        if n == 0:
            assert_close(weights[b * h:(b + 1) * h],
                         np.full((h, T, T), 1 / T), REORDERED)


@pytest.mark.parametrize('kernels', KERNELS)
@pytest.mark.parametrize('inference', [False, True],
                         ids=['training', 'inference'])
def test_every_path_gives_the_books_output_at_length_0(kernels, inference):
    attention = book_attention()
    X = np.random.normal(size=(3, 5, 16))
    lens = np.array([5, 0, 2], dtype='float32')
    expected = attention(X, X, X, lens)                      # (3, 5, 16)
    twin = blocks.FastSelfAttention(attention, kernels, inference)
    twin.hybridize()
    with autograd.predict_mode():
        output = twin(X, lens)                               # (3, 5, 16)
    assert output.shape == (3, 5, 16)
    assert_close(output, expected, REORDERED)
