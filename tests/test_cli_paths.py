"""What the options that name files, directories and texts take
(d2l_bert/cli/_paths.py): files that can be read whole, directories and
files that can be written, named within the file system's limits, and
paths and texts in UTF-8."""
import argparse
import os
import subprocess
import sys

import pytest

from d2l_bert.cli import _paths


def refused(check, text):
    """The message of `check`'s refusal of `text`."""
    with pytest.raises(argparse.ArgumentTypeError) as e:
        check(text)
    return str(e.value)


def test_path_validators(tmp_path):
    (tmp_path / 'f.txt').write_text('x')
    path, folder = str(tmp_path / 'f.txt'), str(tmp_path)
    assert _paths.texts_file('-') == '-'
    assert _paths.texts_file(path) == path
    assert _paths.existing_dir(folder) == folder
    assert _paths.output_dir(str(tmp_path / 'new' / 'dir'))
    assert _paths.output_file('.npy')(str(tmp_path / 'v.npy'))
    for check, text, message in [
            (_paths.texts_file, folder, 'is a directory, not a file'),
            (_paths.texts_file, folder + '/no', 'no such file'),
            (_paths.existing_dir, path, 'not a directory'),
            (_paths.existing_dir, folder + '/no', 'no such directory'),
            (_paths.output_dir, path, 'exists and is not a directory'),
            (_paths.output_dir, path + '/below', 'is not a directory'),
            (_paths.output_file('.npy'), path, 'must name a .npy file')]:
        with pytest.raises(argparse.ArgumentTypeError, match=message):
            check(text)
    assert os.listdir(tmp_path) == ['f.txt']


def test_texts_are_read_from_files_and_pipes_never_devices(tmp_path):
    # a device never ends (/dev/zero, /dev/urandom): nothing reads it
    fifo = str(tmp_path / 'pipe')
    os.mkfifo(fifo)
    assert _paths.texts_file(fifo) == fifo
    assert refused(_paths.texts_file, os.devnull) == (
        f"{os.devnull!r} is a character device, not a file of texts; give "
        "a text file, one text a line, or '-' for standard input")


def test_a_text_or_a_model_path_that_is_not_utf8_is_refused():
    # (the shell gives bytes that are not UTF-8 as surrogates)
    text = os.fsdecode(b'caf\xe9 au lait')
    assert _paths.utf8_text('café') == 'café'
    assert refused(_paths.utf8_text, text) == (
        "must be UTF-8 text, got the bytes b'caf\\xe9 au lait', which are "
        'not UTF-8; give the text in UTF-8')
    model = os.fsdecode(b'models/b\xe8rt')
    message = ("must be a path in UTF-8 (MXNet reads and writes its files "
               "by UTF-8 names), got the bytes b'models/b\\xe8rt'; give the "
               'directory a name of UTF-8 characters')
    assert refused(_paths.utf8_path('directory'), model) == message
    check = _paths.name_or_dir(('bert.small',), 'a model', utf8=True)
    assert refused(check, model) == message
    assert check('bert.small') == 'bert.small'


def test_a_long_value_is_shown_cut_in_the_middle():
    assert _paths.shown('short') == "'short'"
    shown = _paths.shown('a' * 500 + '\nz')
    assert shown == f"'{'a' * 35}...{'a' * 16}\\nz' (502 characters)"


def test_a_path_longer_than_the_file_system_takes_creates_nothing(
        tmp_path):
    name_max = os.pathconf(tmp_path, 'PC_NAME_MAX')
    path_max = os.pathconf(tmp_path, 'PC_PATH_MAX')
    deep = str(tmp_path / '/'.join(['d' * 100] * (path_max // 101 + 1)))
    message = refused(_paths.output_dir, deep)
    assert message.endswith(
        f'is {len(os.fsencode(deep)):,} bytes long from /, and this file '
        f'system takes paths of less than {path_max:,} bytes, 64 of them '
        'for the files in it; give a shorter path')
    # a directory whose path leaves no room for its files' names
    parts, length = [], len(str(tmp_path))
    while length + 101 < path_max - 40:
        parts.append('r' * 100)
        length += 101
    room = str(tmp_path / '/'.join(parts + ['r' * (path_max - 41 - length)]))
    assert len(os.fsencode(room)) == path_max - 40
    assert 'give a shorter path' in refused(_paths.output_dir, room)
    long_name = 'n' * (name_max + 1)
    assert refused(_paths.output_dir, str(tmp_path / long_name / 'm')) == (
        f"the name '{'n' * 35}...{'n' * 19}' ({name_max + 1} characters) "
        f'has {name_max + 1} bytes, more than the {name_max} this file '
        'system takes; give a shorter name')
    # A file written beside its temporary copy, which adds 15 bytes
    npy = 'v' * (name_max - 15) + '.npy'
    assert refused(_paths.output_file('.npy'), str(tmp_path / npy)) == (
        f"the name '{'v' * 35}...{'v' * 15}.npy' ({len(npy)} characters) "
        f'has {len(npy)} bytes, more than the {name_max - 15} this file '
        f'system takes ({name_max}, less the 15 bytes its temporary copy '
        'adds); give a shorter name')
    assert _paths.output_file('.npy')(str(tmp_path / npy[5:]))
    assert os.listdir(tmp_path) == []


def test_an_output_that_mxnet_cannot_write_is_refused_before_it_loads(
        tmp_path):
    # Run in a process of its own: this one has imported `mxnet` already
    os.symlink(str(tmp_path / 'gone'), tmp_path / 'link')
    code = (
        'import sys\n'
        'from d2l_bert import cli\n'
        'for out in sys.argv[1:]:\n'
        '    for command in ("pretrain", "finetune"):\n'
        '        try:\n'
        '            cli.main([command, "--out", out])\n'
        '        except SystemExit as e:\n'
        '            assert e.code == 2, e.code\n'
        'print("mxnet" in sys.modules)\n')
    done = subprocess.run(
        [sys.executable, '-c', code, '', str(tmp_path / 'link'),
         os.fsdecode(os.fsencode(str(tmp_path)) + b'/M\xff')],
        capture_output=True, text=True, timeout=60)
    assert done.stdout == 'False\n', done.stderr
    errors = done.stderr.splitlines()
    assert len(errors) == 6 and all('error: argument --out: ' in line
                                    for line in errors), errors


@pytest.mark.skipif(os.geteuid() == 0 if hasattr(os, 'geteuid') else True,
                    reason='root may write anywhere')
def test_an_output_directory_must_be_writable(tmp_path):
    locked = tmp_path / 'locked'
    locked.mkdir(mode=0o500)
    try:
        with pytest.raises(argparse.ArgumentTypeError,
                           match='permission denied'):
            _paths.output_dir(str(locked / 'out'))
    finally:
        locked.chmod(0o700)
