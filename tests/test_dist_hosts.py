"""Tests of ``--hosts`` (d2l_bert/dist/launcher.py and remote.py) across
machines: two hosts made by benchmarks/cluster.py on this machine,
network namespaces on a bridge, an sshd and one core each, links at
1 Gb/s.  The jobs run the commands of docs/distributed.md on the tiny
BERT.  They need root, iproute2 and openssh-server (CI installs them),
and are skipped, saying why, where those or namespaces are missing."""
import os
import re
import signal
import subprocess
import sys
import sysconfig
import time
import zipfile

import pytest

import processes
from helpers import JOB_ARGS, assert_same_state, checkpoint_state, \
    checkpoint_step, write_small_corpus

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, 'benchmarks'))
import cluster as C  # noqa: E402

pytestmark = [processes.needs_proc, processes.needs_parameter_server]

#: The second host, the one that fails
HOST_2 = C.Cluster.address(2)
#: Of the tests' namespaces and links (benchmarks/cluster.py's own,
#: 'd2lc', may be in use by a benchmark)
PREFIX = 'd2lt'
#: How long a fault may take to end the job (the issue's bound)
FAULT_BOUND = 60


# ---------------------------------------------------------------------------
# The harness itself (before the module's cluster is made: same names)
# ---------------------------------------------------------------------------

@pytest.mark.parametrize('euid, missing, message', [
    (1000, None, 'making network namespaces needs root (run as root, or '
                 'with sudo)'),
    (0, 'ip', 'missing ip, tc: apt-get install iproute2'),
    (0, 'sshd', 'missing sshd: apt-get install openssh-server')])
def test_the_cluster_refuses_without_root_or_its_programs(
        monkeypatch, capsys, euid, missing, message):
    monkeypatch.setattr(C.os, 'geteuid', lambda: euid)
    # every other program is there, whatever this machine has
    monkeypatch.setattr(C, 'which', lambda p: None if p in (
        missing, 'tc' if missing == 'ip' else None) else f'/usr/bin/{p}')
    assert C.main(['--state', '/nonexistent/state', 'up', '2']) == 2
    assert capsys.readouterr().err == f'cluster.py: error: {message}\n'


def test_an_interrupted_up_leaves_nothing(tmp_path, monkeypatch):
    cluster = C.Cluster(str(tmp_path / 'state'), prefix=PREFIX)
    try:
        C.check_can_run()
    except C.ClusterError as e:
        pytest.skip(f'no cluster of network namespaces here: {e}')

    def interrupted(*args):
        raise KeyboardInterrupt
    # After the namespaces, links and keys, before the sshd processes
    monkeypatch.setattr(C.Cluster, '_sshd', interrupted)
    with pytest.raises(KeyboardInterrupt):
        cluster.up(2)
    assert_nothing_left(cluster)
    assert cluster.down() == []          # and down again does nothing


def assert_nothing_left(cluster):
    """No namespace, link (veth pairs, the bridge) or state folder."""
    for what in (['netns', 'list'], ['-o', 'link', 'show']):
        listed = subprocess.run([C.which('ip')] + what, capture_output=True,
                                text=True).stdout
        assert f'{cluster.prefix}-' not in listed
    assert not os.path.exists(cluster.state)


@pytest.fixture(scope='module')
def hosts(tmp_path_factory):
    cluster = C.Cluster(str(tmp_path_factory.mktemp('cluster') / 'state'),
                        prefix=PREFIX)
    try:
        cluster.up(2, link='1gbit')
    except C.ClusterError as e:
        pytest.skip(f'no cluster of network namespaces here: {e}')
    yield cluster
    cluster.down()
    assert_nothing_left(cluster)


@pytest.fixture(scope='module')
def corpus(tmp_path_factory):
    return write_small_corpus(tmp_path_factory.mktemp('hosts-corpus'))


def start_on(cluster, host, args, log_dir, name):
    """``d2l-bert ARGS`` started on `host` (as a user logged in there)."""
    return processes.start(cluster.argv(host, processes.d2l_bert(*args)),
                           log_dir, name)


def is_worker(pid):
    """Whether `pid` runs a worker (not the watchdog that runs it)."""
    argv = processes.cmdline(pid)
    return '--kvstore' in argv and 'd2l_bert.dist.remote' not in argv


def workers_seen(cluster):
    """``(host, allowed cpus, OMP_NUM_THREADS)`` of every worker running
    on the hosts now."""
    seen = []
    for host in (1, 2):
        for pid in cluster.job_pids(host):
            if not is_worker(pid):
                continue
            try:
                with open(f'/proc/{pid}/status') as f:
                    cpus = re.search(r'Cpus_allowed_list:\s*(\S+)',
                                     f.read()).group(1)
                with open(f'/proc/{pid}/environ', 'rb') as f:
                    env = dict(v.split('=', 1) for v in
                               f.read().decode().split('\0') if '=' in v)
            except (OSError, AttributeError):
                continue
            seen.append((host, cpus, env.get('OMP_NUM_THREADS')))
    return seen


