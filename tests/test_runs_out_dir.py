"""Tests of d2l_bert/runs/out_dir.py: one run per output directory, and
nothing finished replaced unasked."""
import os
import signal
import subprocess
import sys
import time

import pytest

from d2l_bert.runs.out_dir import (FINETUNED_FILES, LOCK_FILE, OutDirError,
                                   OutDirLock, claim, other_model_files)


def test_a_directory_with_a_finished_model_is_refused_unless_asked(
        tmp_path):
    (tmp_path / 'model.params').write_bytes(b'x')
    with pytest.raises(OutDirError) as e:
        claim(str(tmp_path), ('model.params', 'other'), resume=False)
    assert str(e.value) == (
        f'--out {tmp_path} holds a model (model.params) that this run '
        'would replace: give --resume to go on from it, --overwrite to '
        'start over, or another --out')
    with pytest.raises(OutDirError, match='give --overwrite to replace '
                                          'it, or another --out$'):
        claim(str(tmp_path), ('model.params',))
    assert os.listdir(tmp_path) == ['model.params']
    for asked in (dict(resume=True), dict(overwrite=True)):
        claim(str(tmp_path), ('model.params',), **asked).release()


def test_a_directory_with_the_other_kind_of_model_needs_overwrite(
        tmp_path):
    # --resume is no answer: the directory would hold two models' files
    for name in FINETUNED_FILES + ('config.json',):
        (tmp_path / name).write_bytes(b'x')
    other = (FINETUNED_FILES[:1], 'a fine-tuned model')
    for asked in (dict(), dict(resume=True)):
        with pytest.raises(OutDirError) as e:
            claim(str(tmp_path), ('pretrained.params',),
                  what='a pretrained model', other=other, **asked)
        assert str(e.value) == (
            f'--out {tmp_path} holds a fine-tuned model (finetuned.params), '
            'not a pretrained model: give another --out, or --overwrite to '
            'replace it with a pretrained model')
    claim(str(tmp_path), ('pretrained.params',), overwrite=True,
          other=other).release()
    assert sorted(other_model_files(str(tmp_path), FINETUNED_FILES)) == [
        str(tmp_path / name) for name in sorted(FINETUNED_FILES)]


def test_a_second_run_is_refused_while_the_first_holds_the_lock(tmp_path):
    out = str(tmp_path / 'out')
    with OutDirLock(out):
        assert os.path.isfile(os.path.join(out, LOCK_FILE))
        with pytest.raises(OutDirError, match='another run is using this '
                                              'directory'):
            OutDirLock(out)
    # The lock file goes, and the directory made for it, left empty
    assert not os.path.exists(out)
    OutDirLock(out).release()


def test_a_lock_file_without_a_holder_and_partial_files_are_cleared(
        tmp_path):
    (tmp_path / LOCK_FILE).write_bytes(b'')   # a killed run's
    (tmp_path / '.checkpoint.zip.0badc0de.tmp').write_bytes(b'PK')
    (tmp_path / 'keep.txt').write_text('x')
    lock = claim(str(tmp_path), ())
    assert sorted(os.listdir(tmp_path)) == [LOCK_FILE, 'keep.txt']
    lock.release()
    assert os.listdir(tmp_path) == ['keep.txt']


def test_the_directories_made_for_the_lock_go_with_it(tmp_path):
    out = tmp_path / 'runs' / 'deep' / 'out'
    OutDirLock(str(out)).release()
    assert os.listdir(tmp_path) == []
    # and when the lock is refused
    (tmp_path / 'held').mkdir()
    with OutDirLock(str(tmp_path / 'held')):
        with pytest.raises(OutDirError):
            OutDirLock(str(tmp_path / 'held'))
    # what the run wrote stays, and what holds it
    with OutDirLock(str(out)):
        (out / 'model.params').write_bytes(b'x')
    assert os.listdir(out) == ['model.params']


