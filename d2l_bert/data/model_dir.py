"""The files of a pretrained BERT directory, read: d2l's `bert.small` layout.

``pretrained.params`` (a `BERTModel`'s parameters, by structural name),
``vocab.json`` (the tokens in index order) and, written by
``d2l-bert pretrain``, ``config.json`` (the `BERTModel` arguments).
The book's `load_pretrained_model` reads them with `load_vocab` and
`read_config`; `infer_config` reads the sizes off the parameters' shapes
where no ``config.json`` records them.  `d2l_bert.runs.model_files`
writes such a directory and loads it back whole.

Nothing a file declares is trusted: ``config.json`` and ``vocab.json``
are read only up to a size (`read_bounded`), and the parameters' names
and shapes are read and checked against the file's size (`read_params`)
and against the model (`check_params_fit`) before MXNet reads them.
A damaged file is refused in one line that names it and the cause.
"""
import os
import re

import mxnet as mx
import numpy as onp

from .bounded import json_value, read_bounded
from .ndarray_file import NDArrayFileError, read_arrays

PARAMS_FILE, VOCAB_FILE, CONFIG_FILE = ('pretrained.params', 'vocab.json',
                                        'config.json')

#: BERT's size of one attention head.  The number of heads does not show
#: in the parameter shapes, so it is read as ``num_hiddens // HEAD_SIZE``
#: (right for `bert.small`, 256 / 4, and `bert.base`, 768 / 12)
HEAD_SIZE = 64

#: The largest ``config.json`` and ``vocab.json`` read, in bytes (d2l's
#: are under 1 KB and 300 KB)
MAX_CONFIG_BYTES, MAX_VOCAB_BYTES = 1 << 20, 64 << 20


# ---------------------------------------------------------------------------
# Reading the files
# ---------------------------------------------------------------------------

def load_vocab(file_name):
    """Read a vocabulary saved as a JSON list of tokens in index order.

    Parameters
    ----------
    file_name : str
        Path of ``vocab.json``: token ``i`` of the list has index ``i``.

    Returns
    -------
    d2l.Vocab
        An empty `Vocab` with `idx_to_token` and `token_to_idx` set from
        the file, as the book's `load_pretrained_model` builds it.

    Raises
    ------
    ValueError
        If the file is not a JSON list of distinct strings holding the
        tokens BERT needs (`<unk>`, `<pad>`, `<cls>`, `<sep>`).
    """
    from d2l.mxnet import Vocab
    idx_to_token = _read_json(file_name, MAX_VOCAB_BYTES,
                              'it should be the list of tokens in index '
                              'order')
    if not isinstance(idx_to_token, list):
        raise ValueError(
            f'{file_name} must hold a JSON list of token strings in index '
            f'order, got a {type(idx_to_token).__name__}')
    for i, token in enumerate(idx_to_token):
        if not isinstance(token, str):
            raise ValueError(
                f'{file_name} must hold a JSON list of token strings in '
                f'index order; token {i} is {token!r:.60}')
    seen = set()
    for token in idx_to_token:
        if token in seen:
            raise ValueError(f'{file_name} lists the token {token!r:.60} '
                             f'twice; each token has one index')
        seen.add(token)
    missing = [t for t in ('<unk>', '<pad>', '<cls>', '<sep>')
               if t not in idx_to_token]
    if missing:
        raise ValueError(
            f'{file_name} lacks the special tokens {missing} that BERT '
            'inputs need')
    vocab = Vocab()
    vocab.idx_to_token = idx_to_token
    vocab.token_to_idx = {token: idx for idx, token in enumerate(
        idx_to_token)}
    return vocab


#: The sizes of ``config.json``, `BERTModel`'s integer arguments
SIZE_KEYS = ('vocab_size', 'num_hiddens', 'ffn_num_hiddens', 'num_heads',
             'num_blks', 'max_len')


def read_config(model_dir):
    """Return the dict in ``model_dir/config.json``, or None without one.

    Raises
    ------
    ValueError
        The file is not a JSON object, or a size of `SIZE_KEYS` in it is
        not a positive integer, or its ``dropout`` not a number in [0, 1).
    """
    path = os.path.join(model_dir, CONFIG_FILE)
    if not os.path.lexists(path):
        return None
    config = _read_json(path, MAX_CONFIG_BYTES, 'correct it, or re-run '
                        '`d2l-bert pretrain`')
    if not isinstance(config, dict):
        raise ValueError(f'{path} must hold a JSON object, got a '
                         f'{type(config).__name__}; correct it, or re-run '
                         '`d2l-bert pretrain`')
    _check_config_types(path, config)
    return config


