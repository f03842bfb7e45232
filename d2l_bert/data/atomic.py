"""Files written whole or not at all.

Everything the package writes for the user (models, checkpoints, plots,
downloads, corpora) goes through one of three functions here:

- `atomic_write`: one file.  It is written under a temporary name in the
  destination's directory, flushed to the disk (`os.fsync`), then renamed
  over the destination (`os.replace`, atomic on one file system): a reader,
  or the next run after a crash or a Ctrl-C, finds the old file or the
  new one, never half of one;
- `atomic_write_into`: files and folders at once, as unpacking an archive
  makes them.  They are written into a temporary folder, flushed, then
  each renamed into place;
- `atomic_write_all`: several files, all or none (a model's parameters,
  vocabulary and configuration).  Each is written as `atomic_write`
  writes one, and none is renamed into place before all are written.

On any failure, a KeyboardInterrupt included, the temporary file or folder
is removed and the error raised again.  A SIGTERM or SIGHUP that comes
while they write waits until the files are in place, then ends the
process as it would have (`sigterm_after`): no temporary file is left
by it.  A file
gets the mode a plain ``open(path, 'w')`` would give it under the
current umask.
"""
import contextlib
import errno
import os
import re
import secrets
import shutil
import signal
import tempfile
import threading


#: The signals whose default ends the process, which `sigterm_after`
#: holds while a file is written: `kill`'s, and a closed terminal's
DEFERRED_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def sigterm_after():
    """For the `with` block, a SIGTERM or SIGHUP waits; at its end, the
    process gets it again and ends as the signal's default ends it.
    Only in the main thread, and for each signal only where it has its
    default disposition (a SIGHUP that ``nohup`` ignores stays
    ignored)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received, held = [], [s for s in DEFERRED_SIGNALS
                          if signal.getsignal(s) == signal.SIG_DFL]
    for signum in held:
        signal.signal(signum, lambda signum, frame: received.append(signum))
    try:
        yield
    finally:
        for signum in held:
            signal.signal(signum, signal.SIG_DFL)
        if received:
            os.kill(os.getpid(), received[0])


@sigterm_after()
def atomic_write(path, write):
    """Write the file `path` whole or not at all.

    Parameters
    ----------
    path : str or os.PathLike
        The destination; its directory is created if missing (so a long
        run never fails at its last write for want of a folder).
    write : callable, str or bytes
        ``write(tmp_path)`` writes the file at the path it is given, such
        as ``net.save_parameters`` or ``fig.savefig``; a str is written as
        UTF-8 text (line ends as they are), bytes as they are.

    Returns
    -------
    str
        `path`.
    """
    path = os.fspath(path)
    tmp = _write_temporary(path, write)
    with _removed_on_failure(path, tmp):
        os.replace(tmp, path)
        _fsync_directory(os.path.dirname(os.path.abspath(path)))
    return path


@sigterm_after()
def atomic_write_all(files, remove_first=()):
    """Write several files whole, all of them or none.

    Every file is written and flushed under a temporary name beside it,
    as `atomic_write` writes one, before any is renamed into place: a
    failure while writing (a full disk) leaves the old files as they
    were and no new one.  The files of `remove_first` are then removed,
    and the new ones renamed into place in the order of `files`: put
    last the one that marks the set finished, and name it in
    `remove_first`, so that even a crash between two renames leaves no
    marker beside another set's files.

    Parameters
    ----------
    files : sequence of (str, callable or str or bytes)
        Each destination and what to write there, as `atomic_write`
        takes them.
    remove_first : sequence of str
        Paths removed (if there) once every file is written.

    Returns
    -------
    list of str
        The destinations.
    """
    files = [(os.fspath(path), write) for path, write in files]
    staged = []
    try:
        for path, write in files:
            staged.append(_write_temporary(path, write))
        for path in remove_first:
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)
        for tmp, (path, _) in zip(staged, files):
            os.replace(tmp, path)
        for directory in {os.path.dirname(os.path.abspath(path))
                          for path, _ in files}:
            _fsync_directory(directory)
    finally:
        for tmp in staged:
            with contextlib.suppress(FileNotFoundError):
                os.remove(tmp)
    return [path for path, _ in files]


def _write_temporary(path, write):
    """Write and flush a new temporary file beside `path` (`write` as
    `atomic_write` takes it); return its path.  On failure it is
    removed and the error raised (`write_failure`'s, if any)."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = _new_file(directory, os.path.basename(path))
    with _removed_on_failure(path, tmp):
        with open(fd, 'wb') as f:
            if not callable(write):
                f.write(write.encode('utf-8') if isinstance(write, str)
                        else write)
        if callable(write):
            write(tmp)
        _fsync_file(tmp)
    return tmp


@contextlib.contextmanager
def _removed_on_failure(path, tmp):
    """Remove the temporary file `tmp` of `path` if the body fails, and
    raise `write_failure`'s error (or the body's own)."""
    try:
        yield
    except BaseException as e:
        failure = write_failure(e, path, tmp)
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)
        if failure is None:
            raise
        raise failure from None


