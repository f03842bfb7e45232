"""Shared fixtures: a tiny BERT configuration and seeded randomness."""
import os
import random

# d2l_bert before mxnet, as the notebooks do, so that the tests run with
# the thread count and OpenBLAS kernels users get (see d2l_bert._threads);
# it also turns on NumPy semantics
import d2l_bert  # noqa: F401  (isort: skip)

import mxnet as mx
import numpy as onp
import pytest
from mxnet import np

#: A configuration small enough for fast tests (vocab 99, hidden 32, 2 blocks)
TINY = dict(vocab_size=99, num_hiddens=32, ffn_num_hiddens=48, num_heads=4,
            num_blks=2, dropout=0.0, max_len=16)


@pytest.fixture(autouse=True)
def seeded():
    """Seed Python, NumPy and MXNet before every test."""
    random.seed(0)
    onp.random.seed(0)
    mx.random.seed(0)


@pytest.fixture
def tiny_config():
    return dict(TINY)


@pytest.fixture
def tiny_batch():
    """A batch of 3 sequences of 12 tokens with valid lengths and
    3 predicted positions each (padding positions repeated, as in data)."""
    tokens = np.random.randint(0, TINY['vocab_size'], (3, 12)).astype('int32')
    segments = np.array([[0] * 6 + [1] * 6, [0] * 4 + [1] * 8,
                         [0] * 12], dtype='int32')
    valid_lens = np.array([12, 7, 9], dtype='float32')
    pred_positions = np.array([[1, 5, 10], [2, 3, 0], [8, 0, 0]],
                              dtype='int32')
    return tokens, segments, valid_lens, pred_positions


def write_small_corpus(directory, num_train=60, num_valid=30):
    """Write the first paragraphs of the embedded corpus's two splits to
    `directory` (WikiText's file names) and return it as a string."""
    from d2l_bert import corpus
    os.makedirs(directory, exist_ok=True)
    for split, count in (('train', num_train), ('valid', num_valid)):
        name = corpus.FILE_NAMES[split]
        with open(os.path.join(corpus.DATA_DIR, name),
                  encoding='utf-8') as f:
            lines = [line for line in f if len(line.split(' . ')) >= 2]
        with open(os.path.join(directory, name), 'w',
                  encoding='utf-8') as f:
            f.writelines(lines[:count])
    return str(directory)
