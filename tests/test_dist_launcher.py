"""Tests of d2l_bert/dist/launcher.py: the checks made before anything
starts, the threads of a job, and `run_job`'s watch over processes
(small Python processes standing in for the roles; the real jobs are in
test_cli_pretrain.py and test_cli_launch.py)."""
import os
import random
import shlex
import signal
import socket
import subprocess
import sys
import time

import pytest

from d2l_bert import presets
from d2l_bert.dist import launcher as D
from d2l_bert.dist import roles as R
from d2l_bert.dist import ssh as S

from processes import alive, left_behind, marked, needs_proc, wait_for

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: Marks the stand-in processes (see `processes.stop`)
MARK = '# d2l_bert test process'


def python(code):
    return [sys.executable, '-c', f'{code}  {MARK}']


SLEEP = python('import time; time.sleep(60)')


def role(name, argv):
    kind = name.split()[0]
    return R.Role(name, kind, argv, {}, None)


# ---------------------------------------------------------------------------
# A role's environment
# ---------------------------------------------------------------------------

def test_a_role_gets_its_variables_afresh(monkeypatch):
    monkeypatch.setenv('DMLC_ROLE', 'server')
    monkeypatch.setenv('DMLC_INTERFACE', 'eth0')
    monkeypatch.setenv('OMP_NUM_THREADS', '8')
    env = D._environment(R.local_roles(['w'], 1, 1, 1234, 1)[2])
    assert env['DMLC_ROLE'] == 'worker' and env['OMP_NUM_THREADS'] == '1'
    assert 'DMLC_INTERFACE' not in env          # would pick an interface
    assert env['PATH'] == D.os.environ['PATH']


# ---------------------------------------------------------------------------
# Threads over ssh
# ---------------------------------------------------------------------------

def test_threads_over_ssh_are_each_machines_cores_divided(
        tmp_path, monkeypatch):
    # Both "machines" are this one, on ports where an ssh server would be
    # expected: two listening sockets stand in for them, and the probe
    # says the first has 4 cores, the second 1
    with socket.socket() as a, socket.socket() as b:
        for s in (a, b):
            s.bind(('127.0.0.1', 0))
            s.listen()
        path = tmp_path / 'hosts.txt'
        path.write_text(f'127.0.0.1:{a.getsockname()[1]}\n'
                        f'localhost:{b.getsockname()[1]}\n')
        probed = []

        def probe(machines, hosts, program, **kwargs):
            probed.append((hosts, program))
            return {'127.0.0.1': 4, 'localhost': 1}
        monkeypatch.setattr(S, 'probe_hosts', probe)
        job = D.prepare_job(lambda threads: ['w', str(threads)],
                            hosts=str(path), num_workers=3)
    assert probed == [(str(path), 'w')]
    assert job.num_workers == 3 and job.port == S.DEFAULT_SSH_JOB_PORT
    assert [r.name for r in job.roles] == [
        'scheduler', 'server 0', 'server 1', 'worker 0', 'worker 1',
        'worker 2']
    # Two workers share the 4 cores of the first, one has the second's
    assert [shlex.split(r.argv[-1])[-2:] for r in job.roles[3:]] == [
        ['w', '2'], ['w', '1'], ['w', '2']]
    assert job.description == (
        'starting 1 scheduler, 2 server(s) and 3 worker(s) on 2 '
        'machine(s) over ssh, the scheduler on 127.0.0.1:9091, 1/2 '
        'thread(s) per worker\n'
        '  127.0.0.1: scheduler, server 0, worker 0, worker 2 (4 core(s), '
        '2 thread(s) per worker)\n'
        '  localhost: server 1, worker 1 (1 core(s), 1 thread(s) per '
        'worker)')


# ---------------------------------------------------------------------------
# What is refused before anything starts
# ---------------------------------------------------------------------------

def closed_port():
    """A port on 127.0.0.1 where nothing listens (just released)."""
    return R.free_port()


def test_prepare_job_refuses_a_port_in_use():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(D.LaunchError) as e:
            D.prepare_job(lambda t: ['true'], num_workers=2, port=port)
    assert str(e.value) == (f'--port {port} is in use on 127.0.0.1: choose '
                            'another port, or leave --port out to take a '
                            'free one')


def test_prepare_job_refuses_an_unreachable_host(tmp_path):
    port = closed_port()
    path = tmp_path / 'hosts.txt'
    path.write_text(f'127.0.0.1:{port}\n')
    with pytest.raises(D.LaunchError) as e:
        D.prepare_job(lambda t: ['w'], hosts=str(path))
    assert str(e.value) == (f'--hosts {path} line 1: cannot reach 127.0.0.1 '
                            f'on port {port} (ssh): Connection refused')


