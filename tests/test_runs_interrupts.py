"""Tests for d2l_bert.runs.interrupts: a Ctrl-C is held until the end of
the step, and not lost inside MXNet's callbacks."""
import os
import signal
import subprocess
import sys
import threading

import mxnet as mx
import pytest
from mxnet import np, npx

from d2l_bert.runs import interrupts

npx.set_np()


@pytest.fixture(autouse=True)
def pythons_own_handlers():
    """SIGINT and SIGTERM handled as in a command started from a terminal,
    whatever this process inherited (a suite started in the background
    ignores SIGINT); put back afterwards."""
    previous = {signum: signal.getsignal(signum)
                for signum in (signal.SIGINT, signal.SIGTERM)}
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    yield
    for signum, handler in previous.items():
        signal.signal(signum, handler)


def ctrl_c():
    os.kill(os.getpid(), signal.SIGINT)


def test_outside_the_block_a_ctrl_c_comes_at_once():
    with pytest.raises(KeyboardInterrupt):
        ctrl_c()
    interrupts.check()      # nothing held
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_ctrl_c_waits_for_the_next_check():
    steps = []
    with pytest.raises(KeyboardInterrupt):
        with interrupts.between_steps():
            for step in interrupts.checked(range(5)):
                if step == 2:
                    ctrl_c()
                steps.append(step)
    assert steps == [0, 1, 2]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_second_ctrl_c_comes_at_once():
    steps = []
    with pytest.raises(KeyboardInterrupt):
        with interrupts.between_steps():
            ctrl_c()
            steps.append('held')
            ctrl_c()
            steps.append('not reached')
    assert steps == ['held']


def test_a_ctrl_c_held_at_the_end_of_the_block_is_raised_then():
    done = []

    @interrupts.between_steps()
    def last_step():
        ctrl_c()
        done.append(1)
    with pytest.raises(KeyboardInterrupt):
        last_step()
    assert done == [1]
    interrupts.check()      # raised once, not held for later


def test_a_block_without_ctrl_c_changes_nothing():
    with interrupts.between_steps():
        assert list(interrupts.checked('abc')) == ['a', 'b', 'c']
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_someone_elses_handler_is_left_in_charge():
    seen = []
    previous = signal.signal(signal.SIGINT, lambda s, f: seen.append(s))
    try:
        with interrupts.between_steps():
            ctrl_c()
            interrupts.check()
    finally:
        signal.signal(signal.SIGINT, previous)
    assert seen == [signal.SIGINT]


def test_outside_the_main_thread_the_block_does_nothing():
    handlers = []

    def run():
        with interrupts.between_steps():
            handlers.append(signal.getsignal(signal.SIGINT))
    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert handlers == [signal.default_int_handler]


class _Identity(mx.operator.CustomOp):
    def forward(self, is_train, req, in_data, out_data, aux):
        self.assign(out_data[0], req[0], in_data[0])

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        self.assign(in_grad[0], req[0], out_grad[0])


@mx.operator.register('interrupts_test_identity')
class _IdentityProp(mx.operator.CustomOpProp):
    """An identity whose shape inference (a callback MXNet makes from C,
    in the calling thread) receives a Ctrl-C."""
    def infer_shape(self, in_shape):
        ctrl_c()
        return in_shape, in_shape, []

    def create_operator(self, ctx, shapes, dtypes):
        return _Identity()


def identity(x):
    return mx.nd.Custom(x.as_nd_ndarray(),
                        op_type='interrupts_test_identity').as_np_ndarray()


def test_without_the_block_mxnet_swallows_a_ctrl_c_in_its_callback(
        monkeypatch):
    # what the block is for: ctypes hands the interrupt to the
    # unraisable hook, and MXNet goes on with the shapes it did not get
    swallowed = []
    monkeypatch.setattr(sys, 'unraisablehook',
                        lambda u: swallowed.append(u.exc_type))
    try:
        identity(np.ones((2, 3))).wait_to_read()
    except mx.MXNetError:
        pass
    assert swallowed == [KeyboardInterrupt]


def test_in_the_block_a_ctrl_c_in_mxnets_callback_comes_at_the_check():
    with pytest.raises(KeyboardInterrupt):
        with interrupts.between_steps():
            out = identity(np.ones((2, 3)))
            assert float(out.sum()) == 6.0
            interrupts.check()
            raise AssertionError('the Ctrl-C was lost')


def test_within_another_block_the_held_signal_is_kept():
    with pytest.raises(KeyboardInterrupt):
        with interrupts.between_steps():
            ctrl_c()
            with interrupts.between_steps():
                pass
            raise AssertionError('the held Ctrl-C was dropped')


FORKED = '''
import multiprocessing, signal
from d2l_bert.runs import interrupts
def handlers():
    return (signal.getsignal(signal.SIGINT) is signal.default_int_handler,
            signal.getsignal(signal.SIGTERM) == signal.SIG_DFL)
signal.signal(signal.SIGINT, signal.default_int_handler)
with interrupts.between_steps():
    pool = multiprocessing.get_context('fork').Pool(1)
    try:
        print(pool.apply_async(handlers).get(timeout=30), flush=True)
    finally:
        pool.terminate()
        pool.join()
'''


def test_a_forked_worker_has_pythons_own_handlers():
    # a worker forked inside the block never calls `check`: it must not
    # hold a Ctrl-C, nor turn Pool.terminate's SIGTERM into anything.
    # Forked from a fresh interpreter: a fork of this process, where
    # MXNet has run a Python custom operator, can hang now and then in
    # MXNet's own fork handlers (apache/mxnet#17467)
    proc = fresh_python(FORKED)
    assert (proc.returncode, proc.stdout) == (0, '(True, True)\n'), (
        proc.stderr)


def fresh_python(code):
    """Run `code` in a new interpreter that imports what this one does;
    return the finished process."""
    return subprocess.run([sys.executable, '-c', code], capture_output=True,
                          text=True, timeout=60, env=dict(
                              os.environ,
                              PYTHONPATH=os.pathsep.join(sys.path)))


# ---------------------------------------------------------------------------
# ended_as_ctrl_c: SIGTERM and SIGHUP leave `with` blocks as Ctrl-C does
# ---------------------------------------------------------------------------

ENDED = '''
import os, signal, sys
from d2l_bert.runs import interrupts
# as from a terminal: a suite started under nohup hands its children an
# ignored SIGHUP, which ended_as_ctrl_c rightly leaves ignored
signal.signal(signal.{name}, signal.SIG_DFL)
try:
    with interrupts.ended_as_ctrl_c():
        try:
            os.kill(os.getpid(), signal.{name})
        finally:
            print('cleaned up', flush=True)
finally:
    print('never', flush=True)
'''


@pytest.mark.parametrize('name', ['SIGTERM', 'SIGHUP'])
def test_sigterm_and_sighup_clean_up_then_end_the_process_by_them(name):
    proc = fresh_python(ENDED.format(name=name))
    assert (proc.returncode, proc.stdout) == (
        -getattr(signal, name), 'cleaned up\n'), proc.stderr


def test_the_handlers_are_restored_and_an_ignored_signal_stays_ignored():
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        before = {s: signal.getsignal(s)
                  for s in (signal.SIGTERM, signal.SIGHUP)}
        with interrupts.ended_as_ctrl_c():
            assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
            assert signal.getsignal(signal.SIGTERM) != before[
                signal.SIGTERM]
        assert {s: signal.getsignal(s) for s in before} == before
    finally:
        signal.signal(signal.SIGHUP, previous)
