"""Tests of d2l_bert/data/atomic.py: files written whole or not at all."""
import os
import signal
import stat
import subprocess
import sys

import pytest

from d2l_bert.data import atomic as files
from d2l_bert.data.atomic import atomic_write, atomic_write_all, \
    atomic_write_into

OLD = b'the old file\n' * 100


class Stop(Exception):
    pass


def write_half_then(error):
    """A writer that writes part of a file at its path, then raises."""
    def write(tmp):
        with open(tmp, 'wb') as f:
            f.write(b'half of a new file')
        raise error
    return write


@pytest.fixture
def old_file(tmp_path):
    path = tmp_path / 'model.params'
    path.write_bytes(OLD)
    return path


@pytest.fixture
def events(monkeypatch):
    """Record each `os.fsync` (what it flushed) and `os.replace`, in order,
    and still do them."""
    calls = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        st = os.fstat(fd)
        calls.append(('fsync', 'dir' if stat.S_ISDIR(st.st_mode) else 'file',
                      (st.st_dev, st.st_ino)))
        real_fsync(fd)

    def replace(src, dst):
        calls.append(('replace', os.path.basename(dst), None))
        real_replace(src, dst)
    monkeypatch.setattr(os, 'fsync', fsync)
    monkeypatch.setattr(os, 'replace', replace)
    return calls


def identity(path):
    st = os.stat(path)
    return st.st_dev, st.st_ino


# ---------------------------------------------------------------------------
# atomic_write
# ---------------------------------------------------------------------------

@pytest.mark.parametrize('error', [Stop('disk full'), KeyboardInterrupt()],
                         ids=['error', 'ctrl-c'])
def test_a_write_that_fails_half_way_leaves_the_old_file_whole(old_file,
                                                               error):
    with pytest.raises(type(error)):
        atomic_write(old_file, write_half_then(error))
    assert old_file.read_bytes() == OLD
    assert os.listdir(old_file.parent) == ['model.params']


@pytest.mark.parametrize('error', [Stop('disk full'), KeyboardInterrupt()],
                         ids=['error', 'ctrl-c'])
def test_a_new_file_that_fails_half_way_leaves_nothing(tmp_path, error):
    with pytest.raises(type(error)):
        atomic_write(tmp_path / 'new.png', write_half_then(error))
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize('failing', [0, 1, 2])
@pytest.mark.parametrize('error', [
    OSError(28, 'No space left on device'), KeyboardInterrupt()],
    ids=['full-disk', 'ctrl-c'])
def test_a_set_of_files_that_fails_at_any_one_leaves_the_old_set(
        tmp_path, failing, error):
    names = ['vocab.json', 'config.json', 'model.params']
    for name in names:
        (tmp_path / name).write_bytes(OLD)
    writes = [b'new'] * 3
    writes[failing] = write_half_then(error)
    with pytest.raises(type(error)):
        atomic_write_all([(tmp_path / n, w) for n, w in zip(names, writes)],
                         remove_first=[tmp_path / 'model.params'])
    assert {n: (tmp_path / n).read_bytes() for n in os.listdir(tmp_path)} \
        == {n: OLD for n in names}


def test_a_set_of_files_goes_into_place_in_order_marker_last(
        tmp_path, monkeypatch):
    (tmp_path / 'model.params').write_bytes(OLD)
    seen = []
    replace = os.replace

    def watch(src, dest):
        seen.append((os.path.basename(dest),
                     sorted(n for n in os.listdir(tmp_path)
                            if not n.startswith('.'))))
        replace(src, dest)
    monkeypatch.setattr(files.os, 'replace', watch)
    atomic_write_all([(tmp_path / 'vocab.json', 'v'),
                      (tmp_path / 'model.params', b'p')],
                     remove_first=[tmp_path / 'model.params'])
    # The old marker is gone before the first new file is in place
    assert seen == [('vocab.json', []), ('model.params', ['vocab.json'])]
    assert sorted(os.listdir(tmp_path)) == ['model.params', 'vocab.json']


def test_a_new_file_appears_only_whole(tmp_path):
    path = tmp_path / 'vocab.json'
    seen = []

    def write(tmp):
        # Written under another name, in the destination's directory
        seen.append((os.path.dirname(tmp), os.path.exists(path)))
        with open(tmp, 'w', encoding='utf-8') as f:
            f.write('["<unk>",')
            seen.append(os.path.exists(path))
            f.write(' "<pad>"]')
    assert atomic_write(str(path), write) == str(path)
    assert seen == [(str(tmp_path), False), False]
    assert path.read_text(encoding='utf-8') == '["<unk>", "<pad>"]'
    assert os.listdir(tmp_path) == ['vocab.json']


