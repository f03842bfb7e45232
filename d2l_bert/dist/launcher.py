"""Start a job on MXNet's parameter server, watch it, and stop it whole.

A data-parallel job on MXNet's parameter server (the ``dist_sync``
kvstore) is a set of processes, each told its role by ps-lite's
``DMLC_*`` environment variables: one scheduler, which introduces the
others to each other; S servers, which sum the gradients the workers push;
and N workers, which train.  `d2l_bert.dist.roles.local_roles`
describes such a job on this machine, `d2l_bert.dist.ssh.ssh_roles` one
spread over the machines of a hosts file (`read_hosts`); `prepare_job`
checks a job's options and picks one of the two, starting nothing;
`run_job` starts the processes, watches them and stops them all when
one fails.  ``d2l-bert pretrain --workers N`` and
``d2l-bert launch`` call these two; the worker's side of the job is in
`d2l_bert.dist.workers`.

Why not MXNet's own launcher (``python -m mxnet.tools.launch``, which
runs the roles through the ``dmlc_tracker`` package of the same wheel):

- On Python 3.9 and later it fails at once: ``dmlc_tracker/tracker.py``
  calls ``Thread.isAlive``, which Python 3.9 removed.  It fails after it
  started the scheduler and before it started any server or worker; the
  scheduler, left behind, waits forever, and keeps the launcher's output
  open, so a caller that reads that output to its end sees nothing at all.
- It puts the scheduler on the address of the machine's outgoing network
  interface (found by "connecting" a UDP socket to 10.255.255.255, which
  also fails on a machine without a network) and probes ports on every
  interface; the servers and workers bind to whatever interface ps-lite
  finds.  A job on one machine is open to the network.
- It does not watch its processes: when a worker dies, the others wait
  for it forever.

Here every role of a local job binds to the loopback address: the
scheduler to ``DMLC_PS_ROOT_URI``, the servers and workers to
``DMLC_NODE_HOST`` (without it, ps-lite binds them to the first network
interface it finds).  Every process runs under a supervisor of its own
(`d2l_bert.processes.Supervised`), which ends it, and all it started,
when the launcher ends, however it ends; when one ends badly, `run_job`
says in one line which one and how, and stops all the others.

The threads are explicit: each worker gets ``cores // N`` of them
(`roles.divide_threads`), each scheduler and server one.  ``d2l-bert pretrain``
passes the count to its workers as ``--threads``, which reach
`d2l_bert.threads.set_threads` before `mxnet` is imported; any other
worker command finds it in ``OMP_NUM_THREADS``.

This module does not import `mxnet`, except in `serve`, which runs a
scheduler or a server.
"""
import os
import signal
import subprocess
import sys
import time
from collections import namedtuple

from ..processes import Supervised, exit_with_parent
from . import ssh
from .hosts_file import DEFAULT_TIMEOUT, HostsError, check_timeout, \
    read_hosts
from .remote import GRACE, HEARTBEAT
from .roles import LOOPBACK, ROLE_VARIABLES, LaunchError, check_command, \
    check_counts, check_port, check_port_number, check_threads, \
    divide_threads, free_port, local_roles

#: Seconds a scheduler or server may take to end after the last worker
SETTLE = 3.0
#: Seconds a scheduler or server that ended cleanly waits for workers
#: still running before the job fails (`run_job`'s `finish`)
FINISH = 30.0
#: Seconds between `run_job`'s looks at its processes
POLL = 0.05
#: Seconds `prepare_job` waits for a machine's ssh port to answer, at most
REACH_TIMEOUT = 5.0

#: A job ready to start, with its `roles`, the scheduler's `port`, each
#: worker's `num_threads` by its machine's address (127.0.0.1 on this
#: machine), `num_workers`, and a `description` (one line on this
#: machine; over ssh, a line more for each machine)
Job = namedtuple('Job', ['roles', 'port', 'num_threads', 'num_workers',
                         'description'])


