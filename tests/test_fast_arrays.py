"""d2l_bert.fast.arrays: `quick_arrays()` gives the arrays MXNet's
`np.array` gives, and leaves to it what it does not take."""
import random

import mxnet as mx
import numpy as onp
import pytest
from mxnet import np, npx

from d2l_bert.book import dataset as D
from d2l_bert.fast import arrays
from helpers import write_small_corpus

npx.set_np()


@pytest.fixture(autouse=True)
def mxnets_own_after():
    yield
    arrays.undo()
    assert np.array is arrays.ORIGINAL


def same(a, b):
    return (type(a) is type(b) and a.dtype == b.dtype and a.shape == b.shape
            and a.ctx == b.ctx and onp.array_equal(a.asnumpy(), b.asnumpy()))


# what `_pad_bert_inputs` passes, and more
INPUTS = [
    ([5, 7, 0, 0], 'int32'), ([0, 1, 1, 0], None), (3, 'float32'),
    (1, None), (True, None), (False, 'int32'), ([1.0, 0.0], None),
    ([1.5, -2.25], 'float64'), ([[1, 2], [3, 4]], 'int64'), ((1, 2), int),
    ([2 ** 40], 'int64'), ([], None), ([[], []], 'int32'),
    ([7, 200], 'uint8'), ([-1, 2], 'int8'), ([0.5], 'float16'),
    (2.5, float)]


@pytest.mark.parametrize('value, dtype', INPUTS)
@pytest.mark.parametrize('ctx', [None, mx.cpu(1)])
def test_a_host_value_gives_mxnets_array(value, dtype, ctx):
    theirs = arrays.ORIGINAL(value, dtype=dtype, ctx=ctx)
    ours = arrays.array(value, dtype=dtype, ctx=ctx)
    assert same(ours, theirs), (ours, theirs)
    # the array goes on as any other: an operator reads it, one writes it
    ours += 1
    assert onp.array_equal(ours.asnumpy(), (theirs + 1).asnumpy())


@pytest.mark.parametrize('value, dtype', [
    (onp.arange(3), None), (np.arange(3), None),
    (mx.nd.array([1, 2]), None), ([1, 0], bool),
    ([1, 2], 'bool'), ([1, 2], 'float32')])
def test_what_is_not_a_host_list_for_the_cpu_is_mxnets_to_make(
        monkeypatch, value, dtype):
    calls = []
    monkeypatch.setattr(arrays, 'ORIGINAL', lambda *a, **k: calls.append(
        (a, k)) or 'mxnet')
    got = arrays.array(value, dtype=dtype,
                       ctx=mx.gpu(0) if dtype == 'float32' else None)
    assert got == 'mxnet' and len(calls) == 1


def test_a_ragged_list_is_refused_as_mxnet_refuses_it():
    with pytest.raises(TypeError) as theirs:
        arrays.ORIGINAL([[1, 2], [3]], dtype='int32')
    with pytest.raises(TypeError) as ours:
        arrays.array([[1, 2], [3]], dtype='int32')
    assert str(ours.value) == str(theirs.value)


def test_quick_arrays_replaces_np_array_once_and_undo_gives_it_back():
    assert arrays.quick_arrays() is True
    assert np.array is arrays.array and mx.np.array is arrays.array
    assert arrays.quick_arrays() is False
    arrays.undo()
    assert np.array is arrays.ORIGINAL


def test_the_books_dataset_is_the_same_example_for_example(tmp_path):
    paragraphs = D._read_wiki(write_small_corpus(tmp_path))
    made = []
    for quick in (False, True):
        if quick:
            arrays.quick_arrays()
        random.seed(0)
        made.append(D._WikiTextDataset(paragraphs, 40))
    book, ours = made
    assert len(book) == len(ours) > 100
    assert book.vocab.idx_to_token == ours.vocab.idx_to_token
    for i in range(len(book)):
        assert all(same(a, b) for a, b in zip(book[i], ours[i])), i
