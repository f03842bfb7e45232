"""`fast.warm`: the loops compiled ahead in two child processes, into
the numba cache from which `_ops.available()` then loads them; and the
smoke test's message names the loop that fails."""
import os
import subprocess
import sys

import pytest

from d2l_bert import presets
from d2l_bert.fast import _smoke, warm

LOOPS = ('softmax_ce_forward', 'softmax_ce_backward', 'layer_norm_backward',
         'self_attention_forward', 'self_attention_backward',
         'add_norm_forward', 'add_norm_backward')

#: In a fresh process: the kernels' check, then what numba's cache gave
CHECK = """
from d2l_bert.fast import _loops, _ops
assert _ops.available()
for name in %r:
    stats = getattr(_loops, name).stats
    print(name, sum(stats.cache_hits.values()),
          sum(stats.cache_misses.values()))
""" % (LOOPS,)


@pytest.fixture
def no_children(monkeypatch):
    monkeypatch.setattr(warm, '_child', [])
    yield warm._child
    for child in warm._child:
        child.kill()
        child.wait()


def test_the_children_fill_the_cache_the_kernels_load_from(
        tmp_path, monkeypatch, no_children):
    monkeypatch.setenv('NUMBA_CACHE_DIR', str(tmp_path))
    monkeypatch.delenv(presets.KERNELS_ENV, raising=False)
    from d2l_bert.fast import compile_ahead
    assert compile_ahead()
    assert len(no_children) == len(_smoke.PARTS) == 2
    children = list(no_children)
    warm.wait(timeout=300)
    assert [c.returncode for c in children] == [0, 0]
    assert no_children == []
    done = subprocess.run([sys.executable, '-c', CHECK], env=os.environ,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    # every loop a hit of the cache, none compiled again
    assert done.stdout.split('\n')[:-1] == [f'{name} 1 0' for name in LOOPS]


def test_with_the_kernels_off_nothing_starts(monkeypatch, no_children):
    from d2l_bert.fast import compile_ahead
    monkeypatch.setenv(presets.KERNELS_ENV, '0')
    assert not compile_ahead()
    assert no_children == []
    warm.wait()   # nothing to wait for


def test_a_wait_past_its_timeout_leaves_the_children(monkeypatch,
                                                      no_children):
    sleeper = subprocess.Popen([sys.executable, '-c',
                                'import time; time.sleep(30)'])
    no_children.append(sleeper)
    warm.wait(timeout=0.1)
    assert no_children == [sleeper] and sleeper.poll() is None


class WrongAttention:
    """`_loops`, but for an attention whose output is 0."""

    def __getattr__(self, name):
        from d2l_bert.fast import _loops
        return getattr(_loops, name)

    @staticmethod
    def self_attention_forward(*args):
        P, O = args[-4], args[-3]
        P[...] = 0
        O[...] = 0


def test_a_loop_giving_a_wrong_number_is_named():
    _smoke.run(WrongAttention(), ['loss_and_norms'])
    with pytest.raises(RuntimeError, match='^the compiled loop '
                       'self_attention_forward gave a wrong result$'):
        _smoke.run(WrongAttention())