def prepare_job(worker_argv, *, num_workers=None, num_servers=None,
                hosts=None, port=None, num_threads=None, timeout=None):
    """Check a job's options and describe its processes; start nothing.

    Parameters
    ----------
    worker_argv : callable
        ``worker_argv(num_threads)``: each worker's command, given its
        thread count.
    num_workers : int, optional
        Default: one per machine of `hosts`; required without `hosts`.
    num_servers : int, optional
        Default: 1 on this machine, one per machine over ssh.
    hosts : str, optional
        A hosts file (`read_hosts`): run over ssh on those machines, each
        checked to answer on its ssh port, to let this user log in and
        to hold the same Python (`ssh.probe_hosts`).  Without it, everything
        runs here, on 127.0.0.1.
    port : int, optional
        The scheduler's port: default a free one here (checked to be
        free when given), `ssh.DEFAULT_SSH_JOB_PORT` over ssh.
    num_threads : int, optional
        Each worker's CPU threads; default the physical cores of its
        machine (this one, or each machine of `hosts`) divided among the
        workers there.
    timeout : float, optional
        Over ssh, the seconds a machine may be silent before the job is
        stopped (`hosts_file.DEFAULT_TIMEOUT`, `hosts_file.check_timeout`);
        refused
        without `hosts`.

    Returns
    -------
    Job

    Raises
    ------
    LaunchError
        With one line naming the option at fault.
    """
    machines = None
    if hosts is not None:
        machines = _checked(read_hosts, hosts)
        num_workers = len(machines) if num_workers is None else num_workers
        num_servers = len(machines) if num_servers is None else num_servers
    elif num_workers is None:
        raise LaunchError('give --workers N (or --hosts FILE)')
    elif timeout is not None:
        raise LaunchError('--timeout goes with --hosts FILE: how long a '
                          'machine may be silent (a job on this machine '
                          'has no such limit)')
    num_servers = 1 if num_servers is None else num_servers
    check_counts(num_workers, num_servers)
    check_threads(num_threads)
    timeout = _checked(check_timeout,
                       DEFAULT_TIMEOUT if timeout is None else timeout)
    if machines is not None:
        return _ssh_job(worker_argv, machines, hosts, num_workers,
                        num_servers, port, num_threads, timeout)
    return _local_job(worker_argv, num_workers, num_servers, port,
                      num_threads)


def _checked(check, value):
    """`check(value)`, its `HostsError` raised as a `LaunchError`."""
    try:
        return check(value)
    except HostsError as e:
        raise LaunchError(str(e)) from None


def _local_job(worker_argv, num_workers, num_servers, port, num_threads):
    """`prepare_job` on this machine, on 127.0.0.1."""
    if num_threads is None:
        num_threads = divide_threads(num_workers)
    argv = worker_argv(num_threads)
    check_command(argv)
    if port is None:
        port = free_port()
    else:
        check_port(port)
    roles = local_roles(argv, num_workers, num_servers, port, num_threads)
    description = (f'starting 1 scheduler, {num_servers} server(s) and '
                   f'{num_workers} worker(s) on {LOOPBACK}:{port}, '
                   f'{num_threads} thread(s) per worker')
    return Job(roles, port, {LOOPBACK: num_threads}, num_workers,
               description)


def _ssh_job(worker_argv, machines, path, num_workers, num_servers, port,
             num_threads, timeout):
    """`prepare_job` over the machines of the hosts file `path`."""
    port = ssh.DEFAULT_SSH_JOB_PORT if port is None else port
    check_port_number(port)
    ssh.check_reachable(machines, path,
                        timeout=min(timeout, REACH_TIMEOUT))
    program = worker_argv(num_threads or 1)[0]
    cores = ssh.probe_hosts(machines, path, program, timeout=timeout)
    workers_on = {}
    for _, role, host in ssh.deal(machines, num_workers, num_servers):
        if role == 'worker':
            workers_on[host.address] = workers_on.get(host.address, 0) + 1
    threads = {address: num_threads or divide_threads(
        workers_on.get(address, 1), cores[address]) for address in cores}
    roles = ssh.ssh_roles(machines, worker_argv, num_workers, num_servers,
                          port, threads, timeout=timeout)
    counts = sorted(set(threads[a] for a in workers_on))
    description = '\n'.join(
        [f'starting 1 scheduler, {num_servers} server(s) and {num_workers} '
         f'worker(s) on {len(machines)} machine(s) over ssh, the scheduler '
         f'on {machines[0].address}:{port}, '
         f'{"/".join(map(str, counts))} thread(s) per worker']
        + ssh.host_lines(machines, num_workers, num_servers, threads,
                         cores))
    return Job(roles, port, threads, num_workers, description)


# ---------------------------------------------------------------------------
# Running a job
# ---------------------------------------------------------------------------

class _Stop(Exception):
    """This launcher was asked to stop (SIGTERM or SIGHUP)."""

    def __init__(self, signum):
        super().__init__(signum)
        self.signum = signum


def _raise_stop(signum, frame):
    raise _Stop(signum)


def _environment(role):
    """This process's environment without ps-lite's variables, plus the
    role's."""
    env = {k: v for k, v in os.environ.items() if k not in ROLE_VARIABLES}
    env.update(role.env)
    return env


