"""The roles of a job over ssh, on the machines of a hosts file.

`ssh_roles` describes every process of the job as an ssh command run
from this machine: the scheduler on the first machine, servers and
workers dealt out over the machines in turn (`deal`), each under its
machine's watchdog (`d2l_bert.dist.remote`).  Before that,
`check_reachable` and `probe_hosts` check that every machine answers,
lets this user log in and holds the same Python with d2l-bert.

This module does not import `mxnet`.
"""
import os
import shlex
import socket
import subprocess
import sys

from ..presets import KERNELS_ENV, SSH_ENV
from .hosts_file import DEFAULT_TIMEOUT
from .remote import PROBE_MARK
from .roles import LaunchError, Role, check_counts, role_environment, \
    role_names, serve_argv

#: The scheduler's port of a job over ssh, unless ``--port`` says
DEFAULT_SSH_JOB_PORT = 9091
#: Variables that choose the kernels a process runs (and so the last bits
#: of its numbers) and how its threads idle.  ssh passes no environment,
#: so the roles on other machines get those set here
KERNEL_VARIABLES = ('OPENBLAS_CORETYPE', 'DNNL_MAX_CPU_ISA',
                    'ONEDNN_MAX_CPU_ISA', 'MKLDNN_MAX_CPU_ISA',
                    'NUMBA_CPU_NAME', 'NUMBA_CPU_FEATURES', 'GOMP_SPINCOUNT',
                    KERNELS_ENV)


def check_reachable(hosts, path, timeout=5.0):
    """Raise a `LaunchError` naming the first host whose ssh port does not
    accept a connection within `timeout` seconds."""
    for host in hosts:
        try:
            with socket.create_connection((host.address, host.port),
                                          timeout=timeout):
                pass
        except OSError as e:
            why = e.strerror or type(e).__name__
            if isinstance(e, socket.gaierror):
                why = 'unknown host name'
            elif isinstance(e, socket.timeout):
                why = f'no answer within {timeout:g} s'
            raise LaunchError(
                f'--hosts {path} line {host.line}: cannot reach '
                f'{host.address} on port {host.port} (ssh): {why}') \
                from None


def ssh_command(environ=None):
    """The ssh program and its options: ``D2L_BERT_SSH`` (`SSH_ENV`) if
    set (such as ``ssh -F my_config``), else ``ssh``."""
    environ = os.environ if environ is None else environ
    return shlex.split(environ.get(SSH_ENV) or 'ssh')


