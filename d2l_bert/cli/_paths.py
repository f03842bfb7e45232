"""What the options that name files, directories and texts take.

The `type=` functions of the arguments that are paths (``--out``,
``--model``, ``--file``...) or texts (``TEXT``, ``--compare``), checked
while the command line is parsed, before any work or file:

- a file to read is one that exists and can be read; where a file of
  texts is read whole (``encode --file``), a regular file, a pipe or
  '-' for standard input, never a device (`/dev/zero` would never end);
- a directory or a file to write is one the nearest existing directory
  above it lets this user create, on a file system mounted writable,
  named within the file system's limits on the length of a name and of
  a path (`check_length`): nothing is created for a path that could
  not be written in the end;
- a path MXNet reads or writes is named in UTF-8, and a text is UTF-8:
  a name or a text that is not comes from the shell as a str with
  surrogates (``os.fsdecode``), which MXNet and the tokenizers cannot
  take.

A value shown in a message is cut when it is long, and given as bytes
when it is not UTF-8 (`shown`).  Nothing here imports `mxnet`.
"""
import argparse
import os
import stat

from ._args import existing_file
from ..dist.hosts_file import file_kind

#: The room the files a command writes in its output directory need in a
#: path, beyond the directory's own: a separator and the longest of their
#: temporary names (``.finetuned.params.XXXXXXXX.tmp``, 30 bytes), with a
#: margin
ROOM = 64
#: The bytes `atomic_write` adds to a file's name for its temporary copy
#: beside it (``.NAME.XXXXXXXX.tmp``)
TEMPORARY_SUFFIX = 15


def shown(text, limit=60):
    """`text` as a message shows it: its `repr`, or that of its bytes if
    it is not UTF-8 (a name the shell passed as it was), cut in the
    middle when longer than `limit` characters."""
    try:
        text.encode('utf-8')
        value = repr(text)
    except UnicodeEncodeError:
        value = f'the bytes {os.fsencode(text)!r}'
    if len(value) <= limit:
        return value
    return (f'{value[:limit - 24]}...{value[-20:]} ({len(text):,} '
            'characters)')


def utf8_text(text):
    """A text in UTF-8 (``TEXT``, ``--compare``): not one the shell
    passed as bytes that are not UTF-8."""
    if not _is_utf8(text):
        raise argparse.ArgumentTypeError(
            f'must be UTF-8 text, got {shown(text)}, which are not UTF-8; '
            'give the text in UTF-8')
    return text


def utf8_path(what):
    """A validator of a path that MXNet reads, named in UTF-8 (`what`:
    what it names, in the message)."""
    def check(text):
        _check_utf8_name(text, what)
        return text
    check.__name__ = f'{what} in UTF-8'
    return check


def _is_utf8(text):
    try:
        text.encode('utf-8')
    except UnicodeEncodeError:
        return False
    return True


def _check_utf8_name(text, what):
    if not _is_utf8(text):
        raise argparse.ArgumentTypeError(
            f'must be a path in UTF-8 (MXNet reads and writes its files by '
            f'UTF-8 names), got {shown(text)}; give the {what} a name of '
            'UTF-8 characters')


def texts_file(text):
    """A file of texts to read whole: '-' (standard input), a regular
    file or a pipe; not a directory, a device or a socket."""
    if text == '-':
        return text
    existing_file(text)
    mode = os.stat(text).st_mode
    if not (stat.S_ISREG(mode) or stat.S_ISFIFO(mode)):
        raise argparse.ArgumentTypeError(
            f'{shown(text)} is {file_kind(mode)}, not a file of texts; give '
            "a text file, one text a line, or '-' for standard input")
    return text


def existing_dir(text):
    """The path of a directory that exists."""
    if not os.path.isdir(text):
        what = 'not a directory' if os.path.exists(text) else \
            'no such directory'
        raise argparse.ArgumentTypeError(f'{what}: {text!r}')
    return text


def output_dir(text):
    """A directory to write into: one that exists, or one that can be
    made in the nearest directory above it that exists; named in UTF-8,
    as MXNet takes the names of the files it writes, and short enough
    for the files written in it (`check_length`)."""
    if not text:
        raise argparse.ArgumentTypeError(
            "must name a directory, got ''; give a path such as my-bert")
    _check_name(text, 'directory')
    if os.path.exists(text) and not os.path.isdir(text):
        raise argparse.ArgumentTypeError(
            f'{text!r} exists and is not a directory')
    _check_writable(text)
    check_length(text, ROOM)
    return text


