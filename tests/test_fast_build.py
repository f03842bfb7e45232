"""What building a twin needs (`d2l_bert.fast._build`): the blocks of a
model, the contexts of its parameters, hybridizing a twin without its
shared blocks, and the small batch a twin is checked on.
"""
import mxnet as mx
import pytest
from mxnet import init
from mxnet.gluon import nn

from d2l_bert.book.bert import BERTEncoder
from d2l_bert.fast import _build, blocks


def test_walk_yields_a_block_then_every_descendant():
    outer, inner, leaf = nn.HybridSequential(), nn.HybridSequential(), \
        nn.Dense(2)
    inner.add(leaf)
    outer.add(inner)
    assert list(_build.walk(outer)) == [outer, inner, leaf]


def test_contexts_are_the_parameters_and_their_absence_is_named():
    net = nn.Dense(2, in_units=3)
    with pytest.raises(ValueError, match=r'not initialized; call '
                       r'net.initialize'):
        _build.contexts(net)
    net.initialize(ctx=[mx.cpu(0)])
    assert _build.contexts(net) == [mx.cpu(0)]
    with pytest.raises(ValueError, match='Sequential has no parameters'):
        _build.contexts(nn.Sequential())


@pytest.mark.parametrize('name, shapes', [
    ('BERTModel', [(2, 8), (2, 8), (2,), (2, 2)]),
    ('BERTEncoder', [(2, 8), (2, 8), (2,)])])
def test_tiny_batch_gives_each_kind_its_inputs(name, shapes):
    batch = _build.tiny_batch(name, mx.cpu(), max_len=16)
    assert [a.shape for a in batch] == shapes
    assert batch[2].tolist() == [8, 6]                       # valid_lens
    assert int(batch[0].max()) == 3 and int(batch[0].min()) == 1


def test_tiny_batch_wraps_the_classifiers_inputs_in_one_tuple():
    (inputs,) = _build.tiny_batch('BERTClassifier', mx.cpu(), max_len=4)
    assert [a.shape for a in inputs] == [(2, 4), (2, 4), (2,)]


def test_hybridize_twin_leaves_the_shared_blocks_imperative():
    encoder = BERTEncoder(50, 16, 32, 2, 1, 0.0, max_len=16)
    encoder.initialize(init.Normal(0.02))
    twin = blocks.FastBERTEncoder(encoder, kernels=False)
    _build.hybridize_twin(twin, encoder)
    assert twin._active
    shared = [b for b in _build.walk(encoder) if hasattr(b, '_active')]
    assert shared and not any(b._active for b in shared)
