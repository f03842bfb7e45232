"""A side of a benchmark in a child process, driven through a pipe.

`Child` starts ``script --worker ...`` (the PyTorch side, or one MXNet
model alone in its process) under a supervisor,
`d2l_bert.processes.Supervised`, so that it ends with the benchmark,
however the benchmark ends; the child answers with `serve`.  Both ends
of the protocol are here; the child's end imports neither MXNet nor
d2l_bert (the PyTorch peer's Python has neither).

- `find_torch_python`, `TorchChild`, `serve_torch`: the PyTorch side;
- `in_processes`, `serve_step`: MXNet steps, each in its own process,
  taking turns.
"""
import importlib
import importlib.util
import os
import pickle
import subprocess
import sys
import time

from _gemm import gemm_rate
from _machine import set_threads
from _timing import take_turns, waited


def find_torch_python(path):
    """Return the interpreter to run PyTorch with, or None."""
    if path is not None:
        return path
    if all(importlib.util.find_spec(m) for m in ('torch', 'transformers')):
        return sys.executable
    return None


#: Seconds a child has to end after ``('quit',)`` before it is ended
QUIT_SECONDS = 30


class Child:
    """One side of a benchmark in a child process driven through a pipe:
    `script` run by `python` with ``--worker`` and `worker_args`, which
    calls `serve` (the PyTorch side, or one MXNet model alone in its
    process).

    The child runs under a supervisor (`d2l_bert.processes.Supervised`):
    it ends, with all it started, when this process ends, however it
    ends.  Only this side imports d2l_bert.
    """

    def __init__(self, python, script, *worker_args):
        from d2l_bert.processes import Supervised
        self.proc = Supervised(
            [python, os.path.abspath(script), '--worker', *worker_args],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def ask(self, *command):
        try:
            pickle.dump(command, self.proc.stdin, protocol=4)
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass                    # it ended: its last words are below
        try:
            answer = pickle.load(self.proc.stdout)
        except EOFError:
            raise RuntimeError('the child process ended (see its '
                               'messages above)') from None
        if answer[0] == 'error':
            raise RuntimeError(answer[1])
        return answer

    def close(self):
        try:
            pickle.dump(('quit',), self.proc.stdin, protocol=4)
            self.proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass
        try:
            self.proc.wait(timeout=QUIT_SECONDS)
        except subprocess.TimeoutExpired:
            self.proc.end()     # its supervisor kills it and all below
            self.proc.wait()


#: The PyTorch side (`bench_torch.py`, `bench_minilm.py`)
TorchChild = Child


def serve_torch(setup):
    """`serve` for the PyTorch side: exit status 2 if torch or
    transformers cannot be imported.  Runs in the child, which imports no
    MXNet."""
    return serve(setup, needs=('torch', 'transformers'))


def serve(setup, needs=()):
    """Serve a `Child`: read pickled commands on stdin, answer on stdout.

    Commands: ``('setup', *args)``, answered ``('ready', info)`` where
    ``fns, info = setup(*args)``; the name of a function of `fns`,
    answered ``(name, wall seconds, CPU seconds of this process,
    result)``, timed here; ``('quit',)``.  Returns the exit status (2 if
    a module of `needs` cannot be imported).
    """
    # Keep stdout for answers: whatever a library prints goes to stderr
    out = os.fdopen(os.dup(1), 'wb')
    os.dup2(2, 1)
    inp = sys.stdin.buffer

    def send(*answer):
        pickle.dump(answer, out, protocol=4)
        out.flush()

    try:
        for module in needs:
            importlib.import_module(module)
    except ImportError as e:
        send('error', f'{type(e).__name__}: {e}')
        return 2
    fns = {}
    while True:
        try:
            command = pickle.load(inp)
        except EOFError:
            return 0
        if command[0] == 'setup':
            fns, info = setup(*command[1:])
            send('ready', info)
        elif command[0] in fns:
            start, start_cpu = time.perf_counter(), time.process_time()
            result = fns[command[0]]()
            send(command[0], time.perf_counter() - start,
                 time.process_time() - start_cpu, result)
        elif command[0] == 'quit':
            return 0
        else:
            send('error', f'unknown command {command[0]!r}')


def in_processes(script, sides, worker_args, repeats, warmup=1,
                 pause=0.2):
    """Time MXNet steps, each side in a process of its own, taking turns.

    In one process, what one model leaves behind (memory the kernel must
    zero again, idle OpenMP threads, numba's threads) slows the next
    (d2l 1.0.3's pretraining step, alternating with ours, runs slower
    than alone).  Here every side runs alone in its process, as a user runs
    it; the turns (with `pause` seconds of idle between them) still share
    the machine's load alike.

    Parameters
    ----------
    script : str
        The benchmark, run as ``script --worker SIDE *worker_args``; its
        worker calls `serve` with a setup giving ``{'step': f}``.
    sides : sequence of str
    worker_args : list of str
        The options each worker gets (threads, instruction set, sizes).
    repeats, warmup : int
    pause : float

    Returns
    -------
    res : dict of side -> (median wall s, list of wall s, median CPU s)
        As `alternate` returns them.
    infos : dict of side -> what its setup returned
    """
    children = {}
    try:
        for side in sides:
            children[side] = Child(sys.executable, script, side,
                                   *worker_args)
        infos = {side: child.ask('setup')[1]
                 for side, child in children.items()}
        turns = {side: (lambda child=child: child.ask('step')[1:3])
                 for side, child in children.items()}
        times, wall, cpu = take_turns(turns, repeats, warmup, pause)
    finally:
        for child in children.values():
            child.close()
    res = {side: (wall[side], [w for w, _ in times[side]], cpu[side])
           for side in times}
    return res, infos


def serve_step(args, build_side):
    """Serve one side of a step benchmark from this process (`serve`):
    its step, or the GEMM when ``args.worker == 'gemm'``.

    ``build_side(args)`` returns ``(step, info)``: the step function and
    a dict the parent reads (its losses, the settings).
    """
    threads = set_threads(args.threads, isa=args.isa)

    def setup():
        if args.worker == 'gemm':
            gemm, gemm_flops = gemm_rate()
            return {'step': waited(gemm)}, dict(flops=gemm_flops,
                                                threads=threads)
        step, info = build_side(args)
        return {'step': waited(step)}, dict(info, threads=threads)
    return serve(setup)
