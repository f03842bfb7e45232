"""Tests of d2l_bert/data/ndarray_file.py: an MXNet file of arrays read
without MXNet, every size it declares checked against its bytes."""
import struct

import mxnet as mx
import pytest

from d2l_bert.data.ndarray_file import (NDArrayFileError, V2_MAGIC,
                                        V3_MAGIC, read_arrays)

# Offsets in a file of one array: the list header (24 bytes), then the
# array's mark, storage type, number of dimensions and its sizes
COUNT_AT, MARK_AT, NDIM_AT, DIMS_AT = 16, 24, 32, 36


def saved(tmp_path, arrays):
    """The bytes of `arrays` (a dict or a list) as `mx.npx.save` writes
    them."""
    path = str(tmp_path / 'a.params')
    mx.npx.save(path, arrays)
    with open(path, 'rb') as f:
        return bytearray(f.read())


def names(*names):
    return struct.pack('<Q', len(names)) + b''.join(
        struct.pack('<Q', len(n)) + n.encode() for n in names)


def write(tmp_path, data):
    path = tmp_path / 'b.params'
    path.write_bytes(bytes(data))
    return str(path)


def test_names_shapes_and_dtypes_are_those_mxnet_saved(tmp_path):
    arrays = {'w': mx.np.zeros((3, 5)), 'b': mx.np.ones(7, dtype='int64'),
              'scalar': mx.np.array(2.5, dtype='float16')}
    data = saved(tmp_path, arrays)
    path = write(tmp_path, data)
    assert struct.unpack_from('<I', data, MARK_AT) == (V3_MAGIC,)
    found = read_arrays(path)
    assert [(a.name, a.shape, a.dtype, a.nbytes) for a in found] == [
        ('w', (3, 5), 'float32', 60), ('b', (7,), 'int64', 56),
        ('scalar', (), 'float16', 2)]
    # What MXNet itself reads back
    loaded = mx.npx.load(path)
    assert {k: v.shape for k, v in loaded.items()} == {
        a.name: a.shape for a in found}


def test_the_formats_before_numpy_shapes_are_read(tmp_path):
    data = saved(tmp_path, {'w': mx.np.zeros((2, 9))})
    struct.pack_into('<I', data, MARK_AT, V2_MAGIC)
    [array] = read_arrays(write(tmp_path, data))
    assert (array.name, array.shape, array.nbytes) == ('w', (2, 9), 72)
    # The oldest: the mark is the number of dimensions, each a uint32,
    # and there is no storage type
    header = struct.pack('<QQQ', 0x112, 0, 1)
    array = struct.pack('<IIIiii', 2, 2, 9, 1, 0, 0) + bytes(72)
    [array] = read_arrays(write(tmp_path, header + array + names('v')))
    assert (array.name, array.shape, array.dtype) == ('v', (2, 9),
                                                       'float32')


def test_arrays_saved_from_a_list_have_no_names(tmp_path):
    data = saved(tmp_path, [mx.np.zeros(4), mx.np.zeros((2, 2))])
    assert data.endswith(struct.pack('<Q', 0))  # no names
    assert [(a.name, a.shape) for a in read_arrays(
        write(tmp_path, data))] == [(None, (4,)), (None, (2, 2))]


def damaged(data, change):
    """`data` (one float32 array of shape (3, 5) named 'w') changed."""
    data = bytearray(data)
    if change == 'random':
        return bytearray(b'\x93NUMPY\x01\x00' + bytes(range(200)))
    if change == 'cut':
        return data[:DIMS_AT + 16 + 12 + 30]
    if change == 'count':
        struct.pack_into('<Q', data, COUNT_AT, 3 << 50)
    elif change == 'ndim':
        struct.pack_into('<i', data, NDIM_AT, 700_000_000)
    elif change == 'shape':
        struct.pack_into('<qq', data, DIMS_AT, 90_000, 80_000)
    elif change == 'unknown size':
        struct.pack_into('<q', data, DIMS_AT, -1)
    elif change == 'sparse':
        struct.pack_into('<i', data, MARK_AT + 4, 2)
    elif change == 'dtype':
        struct.pack_into('<i', data, DIMS_AT + 16 + 8, 41)
    elif change == 'names':
        struct.pack_into('<Q', data, len(data) - 17, 5)
    elif change == 'name length':
        struct.pack_into('<Q', data, len(data) - 9, 1 << 45)
    elif change == 'name bytes':
        data[-1:] = b'\xff'
    return data


#: Each way `damaged` changes a file, and what is said of the result
DAMAGES = [
    ('random', r'^it starts with 0x159504d554e93, not 0x112, the mark of a '
               r'file `mx.nd.save` writes$'),
    ('cut', r'^array 1 of 1, of shape \(3, 5\) and dtype float32, needs 60 '
            r'bytes at offset 64, and the file ends at 94$'),
    ('count', r'^it declares 3,377,699,720,527,872 arrays, more than its '
              r'141 bytes can hold$'),
    ('ndim', r'^array 1 of 1 has 700000000 dimensions, where an array '
             r'MXNet writes has 0 to 32$'),
    ('shape', r'^array 1 of 1, of shape \(90000, 80000\) and dtype float32,'
              r' needs 28,800,000,000 bytes at offset 64, and the file ends'
              r' at 141$'),
    ('unknown size', r'shape \(-1, 5\), whose sizes are not all known$'),
    ('sparse', r"storage type 2; a model's parameters are dense \(0\)$"),
    ('dtype', r'dtype flag 41: not an array MXNet writes$'),
    ('names', r'^it holds 1 arrays and 5 names$'),
    ('name length', r'^name 1 of 1 needs 35,184,372,088,832 bytes at offset'
                    r' 140, and the file ends at 141$'),
    ('name bytes', r'^name 1 of 1 is not UTF-8 text$'),
]


@pytest.mark.parametrize('change, message', DAMAGES,
                         ids=[change for change, _ in DAMAGES])
def test_a_size_the_bytes_do_not_hold_is_refused_unread(tmp_path, change,
                                                        message):
    data = saved(tmp_path, {'w': mx.np.zeros((3, 5))})
    assert len(data) == 141
    with pytest.raises(NDArrayFileError, match=message):
        read_arrays(write(tmp_path, damaged(data, change)))
