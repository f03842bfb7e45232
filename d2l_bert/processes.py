"""Processes that end with the one that started them, within limits.

`Supervised` starts a command under a *supervisor*: a small process run
from a fresh interpreter (``python -I -S`` on this file, which imports
only Python's standard library, never MXNet).  On Linux it is the
*subreaper* of what the command starts (`PR_SET_CHILD_SUBREAPER`): a
process that leaves its parent (``setsid``, a double fork) becomes its
child instead of init's.  It holds one end of a pipe whose other end
only the starting process holds, and so notices that process's end,
SIGKILL included.  Then, or when the command ends, or on `end`, it kills
every process below it, again until it has no child left, removes the
command's folder and exits as the command did.  Left behind: processes
of another user (a set-user-ID program), those started outside the
process tree (``systemd-run``, ``ssh``), and, without Linux's ``/proc``
and subreapers (macOS), those outside the command's process group.

`Limits` bounds the command and all it starts:

- *memory*, in bytes: with a cgroup made below this process's own
  (cgroup v1's ``memory`` controller, or v2's where it is enabled for
  the children of this process's cgroup), for all of them together,
  swap included; elsewhere ``RLIMIT_DATA``, for each process;
- *processes* (and threads): with a ``pids`` cgroup likewise; elsewhere
  ``RLIMIT_NPROC``, which counts all of this user's (so it is set to
  those running plus the limit), and which root ignores;
- a cgroup's limit reached (the OOM killer ended a process, a fork was
  refused) ends them all, and `Supervised.limit` says which.

``check-text``'s cells, every process of a job and the benchmarks'
child processes run this way.
"""
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time
import types

try:
    import resource
except ImportError:    # Windows
    resource = None

#: ``prctl`` options (``<linux/prctl.h>``)
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36

#: Seconds between the supervisor's looks at its limits
POLL_SECONDS = 0.2
#: Seconds the supervisor tries to end what is below it, at most
SWEEP_SECONDS = 10.0
#: Seconds the supervisor may take to start its command
START_SECONDS = 60.0
#: The signals the supervisor passes on to its command's process group
FORWARDED = (signal.SIGHUP, signal.SIGINT, signal.SIGTERM)
#: How the cgroups made here begin
CGROUP_PREFIX = 'd2l-bert-'

#: The limits a command takes: at least 1 GB (a process that imported
#: MXNet maps 600 MB), from 64 to 65536 processes, 1024 by default
MIN_MEMORY = 1 << 30
MIN_PROCESSES, MAX_PROCESSES, DEFAULT_PROCESSES = 64, 65536, 1024
#: The share of the machine's memory `default_memory` gives
MEMORY_SHARE = 0.5

_LIBC = []   # the C library, once loaded


# --- Linux's /proc and prctl -------------------------------------------------

