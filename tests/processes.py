"""Watching the processes a test starts: their descendants, the addresses
they listen on, and stopping them all (Linux's /proc), shared by the tests
of `d2l_bert.dist.launcher` and of the commands that launch jobs."""
import os
import signal
import subprocess
import sys
import time

import pytest

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
