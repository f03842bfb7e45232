"""Tests of d2l_bert/hf/torch_pickle.py against lying files: every size a
``pytorch_model.bin`` declares (a tensor's shape and strides, a
storage's element count, a pickle's lengths and memo indices) is checked
before anything of that size is allocated."""
import pickle
import zipfile

import numpy as onp
import pytest

import hf_formats
from d2l_bert import hf
from d2l_bert.hf import torch_pickle


def bin_path(tmp_path):
    return str(tmp_path / 'pytorch_model.bin')


@pytest.mark.parametrize('write', ['zip', 'legacy'])
@pytest.mark.parametrize('tensor, message', [
    # 2.4e10 values from 4: 90 GB asked of a file of 1 KB
    ((range(4), 0, (120000, 200000), (0, 0)),
     r'tensor of size \(120000, 200000\) has the stride \(0, 0\): a stride '
     r'of 0 repeats one value along a dimension, which the tensors of a '
     r'state dict never do; the file is corrupt$'),
    ((range(4), 0, (3, 50000, 1), (1, 0, 1)),
     r'tensor of size \(3, 50000, 1\) has the stride \(1, 0, 1\)'),
    ((range(3000), 0, (1500, 1500), (1, 1)),
     r'tensor of size \(1500, 1500\) and stride \(1, 1\) has 2,250,000 '
     r'values, more than the 3,000 of its storage: its strides overlap, '
     r'which those of a state dict never do; the file is corrupt$'),
    ((range(6), 0, ('2', 3), (3, 1)), r"invalid tensor: size \('2', 3\)"),
    ((range(6), 0, (2, 3), (True, 1)), r'invalid tensor: .*stride \(True'),
], ids=['strides 0', 'a stride 0', 'overlapping', 'a str size',
        'a bool stride'])
def test_a_tensor_its_storage_cannot_hold_is_refused_before_its_copy(
        tmp_path, monkeypatch, write, tensor, message):
    path = bin_path(tmp_path)
    getattr(hf_formats, f'write_torch_{write}')(path, {'w': tensor},
                                                monkeypatch)
    monkeypatch.setattr(onp, 'array', None)  # the copy is never reached
    with pytest.raises(hf.CheckpointError, match=f'^{path}: {message}'):
        hf.read_pytorch_bin(path)


def test_a_size_1_dimension_may_have_stride_0(tmp_path, monkeypatch):
    # As the `position_ids` buffer of older transformers: arange(n)
    # expanded to (1, n)
    path = bin_path(tmp_path)
    hf_formats.write_torch_zip(path, {'ids': (range(5), 0, (1, 5), (0, 1))},
                               monkeypatch)
    onp.testing.assert_array_equal(hf.read_pytorch_bin(path)['ids'],
                                   [[0, 1, 2, 3, 4]])


@pytest.mark.parametrize('numel, nbytes', [
    (2 ** 61 + 3, '9,223,372,036,854,775,820'), (3 << 33, '103,079,215,104')],
    ids=['2**61 + 3', '3 << 33'])
def test_a_legacy_storage_longer_than_the_file_is_refused_unread(
        tmp_path, monkeypatch, numel, nbytes):
    path = bin_path(tmp_path)
    hf_formats.write_torch_legacy(path, {'w': (range(6), 0, (2, 3), (3, 1))},
                                  monkeypatch, numels=[numel])
    with pytest.raises(hf.CheckpointError, match=(
            f'^{path}: storage 0 declares {numel:,} values, {nbytes} bytes,'
            r' and the file ends 24 bytes further: it is truncated or '
            'corrupt$')):
        hf.read_pytorch_bin(path)


def test_a_zip_storage_larger_than_its_count_is_refused_unread(
        tmp_path, monkeypatch):
    path = bin_path(tmp_path)
    hf_formats.write_torch_zip(path, {'w': (range(600), 0, (2, 3), (3, 1))},
                               monkeypatch, numels=[6])
    with pytest.raises(hf.CheckpointError, match=(
            f'^{path}: archive/data/0 holds 2,400 bytes, more than the 24 it'
            ' should: the file is corrupt$')):
        hf.read_pytorch_bin(path)