def descendants(pid):
    """The pids of every process below `pid`, from Linux's /proc (none
    elsewhere)."""
    tree = {}
    for entry in os.listdir('/proc') if os.path.isdir('/proc') else ():
        text = _read(f'/proc/{entry}/stat') if entry.isdigit() else None
        if text:   # the command's name, in parentheses, may hold spaces
            parent = int(text.rsplit(')', 1)[1].split()[1])
            tree.setdefault(parent, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        kids = tree.get(todo.pop(), [])
        found += kids
        todo += kids
    return found


def _signal(pid, signum, group=False):
    try:
        (os.killpg if group else os.kill)(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def _prctl(option, value):
    """``prctl(option, value)`` on Linux; whether it was done."""
    try:
        if not _LIBC:
            import ctypes
            _LIBC.append(ctypes.CDLL(None, use_errno=True))
        return _LIBC[0].prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError, TypeError):   # not Linux
        return False


def become_subreaper():
    """Make this process the parent of its orphaned descendants (Linux's
    `PR_SET_CHILD_SUBREAPER`); whether it could."""
    return _prctl(PR_SET_CHILD_SUBREAPER, 1)


def exit_with_parent(signum=signal.SIGTERM):
    """Have Linux send `signum` to this process when the one that
    started it ends (`PR_SET_PDEATHSIG`); exit at once if it has ended
    already.  Elsewhere do nothing."""
    if _prctl(PR_SET_PDEATHSIG, signum) and os.getppid() == 1:
        os._exit(1)


# --- limits ------------------------------------------------------------------

def machine_memory():
    """Bytes of memory of this machine (``MemTotal``), or of this
    process's cgroup if it has a lower limit; None where unknown."""
    known = [int(line.split()[1]) * 1024 for line in (_read(
        '/proc/meminfo') or '').splitlines() if line.startswith('MemTotal:')]
    place = cgroup_place('memory')
    if place is not None:
        value = _read(os.path.join(place[1], 'memory.max' if place[0] == 2
                                   else 'memory.limit_in_bytes')) or ''
        known += [int(value)] if value.strip().isdigit() else []
    return min(known) if known else None


def default_memory():
    """`MEMORY_SHARE` of `machine_memory` (at least `MIN_MEMORY`)."""
    total = machine_memory()
    return MIN_MEMORY if total is None else \
        max(MIN_MEMORY, int(total * MEMORY_SHARE))


def _read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def _write(path, text):
    with open(path, 'w') as f:
        f.write(text)


def _write_if(path, text):
    return os.path.exists(path) and _write(path, text)


def cgroup_place(controller, proc='/proc/self'):
    """``(version, folder)`` of this process's cgroup that `controller`
    (``'memory'``, ``'pids'``) limits, or None: a cgroup v1 hierarchy
    that holds it, else the cgroup v2 one if it is enabled there for
    the children of this process's cgroup (``cgroup.subtree_control``).
    """
    own = {}
    for line in (_read(f'{proc}/cgroup') or '').splitlines():
        _, names, path = line.split(':', 2)
        for name in names.split(',') if names else ['']:
            own[name] = path
    v2 = None
    for line in (_read(f'{proc}/mountinfo') or '').splitlines():
        fields = line.split()
        if ' - ' not in line:
            continue
        kind, _, options = line.split(' - ', 1)[1].split()[:3]
        root, point = fields[3], fields[4]
        if kind == 'cgroup' and controller in options.split(','):
            folder = _below(point, root, own.get(controller))
            if folder is not None:
                return 1, folder
        elif kind == 'cgroup2' and v2 is None:
            v2 = _below(point, root, own.get(''))
    if v2 is not None and controller in (_read(os.path.join(
            v2, 'cgroup.subtree_control')) or '').split():
        return 2, v2
    return None


def _below(point, root, path):
    """The folder of the cgroup `path` in a hierarchy whose `root` is
    mounted at `point`, or None if it is not below it."""
    if path is None or not (path + '/').startswith(root.rstrip('/') + '/'):
        return None
    return os.path.normpath(os.path.join(
        point, path[len(root.rstrip('/')):].lstrip('/')))


class Limits:
    """The limits of a command and of all it starts (see the module).

    Parameters
    ----------
    memory : int or None
        Bytes; None for no limit.
    processes : int or None
        Processes and threads; None for no limit.
    cgroups : bool, default True
        Make cgroups where one can (False: resource limits only).

    Attributes
    ----------
    how : dict
        ``{'memory': ..., 'processes': ...}``: ``'cgroup v1'``,
        ``'cgroup v2'``, ``'RLIMIT_DATA'``, ``'RLIMIT_NPROC'``, or None
        (no limit asked, or none that can apply).
    """

    def __init__(self, memory=None, processes=None, cgroups=True):
        self.groups = {}   # controller: (version, folder)
        self.how, self._rlimits = {}, []
        name = f'{CGROUP_PREFIX}{os.getpid()}-{os.urandom(4).hex()}'
        for kind, value, controller in (('memory', memory, 'memory'),
                                        ('processes', processes, 'pids')):
            self.how[kind] = None
            if value is None:
                continue
            place = cgroup_place(controller) if cgroups else None
            if place is not None and self._make(controller, place, name,
                                                value):
                self.how[kind] = f'cgroup v{place[0]}'
            elif resource is not None:
                self.how[kind] = self._rlimit(kind, value)

    def _make(self, controller, place, name, value):
        """Make the cgroup of `controller`; whether it could be."""
        version, parent = place
        folder = os.path.join(parent, name)
        try:
            if not os.path.isdir(folder):
                os.mkdir(folder)
            if controller == 'pids':
                _write(os.path.join(folder, 'pids.max'), str(value))
            elif version == 1:   # memory, and memory with swap if counted
                _write(os.path.join(folder, 'memory.limit_in_bytes'),
                       str(value))
                _write_if(os.path.join(folder, 'memory.memsw.limit_in_bytes'),
                          str(value))
            else:
                _write(os.path.join(folder, 'memory.max'), str(value))
                _write_if(os.path.join(folder, 'memory.swap.max'), '0')
        except OSError:
            if folder not in [f for _, f in self.groups.values()]:
                _rmdir(folder)
            return False
        self.groups[controller] = (version, folder)
        return True

    def _rlimit(self, kind, value):
        if kind == 'memory':
            self._rlimits.append((resource.RLIMIT_DATA, value))
            return 'RLIMIT_DATA'
        if os.geteuid() == 0:   # root is not held by RLIMIT_NPROC
            return None
        self._rlimits.append((resource.RLIMIT_NPROC,
                              user_tasks() + value))
        return 'RLIMIT_NPROC'

    def folders(self):
        return sorted(set(f for _, f in self.groups.values()))

    def enter(self):
        """In the command's process, before it runs (`preexec_fn`): a
        process group of its own, the cgroups, the resource limits."""
        os.setpgid(0, 0)
        for folder in self.folders():
            _write(os.path.join(folder, 'cgroup.procs'), str(os.getpid()))
        for which, value in self._rlimits:
            _, hard = resource.getrlimit(which)
            if hard != resource.RLIM_INFINITY:
                value = min(value, hard)
            resource.setrlimit(which, (value, hard))

    def kill(self):
        """SIGKILL to every process of the cgroups; whether there was
        one."""
        pids = set()
        for folder in self.folders():
            text = _read(os.path.join(folder, 'cgroup.procs')) or ''
            pids.update(int(p) for p in text.split())
        for pid in pids:
            _signal(pid, signal.SIGKILL)
        return bool(pids)

    def remove(self):
        """Remove the cgroups (empty by now)."""
        for folder in self.folders():
            _rmdir(folder)
        self.groups = {}


def limit_reached(groups):
    """'memory' or 'processes' if the limit of a cgroup of `groups`
    (`Limits.groups`) was reached (the OOM killer ended a process, a
    fork was refused), else None."""
    for kind, controller, name, key in (
            ('memory', 'memory', 'memory.oom_control', 'oom_kill'),
            ('memory', 'memory', 'memory.events', 'oom_kill'),
            ('processes', 'pids', 'pids.events', 'max')):
        if controller in groups:
            text = _read(os.path.join(groups[controller][1], name)) or ''
            for fields in map(str.split, text.splitlines()):
                if fields[:1] == [key] and int(fields[1]) > 0:
                    return kind
    return None


def _rmdir(folder):
    """Remove the cgroup `folder`, waiting up to a second for its last
    processes to leave it."""
    for _ in range(100):
        try:
            return os.rmdir(folder)
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.01)


