"""Several machines on one: hosts in network namespaces, for the tests
and benchmarks of ``d2l-bert pretrain --hosts``.

::

    python benchmarks/cluster.py up 2 --link 1gbit [--delay 0.2ms]
    python benchmarks/cluster.py run 1 -- d2l-bert pretrain \\
        --hosts /tmp/d2l-cluster/hosts.txt --steps 5
    python benchmarks/cluster.py link 2 down      # cut host 2 off
    python benchmarks/cluster.py down

Host i is the network namespace ``d2lc-hI``, with the address
10.231.0.(10+I)/24 on its ``eth0``, one end of a veth pair whose other end
is a port of the bridge ``d2lc-br``.  The bridge has no address and the
namespaces no route beyond 10.231.0.0/24, so nothing leaves the machine.
Each link is held to ``--link`` in both directions by a token bucket
(``tc qdisc ... tbf``) on both ends of its veth pair, and delayed by
``--delay`` with ``netem``.  Each host has its own cores: the machine's
CPUs are dealt out in turn (``--cores`` per host; 1 on a 2-core machine),
and its sshd and everything started through it run on them
(``taskset``).  One sshd a host listens on that host's address only, with
a host key, a client key and its own configuration in ``--state``
(default /tmp/d2l-cluster); ``ssh -F STATE/ssh_config ADDRESS`` logs in
as this user, and ``d2l-bert`` finds that command in ``D2L_BERT_SSH``,
which ``run`` sets.  The file system is the machine's: every host sees
the same Python environment at the same path, and the same folders.
Logins to a host skip this user's shell start-up files (``~/.bashrc``
and the like are empty in its sshd's mount namespace): a machine's own
start-up that waits, such as pyenv's rehash on a lock a killed login
left, would otherwise be timed as the launcher's.

``up`` first removes what an earlier ``up`` left, and removes what it
made when it fails or is interrupted; ``down`` removes the namespaces
(with every process still in them), the bridge, the sshd processes, and
the state folder, and does nothing when there is nothing.  Both need
root and Debian's iproute2 and openssh-server, and say so in one line
when they are missing.

`Cluster` is the same from Python (the tests' fixture).
"""
import argparse
import json
import os
import pwd
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time

from _common import PRESETS

PREFIX = 'd2lc'
SUBNET = '10.231.0'
STATE = '/tmp/d2l-cluster'
#: The programs `up` needs, and the Debian package of each
NEEDS = {'ip': 'iproute2', 'tc': 'iproute2', 'sshd': 'openssh-server',
         'ssh': 'openssh-client', 'ssh-keygen': 'openssh-client',
         'taskset': 'util-linux'}
SBIN = ('/usr/sbin', '/sbin', '/usr/local/sbin')
#: The shell's start-up files in a home folder, which logins to a host skip
START_FILES = ('.bashrc', '.bash_profile', '.bash_login', '.profile')


class ClusterError(RuntimeError):
    """What stops the cluster from being made, in one line."""


def which(program):
    """The path of `program`, looking in the sbin folders too."""
    path = os.pathsep.join([os.environ.get('PATH', '')] + list(SBIN))
    return shutil.which(program, path=path)


def check_can_run():
    """Raise a `ClusterError` unless this process is root and has every
    program `up` needs."""
    if os.geteuid() != 0:
        raise ClusterError('making network namespaces needs root (run as '
                           'root, or with sudo)')
    missing = sorted({NEEDS[p] for p in NEEDS if which(p) is None})
    if missing:
        programs = [p for p in NEEDS if which(p) is None]
        raise ClusterError(f'missing {", ".join(programs)}: apt-get '
                           f'install {" ".join(missing)}')


def _run(*argv, check=True, netns=None):
    """Run a command quietly; raise a `ClusterError` with its message when
    `check` and it fails."""
    argv = [str(a) for a in argv]
    if netns:
        argv = [which('ip'), 'netns', 'exec', netns] + argv
    done = subprocess.run(argv, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True)
    if check and done.returncode:
        message = (done.stderr.strip() or done.stdout.strip()).splitlines()
        raise ClusterError(f'{" ".join(argv)}: '
                           f'{message[-1] if message else done.returncode}')
    return done


