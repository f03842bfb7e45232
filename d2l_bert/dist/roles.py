"""The processes of a job, before any starts: their roles, environments
and threads, and the checks of a job's options.

A job on MXNet's parameter server is one scheduler, S servers and N
workers, each told its part by ps-lite's ``DMLC_*`` variables
(`role_environment`).  `local_roles` describes such a job on this
machine, every role on the loopback address; `d2l_bert.dist.ssh` one
over the machines of a hosts file.  `d2l_bert.dist.launcher` checks the
options with the functions here, then starts the roles.

This module does not import `mxnet`.
"""
import errno
import os
import shutil
import socket
import sys
from collections import namedtuple

#: Where every process of a job on one machine listens
LOOPBACK = '127.0.0.1'
#: ps-lite's variables, and ours, that a role's environment sets afresh
ROLE_VARIABLES = ('DMLC_ROLE', 'DMLC_PS_ROOT_URI', 'DMLC_PS_ROOT_PORT',
                  'DMLC_NUM_SERVER', 'DMLC_NUM_WORKER', 'DMLC_NODE_HOST',
                  'DMLC_INTERFACE', 'DMLC_LOCAL', 'OMP_NUM_THREADS')


class LaunchError(ValueError):
    """A job that cannot start; the message is one line naming the
    option, the value given and what is allowed."""


#: One process of a job, with its `name` in messages (``'worker 1'``), its
#: ps-lite `role` ('scheduler', 'server' or 'worker'), the `argv` that
#: starts it, the variables `env` adds to this process's environment
#: (none for an ssh role, whose remote command holds them), and the
#: `host` it runs on (None for this machine)
Role = namedtuple('Role', ['name', 'role', 'argv', 'env', 'host'])


def check_counts(num_workers, num_servers):
    """Raise a `LaunchError` unless both counts are positive integers."""
    for option, value in (('--workers', num_workers),
                          ('--servers', num_servers)):
        if isinstance(value, bool) or not isinstance(value, int) \
                or value < 1:
            raise LaunchError(f'{option} must be a positive integer, got '
                              f'{value!r}')


def free_port(host=LOOPBACK):
    """Return a TCP port nothing listens on at `host`, as the system
    chooses one.  (Another program may take it before the scheduler
    binds it; the scheduler then fails and `launcher.run_job` says so.)"""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def check_port_number(port):
    """Raise a `LaunchError` unless `port` is a TCP port number."""
    if isinstance(port, bool) or not isinstance(port, int) \
            or not 1 <= port <= 65535:
        raise LaunchError(f'--port must be a TCP port in [1, 65535], got '
                          f'{port!r}')


def check_port(port, host=LOOPBACK):
    """Raise a `LaunchError` if the scheduler could not listen on `port`
    at `host`: not a port number, or in use."""
    check_port_number(port)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                raise LaunchError(
                    f'--port {port} is in use on {host}: choose another '
                    'port, or leave --port out to take a free one') from None
            raise LaunchError(f'--port {port}: cannot listen on {host} '
                              f'({e.strerror})') from None


def check_threads(num_threads):
    """Raise a `LaunchError` unless `num_threads` is None or a positive
    integer."""
    if num_threads is not None and (
            isinstance(num_threads, bool) or not isinstance(num_threads, int)
            or num_threads < 1):
        raise LaunchError(f'--threads must be a positive integer, got '
                          f'{num_threads!r}')


def check_command(argv):
    """Raise a `LaunchError` unless the program of `argv` runs here."""
    program = argv[0] if argv else ''
    if shutil.which(program) is None:
        why = 'not found' if os.sep not in program and not \
            os.path.exists(program) else 'not an executable file'
        raise LaunchError(f'{program}: command {why}')


def divide_threads(num_workers, cores=None):
    """Threads for each of `num_workers` workers sharing `cores` (default
    this machine's physical cores): ``cores // num_workers``, at least 1."""
    if cores is None:
        from ..threads import physical_cores
        cores = physical_cores()
    return max(1, cores // num_workers)


def role_environment(role, *, scheduler, port, num_workers, num_servers,
                     node_host, num_threads):
    """The variables that make a process a `role` of the job.

    Parameters
    ----------
    role : {'scheduler', 'server', 'worker'}
        The process's part in the job (``DMLC_ROLE``).
    scheduler : str
        The scheduler's address (``DMLC_PS_ROOT_URI``); the scheduler
        binds to it.
    port : int
        The scheduler's port.
    num_workers, num_servers : int
        Number of workers and of servers of the job.
    node_host : str
        The address a server or a worker binds to (``DMLC_NODE_HOST``).
    num_threads : int
        ``OMP_NUM_THREADS`` of the process.

    Returns
    -------
    dict of str to str
    """
    env = dict(DMLC_ROLE=role, DMLC_PS_ROOT_URI=scheduler,
               DMLC_PS_ROOT_PORT=str(port), DMLC_NUM_WORKER=str(num_workers),
               DMLC_NUM_SERVER=str(num_servers),
               OMP_NUM_THREADS=str(num_threads))
    if role != 'scheduler':
        env['DMLC_NODE_HOST'] = node_host
    return env


def serve_argv(python=None):
    """The command of a scheduler or a server: `serve` in a new Python."""
    return [python or sys.executable, '-m', 'd2l_bert.dist.launcher',
            'serve']


def role_names(num_workers, num_servers):
    """``(name, role)`` of every process, the scheduler first."""
    return ([('scheduler', 'scheduler')]
            + [(f'server {i}', 'server') for i in range(num_servers)]
            + [(f'worker {i}', 'worker') for i in range(num_workers)])


def local_roles(worker_argv, num_workers, num_servers, port, num_threads,
                python=None):
    """The processes of a job on this machine, all on the loopback address.

    Parameters
    ----------
    worker_argv : list of str
        Each worker's command.
    num_workers, num_servers : int
        Number of workers and of servers of the job.
    port : int
        The scheduler's port on 127.0.0.1.
    num_threads : int
        Each worker's ``OMP_NUM_THREADS``; schedulers and servers get 1.
    python : str, optional
        The interpreter of the scheduler and the servers; default this one.

    Returns
    -------
    list of Role
        The scheduler, the servers, then the workers.
    """
    check_counts(num_workers, num_servers)
    roles = []
    for name, role in role_names(num_workers, num_servers):
        env = role_environment(
            role, scheduler=LOOPBACK, port=port, num_workers=num_workers,
            num_servers=num_servers, node_host=LOOPBACK,
            num_threads=num_threads if role == 'worker' else 1)
        argv = list(worker_argv) if role == 'worker' else serve_argv(python)
        roles.append(Role(name, role, argv, env, None))
    return roles