def _how(status, role=None):
    """Say how a process with exit `status` (``Popen.returncode``) ended;
    for an ssh `role`, 255 is ssh's own failure."""
    if role is not None and role.host and status == 255:
        return (f'lost its connection: ssh to {role.host} failed or got no '
                'answer (the machine or its network is down)')
    if status < 0 or (role is not None and role.host and status > 128):
        signum = -status if status < 0 else status - 128
        try:
            name = signal.Signals(signum).name
        except ValueError:
            name = f'signal {signum}'
        return f'was killed by {name}'
    return f'exited with status {status}'


def _exit_status(status):
    """The launcher's exit status for a process that ended with `status`:
    its own, or 128 + the signal that killed it, as a shell gives."""
    return 128 - status if status < 0 else (status or 1)


def run_job(roles, *, prog='d2l-bert', grace=GRACE, finish=FINISH,
            poll=POLL, stream=None):
    """Start every role, wait until the workers are done, stop the rest.

    Each process runs under a supervisor (`processes.Supervised`), in a
    process group of its own, with this process's standard output and
    error.  The job has failed as soon as a process ends with a non-zero
    status or a signal, or a scheduler or a server ends before the
    workers: one line on `stream` then names the process, its machine,
    and how it ended, and every other process is stopped: the ssh of a
    remote one first sees its input end (its machine's
    `d2l_bert.dist.remote` then stops the role), every process group
    gets SIGTERM `grace` seconds later, and what is left is killed
    `grace` seconds after that.  So a failed job ends within about ``poll
    + 3 * grace`` seconds, leaving no process behind.  After the last
    worker exits cleanly, the scheduler and servers end by themselves;
    those still running after `SETTLE` seconds (or `finish`, if less) are
    stopped, with a note on `stream` (workers that never joined the job
    leave them waiting).  Ctrl-C, SIGTERM and SIGHUP stop the job the
    same way.  A process a role started, in its group, in a session of
    its own (``setsid``) or double-forked, ends with its role; and should
    this process end, SIGKILL included, every role ends with it.

    While the job runs, each ssh gets a byte on its standard input every
    `HEARTBEAT` seconds: the heartbeat its machine's
    `d2l_bert.dist.remote` waits for.

    Parameters
    ----------
    roles : list of roles.Role
        The processes to start, in order.
    prog : str
        Starts the message line (``d2l-bert pretrain: error: ...``).
    grace, finish, poll : float
        Seconds (`remote.GRACE`, `FINISH`, `POLL`).
    stream : file, optional
        Where the message line goes; default `sys.stderr`.

    Returns
    -------
    int
        0 if every worker exited with status 0; else the failed process's
        status (128 + the signal's number for a signal), or 130 after
        Ctrl-C.
    """
    stream = sys.stderr if stream is None else stream
    handlers = {}
    procs = []
    try:
        _catch_stop(handlers)
        for role in roles:
            procs.append((role, _start(role)))
        failed = _watch(procs, finish, poll)
        if failed is None:
            _note_waiting(prog, stream, procs)
            return 0
        return _report(prog, stream, *_failure(failed, len(procs)))
    except (_CannotStart, KeyboardInterrupt, _Stop) as e:
        return _report(prog, stream, *_interruption(e))
    finally:
        _stop(procs, grace)
        _restore_handlers(handlers)


def _note_waiting(prog, stream, procs):
    """Say so when a scheduler or server still waits for the workers,
    which have all exited: `run_job` stops it."""
    waiting = [role.name for role, proc in procs if proc.poll() is None]
    if waiting:
        print(f'{prog}: note: the workers have exited, but '
              f'{", ".join(waiting)} still waited for them (did each '
              "worker join the job, with mx.kv.create('dist_sync')?); "
              'stopped', file=stream, flush=True)


def _catch_stop(handlers):
    """Have SIGTERM and SIGHUP raise `_Stop`, keeping the handlers they
    had in the dict `handlers` as each is replaced (none outside the main
    thread)."""
    for signum in (signal.SIGTERM, signal.SIGHUP):
        try:
            handlers[signum] = signal.signal(signum, _raise_stop)
        except ValueError:   # not the main thread: no handlers
            break


def _restore_handlers(handlers):
    """Put back the signal handlers `_catch_stop` replaced."""
    for signum, handler in handlers.items():
        signal.signal(signum, handler)


def _report(prog, stream, message, status):
    """Print `run_job`'s message line on `stream`; return `status`."""
    # On a line of its own, also after a progress bar cut short
    print(f'\n{prog}: {message}', file=stream, flush=True)
    return status


def _failure(failed, num_procs):
    """The message line and the exit status of a job whose process
    `failed` (``(role, proc)``) ended badly, out of `num_procs`."""
    role, proc = failed
    where = f' on {role.host}' if role.host else ''
    return (f'error: {role.name} (pid {proc.child_pid}{where}) '
            f'{_how(proc.returncode, role)}; stopped the job and its '
            f'{num_procs - 1} other process(es)',
            _exit_status(proc.returncode))


