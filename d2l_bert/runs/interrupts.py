"""Ctrl-C between training steps, not inside MXNet.

A ``KeyboardInterrupt`` is raised wherever Python next runs, and in a
training step that is often inside a callback MXNet calls from C: the
fast layer's custom operators infer shapes and storage types while
autograd builds the backward pass.  There ctypes prints the exception and
swallows it, and MXNet goes on with what the callback failed to return:
the Ctrl-C is lost, or the step fails with an MXNet error.  In a training
loop, `between_steps` holds a Ctrl-C until the loop's next `check` (the
next batch, also during evaluation); a second Ctrl-C comes at once.
"""
import contextlib
import signal
import threading

#: The Ctrl-Cs held since the last `check`
_held = []


def _hold(signum, frame):
    """SIGINT's handler in `between_steps`: hold the first Ctrl-C, raise
    at the second."""
    if _held:
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
    handler (elsewhere, someone else decided what a Ctrl-C does).  A
    Ctrl-C still held when the block ends is raised then.
    """
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT)
            is not signal.default_int_handler):
        yield
        return
    _held.clear()
    signal.signal(signal.SIGINT, _hold)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    check()
