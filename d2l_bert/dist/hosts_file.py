"""The hosts file of a job over ssh, and how long a machine may be silent.

``d2l-bert launch --hosts FILE`` and ``d2l-bert pretrain --hosts FILE``
run a job on the machines of FILE, one ``[USER@]ADDRESS[:SSH_PORT]`` a
line (`read_hosts`).  The file is read whole before anything starts, and
only if it is a regular file of at most `MAX_HOSTS_BYTES`; each line
must name a machine ssh and ps-lite can both take: an IPv4 address or a
host name of DNS labels (`check_address`), a user name that ssh cannot
mistake for one of its options, a port from 1 to 65535.  A line that is
not so is one line naming the file, the line's number and the value.

``--timeout`` (`check_timeout`) is how long a machine of the job may be
silent before the job stops, from `MIN_TIMEOUT` to `MAX_TIMEOUT`
seconds (`DEFAULT_TIMEOUT` when it is not given): the command line's
validator (`d2l_bert.cli._args`) and the launcher take the range from
here.

This module does not import `mxnet`.
"""
import ipaddress
import os
import re
import stat
from collections import namedtuple

#: The most bytes a hosts file may hold: some ten thousand machines
MAX_HOSTS_BYTES = 1 << 20
#: The longest host name DNS takes, without its final dot, and the
#: longest of its labels
MAX_NAME, MAX_LABEL = 253, 63
#: Seconds a machine may be silent before the job stops (``--timeout``):
#: at least 3 (ssh asks every ``timeout // 3`` seconds, at least 1), at
#: most an hour
MIN_TIMEOUT, MAX_TIMEOUT = 3, 3600
#: The seconds a machine may be silent unless ``--timeout`` says (the
#: launcher's, and its machines' watchdogs', `d2l_bert.dist.remote`)
DEFAULT_TIMEOUT = 30.0
#: What a line of a hosts file holds, for the messages
FORM = '[USER@]ADDRESS[:SSH_PORT]'

_LABEL = re.compile(r'[A-Za-z0-9_]([A-Za-z0-9_-]*[A-Za-z0-9_])?$')
#: A user name: POSIX's portable characters, and '@' and '$' (Active
#: Directory's user@domain, Samba's machine accounts); never a leading
#: '-', which ssh would read as an option
_USER = re.compile(r'[A-Za-z0-9._@$][A-Za-z0-9._@$-]*$')

#: A machine of a hosts file, with the `address` ps-lite binds to there, the
#: `ssh_target` (``user@address`` or `address`), the ssh `port`, and the
#: `line` of the file, for messages
Host = namedtuple('Host', ['address', 'ssh_target', 'port', 'line'])


class HostsError(ValueError):
    """A hosts file or a ``--timeout`` that a job cannot take; the message
    is one line naming the file (and line) or the option, the value and
    what is allowed."""


def _shown(text, limit=100):
    """`text` as a message shows it: its `repr` (every control character
    escaped), cut in the middle when longer than `limit`."""
    value = repr(text)
    if len(value) <= limit:
        return value
    return (f'{value[:limit - 24]}...{value[-20:]} ({len(text):,} '
            'characters)')


def check_timeout(timeout):
    """Return `timeout` if it is a number of seconds from `MIN_TIMEOUT`
    to `MAX_TIMEOUT`, else raise a `HostsError`."""
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) \
            or not MIN_TIMEOUT <= timeout <= MAX_TIMEOUT:
        raise HostsError(f'--timeout must be {timeout_range()}, got '
                         f'{timeout!r}')
    return timeout


def timeout_range():
    """What ``--timeout`` takes, as the messages say it."""
    return (f'a number of seconds from {MIN_TIMEOUT} to {MAX_TIMEOUT} '
            '(how long a machine of --hosts may be silent)')


def read_hosts(path):
    """Read a hosts file: one machine a line, ``[USER@]ADDRESS[:SSH_PORT]``.

    Blank lines and text after ``#`` are ignored.  ADDRESS is what the
    processes on that machine bind to and what the others connect to:
    give each machine's address on the network that joins them (a name
    works if it resolves to that address on every machine).  The first
    machine also runs the scheduler.  The format is that of MXNet's own
    launcher (``-H``), with ``user@`` added.

    Returns
    -------
    list of Host

    Raises
    ------
    HostsError
        If the file is not a regular file, cannot be read, holds more
        than `MAX_HOSTS_BYTES` or no machine, or a line is not of that
        form.
    """
    lines = _text_lines(path, _read_bounded(path))
    hosts = []
    for number, text in enumerate(lines, 1):
        text = text.split('#', 1)[0].strip()
        if text:
            hosts.append(_host(path, number, text))
    if not hosts:
        raise HostsError(f'--hosts {path} lists no machine: write one '
                         f'{FORM} a line')
    return hosts


