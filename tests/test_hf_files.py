"""Tests of d2l_bert/hf/files.py against lying files: a safetensors
header, a shard index and the settings files are checked whole, and what
the weights need against the memory available, before any weight is
read."""
import json
import os
import shutil

import pytest

import hf_formats
from d2l_bert import hf
from d2l_bert.runs import memory


def safetensors(tmp_path, header, data=b'\0' * 8, length=None):
    """A safetensors file of `header` (a dict, or bytes as they are) and
    `data`; `length` is the header length it declares."""
    text = header if isinstance(header, bytes) else json.dumps(
        header).encode()
    path = tmp_path / 'model.safetensors'
    path.write_bytes((len(text) if length is None else length).to_bytes(
        8, 'little') + text + data)
    return str(path)


def entry(dtype='F32', shape=(2,), offsets=(0, 8)):
    return {'dtype': dtype, 'shape': list(shape),
            'data_offsets': list(offsets)}


def refused(path, cause):
    return (f'^{path} cannot be read \\({cause}\\): the file is truncated or '
            r'corrupt \(an interrupted download\?\); download it again$')


#: The end of the message for data_offsets that are not offsets
NOT_OFFSETS = (r', not two integers 0 <= begin <= end <= 8 \(the bytes after '
               r'the header\)')


@pytest.mark.parametrize('header, cause', [
    ({'w': entry(offsets=(0, 1e400))},
     r"its header gives 'w' the data_offsets \[0, inf\]" + NOT_OFFSETS),
    ({'w': entry('BF16', (4,), (0, -1e400))},
     r"its header gives 'w' the data_offsets \[0, -inf\]" + NOT_OFFSETS),
    ({'w': entry(offsets=(0, 8.0))},
     r"its header gives 'w' the data_offsets \[0, 8\.0\]" + NOT_OFFSETS),
    ({'w': entry(offsets=(-8, 0))},
     r"its header gives 'w' the data_offsets \[-8, 0\]" + NOT_OFFSETS),
    ({'w': entry(offsets=(0, 4096))},
     r"its header gives 'w' the data_offsets \[0, 4096\]" + NOT_OFFSETS),
    ({'w': entry(offsets=(8, 0))},
     r"its header gives 'w' the data_offsets \[8, 0\]" + NOT_OFFSETS),
    ({'w': entry('BF16', shape=(70000, 80000))},
     r"its header gives 'w' the shape \(70000, 80000\) of BF16, "
     r'11,200,000,000 bytes, but offsets 0 to 8, 8 bytes'),
    ({'w': entry(shape=(-2,))},
     r"its header gives 'w' the shape \[-2\], not a list of sizes >= 0"),
    ({'w': entry(shape=(True, 2))},
     r"its header gives 'w' the shape \[True, 2\], not a list of sizes "
     r'>= 0'),
    ({'w': entry('F8_E4M3')},
     r"its header gives 'w' the dtype 'F8_E4M3', not one of F64, F32, F16, "
     r'BF16, I64, I32, I16, I8, U64, U32, U16, U8, BOOL'),
    ({'w': entry(), 'v': entry(offsets=(4, 8), shape=(1,))},
     r"its header puts 'w' and 'v' on the same bytes"),
    ({'w': [0, 8]}, r"its header gives 'w' \[0, 8\], not a JSON object"),
    (b'[{"w": 1}]', 'its header is not a JSON object'),
    (b'{"w": ', 'its header is not JSON'),
], ids=['inf', '-inf', 'float', 'negative', 'past the end', 'reversed',
        'shape', 'negative size', 'bool size', 'F8', 'overlap',
        'not an object', 'a list', 'not JSON'])
def test_a_header_its_data_do_not_hold_is_refused_unread(
        tmp_path, monkeypatch, header, cause):
    from safetensors import numpy as safetensors_numpy
    path = safetensors(tmp_path, header)
    # No tensor is read, by safetensors or by hand
    monkeypatch.setattr(safetensors_numpy, 'load_file', None)
    monkeypatch.setattr(hf.files, '_read_safetensors_tensors', None)
    with pytest.raises(hf.CheckpointError, match=refused(path, cause)):
        hf.read_safetensors(path)


@pytest.mark.parametrize('length', [4096, 1 << 61])
def test_a_header_longer_than_the_file_is_refused_unread(tmp_path, length):
    path = safetensors(tmp_path, {'w': entry()}, length=length)
    size = os.path.getsize(path)
    with pytest.raises(hf.CheckpointError, match=refused(
            path, f'a header of {length:,} bytes, in a file of {size:,}')):
        hf.read_safetensors(path)


def test_weights_larger_than_the_memory_available_are_not_read(
        tmp_path, monkeypatch):
    path = safetensors(tmp_path, {'w': entry(shape=(6000,),
                                             offsets=(0, 24000))},
                       data=bytes(24000))
    monkeypatch.setattr(memory, 'available_bytes', lambda: 20_000)
    with pytest.raises(hf.CheckpointError, match=(
            f'^{path}: its tensors take 23.4 KB of memory, and this machine '
            'has 19.5 KB available$')):
        hf.read_safetensors(path)