def _interruption(e):
    """The message line and the exit status of a job stopped by `e`: a
    `_CannotStart`, a `KeyboardInterrupt` (Ctrl-C) or a `_Stop`."""
    if isinstance(e, _CannotStart):
        return f'error: {e}; stopped the job', 127
    if isinstance(e, KeyboardInterrupt):
        return 'interrupted; stopped the job', 130
    return (f'got {signal.Signals(e.signum).name}; stopped the job',
            128 + e.signum)


class _CannotStart(Exception):
    """A role's program could not be started."""


def _start(role):
    """Start `role` under a supervisor; an ssh role's standard input is a
    pipe, for the heartbeats."""
    try:
        return Supervised(
            role.argv, env=_environment(role),
            stdin=subprocess.PIPE if role.host else subprocess.DEVNULL)
    except OSError as e:
        raise _CannotStart(f'cannot start {role.name}: {role.argv[0]}: '
                           f'{e.strerror}') from None


def _heartbeat(procs):
    """A byte to every ssh role that is still there."""
    for role, proc in procs:
        if proc.stdin is not None and proc.poll() is None:
            try:
                proc.stdin.write(b'.')
                proc.stdin.flush()
            except (BrokenPipeError, OSError, ValueError):
                pass


#: A scheduler or server that ended cleanly while workers still ran, and
#: when `_watch` saw it
_Early = namedtuple('_Early', ['role', 'proc', 'since'])


def _watch(procs, finish, poll):
    """Wait for the workers; return the first ``(role, proc)`` that failed,
    or None when the workers are done.

    A process fails by ending with a non-zero status or a signal.  A
    scheduler or server that ends cleanly while workers still run is
    normal for a moment (the workers' last barrier lets it go before they
    have exited), but fails the job if the workers are not done `finish`
    seconds later: they would wait for it forever.
    """
    done_at = early = None
    beat = 0.0
    while True:
        now = time.monotonic()
        if now - beat >= HEARTBEAT:
            _heartbeat(procs)
            beat = now
        states = [(role, proc, proc.poll()) for role, proc in procs]
        for role, proc, status in states:
            if status not in (None, 0):
                return role, proc
        if all(status == 0 for role, _, status in states
               if role.role == 'worker'):
            done_at = done_at or now
            if all(status is not None for _, _, status in states) or \
                    now - done_at > min(finish, SETTLE):
                return None   # `run_job` stops what still runs
        else:
            for role, proc, status in states:
                if status == 0 and role.role != 'worker':
                    early = early or _Early(role, proc, now)
            if early and now - early.since > finish:
                return early.role, early.proc
        time.sleep(poll)


def _stop(procs, grace):
    """End the input of every ssh and wait `grace` seconds for them (their
    machines stop the roles), then SIGTERM to the process group of every
    process (its supervisor passes it on), and after `grace` seconds more
    have the supervisors kill what is left; reap them all."""
    def wait_all(seconds, which):
        deadline = time.monotonic() + seconds
        for proc in which:
            try:
                proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
    remote = [proc for _, proc in procs if proc.stdin is not None]
    for proc in remote:
        try:
            proc.stdin.close()
        except OSError:
            pass
    wait_all(grace, remote)
    for _, proc in procs:
        proc.send_signal(signal.SIGTERM)
    wait_all(grace, [proc for _, proc in procs])
    for _, proc in procs:
        proc.end()
    for _, proc in procs:
        proc.wait()


# ---------------------------------------------------------------------------
# The scheduler's and the servers' side
# ---------------------------------------------------------------------------

def serve():
    """Run the scheduler or a server that ``DMLC_ROLE`` names, until the
    job ends; ``python -m d2l_bert.dist.launcher serve`` calls it.

    Importing `mxnet` in a process whose ``DMLC_ROLE`` is 'scheduler' or
    'server' runs that role and exits (`mxnet.kvstore.kvstore_server`).
    """
    role = os.environ.get('DMLC_ROLE')
    if role not in ('scheduler', 'server'):
        sys.exit(f'd2l_bert.dist.launcher serve: DMLC_ROLE must be '
                 f'scheduler or server, got {role!r}')
    exit_with_parent()
    from ..threads import set_threads
    set_threads(int(os.environ.get('OMP_NUM_THREADS') or 1))
    import mxnet  # noqa: F401  (runs the role, then exits)
    sys.exit(f'd2l_bert.dist.launcher serve: mxnet did not run the '
             f'{role}')


if __name__ == '__main__':
    if sys.argv[1:] != ['serve']:
        sys.exit('usage: python -m d2l_bert.dist.launcher serve')
    serve()