def ssh_options(host, timeout):
    """ssh's options for a job's login to `host`.

    ``BatchMode`` makes ssh fail rather than wait for a password; the
    server is asked every ``timeout / 3`` seconds whether it is there,
    and ssh ends with status 255 after three questions without an answer,
    so a machine cut off from the network ends its role's ssh after
    `timeout` to ``4 / 3 x timeout`` seconds.
    """
    interval = max(1, int(timeout) // 3)
    return ['-o', 'BatchMode=yes', '-o', f'ConnectTimeout={int(timeout)}',
            '-o', f'ServerAliveInterval={interval}',
            '-o', 'ServerAliveCountMax=3', '-o', 'LogLevel=ERROR',
            '-p', str(host.port), host.ssh_target]


def ssh_argv(host, command, env, cwd, *, name='role', python=None,
             timeout=None):
    """The ssh command that runs `command` on `host` in folder `cwd`, with
    the variables `env`, under `d2l_bert.dist.remote`'s watch.

    The remote side (``python -m d2l_bert.dist.remote run``) stops the
    command when the launcher's heartbeats, which `run_job` writes to
    ssh's standard input, end or stay away for `timeout` seconds.
    """
    timeout = DEFAULT_TIMEOUT if timeout is None else timeout
    assignments = [f'{k}={shlex.quote(v)}' for k, v in sorted(env.items())]
    watch = [python or sys.executable, '-m', 'd2l_bert.dist.remote', 'run',
             '--name', f'{name} on {host.address}', '--timeout',
             f'{timeout:g}', '--']
    remote = (f'cd {shlex.quote(cwd)} && exec env '
              + ' '.join(assignments
                         + [shlex.quote(a) for a in watch + command]))
    return ssh_command() + ssh_options(host, timeout) + [remote]


def deal(hosts, num_workers, num_servers):
    """``(name, role, host)`` of every process: the scheduler on the first
    machine, servers and workers dealt out over the machines in turn."""
    next_host = {'server': 0, 'worker': 0}
    for name, role in role_names(num_workers, num_servers):
        if role == 'scheduler':
            yield name, role, hosts[0]
        else:
            yield name, role, hosts[next_host[role] % len(hosts)]
            next_host[role] += 1


def ssh_roles(hosts, worker_argv, num_workers, num_servers, port,
              num_threads, python=None, cwd=None, timeout=None):
    """The processes of a job over the machines `hosts`, each started by
    ssh from this machine.

    The scheduler runs on the first machine, on its address; servers and
    workers are dealt out over the machines in turn, each binding to its
    machine's address.  Every machine needs the same Python with
    d2l-bert installed at the same path (`python`, default this one), and
    the folder `cwd` (default the current one) holding the same files
    (the corpus, and the output folder, for ``--resume``).  The
    `KERNEL_VARIABLES` set here are set there too, so that every worker
    runs the kernels this machine's would.

    Parameters
    ----------
    worker_argv : list of str, or callable
        Each worker's command, or ``worker_argv(num_threads)`` giving it.
    num_threads : dict of str to int
        Each worker's threads, by its machine's address (1 on a machine
        not in it).
    timeout : float, optional
        Seconds a machine may be silent (`ssh_argv`).

    Returns
    -------
    list of Role
    """
    check_counts(num_workers, num_servers)
    python = python or sys.executable
    cwd = cwd or os.getcwd()
    roles = []
    for name, role, host in deal(hosts, num_workers, num_servers):
        threads = num_threads.get(host.address, 1)
        env = role_environment(
            role, scheduler=hosts[0].address, port=port,
            num_workers=num_workers, num_servers=num_servers,
            node_host=host.address,
            num_threads=threads if role == 'worker' else 1)
        env.update((k, os.environ[k]) for k in KERNEL_VARIABLES
                   if k in os.environ)
        if role != 'worker':
            command = serve_argv(python)
        else:
            command = list(worker_argv(threads) if callable(worker_argv)
                           else worker_argv)
        argv = ssh_argv(host, command, env, cwd, name=name, python=python,
                        timeout=timeout)
        roles.append(Role(name, role, argv, {}, host.address))
    return roles


def _probe_failure(host, path, done, python, cwd):
    """The one line that says why `probe_hosts` failed on `host`."""
    where = f'--hosts {path} line {host.line}: {host.ssh_target}'
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    last = lines[-1].strip() if lines else f'status {done.returncode}'
    if done.returncode == 255:
        if 'denied' in last or 'authenticat' in last.lower():
            return (f'{where}: ssh refused the login ({last}): check the '
                    'user and that your key is in its authorized_keys')
        return f'{where}: ssh failed: {last}'
    if done.returncode == 127 or 'not found' in last:
        return (f'{where}: no {python} there: every machine needs the '
                'same Python environment at the same path')
    if 'No module named' in last:
        return (f'{where}: {python} there has no d2l-bert ({last}): '
                'install it into the same environment on every machine')
    return f'{where}: {last}'


def probe_hosts(hosts, path, command, *, python=None, cwd=None,
                timeout=None):
    """Log in to every machine at once and check it for the job.

    Each runs ``python -m d2l_bert.dist.remote probe`` in the job's
    folder: it needs the folder, the same `python`, d2l-bert, MXNet and
    the workers' program, `command`.

    Returns
    -------
    dict of str to int
        The physical cores of each machine, by address.

    Raises
    ------
    LaunchError
        One line for the first machine that fails: the login refused (a
        wrong user or key), the Python or d2l-bert missing there, no
        answer within `timeout` seconds.
    """
    python = python or sys.executable
    cwd = cwd or os.getcwd()
    timeout = DEFAULT_TIMEOUT if timeout is None else timeout
    remote = ' '.join(shlex.quote(a) for a in [
        python, '-m', 'd2l_bert.dist.remote', 'probe', cwd, '--command',
        command])
    procs = [(host, subprocess.Popen(
        ssh_command() + ssh_options(host, timeout) + [remote],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)) for host in hosts]
    cores, problem = {}, None
    for host, proc in procs:
        try:
            out, err = proc.communicate(timeout=timeout + 5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            problem = problem or (
                f'--hosts {path} line {host.line}: {host.ssh_target}: no '
                f'answer to ssh within {timeout:g} s')
            continue
        done = subprocess.CompletedProcess(proc.args, proc.returncode,
                                           out, err)
        found = [line for line in out.splitlines()
                 if line.startswith(PROBE_MARK)]
        if proc.returncode or not found:
            problem = problem or _probe_failure(host, path, done, python,
                                                cwd)
            continue
        cores[host.address] = int(found[-1][len(PROBE_MARK):])
    if problem:
        raise LaunchError(problem)
    return cores


def host_lines(hosts, num_workers, num_servers, threads, cores):
    """One line a machine: the roles it runs, its cores and threads."""
    held = {}
    for name, _, host in deal(hosts, num_workers, num_servers):
        held.setdefault(host.address, []).append(name)
    lines = []
    for host in hosts:
        if host.address not in held:
            continue
        lines.append(f'  {host.address}: {", ".join(held[host.address])} '
                     f'({cores[host.address]} core(s), '
                     f'{threads[host.address]} thread(s) per worker)')
    return lines