def test_text_and_bytes_are_written_as_they_are(tmp_path):
    atomic_write(tmp_path / 'a.txt', 'héllo\nwörld\n')
    atomic_write(tmp_path / 'b.bin', b'\x00\r\n\xff')
    assert (tmp_path / 'a.txt').read_bytes() == 'héllo\nwörld\n'.encode()
    assert (tmp_path / 'b.bin').read_bytes() == b'\x00\r\n\xff'


def test_the_missing_directory_is_created(tmp_path):
    path = tmp_path / 'out' / 'plots' / 'loss.png'
    atomic_write(path, b'png')
    assert path.read_bytes() == b'png'


def test_the_file_then_its_directory_are_flushed_around_the_rename(
        old_file, events):
    atomic_write(old_file, b'new')
    assert events == [('fsync', 'file', identity(old_file)),
                      ('replace', 'model.params', None),
                      ('fsync', 'dir', identity(old_file.parent))]


def test_a_file_written_by_a_callable_is_flushed_too(tmp_path, events):
    path = tmp_path / 'model.params'

    def save_parameters(tmp):
        with open(tmp, 'wb') as f:
            f.write(b'params')
    atomic_write(path, save_parameters)
    assert [e[:2] for e in events] == [('fsync', 'file'),
                                       ('replace', 'model.params'),
                                       ('fsync', 'dir')]
    assert events[0][2] == identity(path)


@pytest.mark.skipif(os.name == 'nt', reason='POSIX file modes')
@pytest.mark.parametrize('umask', [0o022, 0o077, 0o002])
def test_the_mode_is_that_of_a_plain_new_file(tmp_path, umask):
    old_umask = os.umask(umask)
    try:
        with open(tmp_path / 'plain', 'w') as f:
            f.write('x')
        atomic_write(tmp_path / 'text', 'x')
        atomic_write(tmp_path / 'bytes', b'x')
        atomic_write(tmp_path / 'callable',
                     lambda tmp: open(tmp, 'w').close())
    finally:
        os.umask(old_umask)
    expected = stat.S_IMODE(os.stat(tmp_path / 'plain').st_mode)
    assert expected == 0o666 & ~umask
    for name in ('text', 'bytes', 'callable'):
        assert stat.S_IMODE(os.stat(tmp_path / name).st_mode) == expected, \
            name


def test_the_directory_is_not_flushed_on_windows(tmp_path, monkeypatch,
                                                 events):
    # Windows cannot open a folder: skipped, quietly
    monkeypatch.setattr(os, 'name', 'nt')
    files._fsync_directory(str(tmp_path))
    assert events == []


# ---------------------------------------------------------------------------
# atomic_write_into
# ---------------------------------------------------------------------------

def unpack(tmp):
    """Write what an archive holding a folder and a file would unpack."""
    os.makedirs(os.path.join(tmp, 'bert.small'))
    for name, data in (('bert.small/vocab.json', b'["<unk>"]'),
                       ('bert.small/pretrained.params', b'new params'),
                       ('README', b'read me')):
        with open(os.path.join(tmp, name), 'wb') as f:
            f.write(data)


@pytest.fixture
def old_folder(tmp_path):
    folder = tmp_path / 'bert.small'
    folder.mkdir()
    (folder / 'pretrained.params').write_bytes(OLD)
    (folder / 'stale.txt').write_bytes(b'from an older archive')
    return folder


def tree(top):
    return sorted(os.path.relpath(os.path.join(root, name), top)
                  for root, dirs, names in os.walk(top)
                  for name in dirs + names)


def test_entries_replace_their_namesakes_whole(tmp_path, old_folder):
    paths = atomic_write_into(tmp_path, unpack)
    assert paths == [str(tmp_path / 'README'), str(old_folder)]
    # The older folder is gone with everything in it, stale files included
    assert tree(tmp_path) == ['README', 'bert.small',
                              os.path.join('bert.small', 'pretrained.params'),
                              os.path.join('bert.small', 'vocab.json')]
    assert (old_folder / 'pretrained.params').read_bytes() == b'new params'


@pytest.mark.parametrize('error', [Stop('disk full'), KeyboardInterrupt()],
                         ids=['error', 'ctrl-c'])
def test_a_failed_unpack_leaves_the_old_folder_whole(tmp_path, old_folder,
                                                     error):
    before = tree(tmp_path)

    def write(tmp):
        unpack(tmp)
        raise error
    with pytest.raises(type(error)):
        atomic_write_into(tmp_path, write)
    assert tree(tmp_path) == before
    assert (old_folder / 'pretrained.params').read_bytes() == OLD


def test_a_folder_may_replace_a_file_and_a_file_a_folder(tmp_path):
    (tmp_path / 'bert.small').write_bytes(b'a file in the way')
    (tmp_path / 'README').mkdir()
    atomic_write_into(tmp_path, unpack)
    assert (tmp_path / 'bert.small' / 'vocab.json').read_bytes() == \
        b'["<unk>"]'
    assert (tmp_path / 'README').read_bytes() == b'read me'


