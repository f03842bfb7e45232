"""Seeding a run: every random generator it draws from, with one seed.

``d2l-bert pretrain`` and ``d2l-bert finetune`` seed with `seed_everything`
before they read data or build a model; so do the tests, before each one.
"""
import random

import mxnet as mx
import numpy as onp


def seed_everything(seed):
    """Seed Python's, NumPy's and MXNet's random generators.

    Parameters
    ----------
    seed : int
        The same seed for the three, from 0 to ``2**32 - 1``.
    """
    random.seed(seed)
    onp.random.seed(seed)
    mx.random.seed(seed)