def _read_bounded(path):
    """The bytes of the regular file `path`, at most `MAX_HOSTS_BYTES`
    (opened without waiting, so a FIFO is refused, not waited for)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, 'O_NONBLOCK', 0))
    except OSError as e:
        raise HostsError(f'--hosts {path}: cannot read it '
                         f'({e.strerror})') from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise HostsError(f'--hosts {path}: {file_kind(mode)}, not a '
                         f'regular file; write one {FORM} a line in a file')
    with open(fd, 'rb') as f:
        try:
            data = f.read(MAX_HOSTS_BYTES + 1)
        except OSError as e:
            raise HostsError(f'--hosts {path}: cannot read it '
                             f'({e.strerror})') from None
    if len(data) > MAX_HOSTS_BYTES:
        raise HostsError(
            f'--hosts {path}: more than {MAX_HOSTS_BYTES:,} bytes, the '
            f'most a hosts file may hold; write one {FORM} a line')
    return data


def file_kind(mode):
    """``'a directory'``, ``'a FIFO'``... of the `st_mode` `mode`."""
    for test, kind in ((stat.S_ISDIR, 'a directory'),
                       (stat.S_ISCHR, 'a character device'),
                       (stat.S_ISBLK, 'a block device'),
                       (stat.S_ISFIFO, 'a FIFO (a named pipe)'),
                       (stat.S_ISSOCK, 'a socket')):
        if test(mode):
            return kind
    return 'not a regular file'


def _text_lines(path, data):
    """The lines of `data`, which must be UTF-8 text without NUL."""
    try:
        text = data.decode('utf-8')
    except UnicodeDecodeError as e:
        raise HostsError(f'--hosts {path}: not a text file (byte '
                         f'{e.object[e.start]:#04x} at offset {e.start:,}'
                         f'); write one {FORM} a line') from None
    if '\0' in text:
        raise HostsError(f'--hosts {path}: not a text file (it holds NUL '
                         f'bytes); write one {FORM} a line')
    return text.splitlines()


def _host(path, number, text):
    """The `Host` of the line `number` of `path`, `text` (stripped)."""
    where = f'--hosts {path} line {number}'
    target, _, port = text.partition(':')
    user, at, address = target.rpartition('@')
    if not address or any(c.isspace() for c in text) or (
            port and not (port.isdigit() and 1 <= int(port) <= 65535)):
        raise HostsError(f'{where}: expected {FORM}, one machine a line, '
                         f'got {_shown(text)}')
    if at and not _USER.match(user):
        raise HostsError(
            f'{where}: {_shown(user)} is not a user name (letters, digits '
            "and '.', '_', '-', '@', '$', not starting with '-'), in "
            f'{_shown(text)}')
    why = check_address(address)
    if why:
        raise HostsError(f'{where}: {_shown(address)} is not a host name '
                         f'or an IPv4 address: {why}')
    return Host(address, target, int(port or 22), number)


def check_address(address):
    """Why `address` is neither an IPv4 address nor a host name of DNS
    labels (each 1 to `MAX_LABEL` letters, digits, '-' or '_', not
    starting or ending with '-'; at most `MAX_NAME` characters in all),
    or None if it is one of them."""
    name = address[:-1] if address.endswith('.') else address
    labels = name.split('.')
    if all(label.isdigit() for label in labels):
        try:
            ipaddress.IPv4Address(name)
            return None
        except ValueError:
            return 'its numbers are not those of an IPv4 address (four ' \
                'numbers from 0 to 255, such as 10.0.0.2)'
    if len(name) > MAX_NAME:
        return (f'{len(name)} characters, more than the {MAX_NAME} of a '
                'DNS name')
    for label in labels:
        if not label:
            return 'an empty label (two dots in a row, or one at the start)'
        if len(label) > MAX_LABEL:
            return (f'a label of {len(label)} characters, more than the '
                    f'{MAX_LABEL} DNS takes')
        if not _LABEL.match(label):
            return (f'the label {_shown(label)} holds other characters than '
                    "letters, digits, '-' and '_' (or starts or ends with "
                    "'-')")
    return None
