"""Watching the processes a test starts: their descendants, the addresses
they listen on, those that carry a test's mark in their environment, and
stopping them all (Linux's /proc); an outer limit on the processes a test
starts; shared by the tests of `d2l_bert.processes`, of
`d2l_bert.dist.launcher` and of the commands that start processes."""
import contextlib
import os
import resource
import signal
import subprocess
import sys
import time

import pytest

from d2l_bert import processes as supervision
from d2l_bert.dist.workers import has_parameter_server

#: Where a test may wait for a job of a few tiny steps, at most
JOB_TIMEOUT = 120

#: For a test that watches processes through Linux's /proc
needs_proc = pytest.mark.skipif(
    not os.path.isdir('/proc/self/fd'),
    reason="no /proc here: the test reads processes' trees and sockets "
           'from Linux\'s /proc')
#: For a test that runs a job on MXNet's parameter server
needs_parameter_server = pytest.mark.skipif(
    not has_parameter_server(),
    reason='this MXNet has no parameter server (DIST_KVSTORE)')


def children(pid):
    """The pids whose parent is `pid` (none found without /proc)."""
    found = []
    for entry in (os.listdir('/proc') if os.path.isdir('/proc') else ()):
        if not entry.isdigit():
            continue
        try:
            with open(f'/proc/{entry}/stat') as f:
                # The command name, in parentheses, may hold spaces
                fields = f.read().rsplit(')', 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(entry))
    return found


def descendants(pid):
    """Every process below `pid`, children first."""
    found, todo = [], [pid]
    while todo:
        kids = children(todo.pop())
        found += kids
        todo += kids
    return found


def roles(pids):
    """The pids of `pids` that are no supervisor of `d2l_bert.processes`
    (the processes of a job, each under a supervisor of its own)."""
    return [pid for pid in pids
            if os.path.abspath(supervision.__file__) not in cmdline(pid)]


def alive(pid):
    """Whether `pid` runs (a zombie does not count)."""
    try:
        with open(f'/proc/{pid}/stat') as f:
            return f.read().rsplit(')', 1)[1].split()[0] != 'Z'
    except OSError:
        return False


def cmdline(pid):
    try:
        with open(f'/proc/{pid}/cmdline', 'rb') as f:
            return f.read().decode(errors='replace').split('\0')
    except OSError:
        return []


def listening(pids):
    """``[(pid, address, port)]`` of the TCP sockets `pids` listen on."""
    addresses = {}
    for name in ('tcp', 'tcp6'):
        try:
            with open(f'/proc/net/{name}') as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if fields[3] != '0A':                       # TCP_LISTEN
                continue
            address, port = fields[1].split(':')
            addresses[fields[9]] = (_address(address), int(port, 16))
    found = []
    for pid in pids:
        try:
            fds = os.listdir(f'/proc/{pid}/fd')
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(f'/proc/{pid}/fd/{fd}')
            except OSError:
                continue
            inode = target[len('socket:['):-1]
            if target.startswith('socket:[') and inode in addresses:
                found.append((pid,) + addresses[inode])
    return found


def _address(hex_address):
    """The address of /proc/net/tcp's little-endian hexadecimal form."""
    if len(hex_address) == 8:
        return '.'.join(str(int(hex_address[i:i + 2], 16))
                        for i in (6, 4, 2, 0))
    return hex_address          # IPv6: compared as it is


def start(argv, log_dir, name, env=None):
    """Start `argv` in a session of its own, its output in two files of
    `log_dir`; return the Popen."""
    out = open(os.path.join(log_dir, f'{name}.out'), 'w')
    err = open(os.path.join(log_dir, f'{name}.err'), 'w')
    with out, err:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=err, env=env, start_new_session=True)


def d2l_bert(*args):
    """The command line of ``d2l-bert ARGS`` in this interpreter."""
    return [sys.executable, '-m', 'd2l_bert'] + [str(a) for a in args]


