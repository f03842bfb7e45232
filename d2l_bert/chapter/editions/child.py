"""Run an edition's cells in a child process, in a new temporary directory.

`d2l-bert check-text` runs the code of the file it is given, with the
rights of whoever runs it, and reviewers run it on other people's pull
requests.  `ChildRunner` runs the cells with `runner.Runner` in a child
process, so that:

- the child's working directory (and ``TMPDIR``) is a new temporary
  directory, removed when the child ends: a cell that writes files or
  changes directory leaves the caller's directory as it was;
- a cell that calls ``sys.exit`` is a failed cell (`runner.Runner` reports
  `SystemExit` as any error), and so is one that ends its process
  (``os._exit``, a crash): the next cell runs in a new child, after the
  cells that ran before it have run there again;
- a cell that runs longer than `timeout` seconds is stopped and reported as
  failed: an alarm in the child raises `TimeoutError` in the cell, and a
  cell that still does not return (it catches the error, or waits in
  compiled code) has its process ended `grace` seconds later, the next
  cell going on in a new child as above;
- the cells' processes have limits, `memory` bytes and `processes`
  processes and threads (`processes.Limits`): a cell that reaches one
  fails, its processes are ended, and the next cell goes on in a new
  child as above.

This is no sandbox: the cells still run with the user's rights and can
read, write or delete any file the user can.  Check a file you do not
trust in a container, or in CI.

The child makes the parent's thread choices: it inherits the environment
that the parent's `threads.set_threads` wrote, and calls `set_threads`
itself before `mxnet` is imported.  It runs under a supervisor
(`processes.Supervised`), which makes its directory and, when the child
ends, when it is stopped or when the parent ends (SIGKILL included),
ends every process below it, also those a cell started in a session of
its own or that double-forked, and removes the directory.  Requests and
results are JSON messages on a pipe of their own: what a cell prints,
even to the process's standard output, cannot garble them.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from multiprocessing import Pipe
from multiprocessing.connection import Connection

from ...processes import (DEFAULT_PROCESSES, MAX_PROCESSES, MIN_MEMORY,
                          MIN_PROCESSES, Supervised, default_memory,
                          limit_reached)
from ...presets import SMALL_ENV, SMALL_STEPS
from ...runs.memory import size_text
from ..runner import CellResult

#: Seconds a cell may run before it is stopped (`--timeout`)
DEFAULT_TIMEOUT = 600.0

#: Seconds a stopped cell has to return before its process is ended
GRACE = 10.0

#: The longest `timeout`, a week (``poll`` waits at most 2**31 - 1 ms,
#: 24.8 days; `d2l_bert.cli._args.MAX_SECONDS` is the same)
MAX_TIMEOUT = 7 * 24 * 3600.0

#: Seconds the child may take to start (import MXNet, d2l and d2l-bert)
START_TIMEOUT = 300.0

#: Seconds a child that runs no cell has to end by itself, once its
#: pipe is closed, before its supervisor ends it
CLOSE_TIMEOUT = 5.0


@dataclass
class HooksSeen:
    """What the child's `data_hooks.DataHooks` did, as `check_edition` reads
    it (``runner.hooks.small``, ``runner.hooks.used``)."""
    small: bool
    used: set = field(default_factory=set)


class ChildRunner:
    """Run cells in one namespace in a child process (see the module).

    Parameters
    ----------
    ctx : str, default 'cpu'
        Device of the cells, as `devices.parse_ctx` reads it (``'gpu:0'``).
    small : bool, default True
        Small sizes (`data_hooks.DataHooks`); the child's ``D2L_BERT_SMALL``
        says the same to the notebooks' cells.
    steps : int or None
        Step cap of ``train_bert(...)`` calls at small sizes.
    timeout : float or None, default `DEFAULT_TIMEOUT`
        Seconds a cell may run; None or 0 for no limit.
    grace : float, default `GRACE`
        Seconds a stopped cell has to return before its process is ended.
    notebooks : bool, default False
        Some cells come from d2l-bert's notebooks and read their settings
        from the environment: the child sets them first to what the hooks
        give the book's cells (`data_hooks.DataHooks.notebook_environment`).
    environ : mapping, optional
        The child's environment (default: `os.environ`), less the
        variables set here; never changed.
    memory : int, optional
        Bytes the cells' processes may use (default:
        `processes.default_memory`, half the machine's), at least
        `processes.MIN_MEMORY`.
    processes : int, default `processes.DEFAULT_PROCESSES`
        Processes and threads they may run at once.

    Examples
    --------
    >>> with ChildRunner() as runner:
    ...     _ = runner.run('x = 40')
    ...     runner.run('x + 2').output
    '42\\n'
    """

    def __init__(self, ctx='cpu', small=True, steps=SMALL_STEPS,
                 timeout=DEFAULT_TIMEOUT, grace=GRACE, notebooks=False,
                 environ=None, memory=None, processes=DEFAULT_PROCESSES):
        if timeout is not None and not 0 <= timeout <= MAX_TIMEOUT:
            raise ValueError(f'timeout must be a number of seconds from 0 '
                             f'to {MAX_TIMEOUT:g} (a week; 0 for no '
                             f'limit), got {timeout!r}')
        memory = default_memory() if memory is None else memory
        if not (isinstance(memory, int) and memory >= MIN_MEMORY):
            raise ValueError(f'memory must be a number of bytes of at '
                             f'least {MIN_MEMORY}, got {memory!r}')
        if not (isinstance(processes, int)
                and MIN_PROCESSES <= processes <= MAX_PROCESSES):
            raise ValueError(f'processes must be an integer from '
                             f'{MIN_PROCESSES} to {MAX_PROCESSES}, got '
                             f'{processes!r}')
        self.ctx, self.steps, self.notebooks = str(ctx), steps, notebooks
        self.timeout = timeout or None
        self.grace = grace
        self.memory, self.processes = memory, processes
        self.hooks = HooksSeen(bool(small))
        self._environ = dict(os.environ if environ is None else environ)
        self.directory = None  # the current child's; a new one for each
        self._process = self._conn = None
        self._ran = []  # sources run in the current child, to run again
        self._lost = None  # why the last child ended, until the next cell
        self._busy = False  # a cell is running (a Ctrl-C came meanwhile)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def run(self, source):
        """Run one cell in the child; return its `runner.CellResult`."""
        notes = []
        if self._process is None:
            try:
                notes += self._start()
            except (EOFError, OSError, RuntimeError) as e:
                self._stop_child()
                return CellResult('failed', '', 'the process that runs the '
                                  f'cells did not start: {e or "it ended"}')
        try:
            self._busy = True
            self._send(dict(code=source))
            wait = None if self.timeout is None else self.timeout + \
                self.grace
            reply = self._receive(wait)
            self._busy = False
        except (EOFError, OSError):
            return self._ended(notes)
        if reply is None:
            return self._stopped(notes)
        self.hooks.used |= set(reply.pop('used'))
        stopped, limit = reply.pop('stopped'), reply.pop('limit')
        if limit is not None:
            return self._limited(limit, notes)
        result = CellResult(**reply)
        if not stopped:
            self._ran.append(source)  # a cell stopped is not run again
        result.notes = notes + result.notes
        return result

    def close(self):
        """End the child (at once if a cell is running: a Ctrl-C came
        while it ran); its supervisor removes its directory."""
        self._stop_child(polite=not self._busy)
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)

    # --- the child's life ---------------------------------------------------

    def _start(self):
        """Start a child; run again the cells the last one ran.  Return
        notes that say so."""
        self._conn, theirs = Pipe()
        self.directory = os.path.join(
            tempfile.gettempdir(), f'd2l-bert-cells-{os.urandom(6).hex()}')
        env = dict(self._environ, TMPDIR=self.directory)
        env[SMALL_ENV] = '1' if self.hooks.small else '0'
        root = os.path.dirname(os.path.dirname(os.path.dirname(
            os.path.dirname(os.path.abspath(__file__)))))
        code = (f'import sys; sys.path.insert(0, {root!r}); '
                'from d2l_bert.chapter.editions.child import serve; '
                f'serve({theirs.fileno()})')
        try:
            self._process = Supervised(
                [sys.executable, '-c', code], folder=self.directory,
                memory=self.memory, processes=self.processes, env=env,
                pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL,
                stdout=2)
        finally:
            theirs.close()
        self._send(dict(ctx=self.ctx, small=self.hooks.small,
                        steps=self.steps, timeout=self.timeout,
                        notebooks=self.notebooks,
                        limits=self._process.limits,
                        groups=self._process.groups))
        if self._receive(START_TIMEOUT) is None:
            self._stop_child()
            raise RuntimeError('the process that runs the cells did not '
                               f'start within {START_TIMEOUT:g} s')
        if self._lost is None:
            return []
        lost, again, self._ran = self._lost, self._ran, []
        self._lost = None
        for source in again:
            try:
                self._send(dict(code=source))
                if self._receive(None if self.timeout is None else
                                 self.timeout + self.grace) is None:
                    raise EOFError
            except (EOFError, OSError):
                self._stop_child()
                return [f'{lost}; a new one could not run the '
                        f'{len(again)} cells that ran before again']
            self._ran.append(source)
        return [f'{lost}; this one ran in a new process, after the '
                f'{len(again)} cells that ran before were run there again']

    def _ended(self, notes):
        """The child ended while it ran a cell."""
        code = self._process.wait() if self._process else None
        limit = self._process.limit if self._process else None
        if limit is not None:
            return self._limited(limit, notes)
        self._stop_child()
        how = (f'signal {-code}' if code is not None and code < 0
               else f'exit status {code}')
        self._lost = 'the cell before ended its process'
        return CellResult('failed', '',
                          f'the cell ended its process ({how})',
                          notes=notes)

    def _stopped(self, notes):
        """The child did not answer within the timeout and its grace."""
        self._stop_child()
        self._lost = 'the cell before was stopped and its process ended'
        return CellResult(
            'failed', '',
            f'TimeoutError: the cell ran for more than {self.timeout:g} s '
            f'(--timeout) and did not stop; its process was ended',
            seconds=self.timeout + self.grace, notes=notes)

    def _limited(self, limit, notes):
        """The cell reached the limit `limit` ('memory' or 'processes')."""
        self._stop_child()
        self._lost = 'the cell before reached a limit, and its processes ' \
            'were ended'
        if limit == 'memory':
            reached = (f"the cells' memory limit, {size_text(self.memory)} "
                       '(--memory)')
        else:
            reached = (f"the cells' limit of {self.processes} processes "
                       'and threads (--processes)')
        return CellResult(
            'failed', '', f'the cell reached {reached}, and its processes '
            f'were ended; give a larger --{limit} to raise it', notes=notes)

    def _stop_child(self, polite=False):
        """End the child and every process below it (its supervisor
        does, and removes its directory)."""
        process, conn = self._process, self._conn
        self._process = self._conn = None
        self._busy = False
        if conn is not None:
            conn.close()  # a child waiting for a request ends on its own
        if process is None:
            return
        if polite:
            try:
                process.wait(timeout=CLOSE_TIMEOUT)
            except subprocess.TimeoutExpired:
                pass
        process.end()
        process.wait()

    def _send(self, message):
        self._conn.send_bytes(json.dumps(message).encode())

    def _receive(self, timeout):
        """The next message, or None if none came within `timeout` s."""
        if not self._conn.poll(timeout):
            return None
        return json.loads(self._conn.recv_bytes())


# --- in the child ------------------------------------------------------------

def serve(fd):
    """The child's loop: run each cell the pipe `fd` brings, answer with
    its result, until the pipe closes."""
    conn, pid = Connection(fd), os.getpid()
    config = json.loads(conn.recv_bytes())
    # before `mxnet` is imported: the parent's choices, from the
    # environment it passed on
    from ...threads import set_threads
    set_threads()
    from ...devices import parse_ctx
    from ..data_hooks import DataHooks
    from ..runner import Runner
    runner = Runner(parse_ctx(config['ctx']),
                    DataHooks(config['small'], config['steps']))
    if config['notebooks']:
        os.environ.update(runner.hooks.notebook_environment())
    conn.send_bytes(b'{}')
    while True:
        try:
            request = json.loads(conn.recv_bytes())
        except EOFError:
            return
        result, stopped = _run(runner, request['code'], config['timeout'])
        if os.getpid() != pid:   # a copy that a cell's `os.fork()` made
            os._exit(1)
        reply = dict(vars(result), used=sorted(runner.hooks.used),
                     stopped=stopped, limit=_limit(result, config))
        conn.send_bytes(json.dumps(reply).encode())


def _limit(result, config):
    """The limit the cell reached ('memory' or 'processes'), if it did:
    a cgroup's, or a resource limit's (a `MemoryError`, a fork refused)."""
    reached = limit_reached(config['groups'])
    error, how = result.error or '', config['limits']
    if reached is None and how['memory'] == 'RLIMIT_DATA' and \
            error.startswith('MemoryError'):
        reached = 'memory'
    if reached is None and how['processes'] == 'RLIMIT_NPROC' and \
            error.startswith('BlockingIOError') and \
            'fork' in (result.traceback or ''):
        reached = 'processes'
    return reached


def _run(runner, source, timeout):
    """`runner.run(source)`, stopped by `TimeoutError` after `timeout` s.

    Returns the `CellResult` and whether the alarm stopped the cell (not
    the cell's own `TimeoutError`, such as a socket's).
    """
    fired = []

    def alarm(signum, frame):
        fired.append(signum)
        raise TimeoutError(f'the cell ran for more than {timeout:g} s '
                           '(--timeout)')

    if not timeout:
        return runner.run(source), False
    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        result = runner.run(source)
    except TimeoutError as e:  # raised as the cell returned
        result = CellResult('failed', '', f'TimeoutError: {e}',
                            seconds=timeout)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    return result, bool(fired)