def write_failure(error, path, partial=None):
    """The `OSError` to report for `error`, raised while writing `path`
    (through the file `partial`), or None to raise `error` itself.

    A write can fail without naming its file: Python's own writes raise
    an `OSError` with the errno and no file name, NumPy's say ``384000
    requested and 139232 written``, and MXNet's C++ writers raise an
    `MXNetError` (``FileStream.Write incomplete``).  The error returned
    names `path` and the cause: the one of `error` if its errno is one
    of a file system that cannot take the write; else a full file system
    (``ENOSPC``) or the process's limit on file sizes (``EFBIG``) if
    either shows; else, for MXNet, what `error` said.  Other errors (a
    KeyboardInterrupt, a download that fails) give None.
    """
    path = os.fspath(path)
    if isinstance(error, OSError) and error.errno in _STORAGE:
        return OSError(error.errno, error.strerror or str(error), path)
    mxnet = type(error).__name__ == 'MXNetError'
    if not mxnet and not (isinstance(error, OSError)
                          and error.errno is None):
        return None
    cause = _disk_full(os.path.dirname(os.path.abspath(path)), partial)
    if cause is not None:
        return OSError(cause, os.strerror(cause), path)
    if not mxnet:
        return None
    first = str(error).strip().splitlines()[0] if str(error).strip() \
        else type(error).__name__
    return OSError(errno.EIO, f'the write failed ({first})', path)


#: The errors of a file system that cannot take a write
_STORAGE = {errno.ENOSPC, errno.EFBIG, errno.EDQUOT, errno.EROFS,
            errno.EACCES, errno.EPERM, errno.EIO}


def _disk_full(directory, partial):
    """``errno.EFBIG`` if `partial` reached the process's limit on file
    sizes, ``errno.ENOSPC`` if the file system of `directory` has no
    free block, else None."""
    try:
        import resource
        limit, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
        if partial is not None and limit != resource.RLIM_INFINITY and \
                os.path.getsize(partial) >= limit:
            return errno.EFBIG
    except (ImportError, OSError):
        pass
    try:
        stat = os.statvfs(directory)
    except (AttributeError, OSError):
        return None
    # (a few blocks may stay free: less than what was being written)
    return errno.ENOSPC if stat.f_bavail * stat.f_frsize < 1 << 20 \
        else None


