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

from .bert import BERTModel, get_tokens_and_segments
from .files import atomic_write
from .pretraining import get_bert_encoding

PARAMS_FILE, VOCAB_FILE, CONFIG_FILE = ('pretrained.params', 'vocab.json',
                                        'config.json')

#: BERT's size of one attention head: the number of heads does not show
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


def read_config(model_dir):
    """Return the dict in ``model_dir/config.json``, or None without one."""
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
    return config


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
    except mx.base.MXNetError as e:
        raise ValueError(
            f'{params_file} is corrupt or truncated; download it again or '
            're-run `d2l-bert pretrain`') from e
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


# ---------------------------------------------------------------------------
# Saving and loading a pretrained model (d2l's `bert.small` layout)
# ---------------------------------------------------------------------------

MODEL_KEYS = ('vocab_size', 'num_hiddens', 'ffn_num_hiddens', 'num_heads',
              'num_blks', 'dropout', 'max_len')


def save_pretrained(net, vocab, model_dir, config):
    """Save `net` and `vocab` where the book's `load_pretrained_model`
    can read them.

    Writes, each atomically: ``pretrained.params`` (`net.save_parameters`),
    ``vocab.json`` (the list ``vocab.idx_to_token``) and ``config.json``
    (`config`: the `BERTModel` arguments, see `MODEL_KEYS`, and anything
    else worth keeping, such as the pretraining settings).

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
    atomic_write(os.path.join(model_dir, PARAMS_FILE), net.save_parameters)
    atomic_write(os.path.join(model_dir, VOCAB_FILE),
                 json.dumps(list(vocab.idx_to_token)))
    atomic_write(os.path.join(model_dir, CONFIG_FILE),
                 json.dumps(config, indent=2))
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
    config = read_config(model_dir) or infer_config(params_file)
    vocab = load_vocab(os.path.join(model_dir, VOCAB_FILE))
    net = BERTModel(len(vocab), config['num_hiddens'],
                    config['ffn_num_hiddens'], config['num_heads'],
                    config['num_blks'], config['dropout'], config['max_len'])
    net.load_parameters(params_file, ctx=devices)
    return net, vocab, config


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
        encoded_X = get_bert_encoding(self.net, tokens_a, tokens_b,
                                      vocab=self.vocab,
                                      devices=[self.ctx])  # (1, T, H)
        pooled = self.net.hidden(encoded_X[:, 0, :])       # (1, H)
        tokens, _ = get_tokens_and_segments(tokens_a, tokens_b)
        unk = self.vocab.unk
        tokens = [t if self.vocab[t] != unk else '<unk>' for t in tokens]
        return (tokens, encoded_X[0].asnumpy(),             # (T, H)
                pooled[0].asnumpy())                        # (H,)
