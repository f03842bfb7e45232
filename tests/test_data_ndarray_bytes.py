"""Tests of d2l_bert/data/ndarray_bytes.py: MXNet's file of named arrays,
read from bytes without MXNet, every size checked first."""
import struct

import mxnet as mx
import numpy as onp
import pytest
from mxnet import npx

from d2l_bert.data.ndarray_bytes import (NDArrayFileError, file_size,
                                        read_ndarray, read_ndarrays)

ARRAYS = {
    'encoder.pos_embedding': onp.arange(24, dtype='float32').reshape(
        1, 4, 6),
    'w': onp.linspace(-1, 1, 15).reshape(3, 5),          # float64
    'half': onp.ones((2, 3), dtype='float16'),
    'ids': onp.arange(7, dtype='int32'),
    'big': onp.array([2**40 * i for i in range(5)], dtype=onp.int64),
    'bytes': onp.arange(6, dtype='uint8').reshape(2, 3),
    'empty': onp.zeros((0, 4), dtype='float32'),
    'scalar': onp.array(2.5, dtype='float32'),
    'name é': onp.array([1.5], dtype='float32'),
}


def saved(tmp_path, arrays, numpy_shapes):
    """The bytes `mx.nd.save` (or `npx.save`, with NumPy's shapes)
    writes for `arrays`."""
    path = str(tmp_path / 'x.params')
    if numpy_shapes:
        with mx.util.np_shape(True), mx.util.np_array(True):
            npx.save(path, {k: mx.np.array(v, dtype=v.dtype)
                            for k, v in arrays.items()})
    else:
        mx.nd.save(path, {k: mx.nd.array(v, dtype=v.dtype)
                          for k, v in arrays.items()})
    with open(path, 'rb') as f:
        return f.read()


@pytest.mark.parametrize('numpy_shapes', [True, False])
def test_reads_what_mxnet_writes_and_knows_its_size(tmp_path, numpy_shapes):
    arrays = dict(ARRAYS)
    if not numpy_shapes:   # (legacy shapes have no 0-size nor 0-d arrays)
        del arrays['empty'], arrays['scalar']
    data = saved(tmp_path, arrays, numpy_shapes)
    found = read_ndarrays(data)
    assert list(found) == list(arrays)
    for name, array in arrays.items():
        assert found[name].dtype == array.dtype, name
        onp.testing.assert_array_equal(found[name], array, err_msg=name)
    assert file_size((k, v.shape, v.dtype) for k, v in arrays.items()) \
        == len(data)
    # views of the bytes, never written
    assert not found['w'].flags.writeable


def small_file(tmp_path):
    return saved(tmp_path, {'a': onp.ones((2, 3), dtype='float32'),
                            'b': onp.zeros(4, dtype='float32')}, True)


def test_every_cut_of_a_file_is_refused(tmp_path):
    data = small_file(tmp_path)
    for end in range(len(data)):
        with pytest.raises(NDArrayFileError):
            read_ndarrays(data[:end])


def header(count):
    return struct.pack('<QQQ', 0x112, 0, count)


def array(shape, flag=0, stype=0, magic=0xF993FACA, ndim=None):
    ndim = len(shape) if ndim is None else ndim
    return (struct.pack('<Iii', magic, stype, ndim)
            + struct.pack(f'<{len(shape)}q', *shape)
            + struct.pack('<iii', 1, 0, flag))


def names(*texts):
    return struct.pack('<Q', len(texts)) + b''.join(
        struct.pack('<Q', len(t)) + t for t in texts)


#: Files that are not whole, and what is said of them
DAMAGED = [
    (b'PK\3\4' + bytes(40), 'does not begin as a file of MXNet arrays'),
    (header(2**60), 'declares 1,152,921,504,606,846,976 arrays in 24 '
                    'bytes'),
    # a shape of 10**12 floats in a file of 84 bytes: refused, not
    # allocated
    (header(1) + array((10**6, 10**6)) + names(b'a'),
     'is cut short: array 1 of 1, of shape (1000000, 1000000), needs '
     '4,000,000,000,000 bytes, 17 are left'),
    (header(1) + array((2**62, 2**62)) + names(b'a'),
     'is cut short: array 1 of 1, of shape (4611686018427387904, '
     '4611686018427387904), needs '
     '85,070,591,730,234,615,865,843,651,857,942,052,864 bytes, 17 are '
     'left'),
    (header(1) + array((-1, 3)) + names(b'a'),
     'holds array 1 of 1 of shape (-1, 3)'),
    (header(1) + array((2,), ndim=-1), 'holds array 1 of 1 of -1 '
                                       'dimensions (0 to 32)'),
    (header(1) + array((), ndim=10**9), 'holds array 1 of 1 of '
                                        '1,000,000,000 dimensions (0 to '
                                        '32)'),
    (header(1) + array((1,), stype=1) + bytes(4) + names(b'a'),
     'holds array 1 of 1 in sparse storage, which this reader does not '
     'take'),
    (header(1) + array((1,), flag=99) + bytes(4) + names(b'a'),
     'holds array 1 of 1 of an unknown type (flag 99)'),
    (header(1) + array((1,), magic=0x12345678) + bytes(4) + names(b'a'),
     'holds array 1 of 1 in no format of MXNet'),
    (header(1) + array((1,)) + bytes(4) + names(),
     'has no names for its 1 arrays'),
    (header(2) + (array((1,)) + bytes(4)) * 2 + names(b'a', b'a'),
     "holds 'a' twice"),
    (header(1) + array((1,)) + bytes(4) + names(b'\xff'),
     'holds name 1 that is not UTF-8'),
    (header(1) + array((1,)) + bytes(4) + struct.pack('<QQ', 1, 2**63),
     'is cut short: name 1 needs 9,223,372,036,854,775,808 bytes, 0 are '
     'left'),
    (header(1) + array((1,)) + bytes(4) + names(b'a') + b'!!',
     'has 2 bytes past its end'),
]


@pytest.mark.parametrize('data, message', DAMAGED,
                         ids=[message[:40] for _, message in DAMAGED])
def test_a_file_that_is_not_whole_is_one_message(data, message):
    with pytest.raises(NDArrayFileError) as e:
        read_ndarrays(data)
    assert str(e.value) == message


def test_one_array_is_read_at_an_offset():
    data = b'xx' + array((2,)) + struct.pack('<2f', 1.5, -2)
    found, end = read_ndarray(data, 2)
    assert end == len(data)
    onp.testing.assert_array_equal(found, [1.5, -2])
