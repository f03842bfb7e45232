"""What runs on each machine of a job over ssh, around its role.

The launcher (`d2l_bert.dist.launcher`) starts every role of a job over
ssh as ``python -m d2l_bert.dist.remote run ... -- COMMAND``, and before
that asks each machine ``python -m d2l_bert.dist.remote probe`` (in one
ssh login): whether the job's folder, this Python, d2l-bert, MXNet and the
workers' command are there, and how many cores the machine gives.

`run` starts COMMAND in a process group of its own and watches two
things:

- the command: when it ends, `run` ends with its status (128 + the
  signal's number when a signal killed it, as a shell says);
- the launcher: it writes a byte to `run`'s standard input, through ssh,
  every second.  When the input ends (the launcher stopped the job, or
  ssh ended) or stays silent for ``--timeout`` seconds (the network
  between them went down), `run` stops the command's process group
  (SIGTERM, then SIGKILL) and ends.  So a machine cut off from the
  launcher cleans itself up, with no help from the network.

This module does not import `mxnet`.
"""
import argparse
import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

from .hosts_file import DEFAULT_TIMEOUT

#: What `probe` prints before the number of cores, on a line of its own
PROBE_MARK = 'd2l-bert probe: cores '
#: Seconds between the launcher's heartbeats
HEARTBEAT = 1.0
#: Seconds a process group stopped with SIGTERM has before SIGKILL, here
#: and in the launcher (`d2l_bert.dist.launcher.run_job`)
GRACE = 3.0


def probe(folder, program=None):
    """Check this machine for a job; print `PROBE_MARK` and its cores.

    Returns
    -------
    int
        0, or 3 after one line on stderr saying what is missing.
    """
    problem = None
    if not os.path.isdir(folder):
        problem = f'no folder {folder}'
    elif importlib.util.find_spec('mxnet') is None:
        problem = f'{sys.executable} cannot import mxnet'
    elif program and shutil.which(program, path=_path_with(folder)) is None:
        problem = f'no command {program!r}'
    if problem:
        print(problem, file=sys.stderr, flush=True)
        return 3
    from ..threads import physical_cores
    print(f'{PROBE_MARK}{physical_cores()}', flush=True)
    return 0


def _path_with(folder):
    """PATH, for a command given as a relative path from `folder`."""
    return os.pathsep.join([os.environ.get('PATH', os.defpath), folder])


class _Heartbeats(threading.Thread):
    """Reads the launcher's heartbeats from standard input; `last` is
    when the last one came, `ended` whether the input ended."""

    def __init__(self):
        super().__init__(daemon=True)
        self.last = time.monotonic()
        self.ended = False

    def run(self):
        fd = sys.stdin.fileno()
        while True:
            try:
                data = os.read(fd, 64)
            except OSError:
                data = b''
            if not data:
                self.ended = True
                return
            self.last = time.monotonic()


def run(command, name, timeout, grace=GRACE, poll=0.1):
    """Run `command` until it ends, the launcher says stop, or the
    launcher is silent for `timeout` seconds; return the exit status."""
    try:
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    except OSError as e:
        print(f'{name}: cannot run {command[0]!r}: {e.strerror}',
              file=sys.stderr, flush=True)
        return 127
    beats = _Heartbeats()
    beats.start()
    stop = []
    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(signum, lambda s, f: stop.append(s))
    while proc.poll() is None:
        silent = time.monotonic() - beats.last
        if beats.ended or stop or silent > timeout:
            if not beats.ended and not stop:
                print(f'\n{name} on {os.uname().nodename}: no word from '
                      f'the launcher for {silent:.0f} s; stopped it',
                      file=sys.stderr, flush=True)
            _stop_group(proc, grace)
            return 128 + (stop[0] if stop else signal.SIGTERM)
        time.sleep(poll)
    status = proc.returncode
    return 128 - status if status < 0 else status


def _stop_group(proc, grace):
    """SIGTERM to `proc`'s process group, SIGKILL after `grace` s."""
    for signum, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, None)):
        try:
            os.killpg(proc.pid, signum)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            proc.wait(wait)
            if signum == signal.SIGTERM:
                # What else is in the group ends too
                os.killpg(proc.pid, signal.SIGKILL)
            return
        except subprocess.TimeoutExpired:
            continue
        except (ProcessLookupError, PermissionError):
            return


def main(argv=None):
    parser = argparse.ArgumentParser(prog='python -m d2l_bert.dist.remote')
    sub = parser.add_subparsers(dest='action', required=True)
    p = sub.add_parser('probe')
    p.add_argument('folder')
    p.add_argument('--command', default=None)
    r = sub.add_parser('run')
    r.add_argument('--name', default='role')
    r.add_argument('--timeout', type=float, default=DEFAULT_TIMEOUT)
    r.add_argument('command', nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if args.action == 'probe':
        return probe(args.folder, args.command)
    command = args.command[1:] if args.command[:1] == ['--'] \
        else args.command
    return run(command, args.name, args.timeout)


if __name__ == '__main__':
    sys.exit(main())
