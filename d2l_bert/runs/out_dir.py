"""Output directories: one run at a time, and nothing finished replaced
unasked.

``d2l-bert pretrain --out DIR`` and ``d2l-bert finetune --out DIR``
claim DIR before any work (`claim`):

- a directory that holds a finished model or a checkpoint is refused
  unless the command was asked to go on (``--resume``) or to start over
  (``--overwrite``): running a command twice never throws the first
  model away;
- a directory that holds the other command's model (a fine-tuned one
  for ``pretrain``, a pretrained one for ``finetune``) is refused unless
  ``--overwrite`` is given, which then replaces it: the two models share
  ``config.json`` and ``vocab.json``, and a directory never holds one
  model's parameters with the other's configuration (the old one's
  files go once the new one's are all written, `other_model_files`: a
  run that fails keeps them);
- one run at a time: the run holds an OS lock (``fcntl.flock``) on the
  file ``DIR/.d2l-bert.lock`` until it ends, and a second run on DIR is
  refused at once.  The kernel lets go of the lock when the process
  ends, a killed one included, so no stale lock is ever left; the file
  itself is removed when the run ends, however it ends (by a process of
  its own if the run was killed), and so are DIR and the directories
  made above it if the run wrote nothing else there;
- holding the lock, the run removes the temporary files a killed run
  left while it was writing (`atomic.remove_partial_files`): no
  ``.checkpoint.zip.*.tmp`` survives the next run.

Nothing here imports `mxnet`: the checks run before the model is built.
"""
import contextlib
import os
import subprocess
import sys

from ..data.atomic import (PARTIAL_FILES, make_dirs, remove_empty_dirs,
                           remove_partial_files)

#: The lock file a run holds in its output directory
LOCK_FILE = '.d2l-bert.lock'

#: The files of each kind of model, beside ``config.json`` and
#: ``vocab.json``: `d2l-bert pretrain`'s, then `d2l-bert finetune`'s
PRETRAINED_FILES = ('pretrained.params', 'checkpoint.zip', 'loss.png')
FINETUNED_FILES = ('finetuned.params', 'history.json', 'finetune.png')


class OutDirError(Exception):
    """The output directory cannot be used as asked (one line)."""


def finished_files(out, names):
    """The files of `names` that exist in the directory `out`."""
    return [name for name in names
            if os.path.isfile(os.path.join(out, name))]


class OutDirLock:
    """An exclusive, non-blocking ``flock`` on ``OUT/.d2l-bert.lock``.

    A run that ends without `release` (SIGTERM, SIGHUP, SIGKILL) leaves
    nothing of what `release` would have removed either: a process of
    its own (`_watch`) removes it once the run has ended.  The signals
    keep their default, which ends a process at once, also where it
    waits in C (a Python handler would wait for the main thread, and
    be inherited by the forked workers of a data loader or a pool).

    Parameters
    ----------
    out : str
        The output directory; created if missing, with the directories
        missing above it (and removed with the lock if nothing else was
        written in them).

    Raises
    ------
    OutDirError
        Another process holds the lock.
    """

    def __init__(self, out):
        self.out, self.path = out, os.path.join(out, LOCK_FILE)
        self._fd, self._watcher = None, None
        self._made = make_dirs(out)
        try:
            self._fd = _lock(out, self.path)
        except BaseException:
            remove_empty_dirs(self._made)
            raise
        self._watcher = _watch(self.path, self._made)

    def release(self):
        """Remove the lock file and let go of the lock; remove the
        directories made for the lock too if the run left them empty."""
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            os.remove(self.path)
        remove_empty_dirs(self._made)
        os.close(self._fd)
        self._fd = None
        if self._watcher is not None:
            # it finds the lock file gone, and ends
            self._watcher.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._watcher.wait(1)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()


