"""Reading ``pytorch_model.bin`` without torch: a safe unpickler.

A torch state dict is a pickle whose tensors point to raw storages.
`read_pytorch_bin` reads both of torch's layouts with an unpickler that
knows only the few globals a state dict of tensors needs (anything else,
which a malicious pickle would use to run code, is refused) and returns
numpy arrays.

Nor are the sizes in the file trusted.  Each pickle is first read, up
to `MAX_PICKLE_BYTES`, and walked opcode by opcode (`pickletools`),
which checks that every length it declares lies inside it and that it
numbers its memo in order, before it is unpickled from memory; each
storage's size is checked against the file's and the memory available
before it is read; and each tensor's shape and strides against its
storage before it is copied.
"""
import collections
import io
import os
import pickle
import pickletools
import zipfile

import numpy as onp

from .errors import CheckpointError, bfloat16_to_float32, check_memory

#: The largest pickle of a state dict read: it holds the names, shapes
#: and strides, not the values (a BERT's is some 30 KB)
MAX_PICKLE_BYTES = 64 << 20

# torch's storage classes -> numpy dtypes; bfloat16 is read as uint16 and
# widened to float32 (numpy has no bfloat16)
_TORCH_STORAGES = {
    'FloatStorage': onp.float32, 'DoubleStorage': onp.float64,
    'HalfStorage': onp.float16, 'BFloat16Storage': 'bfloat16',
    'LongStorage': onp.int64, 'IntStorage': onp.int32,
    'ShortStorage': onp.int16, 'CharStorage': onp.int8,
    'ByteStorage': onp.uint8, 'BoolStorage': onp.bool_,
}


class _StorageType:
    """Stands for one of torch's storage classes in the pickle."""

    def __init__(self, name):
        self.name = name
        self.dtype = _TORCH_STORAGES[name]
        #: Bytes of one value, as saved
        self.itemsize = 2 if self.dtype == 'bfloat16' else onp.dtype(
            self.dtype).itemsize

    def from_bytes(self, data):
        """Return a 1-D numpy array over the storage's raw bytes."""
        if self.dtype == 'bfloat16':
            return bfloat16_to_float32(onp.frombuffer(data, dtype='<u2'))
        return onp.frombuffer(data, dtype=onp.dtype(self.dtype).newbyteorder(
            '<'))


def _rebuild_tensor(storage, storage_offset, size, stride, *unused):
    """numpy version of ``torch._utils._rebuild_tensor_v2``."""
    if isinstance(storage, _LazyStorage):
        return _LazyTensor(storage, (storage_offset, size, stride))
    size, stride = tuple(size), tuple(stride)
    # A view must stay inside its storage (as_strided does not check)
    if len(size) != len(stride) or not all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 0
            for n in size + stride + (storage_offset,)):
        raise CheckpointError(f'invalid tensor: size {size}, stride '
                              f'{stride}, offset {storage_offset}')
    if any(n > 1 and s == 0 for n, s in zip(size, stride)):
        raise CheckpointError(
            f'tensor of size {size} has the stride {stride}: a stride of '
            f'0 repeats one value along a dimension, which the tensors of '
            f'a state dict never do; the file is corrupt')
    numel = int(onp.prod(size, dtype=object))
    last = storage_offset + sum((n - 1) * s for n, s in zip(size, stride))
    if numel and last >= storage.size:
        raise CheckpointError(
            f'tensor of size {size} and stride {stride} at offset '
            f'{storage_offset} overruns its storage of {storage.size} '
            f'values: the file is corrupt')
    if numel > storage.size:
        raise CheckpointError(
            f'tensor of size {size} and stride {stride} has {numel:,} '
            f'values, more than the {storage.size:,} of its storage: its '
            f'strides overlap, which those of a state dict never do; the '
            f'file is corrupt')
    itemsize = storage.dtype.itemsize
    view = onp.lib.stride_tricks.as_strided(
        storage[storage_offset:], shape=size,
        strides=tuple(s * itemsize for s in stride))
    return onp.array(view)  # a copy: the checkpoint's bytes can go


def _rebuild_parameter(data, *unused):
    """numpy version of ``torch._utils._rebuild_parameter``."""
    return data


class _LazyStorage:
    """A storage of the legacy format, whose bytes follow the pickle."""

    def __init__(self, storages, key):
        self.storages, self.key = storages, key


class _LazyTensor:
    """A tensor over a `_LazyStorage`, built once the bytes are read."""

    def __init__(self, storage, args):
        self.storage, self.args = storage, args

    def materialize(self):
        array = self.storage.storages[self.storage.key][1]
        return _rebuild_tensor(array, *self.args)


