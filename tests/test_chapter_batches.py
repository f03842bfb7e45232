"""Batches d2l 1.0.3's `train_ch13` can take: an epoch of fewer than five
batches cut again into five, and the small sizes' few batches."""
import pytest
from mxnet import np

from d2l_bert.chapter.batches import FewBatches, Recut, with_min_batches
from d2l_bert.presets import MIN_BATCHES


@pytest.mark.parametrize('count', [0, MIN_BATCHES, MIN_BATCHES + 1])
def test_an_epoch_of_enough_batches_or_none_is_left_as_it_is(count):
    train_iter = [('X', 'y')] * count
    assert with_min_batches(train_iter) is train_iter


def test_a_loader_without_a_length_is_left_as_it_is():
    train_iter = iter([('X', 'y')])
    assert with_min_batches(train_iter) is train_iter


def test_an_epoch_of_two_batches_is_recut_into_five_of_its_examples():
    X = np.arange(14).reshape(7, 2)                                 # (7, 2)
    train_iter = [(X[:4], np.arange(4)), (X[4:], np.arange(4, 7))]
    recut = with_min_batches(train_iter)
    assert isinstance(recut, Recut) and len(recut) == MIN_BATCHES
    batches = list(recut)
    assert [len(y) for _, y in batches] == [1, 1, 2, 1, 2]
    assert np.concatenate([y for _, y in batches]).tolist() == list(range(7))
    assert np.concatenate([X for X, _ in batches]).tolist() == X.tolist()
    # each pass reads the loader again
    assert len(list(recut)) == MIN_BATCHES


def test_few_batches_are_cut_from_the_first_batch():
    features = (np.arange(12).reshape(6, 2), np.zeros((6, 3)))
    batches = list(FewBatches([(features, np.arange(6))], 4, 8))
    # 6 examples for 4 batches: one example each, in order
    assert [y.tolist() for _, y in batches] == [[0], [1], [2], [3]]
    assert [X[0].shape for X, _ in batches] == [(1, 2)] * 4
    assert [X[1].shape for X, _ in batches] == [(1, 3)] * 4
