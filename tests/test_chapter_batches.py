"""The small sizes' batches, cut from the first."""
from mxnet import np

from d2l_bert.chapter.batches import FewBatches


def test_few_batches_are_cut_from_the_first_batch():
    features = (np.arange(12).reshape(6, 2), np.zeros((6, 3)))
    batches = list(FewBatches([(features, np.arange(6))], 4, 8))
    # 6 examples for 4 batches: one example each, in order
    assert [y.tolist() for _, y in batches] == [[0], [1], [2], [3]]
    assert [X[0].shape for X, _ in batches] == [(1, 2)] * 4
    assert [X[1].shape for X, _ in batches] == [(1, 3)] * 4