# The only globals a state dict of tensors needs; anything else (which a
# malicious pickle would use to run code) is refused
_ALLOWED_GLOBALS = {
    ('collections', 'OrderedDict'): collections.OrderedDict,
    ('torch._utils', '_rebuild_tensor_v2'): _rebuild_tensor,
    ('torch._utils', '_rebuild_parameter'): _rebuild_parameter,
}


class _StateDictUnpickler(pickle.Unpickler):
    """Unpickle a torch state dict into numpy arrays, refusing code.

    `load_storage(key, storage_type, numel)` returns the raw storage as a
    1-D numpy array.
    """

    def __init__(self, file, path, load_storage):
        super().__init__(file)
        self.path, self.load_storage = path, load_storage

    def find_class(self, module, name):
        if module == 'torch' and name in _TORCH_STORAGES:
            return _StorageType(name)
        if (module, name) in _ALLOWED_GLOBALS:
            return _ALLOWED_GLOBALS[module, name]
        raise CheckpointError(
            f'{self.path}: refusing to unpickle {module:.60}.{name:.60}; a '
            f'BERT state dict holds only tensors (the file may be a whole '
            f'pickled model, or unsafe)')

    def persistent_load(self, pid):
        # ('storage', storage type, key, location, numel[, view metadata])
        if not (isinstance(pid, tuple) and pid and pid[0] == 'storage'
                and isinstance(pid[1], _StorageType)):
            raise CheckpointError(f'{self.path}: unexpected persistent id '
                                  f'{pid!r:.80} in the pickle')
        if len(pid) > 5 and pid[5] is not None:
            raise CheckpointError(f'{self.path}: storage views (torch '
                                  f'before 1.0) are not supported; save '
                                  f'the state dict again with a newer torch')
        return self.load_storage(str(pid[2]), pid[1], int(pid[4]))


class _Bounded:
    """A file read no further than `limit` bytes from where it stands."""

    def __init__(self, f, limit):
        self.f, self.end = f, f.tell() + limit

    def read(self, n=-1):
        left = max(self.end - self.f.tell(), 0)
        return self.f.read(left if n is None or n < 0 else min(n, left))

    def readline(self):
        return self.f.readline(max(self.end - self.f.tell(), 0))

    def tell(self):
        return self.f.tell()


#: The opcodes that store an object in the memo at an index they give
_MEMO_PUTS = ('PUT', 'BINPUT', 'LONG_BINPUT')


def _read_pickle(f, path):
    """Read the pickle that starts where `f` stands, after walking it:
    every length it declares lies inside its `MAX_PICKLE_BYTES`, and its
    memo indices are in order (the unpickler allocates the memo up to
    the largest index).  Return its bytes; `f` stands after it."""
    start = f.tell()
    reader = _Bounded(f, MAX_PICKLE_BYTES)
    try:
        for count, (opcode, arg, _) in enumerate(
                pickletools.genops(reader)):
            if opcode.name in _MEMO_PUTS and arg > count:
                raise CheckpointError(
                    f'{path}: its pickle stores its object {count} at the '
                    f'memo index {arg:,}; a pickle numbers them in order, '
                    f'the file is corrupt')
    except CheckpointError:
        raise
    except ValueError:  # a length past the end, an unknown opcode
        # (its message may quote the file's bytes: not shown)
        cause = (f'its pickle is longer than {MAX_PICKLE_BYTES:,} bytes'
                 if f.tell() >= reader.end
                 else f'the pickle at byte {start:,} is not one torch '
                      f'writes: it breaks off at byte {f.tell():,}')
        raise CheckpointError(
            f'{path} cannot be read ({cause}): the file is truncated or '
            f'corrupt (an interrupted download?); download it again') \
            from None
    end = f.tell()
    f.seek(start)
    return f.read(end - start)


def read_pytorch_bin(path):
    """Read a ``pytorch_model.bin`` state dict without torch.

    Both of torch's formats are read: the zip archive of ``torch.save``
    since torch 1.6 (a pickle ``data.pkl`` plus one raw file per storage)
    and the older stream of pickles followed by the raw storages.  Only
    tensors are unpickled; any other object is refused.

    Returns
    -------
    dict of str to numpy.ndarray
    """
    try:
        if zipfile.is_zipfile(path):
            state = _read_torch_zip(path)
        else:
            state = _read_torch_legacy(path)
    except CheckpointError as e:
        if str(e).startswith(path):
            raise
        raise CheckpointError(f'{path}: {e}') from None
    except (zipfile.BadZipFile, EOFError, pickle.UnpicklingError,
            ValueError, KeyError, IndexError, TypeError,
            AttributeError, OverflowError, OSError) as e:
        # (a message quoting the file at length is not shown)
        detail = f'{type(e).__name__}: {e}' if len(str(e)) <= 200 \
            else type(e).__name__
        raise CheckpointError(
            f'{path} cannot be read ({detail}): the file is truncated or '
            f'corrupt (an interrupted download?); download it again') \
            from None
    if not isinstance(state, dict) or not all(
            isinstance(v, onp.ndarray) for v in state.values()):
        raise CheckpointError(f'{path} does not hold a state dict (a '
                              f'mapping of names to tensors)')
    return dict(state)