def _lock(out, path):
    """The descriptor of the lock file `path` of `out`, locked."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        if not _try_lock(fd):
            os.close(fd)
            raise OutDirError(
                f'--out {out}: another run is using this directory '
                f'(it holds {path}); wait for it to end, or give '
                'another --out')
        # The file may have been removed by a run that just ended,
        # after we opened it: lock the one that is there
        if _same_file(fd, path):
            return fd
        os.close(fd)


#: What watches a run's lock from a process of its own (`_watch`): once
#: the run's end closes its standard input, and the lock is free (the
#: run's forked workers share it), the lock file, partial files and the
#: directories made for the run that are left empty go, as `release`
#: would have removed them.  Standard library only, with ``-I -S``: it
#: starts in some 20 ms.  Its first line, `WATCHER_MARK`, names it among
#: a run's processes
_WATCHER = r'''# the watcher of a d2l-bert run's lock
import fcntl, os, re, sys, time
path, partial, made = sys.argv[1], re.compile(sys.argv[2]), sys.argv[3:]
sys.stdin.buffer.read()
try:
    fd = os.open(path, os.O_RDWR)
except OSError:         # removed by `release`: the run ended well
    sys.exit()
for _ in range(100):
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        break
    except OSError:
        time.sleep(0.1)
else:
    sys.exit()
try:
    if os.path.samestat(os.fstat(fd), os.stat(path)):
        folder = os.path.dirname(path) or '.'
        for name in os.listdir(folder):
            if partial.match(name):
                os.remove(os.path.join(folder, name))
        os.remove(path)
        for directory in reversed(made):
            os.rmdir(directory)
except OSError:
    pass
'''


WATCHER_MARK = _WATCHER.splitlines()[0]


def _watch(path, made):
    """Start `_WATCHER` on the lock file `path` (`made`: the directories
    made for it), in a session of its own: a signal to the run's
    process group, a closed terminal's included, does not end it.
    Return it, or None where there is no ``fcntl`` (Windows)."""
    try:
        import fcntl  # noqa: F401
    except ImportError:
        return None
    return subprocess.Popen(
        [sys.executable, '-I', '-S', '-c', _WATCHER, path,
         PARTIAL_FILES.pattern, *made], stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True)


def _try_lock(fd):
    """Whether an exclusive ``flock`` on `fd` was taken (always true
    where there is no ``fcntl``, as on Windows)."""
    try:
        import fcntl
    except ImportError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except (BlockingIOError, PermissionError):
        return False
    return True


def _same_file(fd, path):
    try:
        a, b = os.fstat(fd), os.stat(path)
    except OSError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def claim(out, finished, *, resume=None, overwrite=False, what='a model',
          other=None):
    """Check that a run may write into `out`, lock it, clean it up.

    Parameters
    ----------
    out : str
        The ``--out`` directory.
    finished : sequence of str
        Names of the files a finished run leaves there.
    resume : bool or None
        ``--resume`` was given (`out` may then hold them); None: the
        command has no ``--resume``.
    overwrite : bool
        ``--overwrite`` was given: start over, replacing them.
    what : str
        What those files are, for the message.
    other : (sequence of str, str), optional
        The files that show another kind of model, and what it is
        (``(('finetuned.params',), 'a fine-tuned model')``): `out` holding
        one is refused unless `overwrite`.

    Returns
    -------
    OutDirLock
        Held until its `release` (or the end of the process).

    Raises
    ------
    OutDirError
        `out` holds those files and neither was asked, or another run
        holds the lock.
    """
    there = finished_files(out, finished) if os.path.isdir(out) else []
    theirs = finished_files(out, other[0]) \
        if other is not None and os.path.isdir(out) else []
    if theirs and not overwrite:
        raise OutDirError(
            f'--out {out} holds {other[1]} ({", ".join(theirs)}), not '
            f'{what}: give another --out, or --overwrite to replace it '
            f'with {what}')
    if there and not overwrite and not resume:
        hint = ('give --resume to go on from it, --overwrite to start '
                'over, or another --out')
        if resume is None:
            hint = 'give --overwrite to replace it, or another --out'
        raise OutDirError(f'--out {out} holds {what} ({", ".join(there)})'
                          f' that this run would replace: {hint}')
    lock = OutDirLock(out)
    remove_partial_files(out)
    return lock


def other_model_files(out, names):
    """The paths of the files of `names` in `out`: those of another kind
    of model, which ``--overwrite`` replaces.  A run removes them once
    its own files are written (`atomic_write_all`'s `remove_first`):
    until then, a full disk or a failure keeps them."""
    return [os.path.join(out, name) for name in finished_files(out, names)]
