"""The files of a d2l BERT directory, as the book's `bert.small` holds them.

``pretrained.params`` (a `BERTModel`'s parameters, by structural name),
``vocab.json`` (the tokens in index order) and, written by
``d2l-bert pretrain``, ``config.json`` (the `BERTModel` arguments).

`save_pretrained` writes such a directory and `load_pretrained` reads it
back, whole; `D2LTextEncoder` encodes raw text with the model in it (the
``d2l-bert encode`` command).  The fine-tuning section reads it with the
book's `load_pretrained_model`.  All of them read the files with
`load_vocab`, `read_config` and `infer_config`.
"""
import json
import os

import mxnet as mx
from mxnet import np

from ..book.bert import BERTModel, get_tokens_and_segments
from ..checks import check_inputs
from ..data.atomic import atomic_write_all
from ..data.model_dir import (  # noqa: F401  (read here, and by users)
    CONFIG_FILE, HEAD_SIZE, PARAMS_FILE, SIZE_KEYS, VOCAB_FILE,
    infer_config, load_parameters, load_vocab, read_config, read_params)
from .memory import available_bytes, size_text

# ---------------------------------------------------------------------------
# Saving and loading a pretrained model (d2l's `bert.small` layout)
# ---------------------------------------------------------------------------

MODEL_KEYS = ('vocab_size', 'num_hiddens', 'ffn_num_hiddens', 'num_heads',
              'num_blks', 'dropout', 'max_len')


def save_pretrained(net, vocab, model_dir, config, replacing=()):
    """Save `net` and `vocab` where the book's `load_pretrained_model`
    can read them.

    Writes, all or none (`atomic_write_all`; a full disk at any of
    them leaves the old files as they were): ``vocab.json`` (the list
    ``vocab.idx_to_token``), ``config.json`` (`config`: the `BERTModel`
    arguments, see `MODEL_KEYS`, and anything else worth keeping, such
    as the pretraining settings) and, last, ``pretrained.params``
    (`net.save_parameters`), which marks a finished model.

    Parameters
    ----------
    net : BERTModel
        The model to save.
    vocab : Vocab
        Its vocabulary.
    model_dir : str
        Created if missing.
    config : dict
        Must hold every key of `MODEL_KEYS`.
    replacing : sequence of str
        Files removed once the new ones are written (another model's).

    Returns
    -------
    str
        `model_dir`.
    """
    missing = [k for k in MODEL_KEYS if k not in config]
    if missing:
        raise ValueError(f'config lacks {missing}; it needs {MODEL_KEYS}')
    if config['vocab_size'] != len(vocab):
        raise ValueError(f"config['vocab_size'] is {config['vocab_size']} "
                         f'but vocab has {len(vocab)} tokens')
    os.makedirs(model_dir, exist_ok=True)
    # All or none; the parameters, which mark a finished model, last
    params_file = os.path.join(model_dir, PARAMS_FILE)
    atomic_write_all(
        [(os.path.join(model_dir, VOCAB_FILE),
          json.dumps(list(vocab.idx_to_token))),
         (os.path.join(model_dir, CONFIG_FILE), json.dumps(config, indent=2)),
         (params_file, net.save_parameters)],
        remove_first=[params_file, *replacing])
    return model_dir


def load_pretrained(model_dir, devices=None):
    """Load a model saved by `save_pretrained` (or d2l's ``bert.small``).

    Parameters
    ----------
    model_dir : str
        Holds ``pretrained.params`` and ``vocab.json``; ``config.json``
        if present gives the `BERTModel` arguments, otherwise they are
        read off the parameter shapes.
    devices : list of mxnet.Context, optional
        Default ``[mx.cpu()]``.

    Returns
    -------
    net : BERTModel
    vocab : d2l.Vocab
    config : dict
    """
    devices = list(devices) if devices else [mx.cpu()]
    if not os.path.isdir(model_dir):
        raise FileNotFoundError(f'model directory {model_dir!r} does not '
                                'exist')
    for name in (PARAMS_FILE, VOCAB_FILE):
        if not os.path.isfile(os.path.join(model_dir, name)):
            raise FileNotFoundError(
                f'{model_dir!r} has no {name}: a d2l BERT directory holds '
                f'{PARAMS_FILE} and {VOCAB_FILE} (d2l-bert pretrain --out '
                'writes one)')
    params_file = os.path.join(model_dir, PARAMS_FILE)
    params = read_params(params_file)
    saved = read_config(model_dir)
    config = saved or infer_config(params_file)
    vocab = load_vocab(os.path.join(model_dir, VOCAB_FILE))
    check_vocab_size(model_dir, len(vocab), saved or {}, params)
    check_memory(params_file, params)
    net = BERTModel(len(vocab), config['num_hiddens'],
                    config['ffn_num_hiddens'], config['num_heads'],
                    config['num_blks'], config['dropout'], config['max_len'])
    sizes = ', '.join(f'{k}={config[k]}' for k in SIZE_KEYS[1:]
                      if k in config)
    load_parameters(net, params_file, devices,
                    f'the sizes of {CONFIG_FILE} ({sizes})')
    return check_inputs(net), vocab, config