def _read_torch_zip(path):
    with zipfile.ZipFile(path) as archive:
        pickles = [n for n in archive.namelist() if n.endswith('/data.pkl')
                   or n == 'data.pkl']
        if len(pickles) != 1:
            raise CheckpointError(f'{path} is a zip archive without '
                                  f'exactly one data.pkl: not a torch file')
        prefix = pickles[0][:-len('data.pkl')]
        byteorder = prefix + 'byteorder'
        if byteorder in archive.namelist() and \
                _read_member(archive, byteorder, 16).strip() != b'little':
            raise CheckpointError(f'{path} was saved big-endian; not '
                                  f'supported')
        # What the storages take, from the archive's directory: checked
        # before any is read (a member may inflate to more than its size)
        check_memory(path, sum(info.file_size for info in archive.infolist()
                               if info.filename.startswith(prefix + 'data/')),
                     'its storages')

        def load_storage(key, storage_type, numel):
            # `read` checks the CRC-32: a corrupt file raises BadZipFile
            data = _read_member(archive, f'{prefix}data/{key}',
                                numel * storage_type.itemsize)
            array = storage_type.from_bytes(data)
            if array.size < numel:
                raise CheckpointError(f'{path}: storage {key} holds '
                                      f'{array.size} values, expected '
                                      f'{numel}')
            return array

        data = _read_member(archive, pickles[0], MAX_PICKLE_BYTES)
        _read_pickle(io.BytesIO(data), path)
        return _StateDictUnpickler(io.BytesIO(data), path,
                                   load_storage).load()


def _read_member(archive, name, limit):
    """The bytes of the member `name`, whose size must be at most
    `limit`."""
    try:
        info = archive.getinfo(name)
    except KeyError:
        raise CheckpointError(f'{archive.filename} lacks {name}, which its '
                              f'data.pkl names') from None
    if info.file_size > limit:
        raise CheckpointError(
            f'{archive.filename}: {name} holds {info.file_size:,} bytes, '
            f'more than the {limit:,} it should: the file is corrupt')
    return archive.read(info)


_LEGACY_MAGIC = 0x1950a86a20f9469cfc6c


def _read_torch_legacy(path):
    # Layout: pickles of the magic number, the protocol version and system
    # information; the pickled object with storages as persistent ids; a
    # pickled list of storage keys; then each storage as an int64 element
    # count followed by its raw bytes, in that list's order
    storages = {}

    def load_storage(key, storage_type, numel):
        storages.setdefault(key, [storage_type, None])
        return _LazyStorage(storages, key)

    def load(f):
        data = _read_pickle(f, path)
        return _StateDictUnpickler(io.BytesIO(data), path,
                                   load_storage).load()

    size = os.path.getsize(path)
    check_memory(path, size, 'its storages')
    with open(path, 'rb') as f:
        if load(f) != _LEGACY_MAGIC:
            raise CheckpointError(f'{path} is neither a zip archive nor a '
                                  f'torch file: not a pytorch_model.bin')
        load(f)  # protocol version
        load(f)  # system information
        state = load(f)
        keys = load(f)
        for key in keys:
            if key not in storages:
                raise CheckpointError(
                    f'{path}: its list of storages names {key!r:.40}, '
                    f'which no tensor of its pickle uses')
            numel = int.from_bytes(f.read(8), 'little')
            storage_type = storages[key][0]
            nbytes = numel * storage_type.itemsize
            if nbytes > size - f.tell():
                raise CheckpointError(
                    f'{path}: storage {key} declares {numel:,} values, '
                    f'{nbytes:,} bytes, and the file ends '
                    f'{size - f.tell():,} bytes further: it is truncated or '
                    f'corrupt')
            storages[key][1] = storage_type.from_bytes(f.read(nbytes))
    return {name: value.materialize() if isinstance(value, _LazyTensor)
            else value for name, value in state.items()}
