"""MXNet's parameter files, read without MXNet: each array's name, shape
and dtype, every size checked against the file's own.

MXNet's loader (`mx.nd.load`, `load_parameters`) allocates what a file
declares before it reads it: a count of arrays, a number of dimensions,
a shape.  On a damaged file it fails with a C++ check that names no
file, or allocates gigabytes for a file of a few bytes.  `read_arrays`
walks the file first, reading no array's data, and refuses in one line
what MXNet would not read or should not allocate.

The layout `mx.nd.save` and `save_parameters` write (MXNet 1.x
``NDArray::Save``), little-endian:

- uint64 ``0x112`` (MXNet's mark of an array list), uint64 reserved;
- uint64 the number of arrays, then each array: uint32 its format
  (``0xF993FACA`` in NumPy shape semantics, ``0xF993FAC9`` before;
  ``0xF993FAC8`` and older files, whose first uint32 is the number of
  dimensions, hold no storage type); int32 the storage type (0: dense);
  the shape (int32 number of dimensions, int64 each; uint32 in the
  oldest format); int32 device type, int32 device id; int32 dtype; the
  values;
- uint64 the number of names (0, or one for each array), then each:
  uint64 its length, its bytes.
"""
import collections
import os
import struct

#: MXNet's mark at the start of a file of arrays
LIST_MAGIC = 0x112
#: The format marks of one array: NumPy shape semantics, the one before,
#: and the first one with a mark
V3_MAGIC, V2_MAGIC, V1_MAGIC = 0xF993FACA, 0xF993FAC9, 0xF993FAC8
#: The most dimensions read (MXNet's operators take at most 6)
MAX_NDIM = 32
#: mshadow's dtype flags that `mx.nd.save` writes -> (name, bytes)
DTYPES = {0: ('float32', 4), 1: ('float64', 8), 2: ('float16', 2),
          3: ('uint8', 1), 4: ('int32', 4), 5: ('int8', 1),
          6: ('int64', 8), 7: ('bool', 1)}
#: MXNet's device types: CPU, GPU, pinned and shared CPU memory
DEVICE_TYPES = (1, 2, 3, 5)

#: One array of a file: its name (None in a file saved from a list),
#: shape, dtype name and the bytes of its values
Array = collections.namedtuple('Array', 'name shape dtype nbytes')


class NDArrayFileError(ValueError):
    """A file that is not, or no longer, an MXNet file of arrays; the
    message says why, without the file's name (the caller adds it)."""


class _Reader:
    """Reads a file's fields, never past its end."""

    def __init__(self, f, size):
        self.f, self.size = f, size

    def remaining(self):
        return self.size - self.f.tell()

    def take(self, num_bytes, what):
        if num_bytes > self.remaining():
            raise NDArrayFileError(
                f'{what} needs {num_bytes:,} bytes at offset '
                f'{self.f.tell():,}, and the file ends at {self.size:,}')
        return self.f.read(num_bytes)

    def unpack(self, fmt, what):
        return struct.unpack('<' + fmt, self.take(struct.calcsize(
            '<' + fmt), what))

    def skip(self, num_bytes, what):
        if num_bytes > self.remaining():
            self.take(num_bytes, what)  # raises, naming `what`
        self.f.seek(num_bytes, os.SEEK_CUR)


def read_arrays(path):
    """Read the names, shapes and dtypes of an MXNet file of arrays.

    Parameters
    ----------
    path : str
        A file written by `mx.nd.save`, `mx.npx.save` or
        `Block.save_parameters`.

    Returns
    -------
    list of Array
        In the file's order; names are None in a file saved from a list.

    Raises
    ------
    NDArrayFileError
        The file is not such a file, is truncated, or declares a count,
        a shape or a length that its bytes do not hold.
    """
    size = os.path.getsize(path)
    with open(path, 'rb') as f:
        reader = _Reader(f, size)
        if size < 24:
            raise NDArrayFileError(f'{size} bytes, too few for the header '
                                   f'of an MXNet file of arrays')
        magic, _, count = reader.unpack('QQQ', 'the header')
        if magic != LIST_MAGIC:
            raise NDArrayFileError(
                f'it starts with 0x{magic:x}, not 0x{LIST_MAGIC:x}, the '
                f'mark of a file `mx.nd.save` writes')
        # An array takes at least 20 bytes (mark, type, shape, device)
        if count * 20 > reader.remaining():
            raise NDArrayFileError(
                f'it declares {count:,} arrays, more than its '
                f'{size:,} bytes can hold')
        shapes = [_read_array(reader, i, count) for i in range(count)]
        names = _read_names(reader, count)
    return [Array(name, shape, dtype, nbytes) for name, (shape, dtype,
            nbytes) in zip(names, shapes)]


def _read_array(reader, i, count):
    """The shape, dtype and byte count of array `i`; skip its values."""
    what = f'array {i + 1} of {count}'
    magic, = reader.unpack('I', what)
    if magic in (V3_MAGIC, V2_MAGIC):
        stype, = reader.unpack('i', what)
        if stype != 0:
            raise NDArrayFileError(f'{what} has storage type {stype}; a '
                                   f"model's parameters are dense (0)")
    if magic in (V3_MAGIC, V2_MAGIC, V1_MAGIC):
        ndim, = reader.unpack('i', what)
        dim_format = 'q'
    else:   # the oldest format: the mark is the number of dimensions
        ndim, dim_format = magic, 'I'
    least = 0 if magic == V3_MAGIC else 1
    if not least <= ndim <= MAX_NDIM:
        raise NDArrayFileError(
            f'{what} has {ndim} dimensions, where an array MXNet writes '
            f'has {least} to {MAX_NDIM}')
    shape = reader.unpack(dim_format * ndim, what)
    if min(shape, default=0) < 0:
        raise NDArrayFileError(f'{what} has the shape {shape}, whose sizes '
                               f'are not all known')
    device, _, flag = reader.unpack('iii', what)
    if device not in DEVICE_TYPES or flag not in DTYPES:
        raise NDArrayFileError(
            f'{what} has device type {device} and dtype flag {flag}: not '
            f'an array MXNet writes')
    dtype, itemsize = DTYPES[flag]
    nbytes = itemsize
    for n in shape:
        nbytes *= n
    reader.skip(nbytes, f'{what}, of shape {shape} and dtype {dtype},')
    return shape, dtype, nbytes


def _read_names(reader, count):
    """The arrays' names; Nones for a file saved from a list."""
    num_names, = reader.unpack('Q', 'the number of names')
    if num_names == 0:
        return [None] * count
    if num_names != count:
        raise NDArrayFileError(f'it holds {count:,} arrays and '
                               f'{num_names:,} names')
    names = []
    for i in range(count):
        length, = reader.unpack('Q', f'name {i + 1} of {count}')
        raw = reader.take(length, f'name {i + 1} of {count}')
        try:
            names.append(raw.decode('utf-8'))
        except UnicodeDecodeError:
            raise NDArrayFileError(f'name {i + 1} of {count} is not '
                                   f'UTF-8 text') from None
    return names