def user_tasks():
    """The processes and threads of this process's real user, as
    ``RLIMIT_NPROC`` counts them."""
    count = 0
    for entry in os.listdir('/proc') if os.path.isdir('/proc') else ():
        text = _read(f'/proc/{entry}/status') if entry.isdigit() else ''
        fields = dict(line.split(':', 1) for line in
                      (text or '').splitlines() if ':' in line)
        if fields.get('Uid', '').split()[:1] == [str(os.getuid())]:
            count += int(fields.get('Threads', '1'))
    return count


# --- the starting process's side ---------------------------------------------

class Supervised(subprocess.Popen):
    """`subprocess.Popen` of a command run by a supervisor (see the
    module): it ends, with all it started, when this process ends.

    `pid`, `poll`, `wait` and `returncode` are the supervisor's, which
    ends as the command did; a signal of `FORWARDED` sent to it reaches
    the command's process group.

    Parameters
    ----------
    argv : list of str
        The command.
    folder : str, optional
        A folder the supervisor makes (it must not exist yet): the
        command's working directory, removed when they end.
    memory, processes, cgroups
        The command's `Limits`.
    **kwargs
        `subprocess.Popen`'s (`env`, `stdin`, `pass_fds`, ...); the
        supervisor runs in a session of its own.

    Attributes
    ----------
    child_pid : int
        The command's pid.
    limits, groups : dict
        `Limits.how` and `Limits.groups`.
    limit : str or None
        Once it has ended, the limit that ended it ('memory' or
        'processes'), if a cgroup's did.

    Raises
    ------
    OSError
        The command cannot start (as `subprocess.Popen` says it).
    """

    def __init__(self, argv, *, folder=None, memory=None, processes=None,
                 cgroups=True, pass_fds=(), **kwargs):
        watch, self._watch = os.pipe()
        self._report, report = os.pipe()
        config = json.dumps(dict(watch=watch, report=report, folder=folder,
                                 memory=memory, processes=processes,
                                 cgroups=cgroups))
        self.limit, self._buffer = None, b''
        try:
            super().__init__(
                [sys.executable, '-I', '-S', os.path.abspath(__file__),
                 config] + list(argv), start_new_session=True,
                pass_fds=tuple(pass_fds) + (watch, report), **kwargs)
        except BaseException:
            self._close()
            raise
        finally:
            os.close(watch)
            os.close(report)
        started = self._message(START_SECONDS) or dict(
            error=[0, 'its supervisor ended before it started'])
        if 'error' in started:
            self.end()
            self.wait()
            raise OSError(*started['error'], argv[0])
        self.child_pid, self.limits = started['pid'], started['limits']
        self.groups = started['groups']

    def end(self):
        """Have the supervisor kill the command and all below it."""
        if self._watch is not None:
            os.close(self._watch)
            self._watch = None

    def poll(self):
        status = super().poll()
        if status is not None:
            self._finish()
        return status

    def wait(self, timeout=None):
        status = super().wait(timeout)
        self._finish()
        return status

    def _finish(self):
        """Read the supervisor's last message: the limit reached."""
        while self._report is not None:
            message = self._message(0)
            if message is None:
                self._close()
            elif 'limit' in message:
                self.limit = message['limit']

    def _close(self):
        self.end()
        if self._report is not None:
            os.close(self._report)
            self._report = None

    def _message(self, timeout):
        """The supervisor's next message; None if none comes within
        `timeout` seconds, or none is left."""
        deadline = time.monotonic() + timeout
        while b'\n' not in self._buffer:
            left = max(0.0, deadline - time.monotonic())
            if not select.select([self._report], [], [], left)[0]:
                return None
            chunk = os.read(self._report, 4096)
            if not chunk:
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b'\n', 1)
        return json.loads(line)