def output_file(suffix):
    """A validator of a file to write, named with `suffix` (``'.npy'``)."""
    def check(text):
        if not text.endswith(suffix):
            raise argparse.ArgumentTypeError(
                f'must name a {suffix} file, got {text!r}')
        if os.path.isdir(text):
            raise argparse.ArgumentTypeError(
                f'{text!r} is a directory, not a {suffix} file')
        _check_name(text, f'{suffix} file', utf8=False)
        _check_writable(os.path.dirname(os.path.abspath(text)), text)
        check_length(text, 0, TEMPORARY_SUFFIX)
        return text
    check.__name__ = f'{suffix} file'
    return check


def check_length(text, room, suffix=0):
    """Raise unless the file system can hold the path `text`: each of
    its names at most ``NAME_MAX`` bytes (the last one with `suffix`
    bytes more, a temporary copy's), and the absolute path with `room`
    bytes more (the files written in it) less than ``PATH_MAX``, as
    `os.pathconf` gives them for the nearest existing directory."""
    path = os.path.abspath(text)
    above = _existing_above(path)
    try:
        name_max = os.pathconf(above, 'PC_NAME_MAX')
        path_max = os.pathconf(above, 'PC_PATH_MAX')
    except (AttributeError, OSError, ValueError):
        return  # (Windows: no `pathconf`)
    names = os.fsencode(path).split(b'/')
    for i, name in enumerate(names):
        extra = suffix if i == len(names) - 1 else 0
        if name_max and len(name) + extra > name_max:
            why = f' ({name_max}, less the {extra} bytes its temporary ' \
                'copy adds)' if extra else ''
            raise argparse.ArgumentTypeError(
                f'the name {shown(os.fsdecode(name))} has {len(name):,} '
                f'bytes, more than the {name_max - extra:,} this file '
                f'system takes{why}; give a shorter name')
    length = len(os.fsencode(path))
    if path_max and length + room >= path_max:
        raise argparse.ArgumentTypeError(
            f'{shown(text)} is {length:,} bytes long from /, and this file '
            f'system takes paths of less than {path_max:,} bytes, {room} '
            'of them for the files in it; give a shorter path')


def _existing_above(path):
    """The nearest path at or above `path` that exists."""
    while not os.path.exists(path):
        path = os.path.dirname(path)
    return path


def _check_name(text, what, utf8=True):
    """Raise unless `text` is a link that leads somewhere (if a link)
    and, with `utf8`, a name in UTF-8 (`what`: what it must name)."""
    if os.path.islink(text) and not os.path.exists(text):
        raise argparse.ArgumentTypeError(
            f'{text!r} is a symbolic link to {os.readlink(text)!r}, which '
            f'does not exist; give a {what} that exists or can be made')
    if utf8 and not _is_utf8(text):
        raise argparse.ArgumentTypeError(
            f'must be a path in UTF-8 (MXNet writes its files by UTF-8 '
            f'names), got the bytes {os.fsencode(text)!r}; give a name '
            'of UTF-8 characters')


def _check_writable(path, name=None):
    """Raise unless the nearest existing directory at or above `path`
    can be written to (`name`: what the message calls the path)."""
    above = _existing_above(os.path.abspath(path))
    path = path if name is None else name
    if not os.path.isdir(above):
        raise argparse.ArgumentTypeError(
            f'cannot write {path!r}: {above!r} is not a directory')
    if _read_only(above):
        raise argparse.ArgumentTypeError(
            f'cannot write {path!r}: {above!r} is on a read-only file '
            'system')
    if not os.access(above, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(
            f'cannot write {path!r}: permission denied in {above!r}')


def _read_only(directory):
    """Whether `directory` is on a file system mounted read-only."""
    try:
        return bool(os.statvfs(directory).f_flag & os.ST_RDONLY)
    except (AttributeError, OSError):
        return False


def name_or_dir(names, what, utf8=False):
    """A validator of a value that is one of `names` or an existing
    directory (`what`: what the directory must hold, said in the
    message; `utf8`: its name must be UTF-8, for MXNet reads it)."""
    def check(text):
        if text in names:
            return text
        if utf8:
            _check_utf8_name(text, 'directory')
        try:
            return existing_dir(text)
        except argparse.ArgumentTypeError as e:
            raise argparse.ArgumentTypeError(
                f'{e}; give {", ".join(names)} or {what}') from None
    check.__name__ = 'name or directory'
    return check