def test_every_file_is_flushed_before_it_is_moved_into_place(tmp_path,
                                                             events):
    atomic_write_into(tmp_path, unpack)
    flushed = [e[2] for e in events if e[:2] == ('fsync', 'file')]
    assert sorted(flushed) == sorted(
        identity(tmp_path / name)
        for name in ('README', 'bert.small/vocab.json',
                     'bert.small/pretrained.params'))
    first_move = next(i for i, e in enumerate(events) if e[0] == 'replace')
    assert all(e[0] == 'fsync' for e in events[:first_move])
    assert events[-1] == ('fsync', 'dir', identity(tmp_path))


def test_remove_partial_files_removes_what_a_killed_writer_left(tmp_path):
    # What `atomic_write` and a checkpoint's parts leave when their
    # process is killed, beside files that only look alike
    partial = ['.checkpoint.zip.0a1b2c3d.tmp', '.part.k_3x9az1.tmp']
    kept = ['checkpoint.zip', '.checkpoint.zip.tmp', 'notes.0a1b2c3d.tmp',
            '.checkpoint.zip.0A1B2C3D.tmp']
    for name in partial + kept:
        (tmp_path / name).write_text('x')
    assert files.remove_partial_files(str(tmp_path)) == sorted(
        str(tmp_path / name) for name in partial)
    assert sorted(os.listdir(tmp_path)) == sorted(kept)
    assert files.remove_partial_files(str(tmp_path / 'nowhere')) == []


# --- a write that fails names the file and the cause ------------------------

def test_a_write_failure_without_a_file_name_names_the_destination(
        tmp_path):
    path = str(tmp_path / 'checkpoint.zip')

    def full(tmp):
        raise OSError(28, 'No space left on device')
    with pytest.raises(OSError) as e:
        atomic_write(path, full)
    assert (e.value.errno, e.value.filename, e.value.strerror) == (
        28, path, 'No space left on device')
    assert os.listdir(tmp_path) == []


def test_a_failure_that_is_not_the_disks_is_raised_as_it_is(tmp_path):
    class MXNetError(Exception):
        pass
    error = ConnectionRefusedError(111, 'Connection refused')
    assert files.write_failure(error, tmp_path / 'x') is None
    assert files.write_failure(KeyboardInterrupt(), tmp_path / 'x') is None
    # MXNet's C++ writer says no errno: its first line, with the file
    failure = files.write_failure(MXNetError('Write incomplete\nat ...'),
                                  tmp_path / 'x')
    assert str(failure) == (f'[Errno 5] the write failed (Write '
                            f"incomplete): '{tmp_path / 'x'}'")


SIGNAL_MID_WRITE = """
import os, signal, sys
from d2l_bert.data.atomic import atomic_write

def write(path):
    with open(path, 'w') as f:
        f.write('new, ')
        os.kill(os.getpid(), getattr(signal, sys.argv[2]))   # mid-write
        f.write('whole')
    print('written', flush=True)

atomic_write(sys.argv[1], write)
print('not reached', flush=True)
"""


def run_signalled_write(dest, name, ignored=()):
    """Write `dest` in a fresh interpreter that sends itself the signal
    `name` mid-write (`ignored`: signals it ignores, as under
    ``nohup``)."""
    def dispositions():
        for signum in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, signal.SIG_IGN if signum in ignored
                          else signal.SIG_DFL)
    return subprocess.run([sys.executable, '-c', SIGNAL_MID_WRITE,
                           str(dest), name], capture_output=True,
                          text=True, timeout=60, preexec_fn=dispositions)


@pytest.mark.parametrize('name', ['SIGTERM', 'SIGHUP'])
def test_a_signal_mid_write_waits_for_the_file_then_ends_the_process(
        tmp_path, name):
    # SIGTERM (`kill`) and SIGHUP (a closed terminal) alike
    dest = tmp_path / 'model.params'
    dest.write_text('old')
    proc = run_signalled_write(dest, name)
    # killed by the signal as by default, once the file was in place whole
    assert proc.returncode == -getattr(signal, name), proc.stderr
    assert proc.stdout == 'written\n'
    assert dest.read_text() == 'new, whole'
    assert sorted(os.listdir(tmp_path)) == ['model.params']


def test_an_ignored_sighup_stays_ignored_while_writing(tmp_path):
    # as under ``nohup``: the write and what follows go on
    dest = tmp_path / 'model.params'
    proc = run_signalled_write(dest, 'SIGHUP', ignored=(signal.SIGHUP,))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == 'written\nnot reached\n'
    assert dest.read_text() == 'new, whole'


def test_sigterm_and_sighup_keep_their_handlers_outside_a_write(tmp_path):
    signums = (signal.SIGTERM, signal.SIGHUP)
    before = [signal.getsignal(s) for s in signums]
    atomic_write(tmp_path / 'f', 'x')
    assert [signal.getsignal(s) for s in signums] == before