def test_a_checked_header_reads_as_safetensors_wrote_it():
    path = os.path.join(hf_formats.TINY_DIR, 'model.safetensors')
    header, start = hf.safetensors_header(path)
    weights = hf_formats.read_weights()
    assert {name: shape for name, (_, shape, _, _) in header.items()} == {
        name: w.shape for name, w in weights.items()}
    assert start == 8 + int.from_bytes(open(path, 'rb').read(8), 'little')


# --- config.json, against the memory --------------------------------------

def tiny_checkpoint(tmp_path, **changes):
    for name in ('model.safetensors', 'vocab.txt'):
        shutil.copy(os.path.join(hf_formats.TINY_DIR, name), tmp_path)
    config = dict(hf_formats.read_config(), **changes)
    (tmp_path / 'config.json').write_text(json.dumps(config))
    return str(tmp_path)


@pytest.mark.parametrize('changes, count, size', [
    (dict(vocab_size=3 * 10 ** 11), '4,800,000,004,640', '17.5 TB'),
    (dict(num_hidden_layers=6 * 10 ** 8), '1,176,000,001,744', '4.3 TB'),
    (dict(hidden_size=3 << 17, num_attention_heads=3), '1,391,650,799,664',
     '5.1 TB'),
], ids=['vocab_size', 'num_hidden_layers', 'hidden_size'])
def test_config_sizes_the_memory_cannot_hold_are_refused_first(
        tmp_path, monkeypatch, changes, count, size):
    model_dir = tiny_checkpoint(tmp_path, **changes)
    monkeypatch.setattr(memory, 'available_bytes', lambda: 8 << 30)
    monkeypatch.setattr(hf.model, 'read_weights', None)  # not reached
    with pytest.raises(hf.CheckpointError, match=(
            f'^{model_dir}/config.json: the {count} float32 weights its '
            f'sizes make take {size} of memory, and this machine has 8.0 GB '
            'available$')):
        hf.load_pretrained_bert(model_dir)


def test_more_blocks_than_the_weights_hold_are_refused_before_listed(
        tmp_path, monkeypatch):
    model_dir = tiny_checkpoint(tmp_path, num_hidden_layers=40_000)
    monkeypatch.setattr(hf.convert, 'parameter_map', None)  # not reached
    with pytest.raises(hf.CheckpointError, match=(
            r'model\.safetensors holds the weights of 2 block\(s\) '
            r'\(encoder\.layer\.N\), but config\.json says '
            r'num_hidden_layers=40000$')):
        hf.load_pretrained_bert(model_dir)


# --- Shard indexes and settings files ---------------------------------------

@pytest.mark.parametrize('shard', [['model-1.safetensors'], '../model.bin',
                                   'model.safetensors.index.json',
                                   'pytorch_model.bin'])
def test_an_index_naming_another_kind_of_shard_is_refused(tmp_path, shard):
    index = tmp_path / 'model.safetensors.index.json'
    index.write_text(json.dumps({'weight_map': {'w': shard}}))
    with pytest.raises(hf.CheckpointError, match=(
            f'^{index} names the shard {shard!r}: not a .safetensors file '
            'of its directory$').replace('[', r'\[').replace(']', r'\]')):
        hf.read_shards(str(index))


def test_shards_larger_than_the_memory_available_are_not_read(
        tmp_path, monkeypatch):
    path = safetensors(tmp_path, {'w': entry(shape=(3000,),
                                             offsets=(0, 12000))},
                       data=bytes(12000))
    os.rename(path, tmp_path / 'a.safetensors')
    shutil.copy(tmp_path / 'a.safetensors', tmp_path / 'b.safetensors')
    index = tmp_path / 'model.safetensors.index.json'
    index.write_text(json.dumps({'weight_map': {
        'w': 'a.safetensors', 'v': 'b.safetensors'}}))
    monkeypatch.setattr(memory, 'available_bytes', lambda: 20_000)
    with pytest.raises(hf.CheckpointError, match=(
            f'^{index}: the weights of its 2 shard\\(s\\) take 23.6 KB of '
            'memory, and this machine has 19.5 KB available$')):
        hf.read_shards(str(index))


def test_a_settings_file_nested_too_deeply_is_named(tmp_path):
    path = tmp_path / 'config.json'
    path.write_text('[' * 5000 + ']' * 5000)
    with pytest.raises(hf.CheckpointError,
                       match=f'^{path} is not valid JSON: nested too deeply$'):
        hf.read_json(str(path))


def test_a_settings_file_over_its_limit_is_refused_unread(tmp_path,
                                                          monkeypatch):
    path = tmp_path / 'tokenizer_config.json'
    with open(path, 'wb') as f:
        f.truncate(hf.MAX_SETTINGS_BYTES + 1)   # sparse
    with pytest.raises(hf.CheckpointError, match=(
            f'^{path} holds 16,777,217 bytes, more than the 16,777,216 such'
            ' a file may hold: it is not the file it should be$')):
        hf.read_json(str(path))


def test_a_config_json_that_is_a_device_is_named(tmp_path):
    shutil.copy(os.path.join(hf_formats.TINY_DIR, 'vocab.txt'), tmp_path)
    os.symlink('/dev/zero', tmp_path / 'config.json')
    with pytest.raises(hf.CheckpointError, match=(
            f'^{tmp_path}/config.json is not a regular file')):
        hf.load_pretrained_bert(str(tmp_path))