def test_logins_skip_this_machines_start_up_files_and_only_there(hosts):
    # Non-empty here, so that a login seeing them empty tells
    files = [p for p in C.start_files() if os.path.getsize(p)]
    if not files:
        pytest.skip('no shell start-up file with content in this home '
                    'folder to hide')
    sizes = ' '.join(f'$(wc -c < {p})' for p in files)
    done = subprocess.run(
        hosts.argv(1, hosts.ssh_command.split() + [HOST_2, f'echo {sizes}']),
        capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ['0'] * len(files)
    # Hidden in the hosts' sshd only: not mounted over in this namespace
    with open('/proc/self/mountinfo') as f:
        mounted = [line.split()[4] for line in f]
    assert not set(files) & set(mounted)


def test_two_hosts_give_the_numbers_of_two_workers_on_one_machine(
        hosts, corpus, tmp_path):
    steps = ['--steps', 3, '--corpus', corpus, *JOB_ARGS]
    job = start_on(hosts, 1, ['pretrain', '--hosts', hosts.hosts_file,
                              '--out', tmp_path / 'hosts', *steps],
                   tmp_path, 'hosts')
    seen = set()
    try:
        while job.poll() is None:
            seen.update(workers_seen(hosts))
            time.sleep(0.2)
        status = job.wait(processes.JOB_TIMEOUT)
    finally:
        processes.stop(job)
    out = (tmp_path / 'hosts.out').read_text()
    assert status == 0, (tmp_path / 'hosts.err').read_text()
    # The first lines say which host runs which role
    assert out.startswith(
        'starting 1 scheduler, 2 server(s) and 2 worker(s) on 2 '
        'machine(s) over ssh, the scheduler on 10.231.0.11:9091, 1 '
        'thread(s) per worker\n'
        '  10.231.0.11: scheduler, server 0, worker 0 (1 core(s), 1 '
        'thread(s) per worker)\n'
        '  10.231.0.12: server 1, worker 1 (1 core(s), 1 thread(s) per '
        'worker)\n')
    assert 'CPU threads: 1 of 1 cores' in out
    # Each worker ran on its own host's core, with one thread
    cpus = [','.join(map(str, hosts.cores(i))) for i in (1, 2)]
    assert seen == {(1, cpus[0], '1'), (2, cpus[1], '1')}
    assert not hosts.job_pids(1) and not hosts.job_pids(2)
    here = processes.start(processes.d2l_bert(
        'pretrain', '--workers', 2, '--threads', 1, '--out',
        tmp_path / 'here', *steps), tmp_path, 'here')
    try:
        assert here.wait(processes.JOB_TIMEOUT) == 0, \
            (tmp_path / 'here.err').read_text()
    finally:
        processes.stop(here)
    on_hosts = checkpoint_state(tmp_path / 'hosts/checkpoint.zip')
    on_one = checkpoint_state(tmp_path / 'here/checkpoint.zip')
    assert_same_state(on_hosts, on_one)


def run_until_checkpoint(hosts, corpus, root, step=2):
    """A long job on both hosts, once its checkpoint of `step` is there."""
    out = root / 'out'
    job = start_on(hosts, 1, [
        'pretrain', '--hosts', hosts.hosts_file, '--timeout', 10, '--out',
        out, '--steps', 1000, '--corpus', corpus, *JOB_ARGS], root, 'job')
    try:
        processes.wait_for(
            lambda: (checkpoint_step(out / 'checkpoint.zip') >= step
                     or job.poll() is not None),
            processes.JOB_TIMEOUT, f'the checkpoint of step {step}')
    except BaseException:
        processes.stop(job)
        raise
    assert job.poll() is None, (root / 'job.err').read_text()
    return job, out


def end_after_fault(job, root):
    """Wait for the job to end; its status, seconds and error lines."""
    fault = time.monotonic()
    try:
        status = job.wait(FAULT_BOUND + 30)
    finally:
        processes.stop(job)
    err = (root / 'job.err').read_text()
    errors = [line for line in err.splitlines() if 'error:' in line]
    return status, time.monotonic() - fault, errors


def test_a_host_cut_off_mid_job_ends_it_and_the_rest_resumes(
        hosts, corpus, tmp_path):
    job, out = run_until_checkpoint(hosts, corpus, tmp_path)
    hosts.link(2, 'down')
    try:
        status, seconds, errors = end_after_fault(job, tmp_path)
        assert status == 255 and seconds < FAULT_BOUND
        assert len(errors) == 1, errors
        assert re.match(
            rf'd2l-bert pretrain: error: (worker|server) 1 \(pid \d+ on '
            rf'{HOST_2}\) lost its connection: ssh to {HOST_2} failed or '
            r'got no answer', errors[0])
        # The cut-off host's watchdog stops its roles by itself
        processes.wait_for(lambda: not hosts.job_pids(1)
                           and not hosts.job_pids(2), 30,
                           'no process of the job on either host')
    finally:
        hosts.link(2, 'up')
    with zipfile.ZipFile(out / 'checkpoint.zip') as z:
        assert z.testzip() is None
    assert not [n for n in os.listdir(out) if n.endswith('.tmp')]
    step = checkpoint_step(out / 'checkpoint.zip')
    (tmp_path / 'host1.txt').write_text(f'{C.Cluster.address(1)}\n')
    resumed = start_on(hosts, 1, [
        'pretrain', '--hosts', tmp_path / 'host1.txt', '--out', out,
        '--resume', '--steps', step + 2, '--corpus', corpus, *JOB_ARGS],
        tmp_path, 'resumed')
    try:
        assert resumed.wait(processes.JOB_TIMEOUT) == 0, \
            (tmp_path / 'resumed.err').read_text()
    finally:
        processes.stop(resumed)
    assert 'resum' in (tmp_path / 'resumed.out').read_text()
    assert checkpoint_step(out / 'checkpoint.zip') == step + 2


def test_killed_processes_on_a_host_end_the_job(hosts, corpus, tmp_path):
    job, out = run_until_checkpoint(hosts, corpus, tmp_path)
    victims = [pid for pid in hosts.job_pids(2) if is_worker(pid)]
    assert len(victims) == 1
    # What worker 0 leaves when it is killed while writing a checkpoint
    (out / '.checkpoint.zip.0a1b2c3d.tmp').write_bytes(b'PK half')
    os.kill(victims[0], signal.SIGKILL)
    status, seconds, errors = end_after_fault(job, tmp_path)
    assert status == 137 and seconds < 15
    assert len(errors) == 1, errors
    assert re.fullmatch(
        rf'd2l-bert pretrain: error: worker 1 \(pid \d+ on {HOST_2}\) was '
        r'killed by SIGKILL; stopped the job and its 4 other process\(es\)',
        errors[0])
    assert not hosts.job_pids(1) and not hosts.job_pids(2)
    assert not [n for n in os.listdir(out) if n.endswith('.tmp')]


def without_d2l_bert_there(python):
    """The start of a ``d2l-bert`` command line run by `python`, a Python
    with no d2l-bert, that has this checkout and the suite's site-packages
    (their .pth files too: MXNet's NumPy hook) in its own process only:
    the launcher runs the scheduler, which imports mxnet, and ssh gives
    the machines `python` alone."""
    version = subprocess.run(
        [python, '-c', 'import sys; print(sys.version_info[:2])'],
        capture_output=True, text=True, timeout=60).stdout.strip()
    if version != str(sys.version_info[:2]):
        pytest.skip(f'{python} is Python {version}, not this one\'s '
                    f'{sys.version_info[:2]}: it cannot use its packages')
    packages = sysconfig.get_paths()['purelib']
    start = (f'import site, sys; site.addsitedir({packages!r}); '
             f'sys.path.insert(0, {ROOT!r}); import runpy; '
             "runpy.run_module('d2l_bert', run_name='__main__')")
    return [python, '-c', start]


@pytest.mark.parametrize('hosts_line, python, expected', [
    # No machine has .99: nothing answers
    ('10.231.0.99', None, r'line 1: cannot reach 10\.231\.0\.99 on port 22 '
                          r'\(ssh\): (No route to host|no answer within '
                          r'5 s)$'),
    ('nobody@10.231.0.12', None,
     r'line 1: nobody@10\.231\.0\.12: ssh refused the login '
     r'\(.*Permission denied.*\): check the user and that your key is in '
     r'its authorized_keys$'),
    # Another Python, without d2l-bert there (the launcher is given this
    # checkout and the suite's site-packages, `without_d2l_bert_there`)
    ('10.231.0.12', '/usr/bin/python3',
     r"line 1: 10\.231\.0\.12: /usr/bin/python3 there has no d2l-bert "
     r"\(.*No module named 'd2l_bert.*\): install it into the same "
     r'environment on every machine$')])
def test_a_host_that_cannot_run_the_job_is_one_line_before_training(
        hosts, tmp_path, hosts_line, python, expected):
    if python and not os.path.exists(python):
        pytest.skip(f'no {python} here')
    path = tmp_path / 'hosts.txt'
    path.write_text(hosts_line + '\n')
    argv = processes.d2l_bert('pretrain', '--hosts', path, '--out',
                              tmp_path / 'out')
    if python:
        argv = without_d2l_bert_there(python) + argv[3:]
    done = subprocess.run(hosts.argv(1, argv), capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2
    assert done.stdout == ''
    assert re.fullmatch(rf'd2l-bert pretrain: error: --hosts {path} '
                        + expected, done.stderr.strip())
    assert not hosts.job_pids(1) and not hosts.job_pids(2)