@pytest.mark.parametrize('kwargs, message', [
    (dict(num_workers=0), '--workers must be a positive integer, got 0'),
    (dict(num_workers=2, num_servers=0),
     '--servers must be a positive integer, got 0'),
    (dict(), 'give --workers N (or --hosts FILE)'),
    (dict(num_workers=2, port=70000),
     '--port must be a TCP port in [1, 65535], got 70000'),
    (dict(num_workers=2, num_threads=0),
     '--threads must be a positive integer, got 0'),
    (dict(num_workers=2, timeout=10),
     '--timeout goes with --hosts FILE: how long a machine may be silent '
     '(a job on this machine has no such limit)'),
])
def test_prepare_job_names_the_bad_option(kwargs, message):
    with pytest.raises(D.LaunchError) as e:
        D.prepare_job(lambda t: ['true'], **kwargs)
    assert str(e.value) == message


def test_prepare_job_says_in_one_line_what_hosts_and_timeout_it_refuses(
        tmp_path):
    path = tmp_path / 'hosts.txt'
    path.write_text('10.0.0.1\n10.0.0.300\n')
    with pytest.raises(D.LaunchError) as e:
        D.prepare_job(lambda t: ['w'], hosts=str(path))
    assert str(e.value) == (
        f"--hosts {path} line 2: '10.0.0.300' is not a host name or an "
        'IPv4 address: its numbers are not those of an IPv4 address (four '
        'numbers from 0 to 255, such as 10.0.0.2)')
    path.write_text('10.0.0.1\n')
    for timeout in (2.5, float('nan'), 0):
        with pytest.raises(D.LaunchError) as e:
            D.prepare_job(lambda t: ['w'], hosts=str(path), timeout=timeout)
        assert str(e.value) == (
            '--timeout must be a number of seconds from 3 to 3600 (how long '
            f'a machine of --hosts may be silent), got {timeout!r}')


def test_prepare_job_takes_a_free_port_and_divides_the_threads():
    # `true`: a command every system has (prepare_job checks it exists)
    job = D.prepare_job(lambda threads: ['true', str(threads)], num_workers=2)
    assert 1024 <= job.port <= 65535
    threads = R.divide_threads(2)
    assert job.num_threads == {'127.0.0.1': threads}
    assert job.roles[-1].argv == ['true', str(threads)]
    assert job.description == (
        f'starting 1 scheduler, 1 server(s) and 2 worker(s) on '
        f'127.0.0.1:{job.port}, {threads} thread(s) per worker')


# ---------------------------------------------------------------------------
# run_job: the watch over the processes
# ---------------------------------------------------------------------------

def run(roles, capsys, **kwargs):
    start = time.monotonic()
    status = D.run_job(roles, prog='d2l-bert test', grace=1.0, **kwargs)
    err = capsys.readouterr().err
    return status, err, time.monotonic() - start


def test_run_job_returns_0_when_the_workers_are_done(capsys):
    # A server that would run on (like one whose workers never said
    # goodbye) is stopped `finish` seconds after the last worker
    roles = [role('server 0', SLEEP),
             role('worker 0', python('pass')),
             role('worker 1', python('import time; time.sleep(0.3)'))]
    status, err, seconds = run(roles, capsys, finish=0.5)
    assert status == 0
    assert err == ('d2l-bert test: note: the workers have exited, but '
                   'server 0 still waited for them (did each worker join '
                   "the job, with mx.kv.create('dist_sync')?); stopped\n")
    assert seconds < 5


@needs_proc
def test_a_killed_worker_ends_the_job_with_one_line(capsys, tmp_path):
    # The first worker starts a process of its own: its process group is
    # stopped with it
    pid_file = tmp_path / 'grandchild'
    spawner = python(
        'import subprocess, sys, time; '
        f'p = subprocess.Popen([sys.executable, "-c", '
        f'"import time; time.sleep(60)  {MARK}"]); '
        f'open({str(pid_file)!r}, "w").write(str(p.pid)); time.sleep(60)')
    roles = [role('scheduler', SLEEP), role('server 0', SLEEP),
             role('worker 0', spawner),
             role('worker 1', python(
                 'import os, signal, time; time.sleep(1); '
                 'os.kill(os.getpid(), signal.SIGKILL)'))]
    status, err, seconds = run(roles, capsys)
    assert status == 128 + 9
    lines = err.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith('d2l-bert test: error: worker 1 (pid ')
    assert lines[0].endswith(') was killed by SIGKILL; stopped the job and '
                             'its 3 other process(es)')
    # One second until the kill, then at most `poll + 2 * grace`
    assert seconds < 1 + 5
    assert not alive(int(pid_file.read_text()))


