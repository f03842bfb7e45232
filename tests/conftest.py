"""Shared fixtures: seeded randomness, a tiny batch, a check that no test
leaves the environment changed, and the memory the run may hold (what
they stand on: `helpers`)."""
import ctypes
import gc
import os
import sys

# Before mxnet, as the command line does (and the .venv's hook would), so
# that the tests run with the threads and OpenBLAS kernels users get; an
# OPENBLAS_CORETYPE set for the run (.ci/run sets Haswell) is kept
from d2l_bert.threads import set_threads

set_threads()

import pytest  # noqa: E402
from mxnet import np, npx  # noqa: E402

from d2l_bert.runs.seeding import seed_everything  # noqa: E402

from helpers import TINY, write_small_corpus  # noqa: E402

try:
    import resource
except ImportError:  # Windows
    resource = None

# The book's first cell turns on NumPy semantics; every test runs with them
npx.set_np()


@pytest.fixture(autouse=True)
def seeded():
    """Seed Python, NumPy and MXNet before every test."""
    seed_everything(0)


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


# --- Memory ----------------------------------------------------------------
#
# The suite must fit a student's 8 GB laptop, the notebooks' kernels beside
# it.  Measured on a 2-core Linux machine with the book's editions in
# ../shared (as in CI), 700 tests: the pytest process peaked at 9.0 GB
# while the chapter runners' namespaces stayed in `sys.modules` and
# dropped models waited for a full garbage collection, and at 2.3 GB
# since (2.4 GB summed over it and its children, sampled every 0.5 s)

#: The largest resident set the pytest process may reach, in MB (the
#: kernel's own count, `ru_maxrss`: no sampling, so no 2-core timing);
#: above it the run fails
PEAK_RSS_LIMIT_MB = 4096

#: Growth of the process, in MB, after which a test's end collects garbage
GC_STEP_MB = 256

_rss_at_last_collection = [0]


def _rss_mb():
    """The process's resident set now, in MB; None where /proc is not."""
    try:
        with open('/proc/self/statm') as f:
            pages = int(f.read().split()[1])
    except OSError:
        return None
    return pages * os.sysconf('SC_PAGE_SIZE') // 2 ** 20


@pytest.fixture(autouse=True)
def garbage_collected():
    """Collect garbage after a test once the process has grown by
    `GC_STEP_MB` since the last collection.

    A Gluon block refers to itself (its `_scope` holds it), so a model a
    test drops goes only at a full pass of the garbage collector, which
    Python starts by counts of objects: a model is few objects and much
    memory, and dozens of them waited.  Where /proc is missing, every
    test's end collects.  The memory freed then goes back to the system.
    """
    yield
    rss = _rss_mb()
    if rss is None or rss - _rss_at_last_collection[0] > GC_STEP_MB:
        gc.collect()
        _return_freed_memory()
        _rss_at_last_collection[0] = _rss_mb() or 0


def _return_freed_memory():
    """Give the memory freed so far back to the system, where the C
    library is glibc: it keeps freed blocks in its arenas (MXNet's threads
    have one each), about 1 GB after the pretraining section's run."""
    if not sys.platform.startswith('linux'):
        return
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):  # another C library (musl)
        pass


def peak_rss_mb():
    """The largest resident set the process has had, in MB (None where
    the `resource` module is missing)."""
    if resource is None:
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # kilobytes on Linux, bytes on macOS
    return peak // (2 ** 20 if sys.platform == 'darwin' else 2 ** 10)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session):
    """Fail the run whose process, or one of whose pytest-xdist workers,
    grew past `PEAK_RSS_LIMIT_MB`; a worker hands its peak to the
    controller (`pytest_testnodedown`)."""
    config = session.config
    peaks = config.stash.get(_WORKER_PEAKS, [])
    own = peak_rss_mb()
    if hasattr(config, 'workeroutput'):  # a worker
        config.workeroutput['peak_rss_mb'] = own
    peaks = [p for p in [own] + peaks if p is not None]
    config.stash[_PEAK] = (max(peaks), len(peaks)) if peaks else None
    if peaks and max(peaks) > PEAK_RSS_LIMIT_MB:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """pytest-xdist's controller: keep the peak a worker reported."""
    peak = getattr(node, 'workeroutput', {}).get('peak_rss_mb')
    if peak is not None:
        node.config.stash.setdefault(_WORKER_PEAKS, []).append(peak)


def pytest_terminal_summary(terminalreporter, config):
    found = config.stash.get(_PEAK, None)
    if found is None:
        return
    peak, processes = found
    which = ('the test process' if processes == 1 else
             f'the largest of {processes} test processes')
    line = (f'peak memory of {which}: {peak} MB (limit '
            f'{PEAK_RSS_LIMIT_MB} MB each, tests/conftest.py)')
    if peak > PEAK_RSS_LIMIT_MB:
        terminalreporter.write_line('FAILED: ' + line, red=True)
    else:
        terminalreporter.write_line(line)


_PEAK = pytest.StashKey()
_WORKER_PEAKS = pytest.StashKey()
