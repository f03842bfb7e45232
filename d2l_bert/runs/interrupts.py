"""Ctrl-C between training steps, not inside MXNet.

A ``KeyboardInterrupt`` is raised wherever Python next runs, and in a
training step that is often inside a callback MXNet calls from C: the
fast layer's custom operators infer shapes and storage types while
autograd builds the backward pass.  There ctypes prints the exception and
swallows it, and MXNet goes on with what the callback failed to return:
the Ctrl-C is lost, or the step fails with an MXNet error.  In a training
loop, `between_steps` holds a Ctrl-C until the loop's next `check` (the
next batch, also during evaluation); a second Ctrl-C comes at once.

SIGTERM keeps its default: it ends the process at once, also where it
waits in C (for another worker of a job, say), which a Python handler
could not.  A file being written when it comes is finished first
(`d2l_bert.data.atomic`).  A command whose processes must not outlive
it (``d2l-bert check-text``, whose cells run in a session of their own)
takes SIGTERM and SIGHUP the way Ctrl-C goes instead (`ended_as_ctrl_c`).
"""
import contextlib
import os
import signal
import sys
import threading

#: The Ctrl-Cs held since the last `check`
_held = []
#: The handler SIGINT had before `between_steps` replaced it, while it is
#: replaced
_replaced = {}


def _restore_in_child():
    """In a process forked from here (a `multiprocessing` worker), the
    handler SIGINT had: a worker must not hold a Ctrl-C for a `check`
    it never makes."""
    for signum, handler in _replaced.items():
        signal.signal(signum, handler)
    _replaced.clear()
    _held.clear()


os.register_at_fork(after_in_child=_restore_in_child)


def _hold(signum, frame):
    """SIGINT's handler in `between_steps`: hold the first Ctrl-C, raise
    at the second."""
    if _held:
        _held.clear()
        raise KeyboardInterrupt
    _held.append(signum)


def check():
    """Raise ``KeyboardInterrupt`` if a Ctrl-C is held: call it where a
    step has ended."""
    if _held:
        _held.clear()
        raise KeyboardInterrupt


def checked(batches):
    """Yield from `batches`, calling `check` before each one."""
    for batch in batches:
        check()
        yield batch


@contextlib.contextmanager
def between_steps():
    """For the `with` block, a Ctrl-C waits for the next `check`.

    Only in the main thread, and only where SIGINT has Python's own
    handler (elsewhere, someone else decided what a Ctrl-C does: a
    command started in the background ignores it, an enclosing
    `between_steps` holds it already).  A Ctrl-C still held when the
    block ends is raised then.
    """
    ours = (threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGINT)
            is signal.default_int_handler)
    if ours:
        _held.clear()
        _replaced[signal.SIGINT] = signal.signal(signal.SIGINT, _hold)
    try:
        yield
    finally:
        if ours:
            signal.signal(signal.SIGINT, _replaced.pop(signal.SIGINT))
    check()


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP came (`ended_as_ctrl_c`): raised where Python
    runs in the main thread, so the `with` blocks it leaves clean up as
    they do for a Ctrl-C.

    Parameters
    ----------
    signum : int
        The signal that came.
    """

    def __init__(self, signum):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise_terminated(signum, frame):
    raise Terminated(signum)


@contextlib.contextmanager
def ended_as_ctrl_c(signums=(signal.SIGTERM, signal.SIGHUP)):
    """For the `with` block, the signals `signums` raise `Terminated`
    (a ``KeyboardInterrupt``), and what it leaves cleans up as for a
    Ctrl-C; then the process ends by the signal, as it would have.

    Only in the main thread, and for each signal only where it has its
    default handler (one ignored, as ``nohup`` ignores SIGHUP, stays
    so).  The handlers are restored when the block ends.
    """
    replaced = {}
    if threading.current_thread() is threading.main_thread():
        for signum in signums:
            if signal.getsignal(signum) == signal.SIG_DFL:
                replaced[signum] = signal.signal(signum, _raise_terminated)
    try:
        yield
    except Terminated as e:
        for signum, handler in replaced.items():
            signal.signal(signum, handler)
        replaced.clear()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os.kill(os.getpid(), e.signum)   # its default ends the process
        raise
    finally:
        for signum, handler in replaced.items():
            signal.signal(signum, handler)
