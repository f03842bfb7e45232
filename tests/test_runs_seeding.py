"""One seed for every generator a run draws from (d2l_bert/runs/seeding)."""
import random

import mxnet as mx
import numpy as onp

from d2l_bert.runs.seeding import seed_everything


def _draws():
    return (random.random(), onp.random.rand(),
            float(mx.np.random.uniform(size=1).asnumpy()[0]))


def test_the_same_seed_gives_the_same_draws_of_all_three():
    seed_everything(7)
    first = _draws()
    seed_everything(7)
    assert _draws() == first
    seed_everything(8)
    again = _draws()
    assert all(a != b for a, b in zip(again, first))
