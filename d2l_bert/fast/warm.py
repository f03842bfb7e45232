"""Compiling the fast layer's loops ahead, in processes of their own.

In a fresh runtime numba's cache is empty, and the first `accelerate`
compiles the seven loops of `_ops._smoke_test`: about 5 s of one core,
which the notebook would wait for.  `start()`, called before the first
cell that names `accelerate` (`fast.compile_ahead`, which
`chapter.hosted.in_kernel` sets up),
compiles them in two child processes (`_smoke.PARTS`, one each) into
numba's cache while the student runs the cells before `accelerate`
(imports, data, model): about 3 s on 2 cores.  `_ops.available()` calls
`wait()` before its own smoke test, which then loads the loops from the
cache.  Where the cache is warm the children only load them, and end.

Two children per process at most, which end when their compile does (a
few seconds, whether their parent runs on or not); `wait` is bounded and
gives way to Ctrl-C.
"""
import os
import subprocess
import sys
import time

from ._smoke import PARTS

#: The longest `wait` waits for the child (its compile takes about 5 s
#: on one core; on a loaded machine much more), in seconds
WAIT_SECONDS = 120.0

_child = []  # the children started by `start`, while they may run

#: The child's program: `_loops.py` and `_smoke.py` loaded by their paths
#: under their own names (the package's `__init__` would import MXNet, a
#: second of the child's time), then the smoke test, which compiles every
#: loop into numba's cache, keyed by each function's file and code; the
#: cached code names its module, which the kernel imports as the package's
CHILD = """
import importlib.util, sys
def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = sys.modules[name] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
loops = load('d2l_bert.fast._loops', sys.argv[1])
load('d2l_bert.fast._smoke', sys.argv[2]).run(loops, sys.argv[3:])
"""


def start():
    """Start compiling the loops in child processes, unless they were
    started or numba is missing; return whether children run
    (`fast.compile_ahead` calls it where the kernels are on)."""
    import importlib.util
    if _child:
        return True
    if importlib.util.find_spec('numba') is None:
        return False
    folder = os.path.dirname(os.path.abspath(__file__))
    files = [os.path.join(folder, name) for name in ('_loops.py',
                                                     '_smoke.py')]
    for part in PARTS:  # one process each: the compile of both on 2 cores
        _child.append(subprocess.Popen(
            [sys.executable, '-c', CHILD] + files + [part],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL))
    return True


def wait(timeout=WAIT_SECONDS):
    """Wait for the children of `start`, if any, at most `timeout`
    seconds in all (past it, leave them: the caller compiles what the
    cache lacks)."""
    end = time.monotonic() + timeout
    try:
        for child in _child:
            child.wait(max(0.0, end - time.monotonic()))
    except subprocess.TimeoutExpired:
        return
    _child.clear()
