"""Shared fixtures: seeded randomness, a tiny batch, and a check that no
test leaves the environment changed (what they stand on: `helpers`)."""
import os

# Before mxnet, as the command line and the notebooks' first cell do, so
# that the tests run with the threads and OpenBLAS kernels users get; an
# OPENBLAS_CORETYPE set for the run (.ci/run sets Haswell) is kept
from d2l_bert.threads import set_threads

set_threads()

import pytest  # noqa: E402
from mxnet import np, npx  # noqa: E402

from helpers import TINY, seed_all, write_small_corpus  # noqa: E402

# The book's first cell turns on NumPy semantics; every test runs with them
npx.set_np()


@pytest.fixture(autouse=True)
def seeded():
    """Seed Python, NumPy and MXNet before every test."""
    seed_all(0)


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


@pytest.fixture(scope='module')
def small_corpus(tmp_path_factory):
    """60 training paragraphs (about 150 pairs) and 30 held-out ones."""
    return write_small_corpus(tmp_path_factory.mktemp('small'), 60, 30)

