"""The compiled training attention's operator
(`d2l_bert.fast._attention_ops`) against the book's `MultiHeadAttention`:
its weights (B*h, T, T) and, through `W_o`, its output, within
`REORDERED`; and the count of valid keys it gives the loops.
"""
import mxnet as mx
import numpy as onp
import pytest
from mxnet import np

from d2l_bert.book.attention import MultiHeadAttention
from d2l_bert.fast import _attention_ops, _ops, blocks

from helpers import REORDERED, assert_close

needs_loops = pytest.mark.skipif(
    not _ops.available(), reason='numba is missing or cannot compile here')


def test_key_counts_round_each_length_up_within_the_sequence():
    # key j is valid when j < valid_len, as in the book's `masked_softmax`
    lens = mx.nd.array([2.2, -1, 9, 0, 5])
    counts = _attention_ops.key_counts(lens, 5, 5)
    assert counts.dtype == onp.int32
    assert counts.tolist() == [3, 0, 5, 0, 5]
    assert _attention_ops.key_counts(None, 2, 7).tolist() == [7, 7]


@needs_loops
@pytest.mark.parametrize('valid_lens', [None, [5, 2, 1]])
def test_compiled_attention_weights_equal_the_books(valid_lens):
    # The book's `attention_weights` (B*h, T, T), batch-major then head,
    # against what the compiled attention computes from the fused
    # projection; then its output through `W_o` against the book's
    attention = MultiHeadAttention(16, 4, 0.0, use_bias=True)
    attention.initialize()
    X = np.random.normal(size=(3, 5, 16))
    lens = None if valid_lens is None else np.array(valid_lens, 'float32')
    attention(X, X, X, lens)
    for param in attention.collect_params().values():
        param.set_data(np.random.normal(0, 0.3, size=param.shape))
    book_out = attention(X, X, X, lens)                      # (3, 5, 16)
    book_weights = attention.attention.attention_weights     # (12, 5, 5)
    twin = blocks.FastSelfAttention(attention, kernels=True)
    weight, bias = twin.qkv_weight(mx.nd, X)
    qkv = mx.nd.npx.fully_connected(X, weight, bias, num_hidden=48,
                                    flatten=False)           # (3, 5, 48)
    out, weights = _attention_ops.self_attention(mx.nd, qkv, lens, 4,
                                                 0.0)
    assert weights.shape == book_weights.shape == (12, 5, 5)
    assert_close(weights, book_weights, REORDERED)
    if valid_lens is not None:  # no weight past a sequence's length
        assert float(abs(weights[4:8, :, 2:]).max()) == 0
    assert_close(attention.W_o(out), book_out, REORDERED)