def test_storages_larger_than_the_memory_available_are_not_read(
        tmp_path, monkeypatch):
    from d2l_bert.runs import memory
    path = bin_path(tmp_path)
    hf_formats.write_torch_zip(path, {'w': (range(3000), 0, (3000,), (1,))},
                               monkeypatch)
    monkeypatch.setattr(memory, 'available_bytes', lambda: 9000)
    monkeypatch.setattr(zipfile.ZipFile, 'read', None)  # not reached
    with pytest.raises(hf.CheckpointError, match=(
            f'^{path}: its storages take 11.7 KB of memory, and this '
            'machine has 8.8 KB available$')):
        hf.read_pytorch_bin(path)


# --- The pickles: walked before they are unpickled ---------------------------

def corrupt(path, cause):
    return (f'^{path} cannot be read \\({cause}\\): the file is truncated or '
            r'corrupt \(an interrupted download\?\); download it again$')


@pytest.mark.parametrize('payload, message', [
    # LONG_BINPUT at index 2**31 - 2: the unpickler would grow its memo to
    # twice that, 32 GB
    (b'\x80\x02]q\x00r\xfe\xff\xff\x7f.',
     r'^{path}: its pickle stores its object 3 at the memo index '
     r'2,147,483,646; a pickle numbers them in order, the file is '
     r'corrupt$'),
    # BINBYTES8 of 3 TB, which the unpickler would allocate first
    (b'\x80\x04\x8e' + (3 << 40).to_bytes(8, 'little') + b'ab.',
     'the pickle at byte 0 is not one torch writes: it breaks off at byte '
     '14'),
    # BINUNICODE8 of 2**62 characters
    (b'\x80\x04\x8d' + (1 << 62).to_bytes(8, 'little') + b'.',
     'the pickle at byte 0 is not one torch writes: it breaks off at byte '
     '12'),
    # A GLOBAL whose name runs 100,000 bytes to the file's end, shown by
    # its place, not quoted
    (b'\x80\x02c' + b'z' * 100_000,
     'the pickle at byte 0 is not one torch writes: it breaks off at byte '
     '100,003'),
], ids=['memo', 'bytes8', 'unicode8', 'long name'])
@pytest.mark.parametrize('layout', ['zip', 'legacy'])
def test_a_pickle_declaring_more_than_it_holds_is_refused_unpickled(
        tmp_path, monkeypatch, payload, message, layout):
    path = bin_path(tmp_path)
    if layout == 'zip':
        with zipfile.ZipFile(path, 'w') as archive:
            archive.writestr('archive/data.pkl', payload)
    else:
        with open(path, 'wb') as f:
            f.write(payload)
    monkeypatch.setattr(torch_pickle._StateDictUnpickler, 'load', None)
    expected = (message.format(path=path) if message.startswith('^')
                else corrupt(path, message))
    with pytest.raises(hf.CheckpointError, match=expected):
        hf.read_pytorch_bin(path)


def test_a_pickle_longer_than_the_limit_is_refused(tmp_path, monkeypatch):
    path = bin_path(tmp_path)
    with zipfile.ZipFile(path, 'w') as archive:
        archive.writestr('archive/data.pkl', pickle.dumps(['crane'] * 900))
    monkeypatch.setattr(torch_pickle, 'MAX_PICKLE_BYTES', 1000)
    with pytest.raises(hf.CheckpointError, match=(
            f'^{path}: archive/data.pkl holds [\\d,]+ bytes, more than the '
            '1,000 it should: the file is corrupt$')):
        hf.read_pytorch_bin(path)
    with open(path, 'wb') as f:   # the legacy layout: found by the walk
        f.write(pickle.dumps(['crane'] * 900))
    with pytest.raises(hf.CheckpointError, match=corrupt(
            path, 'its pickle is longer than 1,000 bytes')):
        hf.read_pytorch_bin(path)
