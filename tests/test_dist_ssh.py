"""Tests of d2l_bert/dist/ssh.py: the ssh commands of a job's roles (the
commands, not the network; the hosts file is test_dist_hosts_file.py's,
and jobs across machines are test_dist_hosts.py's)."""
import shlex

from d2l_bert.dist import ssh as S
from d2l_bert.dist.hosts_file import read_hosts
from d2l_bert.presets import SSH_ENV

HOSTS = """\
# two machines of a class room
10.0.0.1            # the first runs the scheduler
alice@10.0.0.2:2222
"""


def test_ssh_roles_build_one_ssh_command_per_process(tmp_path,
                                                    monkeypatch):
    for name in (SSH_ENV,) + S.KERNEL_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    path = tmp_path / 'hosts.txt'
    path.write_text(HOSTS)
    hosts = read_hosts(str(path))
    worker = ['/opt/py env/bin/python', '-m', 'd2l_bert', 'pretrain']
    roles = S.ssh_roles(hosts, worker, 3, 2, 9091,
                        {'10.0.0.1': 2, '10.0.0.2': 2},
                        python='/opt/py env/bin/python', cwd='/home/me/run',
                        timeout=12)
    assert [(r.name, r.host) for r in roles] == [
        ('scheduler', '10.0.0.1'), ('server 0', '10.0.0.1'),
        ('server 1', '10.0.0.2'), ('worker 0', '10.0.0.1'),
        ('worker 1', '10.0.0.2'), ('worker 2', '10.0.0.1')]
    # The environment travels in the remote command, not in ssh's own
    assert all(r.env == {} for r in roles)
    argv = roles[4].argv
    # No terminal: ssh's input carries the heartbeats; silent for 12 s,
    # ssh gives up
    assert argv[:-2] == ['ssh', '-o', 'BatchMode=yes', '-o',
                         'ConnectTimeout=12', '-o', 'ServerAliveInterval=4',
                         '-o', 'ServerAliveCountMax=3', '-o',
                         'LogLevel=ERROR', '-p', '2222']
    assert argv[-2] == 'alice@10.0.0.2'
    remote = shlex.split(argv[-1])
    assert remote[:5] == ['cd', '/home/me/run', '&&', 'exec', 'env']
    assert remote[5:12] == [
        'DMLC_NODE_HOST=10.0.0.2', 'DMLC_NUM_SERVER=2', 'DMLC_NUM_WORKER=3',
        'DMLC_PS_ROOT_PORT=9091', 'DMLC_PS_ROOT_URI=10.0.0.1',
        'DMLC_ROLE=worker', 'OMP_NUM_THREADS=2']
    # The machine's watchdog runs the role
    assert remote[12:21] == [
        '/opt/py env/bin/python', '-m', 'd2l_bert.dist.remote', 'run',
        '--name', 'worker 1 on 10.0.0.2', '--timeout', '12', '--']
    assert remote[21:] == worker           # the space survives quoting
    scheduler = shlex.split(roles[0].argv[-1])
    assert 'DMLC_ROLE=scheduler' in scheduler
    assert not any(a.startswith('DMLC_NODE_HOST') for a in scheduler)
    assert scheduler[-3:] == ['-m', 'd2l_bert.dist.launcher', 'serve']


def test_ssh_roles_take_this_machines_kernel_choices_along(tmp_path,
                                                          monkeypatch):
    # ssh passes no environment: a remote worker would otherwise pick its
    # own OpenBLAS kernels, and its numbers would part from this
    # machine's in the last bits
    for name in S.KERNEL_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv('OPENBLAS_CORETYPE', 'Haswell')
    monkeypatch.setenv('DNNL_MAX_CPU_ISA', 'AVX2')
    monkeypatch.setenv('SOMETHING_ELSE', 'x')
    path = tmp_path / 'hosts.txt'
    path.write_text(HOSTS)
    roles = S.ssh_roles(read_hosts(str(path)), ['w'], 1, 1, 9091, {})
    for role in roles:
        remote = shlex.split(role.argv[-1])
        assigned = remote[5:remote.index('-m') - 1]
        assert 'OPENBLAS_CORETYPE=Haswell' in assigned
        assert 'DNNL_MAX_CPU_ISA=AVX2' in assigned
        assert not any(a.startswith(('SOMETHING_ELSE', 'GOMP_SPINCOUNT'))
                       for a in assigned)


def test_ssh_command_comes_from_d2l_bert_ssh(tmp_path, monkeypatch):
    monkeypatch.setenv(SSH_ENV, 'ssh -F "/my dir/config"')
    path = tmp_path / 'hosts.txt'
    path.write_text(HOSTS)
    roles = S.ssh_roles(read_hosts(str(path)), ['w'], 1, 1, 9091, {})
    assert roles[0].argv[:3] == ['ssh', '-F', '/my dir/config']
