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
  model's parameters with the other's configuration
  (`remove_other_model` takes the old one away before the new one is
  written);
- one run at a time: the run holds an OS lock (``fcntl.flock``) on the
  file ``DIR/.d2l-bert.lock`` until it ends, and a second run on DIR is
  refused at once.  The kernel lets go of the lock when the process
  ends, a killed one included, so no stale lock is ever left; the file
  itself is removed when the run ends normally;
- holding the lock, the run removes the temporary files a killed run
  left while it was writing (`atomic.remove_partial_files`): no
  ``.checkpoint.zip.*.tmp`` survives the next run.

Nothing here imports `mxnet`: the checks run before the model is built.
"""
import os

from ..data.atomic import remove_partial_files

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

    Parameters
    ----------
    out : str
        The output directory; created if missing (and removed with the
        lock if nothing else was written in it).

    Raises
    ------
    OutDirError
        Another process holds the lock.
    """

    def __init__(self, out):
        self.out, self.path = out, os.path.join(out, LOCK_FILE)
        self._fd = None
        self._made = not os.path.isdir(out)
        os.makedirs(out, exist_ok=True)
        while self._fd is None:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
            if not _try_lock(fd):
                os.close(fd)
                raise OutDirError(
                    f'--out {out}: another run is using this directory '
                    f'(it holds {self.path}); wait for it to end, or give '
                    'another --out')
            # The file may have been removed by a run that just ended,
            # after we opened it: lock the one that is there
            if _same_file(fd, self.path):
                self._fd = fd
            else:
                os.close(fd)

    def release(self):
        """Remove the lock file and let go of the lock; remove `out`
        too if it was made for the lock and the run left it empty."""
        if self._fd is None:
            return
        try:
            os.remove(self.path)
            if self._made:
                os.rmdir(self.out)
        except OSError:
            pass
        os.close(self._fd)
        self._fd = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()


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


def remove_other_model(out, names):
    """Remove the files of `names` from `out` (those of another kind of
    model, which ``--overwrite`` replaces), before this run writes its
    own ``config.json`` and ``vocab.json`` there."""
    for name in finished_files(out, names):
        os.remove(os.path.join(out, name))
