"""MXNet's file of named arrays, read from bytes without MXNet.

`mx.nd.save` and `Block.save_parameters` write a list of arrays and
their names; MXNet's own reader allocates each array at the size its
header declares before it reads the data, and names no file when it
fails.  `read_ndarrays` reads the same bytes in Python: every size is
checked against the bytes that are there before anything is taken,
and the arrays are NumPy views of those bytes, so that a damaged or
hostile file costs no more memory than its own size.  `file_size` is
the size such a file has, to check a file's size before reading it.

The layout (little-endian), as MXNet 1.x writes it::

    uint64 0x112, uint64 0, uint64 N     the header
    N times: an array                    `read_ndarray`
    uint64 N (or 0: no names), N times: uint64 length, UTF-8 bytes

and an array::

    uint32 magic (0xF993FAC9, or 0xF993FACA with NumPy shapes)
    int32 storage type (0: dense), int32 ndim, int64 x ndim dims
    int32 device type, int32 device id, int32 type flag, the data
"""
import struct

import numpy as onp

#: The first 8 bytes of a file of arrays
LIST_MAGIC = 0x112
#: The first 4 bytes of an array: MXNet's two formats since 1.0 (the
#: second with NumPy's shapes, where 0 is a size and -1 unknown)
ARRAY_MAGICS = (0xF993FAC9, 0xF993FACA)
#: MXNet's type flags (mshadow's) and NumPy's dtypes
DTYPES = {0: '<f4', 1: '<f8', 2: '<f2', 3: 'u1', 4: '<i4', 5: 'i1',
          6: '<i8', 7: '?'}
#: The most dimensions an array may have
MAX_NDIM = 32


class NDArrayFileError(ValueError):
    """Bytes that are not a whole file of MXNet arrays; the message says
    why, as a phrase that follows the file's name ("is cut short: ...")."""


def file_size(arrays):
    """The size in bytes of the file `mx.nd.save` writes for `arrays`.

    Parameters
    ----------
    arrays : iterable of (str, tuple of int, numpy dtype)
        Each array's name, shape and dtype.
    """
    size = 24 + 8
    for name, shape, dtype in arrays:
        count = 1
        for dim in shape:
            count *= dim
        size += 24 + 8 * len(shape) + count * onp.dtype(dtype).itemsize
        size += 8 + len(name.encode('utf-8'))
    return size


def read_ndarrays(data):
    """The named arrays of a file `mx.nd.save` wrote, as NumPy arrays.

    Parameters
    ----------
    data : bytes
        The whole file.

    Returns
    -------
    dict of str to numpy.ndarray
        Read-only views of `data`, in the file's order.

    Raises
    ------
    NDArrayFileError
        If `data` is not exactly such a file: another format, cut short,
        bytes past its end, sparse arrays, arrays without names or a
        name twice.
    """
    data = memoryview(data)
    if len(data) < 24 or _unpack('<QQ', data, 0, 'the header') != (
            LIST_MAGIC, 0):
        raise NDArrayFileError('does not begin as a file of MXNet arrays')
    (count,), offset = _unpack('<Q', data, 16, 'the header'), 24
    # Each array takes 24 bytes at least: `count` is bounded by the file
    if count > len(data) // 24:
        raise NDArrayFileError(f'declares {count:,} arrays in '
                               f'{len(data):,} bytes')
    arrays = []
    for i in range(count):
        array, offset = read_ndarray(data, offset, f'array {i + 1} of '
                                     f'{count}')
        arrays.append(array)
    names, offset = _read_names(data, offset, count)
    if offset != len(data):
        raise NDArrayFileError(f'has {len(data) - offset:,} bytes past '
                               'its end')
    found = {}
    for name, array in zip(names, arrays):
        if name in found:
            raise NDArrayFileError(f'holds {name!r:.80} twice')
        found[name] = array
    return found


def read_ndarray(data, offset=0, what='the array'):
    """One array of `data` at `offset` (`what` names it in errors), as
    MXNet's ``NDArray::Save`` writes it; returns it, as a read-only
    NumPy view of `data`, and the offset past it."""
    data = memoryview(data)
    magic, stype, ndim = _unpack('<Iii', data, offset, what)
    if magic not in ARRAY_MAGICS:
        raise NDArrayFileError(f'holds {what} in no format of MXNet')
    if stype != 0:
        raise NDArrayFileError(f'holds {what} in sparse storage, which '
                               'this reader does not take')
    if not 0 <= ndim <= MAX_NDIM:
        raise NDArrayFileError(f'holds {what} of {ndim:,} dimensions (0 '
                               f'to {MAX_NDIM})')
    offset += 12
    shape = _unpack(f'<{ndim}q', data, offset, what)
    offset += 8 * ndim
    _, _, flag = _unpack('<iii', data, offset, what)
    offset += 12
    if any(dim < 0 for dim in shape):
        raise NDArrayFileError(f'holds {what} of shape {shape}')
    if flag not in DTYPES:
        raise NDArrayFileError(f'holds {what} of an unknown type (flag '
                               f'{flag})')
    dtype = onp.dtype(DTYPES[flag])
    count = 1
    for dim in shape:
        count *= dim
    nbytes = count * dtype.itemsize
    if nbytes > len(data) - offset:
        raise NDArrayFileError(f'is cut short: {what}, of shape {shape}, '
                               f'needs {nbytes:,} bytes, '
                               f'{len(data) - offset:,} are left')
    array = onp.frombuffer(data, dtype, count, offset).reshape(shape)
    return array, offset + nbytes


def _read_names(data, offset, count):
    """The `count` names that end the file (`offset`: their start), and
    the offset past them."""
    (num_names,) = _unpack('<Q', data, offset, 'the names')
    offset += 8
    if num_names != count:
        what = 'no names' if num_names == 0 else f'{num_names:,} names'
        raise NDArrayFileError(f'has {what} for its {count:,} arrays')
    names = []
    for i in range(count):
        (length,) = _unpack('<Q', data, offset, 'the names')
        offset += 8
        if length > len(data) - offset:
            raise NDArrayFileError(f'is cut short: name {i + 1} needs '
                                   f'{length:,} bytes, '
                                   f'{len(data) - offset:,} are left')
        try:
            names.append(str(data[offset:offset + length], 'utf-8'))
        except UnicodeDecodeError:
            raise NDArrayFileError(f'holds name {i + 1} that is not '
                                   'UTF-8') from None
        offset += length
    return names, offset


def _unpack(layout, data, offset, what):
    """``struct.unpack_from`` that says what is cut short."""
    try:
        return struct.unpack_from(layout, data, offset)
    except struct.error:
        raise NDArrayFileError(f'is cut short in {what}') from None
