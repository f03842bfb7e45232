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
(`d2l_bert.data.atomic`).
"""
import contextlib
import os
import signal
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