def check_vocab_size(model_dir, vocab_size, config, params):
    """Raise a ValueError unless ``vocab.json``'s `vocab_size` tokens are
    the rows of the token embedding in `params` (`read_params`') and the
    ``vocab_size`` of `config`, if it has one."""
    if config.get('vocab_size', vocab_size) != vocab_size:
        raise ValueError(
            f'{model_dir}: {VOCAB_FILE} has {vocab_size} tokens but '
            f'{CONFIG_FILE} says vocab_size={config["vocab_size"]}')
    embedding = params.get('encoder.token_embedding.weight')
    rows = embedding.shape[:1] if embedding is not None else ()
    if rows and rows != (vocab_size,):
        raise ValueError(
            f'{model_dir}: {VOCAB_FILE} has {vocab_size} tokens but '
            f'{PARAMS_FILE} embeds {rows[0]} (its '
            f'encoder.token_embedding.weight has shape {embedding.shape}): '
            'the two files are not of one model')


def check_memory(params_file, params):
    """Raise a ValueError if the arrays of `params` (`read_params`' of
    `params_file`) take more memory than this machine has available."""
    need = sum(array.nbytes for array in params.values())
    available = available_bytes()
    if available is not None and need > available:
        raise ValueError(
            f'{params_file}: its parameters take {size_text(need)} of '
            f'memory, and this machine has {size_text(available)} '
            'available')


class D2LTextEncoder:
    """Encode raw text with a BERT saved in the d2l layout.

    Text is lower-cased and split on white space, as the book's data
    pipeline does; words outside the vocabulary become `<unk>`.

    Parameters
    ----------
    model_dir : str
        A directory as `save_pretrained` writes it.
    ctx : mxnet.Context, optional
        Where the model runs; default the CPU.
    """

    def __init__(self, model_dir, ctx=None):
        self.ctx = ctx if ctx is not None else mx.cpu()
        self.net, self.vocab, self.config = load_pretrained(
            model_dir, [self.ctx])
        self.max_len = self.config['max_len']

    @staticmethod
    def tokenize(text):
        return text.lower().split()

    def encode(self, text_a, text_b=None):
        """Encode one text or a pair.

        Returns
        -------
        tokens : list of str
            With `<cls>` and `<sep>`; unknown words as `<unk>`.
        encoded : numpy.ndarray, float32, shape (T, H)
        pooled : numpy.ndarray, float32, shape (H,)
            ``net.hidden`` of the `<cls>` vector, the input of the NSP
            classifier.
        """
        tokens_a = self.tokenize(text_a)
        tokens_b = None if text_b is None else self.tokenize(text_b)
        num_tokens = len(tokens_a) + 2 + (
            0 if tokens_b is None else len(tokens_b) + 1)
        if num_tokens > self.max_len:
            raise ValueError(f'the text has {num_tokens} tokens with <cls> '
                             f'and <sep>; the model takes at most '
                             f'{self.max_len}')
        encoded_X = encode_tokens(self.net, tokens_a, tokens_b,
                                  vocab=self.vocab,
                                  devices=[self.ctx])  # (1, T, H)
        pooled = self.net.hidden(encoded_X[:, 0, :])       # (1, H)
        tokens, _ = get_tokens_and_segments(tokens_a, tokens_b)
        unk = self.vocab.unk
        tokens = [t if self.vocab[t] != unk else '<unk>' for t in tokens]
        return (tokens, encoded_X[0].asnumpy(),             # (T, H)
                pooled[0].asnumpy())                        # (H,)


# The representation of a text (pair): the book's `get_bert_encoding`
# with its globals as arguments

def _net_context(net):
    for param in net.collect_params().values():
        try:
            return param.list_ctx()[0]
        except RuntimeError:  # not initialized yet
            continue
    raise ValueError('net has no initialized parameter: initialize it or '
                     'load parameters first')


def _check_vocab(net, vocab):
    """Raise when `vocab` is missing or not the size of `net`'s token
    embedding."""
    if vocab is None:
        raise TypeError('encode_tokens needs vocab=, the vocabulary '
                        'the net was trained with')
    embedded = net.encoder.token_embedding.weight.shape[0]
    if len(vocab) != embedded:
        raise ValueError(f'vocab has {len(vocab)} tokens but the net embeds '
                         f'{embedded}: pass the vocabulary the net was '
                         'trained with')


def encode_tokens(net, tokens_a, tokens_b=None, *, vocab=None,
                  devices=None):
    """Return BERT's representation of every token of a text (pair).

    The book's `get_bert_encoding` (:numref:`sec_bert-pretraining`),
    which reads `vocab` and `devices` from the notebook's globals, with
    them as keyword arguments and checked.

    Parameters
    ----------
    net : BERTModel
        A pretrained model.
    tokens_a : list of str
        Tokens of the first text.
    tokens_b : list of str, optional
        Tokens of the second text of a pair.
    vocab : Vocab, keyword-only
        The vocabulary `net` was trained with (required).
    devices : list of mxnet.Context, keyword-only, optional
        The input goes to ``devices[0]``; by default the context of
        `net`'s parameters.

    Returns
    -------
    ndarray, float32, shape (1, T, H)
        ``T = len(tokens_a) + 2``, plus ``len(tokens_b) + 1`` for a pair;
        position 0 is `<cls>`.
    """
    _check_vocab(net, vocab)
    ctx = devices[0] if devices else _net_context(net)
    tokens, segments = get_tokens_and_segments(tokens_a, tokens_b)
    token_ids = np.expand_dims(np.array(vocab[tokens], ctx=ctx),
                               axis=0)                          # (1, T)
    segments = np.expand_dims(np.array(segments, ctx=ctx), axis=0)  # (1, T)
    valid_len = np.expand_dims(np.array(len(tokens), ctx=ctx),
                               axis=0)                          # (1,)
    encoded_X, _, _ = net(token_ids, segments, valid_len)       # (1, T, H)
    return encoded_X