class Cluster:
    """The hosts of `up`, seen from Python.

    Parameters
    ----------
    state : str
        The folder of keys, configurations and ``hosts.txt``.
    prefix : str
        Of the names of namespaces and links: clusters of other prefixes
        are left alone (the tests use their own).
    """

    def __init__(self, state=STATE, prefix=PREFIX):
        self.state = state
        self.prefix = prefix
        self.bridge = f'{prefix}-br'

    # -- names ---------------------------------------------------------
    def netns(self, i):
        """The namespace of host `i` (from 1), and the name of the bridge
        end of its link."""
        return f'{self.prefix}-h{i}'

    @staticmethod
    def address(i):
        return f'{SUBNET}.{10 + i}'

    @property
    def hosts_file(self):
        return os.path.join(self.state, 'hosts.txt')

    @property
    def ssh_command(self):
        """The ssh command that logs in to the hosts (``D2L_BERT_SSH``)."""
        return f'ssh -F {os.path.join(self.state, "ssh_config")}'

    def info(self):
        """What `up` recorded: hosts, cores, link; {} when down."""
        try:
            with open(os.path.join(self.state, 'cluster.json')) as f:
                return json.load(f)
        except OSError:
            return {}

    def cores(self, i):
        """The CPUs of host `i`."""
        return self.info()['cores'][i - 1]

    def argv(self, i, command):
        """`command` run on host `i`: in its namespace, on its cores, with
        ``D2L_BERT_SSH`` set."""
        cpus = ','.join(map(str, self.cores(i)))
        return [which('ip'), 'netns', 'exec', self.netns(i),
                which('taskset'), '-c', cpus, 'env',
                f'{PRESETS.SSH_ENV}={self.ssh_command}'] + list(command)

    def pids(self, i):
        """The processes in host `i`'s namespace."""
        done = _run('ip', 'netns', 'pids', self.netns(i), check=False)
        return [int(p) for p in done.stdout.split()]

    def job_pids(self, i):
        """The processes on host `i` besides its listening sshd."""
        return [p for p in self.pids(i) if p not in self.sshd_pids()]

    def sshd_pids(self):
        return self.info().get('sshd', [])

    def link(self, i, state):
        """Set host `i`'s link 'up' or 'down' (its bridge end)."""
        _run('ip', 'link', 'set', self.netns(i), state)

    # -- up ------------------------------------------------------------
    def up(self, num_hosts, link='1gbit', delay=None, cores=None):
        """Make `num_hosts` hosts on a bridge, each link at `link` (a tc
        rate) delayed by `delay` (a tc time), each host with `cores` CPUs
        (default: the machine's CPUs divided among the hosts, at least
        1).  Removes an earlier cluster first, and what it made when it
        fails or is interrupted."""
        check_can_run()
        if num_hosts < 1 or num_hosts > 200:
            raise ClusterError(f'hosts must be in [1, 200], got {num_hosts}')
        cpus = sorted(os.sched_getaffinity(0))
        cores = cores or max(1, len(cpus) // num_hosts)
        self.down()
        previous = signal.signal(signal.SIGTERM, _interrupt)
        try:
            os.makedirs(self.state, mode=0o700)
            info = dict(hosts=[self.address(i)
                               for i in range(1, num_hosts + 1)],
                        cores=[[cpus[(k * cores + c) % len(cpus)]
                                for c in range(cores)]
                               for k in range(num_hosts)],
                        link=link, delay=delay, sshd=[],
                        made_run_sshd=not os.path.isdir('/run/sshd'))
            self._write(info)
            self._keys(info['hosts'])
            _run('ip', 'link', 'add', self.bridge, 'type', 'bridge')
            _run('ip', 'link', 'set', self.bridge, 'up')
            for i in range(1, num_hosts + 1):
                self._host(i, link, delay)
            os.makedirs('/run/sshd', mode=0o755, exist_ok=True)
            for i in range(1, num_hosts + 1):
                info['sshd'].append(self._sshd(i, info['cores'][i - 1]))
                self._write(info)
            for i in range(1, num_hosts + 1):
                self._wait_for_ssh(i)
        except BaseException:
            self.down()
            raise
        finally:
            signal.signal(signal.SIGTERM, previous)
        return info

    def _write(self, info):
        with open(os.path.join(self.state, 'cluster.json'), 'w') as f:
            json.dump(info, f)

    def _keys(self, addresses):
        """A host key (one for all hosts), a client key, the files that
        make each trust the other, hosts.txt."""
        s = self.state
        for name in ('host_key', 'id_ed25519'):
            _run('ssh-keygen', '-q', '-t', 'ed25519', '-N', '', '-C',
                 f'd2l-bert cluster {name}', '-f', os.path.join(s, name))
        with open(os.path.join(s, 'host_key.pub')) as f:
            host_key = ' '.join(f.read().split()[:2])
        shutil.copy(os.path.join(s, 'id_ed25519.pub'),
                    os.path.join(s, 'authorized_keys'))
        with open(os.path.join(s, 'known_hosts'), 'w') as f:
            f.write(f'{",".join(addresses)} {host_key}\n')
        with open(os.path.join(s, 'ssh_config'), 'w') as f:
            f.write(f'Host {SUBNET}.*\n'
                    f'  IdentityFile {s}/id_ed25519\n'
                    '  IdentitiesOnly yes\n'
                    f'  UserKnownHostsFile {s}/known_hosts\n'
                    '  StrictHostKeyChecking yes\n'
                    '  BatchMode yes\n')
        with open(self.hosts_file, 'w') as f:
            f.write(''.join(f'{a}\n' for a in addresses))

    def _host(self, i, link, delay):
        """Host `i`'s namespace, veth pair on the bridge, address, and
        the rate (and delay) of its link on both ends."""
        ns = port = self.netns(i)
        _run('ip', 'netns', 'add', ns)
        _run('ip', 'link', 'add', port, 'type', 'veth', 'peer', 'name',
             'eth0', 'netns', ns)
        _run('ip', 'link', 'set', port, 'master', self.bridge, 'up')
        _run('ip', 'addr', 'add', f'{self.address(i)}/24', 'dev', 'eth0',
             netns=ns)
        _run('ip', 'link', 'set', 'eth0', 'up', netns=ns)
        _run('ip', 'link', 'set', 'lo', 'up', netns=ns)
        for device, where in ((port, None), ('eth0', ns)):
            _shape(device, link, delay, where)

    def _sshd(self, i, cpus):
        """Start host `i`'s sshd on its address and cores; its pid."""
        s, folder = self.state, os.path.join(self.state, f'h{i}')
        os.makedirs(folder)
        config = os.path.join(folder, 'sshd_config')
        with open(config, 'w') as f:
            f.write(f'ListenAddress {self.address(i)}\n'
                    f'HostKey {s}/host_key\n'
                    f'AuthorizedKeysFile {s}/authorized_keys\n'
                    f'PidFile {folder}/sshd.pid\n'
                    'PermitRootLogin prohibit-password\n'
                    'PasswordAuthentication no\n'
                    'KbdInteractiveAuthentication no\n'
                    'UsePAM no\nStrictModes no\n'
                    # A session whose client fell silent ends in 6 s
                    'ClientAliveInterval 2\nClientAliveCountMax 3\n'
                    'MaxStartups 100\nMaxSessions 100\n')
        sshd = [which('taskset'), '-c', ','.join(map(str, cpus)),
                which('sshd'), '-f', config, '-E',
                os.path.join(folder, 'sshd.log')]
        # `ip netns exec` gives the sshd a mount namespace of its own: the
        # start-up files are hidden there, and nowhere else
        hide = [f'mount --bind /dev/null {shlex.quote(p)} && '
                for p in start_files()]
        _run('sh', '-c', ''.join(hide) + 'exec ' + shlex.join(sshd),
             netns=self.netns(i))
        pid_file = os.path.join(folder, 'sshd.pid')
        deadline = time.monotonic() + 10
        while not os.path.exists(pid_file):
            if time.monotonic() > deadline:
                raise ClusterError(f'sshd of host {i} did not start: see '
                                   f'{folder}/sshd.log')
            time.sleep(0.05)
        with open(pid_file) as f:
            return int(f.read())

    def _wait_for_ssh(self, i, timeout=10):
        """Wait until host 1 can log in to host `i` with ssh."""
        deadline = time.monotonic() + timeout
        while True:
            done = _run(*shlex.split(self.ssh_command), self.address(i),
                        'true', check=False, netns=self.netns(1))
            if done.returncode == 0:
                return
            if time.monotonic() > deadline:
                raise ClusterError(f'cannot log in to host {i} with ssh: '
                                   f'{done.stderr.strip()}')
            time.sleep(0.2)

    # -- down ----------------------------------------------------------
    def down(self):
        """Remove every host, the bridge and the state folder: whatever
        of them exists.  Returns what was removed, as text."""
        removed = []
        info = self.info()
        listed = _run(which('ip') or 'ip', 'netns', 'list',
                      check=False).stdout.split()
        namespaces = [n for n in listed if n.startswith(f'{self.prefix}-h')]
        for ns in namespaces:
            done = _run('ip', 'netns', 'pids', ns, check=False)
            for pid in map(int, done.stdout.split()):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            _run('ip', 'netns', 'del', ns, check=False)
            removed.append(f'netns {ns}')
        # A namespace lives on while a socket of it does (a connection
        # cut off by `link down` retries for minutes), and its veth pair
        # with it: remove the pairs by their bridge ends
        links = _run('ip', '-o', 'link', 'show', check=False).stdout
        for name in re.findall(rf'^\d+: ({self.prefix}-[a-z0-9]+)[@:]',
                               links, re.M):
            _run('ip', 'link', 'del', name, check=False)
            removed.append(f'link {name}')
        others = _run('ip', 'netns', 'list', check=False).stdout.strip()
        if info.get('made_run_sshd') and not others:
            try:
                os.rmdir('/run/sshd')
            except OSError:
                pass
        if os.path.isdir(self.state):
            shutil.rmtree(self.state)
            removed.append(self.state)
        return removed


def start_files():
    """This user's shell start-up files (of `START_FILES`) that exist."""
    home = pwd.getpwuid(os.getuid()).pw_dir
    return [p for p in (os.path.join(home, n) for n in START_FILES)
            if os.path.isfile(p)]


def _shape(device, link, delay, netns):
    """Hold `device`'s sending to `link` (tbf), and delay it by `delay`
    (netem below the token bucket)."""
    rate = _bits(link)
    # A burst of 1 ms at the rate (at least 64 KiB: a GSO segment)
    burst = max(64 * 1024, rate // 8 // 1000)
    _run('tc', 'qdisc', 'add', 'dev', device, 'root', 'handle', '1:', 'tbf',
         'rate', link, 'burst', burst, 'latency', '20ms', netns=netns)
    if delay:
        done = _run('tc', 'qdisc', 'add', 'dev', device, 'parent', '1:1',
                    'handle', '10:', 'netem', 'delay', delay, 'limit',
                    10000, netns=netns, check=False)
        if 'unknown' in done.stderr:
            raise ClusterError('--delay needs netem, which this kernel '
                               'lacks (sch_netem): leave --delay out')
        if done.returncode:
            raise ClusterError(f'--delay {delay}: tc says '
                               f'{done.stderr.strip()}')


def _bits(rate):
    """Bits per second of a tc rate such as '1gbit' or '100mbit'."""
    units = {'gbit': 10 ** 9, 'mbit': 10 ** 6, 'kbit': 10 ** 3, 'bit': 1}
    for unit, scale in units.items():
        if rate.lower().endswith(unit):
            try:
                return int(float(rate[:-len(unit)]) * scale)
            except ValueError:
                break
    raise ClusterError(f'--link must be a rate such as 1gbit or 100mbit, '
                       f'got {rate!r}')


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog='cluster.py', description=__doc__.split('\n\n')[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--state', default=STATE,
                        help=f'folder of keys and configuration ({STATE})')
    sub = parser.add_subparsers(dest='action', required=True)
    up = sub.add_parser('up', help='make N hosts (after removing any)')
    up.add_argument('hosts', type=int, metavar='N')
    up.add_argument('--link', default='1gbit',
                    help="each host's link rate, as tc writes it (1gbit)")
    up.add_argument('--delay', default=None,
                    help='added one-way delay, such as 0.2ms (none)')
    up.add_argument('--cores', type=int, default=None,
                    help="CPUs per host (the machine's, divided)")
    sub.add_parser('down', help='remove the hosts (nothing if none)')
    run = sub.add_parser('run', help='run a command on host I')
    run.add_argument('host', type=int, metavar='I')
    run.add_argument('command', nargs=argparse.REMAINDER)
    link = sub.add_parser('link', help="set host I's link up or down")
    link.add_argument('host', type=int, metavar='I')
    link.add_argument('state', choices=('up', 'down'))
    args = parser.parse_args(argv)
    cluster = Cluster(args.state)
    try:
        if args.action == 'up':
            info = cluster.up(args.hosts, args.link, args.delay, args.cores)
            for i, (address, cpus) in enumerate(
                    zip(info['hosts'], info['cores']), 1):
                print(f'host {i}: {address} in netns {cluster.netns(i)}, '
                      f'cpu {",".join(map(str, cpus))}, link {args.link}'
                      + (f' + {args.delay}' if args.delay else ''))
            print(f'hosts file: {cluster.hosts_file}; ssh: '
                  f'{PRESETS.SSH_ENV}="{cluster.ssh_command}"')
        elif args.action == 'down':
            removed = cluster.down()
            print('removed ' + (', '.join(removed) or 'nothing'))
        elif args.action == 'link':
            cluster.link(args.host, args.state)
        else:
            command = args.command[1:] if args.command[:1] == ['--'] \
                else args.command
            return subprocess.call(cluster.argv(args.host, command))
    except ClusterError as e:
        print(f'cluster.py: error: {e}', file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print('cluster.py: interrupted; removed the hosts', file=sys.stderr)
        return 130
    return 0


if __name__ == '__main__':
    sys.exit(main())