def _read_json(path, limit, hint):
    """The JSON value of the file `path`, read up to `limit` bytes."""
    data = read_bounded(path, limit)
    try:
        return json_value(data.decode('utf-8'))
    except ValueError as e:  # decoding errors included
        raise ValueError(f'{path} is not valid JSON ({e}); {hint}') \
            from None


def _check_config_types(path, config):
    """Raise a ValueError naming the first value of `config` (read from
    `path`) that `BERTModel` cannot take."""
    for key in SIZE_KEYS:
        value = config.get(key, 1)
        if isinstance(value, bool) or not isinstance(value, int) or \
                value < 1:
            raise ValueError(
                f'{path}: {key} must be a positive integer, got {value!r}; '
                'correct it, or re-run `d2l-bert pretrain`')
    num_hiddens, num_heads = (config.get(k) for k in ('num_hiddens',
                                                      'num_heads'))
    if num_hiddens is not None and num_heads is not None and \
            num_hiddens % num_heads:
        raise ValueError(
            f'{path}: num_heads={num_heads} does not divide '
            f'num_hiddens={num_hiddens} (each head takes num_hiddens / '
            'num_heads of them); correct it, or re-run `d2l-bert pretrain`')
    dropout = config.get('dropout', 0)
    if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) \
            or not 0 <= dropout < 1:
        raise ValueError(
            f'{path}: dropout must be a number in [0, 1), got {dropout!r}; '
            'correct it, or re-run `d2l-bert pretrain`')


def damaged(params_file, cause=None):
    """The ValueError for a parameter file that cannot be read, with its
    `cause` if known (MXNet's own error is a C++ trace that names no
    file)."""
    because = f' ({cause})' if cause else ''
    return ValueError(f'{params_file} is corrupt or truncated{because}; '
                      'download it again or re-run `d2l-bert pretrain`')


def is_mxnet_trace(error):
    """Whether `error` is MXNet's own, whose message is a C++ trace
    (Gluon raises some as a ValueError)."""
    return isinstance(error, mx.base.MXNetError) or (
        isinstance(error, ValueError) and 'MXNetError' in str(error))


# ---------------------------------------------------------------------------
# The parameters: read, checked, then loaded
# ---------------------------------------------------------------------------

def read_params(params_file):
    """The names, shapes and dtypes in `params_file`, checked.

    Returns
    -------
    dict of str to Array
        By parameter name, in the file's order (`ndarray_file.Array`:
        name, shape, dtype, nbytes).

    Raises
    ------
    ValueError
        `damaged`'s: the file is not an MXNet parameter file, is
        truncated or declares sizes its bytes do not hold; or its arrays
        have no names (saved from a list), or a name twice.
    """
    try:
        arrays = read_arrays(params_file)
    except NDArrayFileError as e:
        raise damaged(params_file, e) from None
    except OSError as e:
        raise ValueError(f'{params_file}: cannot read it: '
                         f'{e.strerror}') from None
    if arrays and arrays[0].name is None:
        raise ValueError(
            f'{params_file} holds {len(arrays)} arrays without names (saved '
            f'from a list, as `mx.nd.save(file, [...])` does), not the '
            f"named parameters of a model (`net.save_parameters`)")
    params = {array.name: array for array in arrays}
    if len(params) < len(arrays):
        raise damaged(params_file, 'it names a parameter twice')
    return params


def check_params_fit(net, params, params_file, sizes):
    """Raise a ValueError unless the parameters `params` (`read_params`'
    of `params_file`) are those of `net`, by name and shape.

    `sizes` names where `net`'s sizes come from, for the message.
    """
    ours = net._collect_params_with_prefix()

    def fail(detail):
        raise ValueError(f'{params_file} does not fit {sizes}: {detail}; '
                         'correct them, or re-run `d2l-bert pretrain`')

    def names(found):
        more = f' and {len(found) - 3} more' if len(found) > 3 else ''
        return ', '.join(sorted(found)[:3]) + more
    missing = [name for name in ours if name not in params]
    if missing:
        fail(f'it lacks {names(missing)}, which the model has')
    extra = [name for name in params if name not in ours]
    if extra:
        fail(f'it holds {names(extra)}, which the model does not have')
    for name, param in ours.items():
        shape, saved = tuple(param.shape or ()), params[name].shape
        if len(saved) != len(shape) or any(
                n not in (-1, 0, s) for n, s in zip(shape, saved)):
            known = tuple('?' if n in (-1, 0) else n for n in shape)
            shown = '(' + ', '.join(map(str, known)) + (
                ',)' if len(known) == 1 else ')')
            fail(f'its {name} has shape {saved}, the model\'s {shown}')
        dtype = onp.dtype(param.dtype).name
        if params[name].dtype != dtype:
            fail(f'its {name} is {params[name].dtype}, the model\'s '
                 f'{dtype}')