def test_a_path_that_cannot_be_made_leaves_no_directory(tmp_path):
    # (an --out longer than the path limit left 20 nested directories)
    name_max = os.pathconf(tmp_path, 'PC_NAME_MAX')
    out = tmp_path / 'a' / 'b' / ('c' * (name_max + 1)) / 'd'
    with pytest.raises(OSError, match='File name too long'):
        OutDirLock(str(out))
    assert os.listdir(tmp_path) == []


LOCKED = '''
import os, signal, sys, time
from d2l_bert.runs.out_dir import claim
from d2l_bert.data.atomic import atomic_write
# as from a terminal (a suite under nohup ignores SIGHUP)
if signal.{name} != signal.SIGKILL:
    signal.signal(signal.{name}, signal.SIG_DFL)
out = sys.argv[1]
lock = claim(out, ())
if sys.argv[2] == 'write':
    def write(path):
        os.kill(os.getpid(), signal.{name})
        time.sleep(0.2)
        with open(path, 'w') as f:
            f.write('whole')
    atomic_write(os.path.join(out, 'model.json'), write)
elif sys.argv[2] == 'fork':
    pid = os.fork()
    if pid == 0:
        os.kill(os.getpid(), signal.{name})
        time.sleep(10)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    print(os.WTERMSIG(status), sorted(os.listdir(out)), flush=True)
    lock.release()
    sys.exit(0)
os.kill(os.getpid(), signal.{name})
time.sleep(10)
print('never', flush=True)
'''


def locked_run(tmp_path, name, how, out='new/out'):
    """Run `LOCKED` on ``tmp_path/out``: the signal `name` comes while
    the lock is held (`how`: 'wait', while a file is written, 'write',
    or to a forked child, 'fork'); return the finished process."""
    return subprocess.run(
        [sys.executable, '-c', LOCKED.format(name=name),
         str(tmp_path / out), how], capture_output=True, text=True,
        timeout=60, env=dict(os.environ,
                             PYTHONPATH=os.pathsep.join(sys.path)))


def listed_soon(path, names, seconds=5):
    """Whether `path` lists `names` within `seconds` (the lock's watcher
    cleans up once the run has ended)."""
    deadline = time.monotonic() + seconds
    while sorted(os.listdir(path)) != sorted(names):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.mark.parametrize('name', ['SIGTERM', 'SIGHUP', 'SIGKILL'])
def test_a_run_ended_by_a_signal_leaves_nothing_of_the_directory_made(
        tmp_path, name):
    # (a run ended by SIGTERM or SIGHUP left a new directory holding only
    # the lock)
    done = locked_run(tmp_path, name, 'wait')
    assert done.returncode == -getattr(signal, name), done.stderr
    assert done.stdout == '' and listed_soon(tmp_path, [])
    # a directory that was there stays, without the lock
    (tmp_path / 'mine').mkdir()
    (tmp_path / 'mine' / 'notes.txt').write_text('x')
    (tmp_path / 'mine' / '.notes.txt.0123abcd.tmp').write_text('x')
    done = locked_run(tmp_path, name, 'wait', out='mine')
    assert done.returncode == -getattr(signal, name), done.stderr
    assert listed_soon(tmp_path / 'mine', ['notes.txt'])


def test_sigterm_still_waits_for_the_file_being_written(tmp_path):
    done = locked_run(tmp_path, 'SIGTERM', 'write')
    assert done.returncode == -signal.SIGTERM, done.stderr
    assert listed_soon(tmp_path / 'new' / 'out', ['model.json'])
    assert (tmp_path / 'new' / 'out' / 'model.json').read_text() == 'whole'


@pytest.mark.parametrize('name', ['SIGTERM', 'SIGHUP'])
def test_a_forked_child_ended_by_a_signal_leaves_the_lock_alone(tmp_path,
                                                                name):
    # (a data loader's workers are forked, and get the terminal's SIGHUP)
    done = locked_run(tmp_path, name, 'fork')
    assert done.stdout == f"{getattr(signal, name)} ['{LOCK_FILE}']\n", \
        done.stderr
    assert done.returncode == 0 and listed_soon(tmp_path, [])

