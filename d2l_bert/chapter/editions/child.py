"""Run an edition's cells in a child process, in a new temporary directory.

`d2l-bert check-text` runs the code of the file it is given, with the
rights of whoever runs it, and reviewers run it on other people's pull
requests.  `ChildRunner` runs the cells with `runner.Runner` in a child
process, so that:

- the child's working directory (and ``TMPDIR``) is a new temporary
  directory, removed when the runner is closed: a cell that writes files
  or changes directory leaves the caller's directory as it was;
- a cell that calls ``sys.exit`` is a failed cell (`runner.Runner` reports
  `SystemExit` as any error), and so is one that ends its process
  (``os._exit``, a crash): the next cell runs in a new child, after the
  cells that ran before it have run there again;
- a cell that runs longer than `timeout` seconds is stopped and reported as
  failed: an alarm in the child raises `TimeoutError` in the cell, and a
  cell that still does not return (it catches the error, or waits in
  compiled code) has its process ended `grace` seconds later, the next
  cell going on in a new child as above.

This is no sandbox: the cells still run with the user's rights and can
read, write or delete any file the user can.  Check a file you do not
trust in a container, or in CI.

The child makes the parent's thread choices: it inherits the environment
that the parent's `threads.set_threads` wrote, and calls `set_threads`
itself before `mxnet` is imported.  It runs in a session of its own,
and is the subreaper of what its cells start (``PR_SET_CHILD_SUBREAPER``
on Linux): when the child is stopped, every process below it ends with
it (`end_descendants`), also those a cell started in a session of its own
or that double-forked, and those seen below it after a cell are ended
even if the child ended first.  Requests and results are
JSON messages on a pipe of their own: what a cell prints, even to the
process's standard output, cannot garble them.
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

from ..notebooks import SMALL_ENV
from ..runner import SMALL_STEPS, CellResult

#: Seconds a cell may run before it is stopped (`--timeout`)
DEFAULT_TIMEOUT = 600.0

#: Seconds a stopped cell has to return before its process is ended
GRACE = 10.0

#: The longest `timeout`, a week (``poll`` waits at most 2**31 - 1 ms,
#: 24.8 days; `d2l_bert.cli._args.MAX_SECONDS` is the same)
MAX_TIMEOUT = 7 * 24 * 3600.0

#: Seconds the child may take to start (import MXNet, d2l and d2l-bert)
START_TIMEOUT = 300.0


@dataclass
class HooksSeen:
    """What the child's `runner.DataHooks` did, as `check_edition` reads
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
        Small sizes (`runner.DataHooks`); the child's ``D2L_BERT_SMALL``
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
        give the book's cells (`runner.DataHooks.notebook_environment`).
    environ : mapping, optional
        The child's environment (default: `os.environ`), less the
        variables set here; never changed.

    Examples
    --------
    >>> with ChildRunner() as runner:
    ...     _ = runner.run('x = 40')
    ...     runner.run('x + 2').output
    '42\\n'
    """

    def __init__(self, ctx='cpu', small=True, steps=SMALL_STEPS,
                 timeout=DEFAULT_TIMEOUT, grace=GRACE, notebooks=False,
                 environ=None):
        if timeout is not None and not 0 <= timeout <= MAX_TIMEOUT:
            raise ValueError(f'timeout must be a number of seconds from 0 '
                             f'to {MAX_TIMEOUT:g} (a week; 0 for no '
                             f'limit), got {timeout!r}')
        self.ctx, self.steps, self.notebooks = str(ctx), steps, notebooks
        self.timeout = timeout or None
        self.grace = grace
        self.hooks = HooksSeen(bool(small))
        self._environ = dict(os.environ if environ is None else environ)
        self.directory = tempfile.mkdtemp(prefix='d2l-bert-cells-')
        self._process = self._conn = None
        self._ran = []  # sources run in the current child, to run again
        self._lost = None  # why the last child ended, until the next cell
        self._seen = {}  # pid -> start time of the processes cells started
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
        self._remember_descendants()
        self.hooks.used |= set(reply.pop('used'))
        stopped = reply.pop('stopped')
        result = CellResult(**reply)
        if not stopped:
            self._ran.append(source)  # a cell stopped is not run again
        result.notes = notes + result.notes
        return result

    def close(self):
        """End the child (at once if a cell is running: a Ctrl-C came
        while it ran) and remove its directory."""
        self._stop_child(polite=not self._busy)
        shutil.rmtree(self.directory, ignore_errors=True)

    # --- the child's life ---------------------------------------------------

    def _start(self):
        """Start a child; run again the cells the last one ran.  Return
        notes that say so."""
        ours, theirs = Pipe()
        env = dict(self._environ, TMPDIR=self.directory)
        env[SMALL_ENV] = '1' if self.hooks.small else '0'
        root = os.path.dirname(os.path.dirname(os.path.dirname(
            os.path.dirname(os.path.abspath(__file__)))))
        code = (f'import sys; sys.path.insert(0, {root!r}); '
                'from d2l_bert.chapter.editions.child import serve; '
                f'serve({theirs.fileno()})')
        self._process = subprocess.Popen(
            [sys.executable, '-c', code], cwd=self.directory, env=env,
            pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL,
            stdout=2, start_new_session=True)
        theirs.close()
        self._conn = ours
        self._send(dict(ctx=self.ctx, small=self.hooks.small,
                        steps=self.steps, timeout=self.timeout,
                        notebooks=self.notebooks))
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

    def _remember_descendants(self):
        """Note the processes below the child after a cell, to end them
        even if the child ends first (its orphans then leave its tree)."""
        if self._process is None:
            return
        for pid in descendants(self._process.pid):
            started = _start_time(pid)
            if started is not None:
                self._seen[pid] = started

    def _ended(self, notes):
        """The child ended while it ran a cell."""
        code = self._process.wait() if self._process else None
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

    def _stop_child(self, polite=False):
        """End the child and every process of its session."""
        process, conn = self._process, self._conn
        self._process = self._conn = None
        self._busy = False
        if process is not None and process.poll() is None:
            # First what the cells started, in any session: the child
            # is their subreaper, so they are all below it while it lives
            end_descendants(process.pid)
        # and those seen below a child that has ended since
        for pid, started in self._seen.items():
            if _start_time(pid) == started:
                _signal(pid, signal.SIGKILL)
        self._seen = {}
        if conn is not None:
            conn.close()  # a child waiting for a request ends on its own
        if process is None:
            return
        if polite:
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        process.wait()

    def _send(self, message):
        self._conn.send_bytes(json.dumps(message).encode())

    def _receive(self, timeout):
        """The next message, or None if none came within `timeout` s."""
        if not self._conn.poll(timeout):
            return None
        return json.loads(self._conn.recv_bytes())


# --- the processes the cells start -------------------------------------------

def children_of():
    """``{parent pid: [child pids]}`` of every process, from Linux's
    /proc (empty elsewhere)."""
    tree = {}
    try:
        entries = os.listdir('/proc')
    except OSError:
        return tree
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f'/proc/{entry}/stat') as f:
                # The command's name, in parentheses, may hold spaces
                parent = int(f.read().rsplit(')', 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        tree.setdefault(parent, []).append(int(entry))
    return tree


def descendants(pid):
    """The pids of every process below `pid` (none without /proc)."""
    tree, found, todo = children_of(), [], [pid]
    while todo:
        kids = tree.get(todo.pop(), [])
        found += kids
        todo += kids
    return found


def end_descendants(pid):
    """Stop (SIGSTOP) every process below `pid`, again until no new one
    appears (a process forking meanwhile), then kill them (SIGKILL).

    Returns
    -------
    list of int
        Their pids.
    """
    seen = []
    for _ in range(20):
        new = [p for p in descendants(pid) if p not in seen]
        if not new:
            break
        for p in new:
            _signal(p, signal.SIGSTOP)
        seen += new
    for p in seen:
        _signal(p, signal.SIGKILL)
    return seen


def _start_time(pid):
    """When `pid` started (clock ticks after boot), telling it from a
    later process given the same pid; None if it is gone."""
    try:
        with open(f'/proc/{pid}/stat') as f:
            return int(f.read().rsplit(')', 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def _signal(pid, signum):
    try:
        os.kill(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def become_subreaper():
    """Make this process the parent of its orphaned descendants (Linux's
    ``PR_SET_CHILD_SUBREAPER``): a process a cell starts in a session of
    its own, or that double-forks, stays below it, where
    `end_descendants` finds it.  Elsewhere it does nothing."""
    if not sys.platform.startswith('linux'):
        return False
    import ctypes
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(36, 1, 0, 0, 0) == 0   # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        return False


# --- in the child ------------------------------------------------------------

def serve(fd):
    """The child's loop: run each cell the pipe `fd` brings, answer with
    its result, until the pipe closes."""
    conn = Connection(fd)
    become_subreaper()
    config = json.loads(conn.recv_bytes())
    # before `mxnet` is imported: the parent's choices, from the
    # environment it passed on
    from ...threads import set_threads
    set_threads()
    from ...devices import parse_ctx
    from ..runner import DataHooks, Runner
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
        reply = dict(vars(result), used=sorted(runner.hooks.used),
                     stopped=stopped)
        conn.send_bytes(json.dumps(reply).encode())


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
