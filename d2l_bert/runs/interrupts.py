"""Ctrl-C and SIGTERM between training steps, not inside MXNet.

A ``KeyboardInterrupt`` is raised wherever Python next runs, and in a
training step that is often inside a callback MXNet calls from C: the
fast layer's custom operators infer shapes and storage types while
autograd builds the backward pass.  There ctypes prints the exception and
swallows it, and MXNet goes on with what the callback failed to return:
the Ctrl-C is lost, or the step fails with an MXNet error.  In a training
loop, `between_steps` holds a Ctrl-C (or a SIGTERM) until the loop's next
`check` (the next batch, also during evaluation); a second one comes at
once.  `terminated_as_exception` makes a SIGTERM an exception, so that a
file being written is removed (`d2l_bert.data.atomic`) rather than left
half-written by the process's death.
"""
import contextlib
import os
import signal
import threading


class Terminated(BaseException):
    """A SIGTERM, raised where the program stands (not an `Exception`:
    nothing but the command's entry point should catch it)."""


#: The signals held since the last `check`
_held = []
#: signal -> the handler it had before `_handled` replaced it
_replaced = {}


def _restore_in_child():
    """In a process forked from here (a `multiprocessing` worker), the
    handlers it had before: ``Pool.terminate`` ends its workers with
    SIGTERM, which must not be raised or held there."""
    for signum, handler in _replaced.items():
        signal.signal(signum, handler)
    _replaced.clear()
    _held.clear()


os.register_at_fork(after_in_child=_restore_in_child)


def _terminate(signum, frame):
    raise Terminated


def _raise(signum):
    _held.clear()
    raise Terminated if signum == signal.SIGTERM else KeyboardInterrupt


def _hold(signum, frame):
    """The handler in `between_steps`: hold the first signal, raise at
    the second."""
    if _held:
        _raise(signum)
    _held.append(signum)


def check():
    """Raise ``KeyboardInterrupt`` (`Terminated` for a SIGTERM) if a
    signal is held: call it where a step has ended."""
    if _held:
        _raise(_held[0])


def checked(batches):
    """Yield from `batches`, calling `check` before each one."""
    for batch in batches:
        check()
        yield batch


def _ours(signum):
    """Whether `signum`'s handler is Python's default (or
    `terminated_as_exception`'s), which we may replace."""
    handler = signal.getsignal(signum)
    return (handler is signal.default_int_handler if signum == signal.SIGINT
            else handler in (signal.SIG_DFL, _terminate))


@contextlib.contextmanager
def _handled(handler, signums):
    """Give `signums` to `handler` for the `with` block, in the main
    thread, where their handlers are ours to replace; restore them
    after.  Yields whether it gave any."""
    previous = {}
    if threading.current_thread() is threading.main_thread():
        previous = {s: signal.getsignal(s) for s in signums if _ours(s)}
    for signum in previous:
        _replaced.setdefault(signum, previous[signum])
        signal.signal(signum, handler)
    try:
        yield bool(previous)
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)
            if _replaced.get(signum) is old:
                del _replaced[signum]


@contextlib.contextmanager
def terminated_as_exception():
    """For the `with` block, a SIGTERM raises `Terminated`."""
    with _handled(_terminate, [signal.SIGTERM]):
        yield


@contextlib.contextmanager
def between_steps():
    """For the `with` block, a Ctrl-C or a SIGTERM waits for the next
    `check`.

    Only in the main thread, and only where the signal has Python's own
    handling (elsewhere, someone else decided what it does).  A signal
    still held when the block ends is raised then.
    """
    with _handled(_hold, [signal.SIGINT, signal.SIGTERM]) as ours:
        if ours:    # (not within another `between_steps`)
            _held.clear()
        yield
    check()