def stop(proc, extra=(), grace=10):
    """Stop `proc` and everything it started: SIGTERM to `proc` (a
    launcher then stops its job), then SIGKILL to the process groups of
    `proc`, of its descendants and of the pids `extra` (only to those
    still running a d2l_bert command: a pid may have been reused)."""
    pids = set(extra)
    if proc.poll() is None:
        pids.update(descendants(proc.pid))
        proc.terminate()
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            pass
    ours = [pid for pid in sorted(pids)
            if alive(pid) and 'd2l_bert' in ' '.join(cmdline(pid))]
    if proc.poll() is None:
        ours.insert(0, proc.pid)
    for pid in ours:
        for kill in (os.killpg, os.kill):
            try:
                kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    proc.wait()


def wait_for(condition, timeout, what):
    """Poll `condition()` until it is true; fail after `timeout` s."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f'waited {timeout} s for {what}')
        time.sleep(0.05)


def marked(mark):
    """The live processes whose environment holds `mark` (a test sets
    it in the environment of what it starts: every descendant inherits
    it)."""
    found = []
    for entry in os.listdir('/proc'):
        if not entry.isdigit():
            continue
        try:
            with open(f'/proc/{entry}/environ', 'rb') as f:
                if mark.encode() in f.read() and alive(int(entry)):
                    found.append(int(entry))
        except OSError:
            continue
    return found


def left_behind(mark, seconds=10):
    """The processes holding `mark` still there after up to `seconds`
    (none: the test passes at once); kills them, so that a failed test
    leaves none either."""
    deadline = time.monotonic() + seconds
    while marked(mark) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = marked(mark)
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return left


def our_cgroups():
    """The cgroups `d2l_bert.processes` made (``d2l-bert-*``) below this
    process's own cgroups."""
    found = set()
    for controller in ('pids', 'memory'):
        place = supervision.cgroup_place(controller)
        if place is not None:
            found.update(os.path.join(place[1], name)
                         for name in os.listdir(place[1])
                         if name.startswith(supervision.CGROUP_PREFIX))
    return found


def cgroups_left(before):
    """The cgroups of `our_cgroups` made since `before` whose supervisor
    has ended: what a run left behind.  A cgroup whose supervisor (the
    PID in its name) still runs belongs to a run going on, another
    pytest worker's, and one that went since `before` was such a run's."""
    def ended(path):
        pid = int(os.path.basename(path)[len(supervision.CGROUP_PREFIX):]
                  .split('-')[0])
        return not os.path.exists(f'/proc/{pid}')
    return {path for path in our_cgroups() - before if ended(path)}


@contextlib.contextmanager
def pids_limit(count):
    """Yield a `preexec_fn` that holds a process, and all it starts, to
    `count` processes and threads, the test's own outer limit: a pids
    cgroup below this process's (removed afterwards, its processes
    killed), else ``RLIMIT_NPROC`` (for a user other than root, whom it
    does not hold).  Skips the test where neither can hold it."""
    place = supervision.cgroup_place('pids')
    folder = None
    if place is not None:
        folder = os.path.join(place[1], f'test-outer-{os.getpid()}')
        try:
            os.mkdir(folder)
            with open(os.path.join(folder, 'pids.max'), 'w') as f:
                f.write(str(count))
        except OSError:
            folder = None
    if folder is None and os.geteuid() == 0:
        pytest.skip('no writable pids cgroup to bound a fork bomb, and '
                    'RLIMIT_NPROC does not hold root')
    nproc = supervision.user_tasks() + count

    def limit():
        if folder is not None:
            with open(os.path.join(folder, 'cgroup.procs'), 'w') as f:
                f.write(str(os.getpid()))
        else:
            resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
    try:
        yield limit
    finally:
        if folder is not None:
            _remove_cgroup(folder)


def _remove_cgroup(folder):
    """Kill the processes of the cgroup `folder` and of those below it,
    and remove them all; fail if `d2l_bert.processes` left one there."""
    inner = [os.path.join(root, name)
             for root, names, _ in os.walk(folder) for name in names]
    deadline = time.monotonic() + 10
    for group in sorted(inner, reverse=True) + [folder]:
        while os.path.isdir(group) and time.monotonic() < deadline:
            try:
                os.rmdir(group)
            except OSError:   # processes are left in it: kill them
                with open(os.path.join(group, 'cgroup.procs')) as f:
                    for pid in f.read().split():
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(int(pid), signal.SIGKILL)
                time.sleep(0.05)
    assert not inner, f'cgroups left behind: {inner}'