# --- the supervisor's side ---------------------------------------------------

def _supervise(args, command):
    """Make the limits and the folder, start the command, watch it, then
    end all below; return the command's status (Popen's way)."""
    become_subreaper()
    wake, waker = os.pipe()
    for fd in (wake, waker):
        os.set_blocking(fd, False)
    signal.set_wakeup_fd(waker)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    child = status = limit = limits = popen = None

    def forward(signum, frame):
        if child is not None and status is None:
            _signal(child, signum, group=True)

    for signum in FORWARDED:
        signal.signal(signum, forward)
    try:
        limits = Limits(args.memory, args.processes, args.cgroups)
        try:
            if args.folder:
                os.mkdir(args.folder, 0o700)
            # kept: a `Popen` dropped reaps its child if it has ended
            popen = subprocess.Popen(command, cwd=args.folder,
                                     close_fds=False,
                                     preexec_fn=limits.enter)
            child = popen.pid
        except (OSError, subprocess.SubprocessError) as e:
            _tell(args.report, error=[getattr(e, 'errno', None) or 0,
                                      getattr(e, 'strerror', None) or
                                      str(e)])
            return 127
        _tell(args.report, pid=child, limits=limits.how,
              groups=limits.groups)
        status, limit = _watch(child, args.watch, wake, limits)
    finally:
        status = _sweep(child, limits, status)
        if popen is not None:   # reaped here
            popen.returncode = status
        if limits is not None:
            limits.remove()
        if args.folder:
            shutil.rmtree(args.folder, ignore_errors=True)
    _tell(args.report, status=status, limit=limit)
    return status


