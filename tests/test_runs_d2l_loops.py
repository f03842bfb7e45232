"""`d2l_loops`: the fixes of d2l 1.0.3's `train_ch13`, which d2l takes a
point every fifth of the batches (0 below five): its loop with the fix of
the points, and an epoch of few batches cut again into `MIN_BATCHES`."""
import re

import mxnet as mx
import pytest
from mxnet import gluon, np
from mxnet.gluon import nn

from d2l_bert.runs import d2l_loops
from d2l_bert.presets import MIN_BATCHES
from d2l_bert.runs.seeding import seed_everything


@pytest.mark.parametrize('num_batches, points', [
    (1, [0]), (2, [0, 1]), (4, [0, 1, 2, 3]), (5, [0, 1, 2, 3, 4]),
    (12, [1, 3, 5, 7, 9, 11]), (2148, list(range(428, 2148, 429)) + [2147])])
def test_points_are_d2ls_every_fifth_and_every_batch_below_five(
        num_batches, points):
    assert [i for i in range(num_batches)
            if d2l_loops.takes_point(i, num_batches)] == points
    assert d2l_loops.batches_per_point(num_batches) == max(
        num_batches // 5, 1)


def test_train_ch13_trains_on_an_epoch_of_two_batches(capsys):
    # d2l 1.0.3's divides by a fifth of the batch count, 0 here
    seed_everything(0)
    net = nn.Dense(3)
    net.initialize()
    X, y = np.random.normal(size=(8, 4)), np.array([0, 1, 2, 0, 1, 2, 0, 1])
    batches = [(X[:4], y[:4]), (X[4:], y[4:])]
    trainer = gluon.Trainer(net.collect_params(), 'sgd',
                            {'learning_rate': 0.1})
    d2l_loops.train_ch13(net, batches, batches, gluon.loss.SoftmaxCELoss(),
                         trainer, 2, [mx.cpu()])
    out = capsys.readouterr().out
    assert re.search(r'loss [\d.]+, train acc [\d.]+, test acc [\d.]+\n'
                     r'[\d.]+ examples/sec on \[cpu\(0\)\]', out)


@pytest.mark.parametrize('count', [0, MIN_BATCHES, MIN_BATCHES + 1])
def test_an_epoch_of_enough_batches_or_none_is_left_as_it_is(count):
    train_iter = [('X', 'y')] * count
    assert d2l_loops.with_min_batches(train_iter) is train_iter


def test_a_loader_without_a_length_is_left_as_it_is():
    train_iter = iter([('X', 'y')])
    assert d2l_loops.with_min_batches(train_iter) is train_iter


def test_an_epoch_of_two_batches_is_recut_into_five_of_its_examples():
    X = np.arange(14).reshape(7, 2)                                 # (7, 2)
    train_iter = [(X[:4], np.arange(4)), (X[4:], np.arange(4, 7))]
    recut = d2l_loops.with_min_batches(train_iter)
    assert isinstance(recut, d2l_loops.Recut) and len(recut) == MIN_BATCHES
    batches = list(recut)
    assert [len(y) for _, y in batches] == [1, 1, 2, 1, 2]
    assert np.concatenate([y for _, y in batches]).tolist() == list(range(7))
    assert np.concatenate([X for X, _ in batches]).tolist() == X.tolist()
    # each pass reads the loader again
    assert len(list(recut)) == MIN_BATCHES
