"""MXNet 2.0 Gluon's Parameter attributes, entered in their blocks under
MXNet 1.9.1 while a cell runs (`gluon2.parameters_as_attributes`)."""
import pytest
from mxnet import gluon, np
from mxnet.gluon import nn

from d2l_bert.chapter import gluon2


class _Own(nn.Block):
    """A block of MXNet 2.0's writing: its parameter is an attribute."""

    def __init__(self):
        super().__init__()
        self.weight = gluon.Parameter('weight', shape=(1, 3))

    def forward(self, X):
        return X * self.weight.data(ctx=X.ctx)


class _Got(nn.Block):
    """A block of MXNet 1.x's writing: ``self.params.get``."""

    def __init__(self):
        super().__init__()
        self.weight = self.params.get('weight', shape=(1, 3))


def test_without_the_hook_initialize_does_not_see_the_attribute():
    block = _Own()
    block.initialize()
    assert list(block.collect_params()) == []
    with pytest.raises(RuntimeError, match="Parameter 'weight' has not been "
                       'initialized'):
        block(np.ones((2, 3)))


def test_the_hook_enters_it_under_the_blocks_prefix_and_says_so():
    used, before = set(), gluon.Block.__setattr__
    with gluon2.parameters_as_attributes(used):
        first, second = _Own(), _Own()
        pair = nn.Sequential()
        pair.add(first, second)
    pair.initialize()
    names = list(pair.collect_params())
    assert names == [first.prefix + 'weight', second.prefix + 'weight']
    assert first.weight.name == first.prefix + 'weight'
    assert first(np.ones((2, 3))).shape == (2, 3)
    assert used == {gluon2.NOTE}
    # the block class is as it was after the context
    assert gluon.Block.__setattr__ is before
    assert list(_Own().collect_params()) == []


def test_params_get_parameters_and_shared_ones_are_left_as_they_are():
    used = set()
    with gluon2.parameters_as_attributes(used):
        got = _Got()
        owner = _Own()
        borrower = nn.Block()
        borrower.shared = owner.weight   # shared: keeps the owner's name
    assert list(got.collect_params()) == [got.prefix + 'weight']
    assert list(borrower.collect_params()) == [owner.prefix + 'weight']
    assert borrower.shared is owner.weight
    # `_Got` alone would not have made the note
    used_alone = set()
    with gluon2.parameters_as_attributes(used_alone):
        _Got()
    assert used_alone == set()