def _watch(child, watch, wake, limits):
    """Wait until `child` ends, the pipe `watch` ends (or brings a byte)
    or a cgroup's limit is reached; return `child`'s status (None if it
    still runs) and the limit reached."""
    while True:
        ready = select.select([watch, wake], [], [], POLL_SECONDS)[0]
        if wake in ready:   # a signal came: SIGCHLD, most likely
            os.read(wake, 4096)
        status, _ = _reap(child)
        if status is not None:
            return status, limit_reached(limits.groups)
        if watch in ready:
            return None, None
        limit = limit_reached(limits.groups)
        if limit is not None:
            return None, limit


def _reap(child):
    """Reap the children of this process that have ended; return the
    status of `child` if it was one of them, and whether any child is
    left."""
    found = None
    while True:
        try:
            pid, code = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return found, False
        if pid == 0:
            return found, True
        if pid == child:
            found = -os.WTERMSIG(code) if os.WIFSIGNALED(code) else \
                os.WEXITSTATUS(code)


def _sweep(child, limits, status):
    """Kill every process below this one and in the cgroups, again until
    none is left (this process has no child, the cgroups no process) or
    `SWEEP_SECONDS` have passed; return `child`'s status."""
    deadline = time.monotonic() + SWEEP_SECONDS
    while child is not None:
        if status is None:
            _signal(child, signal.SIGKILL, group=True)
        grouped = limits is not None and limits.kill()
        for pid in descendants(os.getpid()):
            _signal(pid, signal.SIGKILL)
        found, left = _reap(child)
        status = found if found is not None else status
        if not (left or grouped) or time.monotonic() > deadline:
            break
        time.sleep(0.005)
    return -signal.SIGKILL if status is None else status


def _tell(fd, **message):
    """One message to the starting process (gone, maybe)."""
    try:
        os.write(fd, json.dumps(message).encode() + b'\n')
    except OSError:   # it is gone
        pass


def _exit_as(status):
    """Exit with `status`, or by the signal ``-status``."""
    if status >= 0:
        sys.exit(status)
    signum = -status
    if resource is not None:   # no core file of the supervisor's
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    signal.set_wakeup_fd(-1)
    if signum not in (signal.SIGKILL, signal.SIGSTOP):
        signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
    os._exit(128 + signum)


def main(argv=None):
    """The supervisor: ``python -I -S processes.py CONFIG COMMAND...``,
    as `Supervised` starts it."""
    config, *command = sys.argv[1:] if argv is None else argv
    args = types.SimpleNamespace(**json.loads(config))
    for fd in (args.watch, args.report):
        os.set_inheritable(fd, False)
    _exit_as(_supervise(args, command))


if __name__ == '__main__':
    main()
