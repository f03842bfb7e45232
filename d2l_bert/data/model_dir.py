"""The files of a pretrained BERT directory, read: d2l's `bert.small` layout.

``pretrained.params`` (a `BERTModel`'s parameters, by structural name),
``vocab.json`` (the tokens in index order) and, written by
``d2l-bert pretrain``, ``config.json`` (the `BERTModel` arguments).
The book's `load_pretrained_model` reads them with `load_vocab` and
`read_config`; `infer_config` reads the sizes off the parameters' shapes
where no ``config.json`` records them.  `d2l_bert.runs.model_files`
writes such a directory and loads it back whole.
"""
import json
import os

import mxnet as mx

PARAMS_FILE, VOCAB_FILE, CONFIG_FILE = ('pretrained.params', 'vocab.json',
                                        'config.json')

#: BERT's size of one attention head.  The number of heads does not show
#: in the parameter shapes, so it is read as ``num_hiddens // HEAD_SIZE``
#: (right for `bert.small`, 256 / 4, and `bert.base`, 768 / 12)
HEAD_SIZE = 64


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
    try:
        with open(file_name, encoding='utf-8') as f:
            idx_to_token = json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(
            f'{file_name} is not valid JSON ({e}); it should be the list '
            'of tokens in index order') from e
    if not isinstance(idx_to_token, list) or not all(
            isinstance(t, str) for t in idx_to_token):
        raise ValueError(
            f'{file_name} must hold a JSON list of token strings in index '
            f'order, got a {type(idx_to_token).__name__}')
    if len(set(idx_to_token)) != len(idx_to_token):
        raise ValueError(f'{file_name} lists a token twice')
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
    if not os.path.isfile(path):
        return None
    try:
        with open(path, encoding='utf-8') as f:
            config = json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f'{path} is not valid JSON ({e})') from e
    if not isinstance(config, dict):
        raise ValueError(f'{path} must hold a JSON object')
    _check_config_types(path, config)
    return config


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
    dropout = config.get('dropout', 0)
    if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) \
            or not 0 <= dropout < 1:
        raise ValueError(
            f'{path}: dropout must be a number in [0, 1), got {dropout!r}; '
            'correct it, or re-run `d2l-bert pretrain`')


def damaged(params_file):
    """The ValueError for a parameter file MXNet cannot read (its own
    error is a C++ trace that names no file)."""
    return ValueError(f'{params_file} is corrupt or truncated; download it '
                      'again or re-run `d2l-bert pretrain`')


def is_mxnet_trace(error):
    """Whether `error` is MXNet's own, whose message is a C++ trace
    (Gluon raises some as a ValueError)."""
    return isinstance(error, mx.base.MXNetError) or (
        isinstance(error, ValueError) and 'MXNetError' in str(error))


def load_parameters(net, params_file, ctx):
    """``net.load_parameters(params_file, ctx=ctx)``, with `damaged`'s
    error for a file MXNet cannot read."""
    try:
        net.load_parameters(params_file, ctx=ctx)
    except (ValueError, mx.base.MXNetError) as e:
        if not is_mxnet_trace(e):
            raise
        raise damaged(params_file) from None


def infer_config(params_file):
    """Read the `BERTModel` arguments off the shapes in `params_file`.

    For directories without ``config.json`` (d2l's own `bert.small` and
    `bert.base`).  The heads are ``num_hiddens // HEAD_SIZE``; the
    dropout, which no file records, is 0.

    Returns
    -------
    dict
        vocab_size, num_hiddens, ffn_num_hiddens, num_heads, num_blks,
        dropout and max_len.
    """
    try:
        shapes = {k: v.shape for k, v in mx.nd.load(params_file).items()}
    except mx.base.MXNetError:
        raise damaged(params_file) from None
    try:
        vocab_size, num_hiddens = shapes['encoder.token_embedding.weight']
        max_len = shapes['encoder.pos_embedding'][1]
        ffn_num_hiddens = shapes['encoder.blks.0.ffn.dense1.weight'][0]
    except KeyError as e:
        raise ValueError(
            f'{params_file} holds no BERTModel parameter {e}') from None
    num_blks = len({k.split('.')[2] for k in shapes
                    if k.startswith('encoder.blks.')})
    return dict(vocab_size=vocab_size, num_hiddens=num_hiddens,
                ffn_num_hiddens=ffn_num_hiddens,
                num_heads=max(num_hiddens // HEAD_SIZE, 1),
                num_blks=num_blks, dropout=0.0, max_len=max_len)
