"""The runtime of the fast layer's custom operators (`d2l_bert.fast._ops`):
importing it changes nothing, and the wait for MXNet's queue at exit is
registered once, with the first operator MXNet makes.
"""
import subprocess
import sys

import pytest

from d2l_bert.fast import _ops
from d2l_bert.presets import KERNELS_ENV

#: A fresh interpreter: the exit wait before and after one LayerNorm of
#: the custom operator, and how many times `atexit.register` was called
#: with it
CHILD = '''
import atexit
registered = []
register = atexit.register
atexit.register = lambda f, *a: (registered.append(f.__name__),
                                 register(f, *a))[1]
from mxnet import np, npx
npx.set_np()
from d2l_bert.fast import _norm_ops, _ops
import mxnet as mx
before = list(_ops._waits_at_exit)
X = np.ones((2, 3))
for _ in range(2):
    _norm_ops.layer_norm(mx.nd, X, np.ones(3), np.zeros(3), 1e-5)
mx.nd.waitall()
print(before, _ops._waits_at_exit, registered.count('_finish_pending_work'))
'''


def test_the_exit_wait_is_registered_by_the_first_operator_not_at_import():
    done = subprocess.run([sys.executable, '-c', CHILD], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split('\n')[-2] == '[] [True] 1'


def test_the_kernels_switch_is_the_presets_variable(monkeypatch):
    monkeypatch.setenv(KERNELS_ENV, '0')
    assert _ops.disabled()
    assert not _ops.available()
    assert _ops.describe().endswith(f'off ({KERNELS_ENV}=0)')
    monkeypatch.setenv(KERNELS_ENV, '1')
    assert not _ops.disabled()


def test_a_failed_smoke_test_warns_once_and_is_remembered(monkeypatch):
    monkeypatch.setattr(_ops, '_smoke_results', {})
    calls = []

    def broken():
        calls.append(1)
        raise RuntimeError('no loop here')
    with pytest.warns(RuntimeWarning, match=r'^d2l_bert: the compiled test '
                      r'loop is not available \(RuntimeError: no loop '
                      r"here\); MXNet's operators are used instead"):
        assert _ops.passes_smoke_test('the compiled test loop is',
                                      broken) is False
    assert _ops.passes_smoke_test('the compiled test loop is',
                                  broken) is False
    assert calls == [1]
    assert _ops.passes_smoke_test('another loop is', lambda: None) is True