def check_mxnet_path(params_file):
    """Raise a ValueError if MXNet cannot open `params_file` by its name:
    MXNet passes file names to its C++ side as UTF-8."""
    try:
        params_file.encode('utf-8')
    except UnicodeEncodeError:
        shown = os.fsencode(params_file).decode('utf-8', 'backslashreplace')
        raise ValueError(
            f'{shown}: its path is not valid UTF-8, and MXNet opens files by '
            f'UTF-8 names; rename the folder that holds it') from None


def load_parameters(net, params_file, ctx, sizes):
    """``net.load_parameters(params_file, ctx=ctx)``, after
    `read_params` and `check_params_fit` (`sizes` says where `net`'s
    sizes come from) and `check_mxnet_path`, with `damaged`'s error for
    a file MXNet cannot read even so."""
    check_params_fit(net, read_params(params_file), params_file, sizes)
    check_mxnet_path(params_file)
    try:
        net.load_parameters(params_file, ctx=ctx)
    except AssertionError as e:  # Gluon's, for what is checked above
        raise ValueError(f'{params_file} does not fit {sizes}: {e}') \
            from None
    except (ValueError, mx.base.MXNetError) as e:
        if not is_mxnet_trace(e):
            raise
        raise damaged(params_file) from None


#: The parameters `infer_config` reads its sizes from, and their shapes
INFERRED_FROM = {'encoder.token_embedding.weight': '(vocab_size, '
                                                   'num_hiddens)',
                 'encoder.pos_embedding': '(1, max_len, num_hiddens)',
                 'encoder.blks.0.ffn.dense1.weight': '(ffn_num_hiddens, '
                                                     'num_hiddens)'}


def infer_config(params_file):
    """Read the `BERTModel` arguments off the shapes in `params_file`.

    For directories without ``config.json`` (d2l's own `bert.small` and
    `bert.base`).  The heads are ``num_hiddens // HEAD_SIZE`` (or the
    next divisor of num_hiddens below); the dropout, which no file
    records, is 0.

    Returns
    -------
    dict
        vocab_size, num_hiddens, ffn_num_hiddens, num_heads, num_blks,
        dropout and max_len.
    """
    params = read_params(params_file)
    shapes = {}
    for name, layout in INFERRED_FROM.items():
        if name not in params:
            raise ValueError(f'{params_file} holds no BERTModel parameter '
                             f'{name!r}; is it the file of a BERTModel?')
        shapes[name] = shape = params[name].shape
        if len(shape) != layout.count(',') + 1 or 0 in shape:
            raise ValueError(f'{params_file}: {name} has shape {shape}; a '
                             f"BERTModel's is {layout}")
    vocab_size, num_hiddens = shapes['encoder.token_embedding.weight']
    _, max_len, pos_hiddens = shapes['encoder.pos_embedding']
    ffn_num_hiddens, ffn_hiddens = shapes['encoder.blks.0.ffn.dense1.'
                                          'weight']
    if not num_hiddens == pos_hiddens == ffn_hiddens or shapes[
            'encoder.pos_embedding'][0] != 1:
        raise ValueError(
            f'{params_file}: the shapes of ' + ', '.join(
                f'{name} {shape}' for name, shape in shapes.items())
            + ' are not those of one BERTModel, ' + ', '.join(
                INFERRED_FROM.values()))
    blocks = {int(m.group(1)) for m in map(
        re.compile(r'encoder\.blks\.(\d+)\.').match, params) if m}
    num_heads = max(num_hiddens // HEAD_SIZE, 1)
    while num_hiddens % num_heads:
        num_heads -= 1
    return dict(vocab_size=vocab_size, num_hiddens=num_hiddens,
                ffn_num_hiddens=ffn_num_hiddens, num_heads=num_heads,
                num_blks=len(blocks), dropout=0.0, max_len=max_len)
