"""Tests of d2l_bert/data/bounded.py: a small file read whole, only if it
is a regular file within its limit."""
import json
import os

import pytest

from d2l_bert.data.bounded import check_regular, read_bounded


class Refused(ValueError):
    pass


def test_a_regular_file_within_the_limit_is_read(tmp_path):
    path = tmp_path / 'config.json'
    path.write_bytes(b'{"a": 1}')
    assert read_bounded(str(path), 8) == b'{"a": 1}'
    assert check_regular(str(path), 8) == 8


def test_a_file_over_the_limit_is_refused_unread(tmp_path):
    path = tmp_path / 'vocab.json'
    with open(path, 'wb') as f:   # sparse: 3 GB that take no disk
        f.truncate(3 << 30)
    with pytest.raises(Refused, match=(
            rf'^{path} holds 3,221,225,472 bytes, more than the 4,096 '
            r'such a file may hold: it is not the file it should be$')):
        read_bounded(str(path), 4096, Refused)


@pytest.mark.skipif(not os.path.exists('/dev/zero'), reason='no /dev/zero')
@pytest.mark.parametrize('target', ['/dev/zero', 'fifo', 'folder'])
def test_what_is_not_a_regular_file_is_refused_without_reading(
        tmp_path, target):
    if target == 'fifo':
        target = str(tmp_path / 'fifo')
        os.mkfifo(target)         # opening it would wait for a writer
    elif target == 'folder':
        target = str(tmp_path / 'folder')
        os.mkdir(target)
    link = tmp_path / 'tokenizer_config.json'
    os.symlink(target, link)
    with pytest.raises(Refused, match=(
            rf'^{link} is not a regular file \(a directory, a device or a '
            r'pipe\); it should be a file of its own$')):
        read_bounded(str(link), 1 << 20, Refused)


def test_a_missing_file_is_named(tmp_path):
    os.symlink(str(tmp_path / 'gone'), tmp_path / 'config.json')
    with pytest.raises(FileNotFoundError,
                       match=rf'^{tmp_path}/config.json is missing$'):
        read_bounded(str(tmp_path / 'config.json'), 100)


def test_json_nested_past_the_limit_is_refused_on_every_python():
    from d2l_bert.data.bounded import MAX_JSON_DEPTH, json_value
    deepest = '[' * MAX_JSON_DEPTH + ']' * MAX_JSON_DEPTH
    assert json_value(deepest) == json.loads(deepest)
    for text in ('[' * (MAX_JSON_DEPTH + 1) + ']' * (MAX_JSON_DEPTH + 1),
                 '{"a": ' * 5000 + '1' + '}' * 5000):
        with pytest.raises(ValueError, match='^nested too deeply$'):
            json_value(text)
    with pytest.raises(ValueError, match='Expecting value'):
        json_value('{"a": }')