@needs_proc
@pytest.mark.parametrize('worker_ends', [True, False],
                         ids=['worker-exits', 'job-stopped'])
def test_a_process_a_worker_started_in_its_own_session_ends_with_the_job(
        capsys, tmp_path, worker_ends):
    # `setsid`: a session and a process group of its own, out of reach
    # of the worker's group; the launcher is its subreaper instead
    pid_file = tmp_path / 'escaped'
    then = 'pass' if worker_ends else 'sys.exit(3)'
    spawner = python(
        'import subprocess, sys, time; '
        f'p = subprocess.Popen([sys.executable, "-c", '
        f'"import time; time.sleep(60)  {MARK}"], start_new_session=True); '
        f'open({str(pid_file)!r}, "w").write(str(p.pid)); time.sleep(0.5); '
        f'{then}')
    roles = [role('scheduler', SLEEP), role('worker 0', spawner)]
    try:
        status, _, seconds = run(roles, capsys, finish=0.5)
        escaped = int(pid_file.read_text())
        assert status == (0 if worker_ends else 3)
        assert seconds < 10
        assert not alive(escaped)
    finally:
        if pid_file.exists() and alive(int(pid_file.read_text())):
            os.kill(int(pid_file.read_text()), signal.SIGKILL)


def test_the_failure_line_gives_the_workers_own_pid(capsys, tmp_path):
    # Not its supervisor's: the pid a user finds in `ps`, or in the
    # worker's own log
    pid_file = tmp_path / 'pid'
    roles = [role('scheduler', SLEEP), role('worker 0', python(
        f'import os; open({str(pid_file)!r}, "w").write(str(os.getpid()))'
        '; os._exit(5)'))]
    status, err, _ = run(roles, capsys)
    assert status == 5
    assert err == (f'\nd2l-bert test: error: worker 0 (pid '
                   f'{pid_file.read_text()}) exited with status 5; stopped '
                   'the job and its 1 other process(es)\n')


#: A launcher of a job whose four roles each detach a process (in a
#: session of its own), then wait
LAUNCHER = f'''
import sys
sys.path.insert(0, {ROOT!r})
from d2l_bert.dist import launcher as D, roles as R
detach = ('import subprocess, sys, time; '
          'subprocess.Popen([sys.executable, "-c", '
          '"import time; time.sleep(300)"], start_new_session=True); '
          'time.sleep(300)')
roles = [R.Role(name, name.split()[0], [sys.executable, '-c', detach], {{}},
                None)
         for name in ('scheduler', 'server 0', 'worker 0', 'worker 1')]
D.run_job(roles)
'''


@needs_proc
@pytest.mark.parametrize('run', range(8))
def test_a_killed_launcher_leaves_no_process_of_its_job(run):
    # SIGKILL at a random moment, while the roles start or once they run
    # (each with the process it detached)
    mark = f'd2l-bert-test-{os.urandom(6).hex()}'
    launcher = subprocess.Popen(
        [sys.executable, '-c', LAUNCHER],
        env={**os.environ, presets.TEST_MARK_ENV: mark})
    if run % 2:
        wait_for(lambda: len(marked(mark)) >= 1 + 4 * 3, 30,
                 'the roles and what they detached')
    time.sleep(random.uniform(0, 0.5))
    launcher.kill()
    launcher.wait()
    assert left_behind(mark, seconds=10) == []


def test_a_failing_worker_gives_its_status(capsys):
    roles = [role('scheduler', SLEEP),
             role('worker 0', python('import sys; sys.exit(3)'))]
    status, err, _ = run(roles, capsys)
    assert status == 3
    assert ') exited with status 3; stopped the job' in err


def test_a_server_that_ends_before_the_workers_fails_the_job(capsys):
    roles = [role('server 0', python('pass')), role('worker 0', SLEEP)]
    status, err, seconds = run(roles, capsys, finish=0.5)
    assert status == 1
    assert err.startswith('\nd2l-bert test: error: server 0 (pid ')
    assert ') exited with status 0; stopped the job' in err
    assert seconds < 5
