"""Reading ``pytorch_model.bin`` without torch: a safe unpickler.

A torch state dict is a pickle whose tensors point to raw storages.
`read_pytorch_bin` reads both of torch's layouts with an unpickler that
knows only the few globals a state dict of tensors needs (anything else,
which a malicious pickle would use to run code, is refused) and returns
numpy arrays.
"""
import collections
import pickle
import zipfile

import numpy as onp

from .files import CheckpointError, bfloat16_to_float32

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
    if len(size) != len(stride) or min(size + stride + (storage_offset,),
                                       default=0) < 0:
        raise CheckpointError(f'invalid tensor: size {size}, stride '
                              f'{stride}, offset {storage_offset}')
    last = storage_offset + sum((n - 1) * s for n, s in zip(size, stride))
    if 0 not in size and last >= storage.size:
        raise CheckpointError(
            f'tensor of size {size} and stride {stride} at offset '
            f'{storage_offset} overruns its storage of {storage.size} '
            f'values: the file is corrupt')
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
            f'{self.path}: refusing to unpickle {module}.{name}; a BERT '
            f'state dict holds only tensors (the file may be a whole '
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
            AttributeError, OSError) as e:
        raise CheckpointError(
            f'{path} cannot be read ({type(e).__name__}: {e}): the file is '
            f'truncated or corrupt (an interrupted download?); download it '
            f'again') from None
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
                archive.read(byteorder).strip() != b'little':
            raise CheckpointError(f'{path} was saved big-endian; not '
                                  f'supported')

        def load_storage(key, storage_type, numel):
            # `read` checks the CRC-32: a corrupt file raises BadZipFile
            data = archive.read(f'{prefix}data/{key}')
            array = storage_type.from_bytes(data)
            if array.size < numel:
                raise CheckpointError(f'{path}: storage {key} holds '
                                      f'{array.size} values, expected '
                                      f'{numel}')
            return array

        with archive.open(pickles[0]) as f:
            return _StateDictUnpickler(f, path, load_storage).load()


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
        return _StateDictUnpickler(f, path, load_storage).load()

    with open(path, 'rb') as f:
        if load(f) != _LEGACY_MAGIC:
            raise CheckpointError(f'{path} is neither a zip archive nor a '
                                  f'torch file: not a pytorch_model.bin')
        load(f)  # protocol version
        load(f)  # system information
        state = load(f)
        keys = load(f)
        for key in keys:
            numel = int.from_bytes(f.read(8), 'little')
            storage_type = storages[key][0]
            nbytes = numel * (2 if storage_type.dtype == 'bfloat16'
                              else onp.dtype(storage_type.dtype).itemsize)
            data = f.read(nbytes)
            if len(data) != nbytes:
                raise CheckpointError(f'{path} ends inside storage {key}: '
                                      f'the file is truncated')
            storages[key][1] = storage_type.from_bytes(data)
    return {name: value.materialize() if isinstance(value, _LazyTensor)
            else value for name, value in state.items()}
