"""Tests of d2l_bert/dist/hosts_file.py: the hosts file of a job over
ssh, read bounded and checked line by line, and the range of
``--timeout``."""
import os

import pytest

from d2l_bert.dist import hosts_file as H

HOSTS = """\
# two machines of a class room
10.0.0.1            # the first runs the scheduler
alice@10.0.0.2:2222
"""


def refused(path):
    """The one line of `read_hosts`'s refusal of the file `path`."""
    with pytest.raises(H.HostsError) as e:
        H.read_hosts(str(path))
    assert '\n' not in str(e.value)
    return str(e.value)


def test_read_hosts_reads_addresses_users_and_ssh_ports(tmp_path):
    path = tmp_path / 'hosts.txt'
    path.write_text(HOSTS)
    assert H.read_hosts(str(path)) == [
        H.Host('10.0.0.1', '10.0.0.1', 22, 2),
        H.Host('10.0.0.2', 'alice@10.0.0.2', 2222, 3)]


@pytest.mark.parametrize('text, message', [
    ('', 'lists no machine'),
    ('# nothing\n\n', 'lists no machine'),
    ('10.0.0.1\nhost:ssh\n', "line 2: expected [USER@]ADDRESS[:SSH_PORT], "
                             "one machine a line, got 'host:ssh'"),
    ('a b\n', "line 1: expected"),
    ('10.0.0.1:70000\n', 'line 1: expected'),
])
def test_read_hosts_names_the_bad_line(tmp_path, text, message):
    path = tmp_path / 'hosts.txt'
    path.write_text(text)
    assert refused(path).startswith('--hosts ')
    assert message in refused(path)


def test_read_hosts_says_when_the_file_is_missing(tmp_path):
    assert refused(tmp_path / 'nowhere.txt').endswith(
        'nowhere.txt: cannot read it (No such file or directory)')


LABEL = 'x' * 63


@pytest.mark.parametrize('line, why', [
    # (a label of 64 characters was a UnicodeError of Python's idna codec)
    (f'{LABEL}y.lab.example', f"'{LABEL}y.lab.example' is not a "
     'host name or an IPv4 address: a label of 64 characters, more than '
     'the 63 DNS takes'),
    ('.'.join([LABEL] * 4), "'" + '.'.join([LABEL] * 4)[:75] + '...' +
     LABEL[-19:] + "' (255 characters) is not a host name or an IPv4 "
     'address: 255 characters, more than the 253 of a DNS name'),
    ('node..lab', "'node..lab' is not a host name or an IPv4 address: an "
     'empty label (two dots in a row, or one at the start)'),
    ('-node.lab', "'-node.lab' is not a host name or an IPv4 address: the "
     "label '-node' holds other characters than letters, digits, '-' and "
     "'_' (or starts or ends with '-')"),
    ('nöde.lab', "'nöde.lab' is not a host name or an IPv4 address: the "
     "label 'nöde' holds other characters than letters, digits, '-' and "
     "'_' (or starts or ends with '-')"),
    ('192.168.1.256', "'192.168.1.256' is not a host name or an IPv4 "
     'address: its numbers are not those of an IPv4 address (four numbers '
     'from 0 to 255, such as 10.0.0.2)'),
    ('10.1', "'10.1' is not a host name or an IPv4 address: its numbers "
     'are not those of an IPv4 address (four numbers from 0 to 255, such '
     'as 10.0.0.2)'),
    # a user that ssh would take for one of its options runs a command
    ('-oProxyCommand=touch${IFS}x@10.0.0.1', "'-oProxyCommand=touch${IFS}x'"
     " is not a user name (letters, digits and '.', '_', '-', '@', '$', not "
     "starting with '-'), in '-oProxyCommand=touch${IFS}x@10.0.0.1'"),
    ('bob\tsmith@10.0.0.1', 'expected [USER@]ADDRESS[:SSH_PORT], one '
     "machine a line, got 'bob\\tsmith@10.0.0.1'"),
    ('10.0.0.1:0', 'expected [USER@]ADDRESS[:SSH_PORT], one machine a '
     "line, got '10.0.0.1:0'"),
])
def test_a_host_that_ssh_or_dns_cannot_take_is_one_line(tmp_path, line,
                                                         why):
    path = tmp_path / 'hosts.txt'
    path.write_text(f'10.0.0.1\n\n{line}\n', encoding='utf-8')
    assert refused(path) == f'--hosts {path} line 3: {why}'


def test_names_dns_and_ssh_take_are_read(tmp_path):
    path = tmp_path / 'hosts.txt'
    path.write_text(f'{LABEL}.lab.example\nnode_7.cluster.\n'
                    'svc$@10.255.0.1:65535\nann@corp.example@h1\n')
    assert H.read_hosts(str(path)) == [
        H.Host(f'{LABEL}.lab.example', f'{LABEL}.lab.example', 22, 1),
        H.Host('node_7.cluster.', 'node_7.cluster.', 22, 2),
        H.Host('10.255.0.1', 'svc$@10.255.0.1', 65535, 3),
        H.Host('h1', 'ann@corp.example@h1', 22, 4)]


def test_a_hosts_file_is_read_bounded_and_only_if_regular(tmp_path):
    # (`launch --hosts /dev/zero` read 24 GB before the OOM killer came)
    fifo = tmp_path / 'fifo'
    os.mkfifo(fifo)
    assert refused(fifo) == (f'--hosts {fifo}: a FIFO (a named pipe), not a '
                             'regular file; write one [USER@]ADDRESS'
                             '[:SSH_PORT] a line in a file')
    assert refused(os.devnull) == (
        f'--hosts {os.devnull}: a character device, not a regular file; '
        'write one [USER@]ADDRESS[:SSH_PORT] a line in a file')
    assert refused(tmp_path) == (
        f'--hosts {tmp_path}: a directory, not a regular file; write one '
        '[USER@]ADDRESS[:SSH_PORT] a line in a file')
    big = tmp_path / 'big.txt'
    big.write_bytes(b'# ' + b'-' * H.MAX_HOSTS_BYTES + b'\n10.0.0.1\n')
    assert refused(big) == (f'--hosts {big}: more than 1,048,576 bytes, '
                            'the most a hosts file may hold; write one '
                            '[USER@]ADDRESS[:SSH_PORT] a line')


def test_timeout_range_is_checked_in_one_place():
    assert H.check_timeout(3) == 3 and H.check_timeout(3600.0) == 3600.0
    for value in (2.99, 3600.5, float('nan'), float('inf'), True, '30'):
        with pytest.raises(H.HostsError) as e:
            H.check_timeout(value)
        assert str(e.value) == (
            '--timeout must be a number of seconds from 3 to 3600 (how long '
            f'a machine of --hosts may be silent), got {value!r}')
