"""Shared fixtures: a tiny BERT configuration, seeded randomness, and a
check that no test leaves the environment changed."""
import os
import random

# Before mxnet, as the command line and the notebooks' first cell do, so
# that the tests run with the threads and OpenBLAS kernels users get; an
# OPENBLAS_CORETYPE set for the run (.ci/run sets Haswell) is kept
from d2l_bert.threads import set_threads

set_threads()

import mxnet as mx  # noqa: E402
import numpy as onp  # noqa: E402
import pytest  # noqa: E402
from mxnet import np, npx  # noqa: E402

# The book's first cell turns on NumPy semantics; every test runs with them
npx.set_np()

#: A configuration small enough for fast tests (vocab 99, hidden 32, 2 blocks)
TINY = dict(vocab_size=99, num_hiddens=32, ffn_num_hiddens=48, num_heads=4,
            num_blks=2, dropout=0.0, max_len=16)


@pytest.fixture(autouse=True)
def seeded():
    """Seed Python, NumPy and MXNet before every test."""
    random.seed(0)
    onp.random.seed(0)
    mx.random.seed(0)


def _environment():
    """`os.environ` as a dict, without pytest's own PYTEST_CURRENT_TEST."""
    return {name: value for name, value in os.environ.items()
            if name != 'PYTEST_CURRENT_TEST'}


@pytest.fixture(autouse=True)
def environment_unchanged():
    """Fail the test that leaves `os.environ` changed (and restore it).

    A test that set OPENBLAS_CORETYPE=SkylakeX and did not undo it once
    made every later notebook kernel die on a CPU without AVX-512.  Use
    `monkeypatch.setenv`/`delenv`, or pass the functions a mapping.
    """
    before = _environment()
    yield
    after = _environment()
    if after != before:
        for name in set(after) - set(before):
            del os.environ[name]
        os.environ.update(before)
        changed = sorted(name for name in set(before) | set(after)
                         if before.get(name) != after.get(name))
        pytest.fail('the test left os.environ changed: '
                    + ', '.join(f'{name}: {before.get(name)!r} -> '
                                f'{after.get(name)!r}' for name in changed),
                    pytrace=False)


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
    from d2l_bert.data import corpus
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