@sigterm_after()
def atomic_write_into(folder, write):
    """Write files and folders into `folder`, each whole or not at all.

    ``write(tmp)`` fills a new temporary folder inside `folder` (unpacking
    an archive there, say); every file in it is then flushed to the disk,
    and each entry renamed into `folder`, in place of an older one of the
    same name.  An older folder is first moved aside and deleted last, so
    a crash leaves either it or the new one, never a folder half deleted
    or half written (for a moment it may leave neither).

    Parameters
    ----------
    folder : str or os.PathLike
        Created if missing; ``''`` is the current directory.
    write : callable
        ``write(tmp)``, `tmp` a path to an empty folder.

    Returns
    -------
    list of str
        The paths of the entries now in `folder`, sorted.
    """
    folder = os.fspath(folder) or os.curdir
    os.makedirs(folder, exist_ok=True)
    # The temporary folder is never renamed into place, only its entries
    # are: `mkdtemp`'s private mode does not matter
    tmp = tempfile.mkdtemp(dir=folder, prefix='.', suffix='.tmp')
    try:
        new = os.path.join(tmp, 'new')
        os.mkdir(new)
        write(new)
        _fsync_tree(new)
        old = os.path.join(tmp, 'old')
        os.mkdir(old)
        paths = []
        for entry in sorted(os.listdir(new)):
            src, dest = os.path.join(new, entry), os.path.join(folder, entry)
            # `os.replace` puts a file over a file at once, but cannot put
            # anything over a folder, nor a folder over a file
            if os.path.isdir(dest) and not os.path.islink(dest) or (
                    os.path.isdir(src) and os.path.lexists(dest)):
                os.replace(dest, os.path.join(old, entry))
            os.replace(src, dest)
            paths.append(dest)
        _fsync_directory(folder)
        return paths
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _new_file(directory, name):
    """Create a new, empty file with a name of its own in `directory`.

    Created by `os.open` with mode 0o666, as `open(path, 'w')` creates a
    file, so the umask gives it the usual mode (`tempfile.mkstemp` would
    give 0o600, and reading the umask means setting it, for the whole
    process).

    Returns
    -------
    fd : int
        Open for writing.
    path : str
    """
    flags = (os.O_WRONLY | os.O_CREAT | os.O_EXCL
             | getattr(os, 'O_BINARY', 0))
    for _ in range(100):
        path = os.path.join(directory,
                            f'.{name}.{secrets.token_hex(4)}.tmp')
        try:
            return os.open(path, flags, 0o666), path
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST,
                          f'no free temporary name for {name!r}', directory)


def _fsync_tree(top):
    """Flush every file below `top`, and the folders that list them."""
    for root, _, files in os.walk(top):
        for name in files:
            path = os.path.join(root, name)
            if not os.path.islink(path):
                _fsync_file(path)
        _fsync_directory(root)


def _fsync_file(path):
    """Flush the file `path` to the disk."""
    # Windows flushes only a file open for writing
    fd = os.open(path, (os.O_RDWR | os.O_BINARY) if os.name == 'nt'
                 else os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_directory(directory):
    """Flush `directory`'s list of names, so that a rename in it lasts.

    Skipped on Windows, which cannot open a folder, and where the file
    system does not support it.
    """
    if os.name == 'nt':
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError as e:
        if e.errno not in (errno.EINVAL, errno.ENOTSUP):
            raise
    finally:
        os.close(fd)


def make_dirs(path):
    """Make the directory `path` and those missing above it, as
    `os.makedirs` does; return the ones made, from the top down.  On a
    failure those made are removed again, and the error raised."""
    missing, above = [], path.rstrip(os.sep) or path
    while above and not os.path.isdir(above):
        missing.append(above)
        above = os.path.dirname(above)
    made = []
    try:
        for directory in reversed(missing):
            with contextlib.suppress(FileExistsError):
                os.mkdir(directory)
                made.append(directory)
        if not os.path.isdir(path):
            raise NotADirectoryError(errno.ENOTDIR,
                                     os.strerror(errno.ENOTDIR), path)
    except BaseException:
        remove_empty_dirs(made)
        raise
    return made


def remove_empty_dirs(made):
    """Remove the directories `made` (as `make_dirs` returns them) that
    are empty, from the bottom up, up to the first that is not."""
    for directory in reversed(made):
        try:
            os.rmdir(directory)
        except OSError:
            return


def remove_partial_files(folder):
    """Remove the temporary files a process killed while writing left in
    `folder`: `atomic_write`'s (``.NAME.XXXXXXXX.tmp``) and those of a
    checkpoint's parts (``.part.XXXXXXXX.tmp``); return their paths.
    Call it only when no process writes there."""
    removed = []
    try:
        names = os.listdir(folder)
    except OSError:
        return removed
    for name in names:
        if PARTIAL_FILES.match(name):
            path = os.path.join(folder, name)
            with contextlib.suppress(OSError):
                os.remove(path)
                removed.append(path)
    return sorted(removed)


#: The names of `_new_file`'s files and of `tempfile.mkstemp`'s with
#: the prefix '.part.'
PARTIAL_FILES = re.compile(
    r'^\.(.+\.[0-9a-f]{8}|part\.[a-z0-9_]{8})\.tmp$')
