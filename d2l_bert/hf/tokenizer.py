"""The checkpoint's tokenizer, from the `tokenizers` library.

`load_tokenizer` reads ``tokenizer.json`` when the checkpoint has one
(the tokenizer transformers saves, added tokens and normalizer included),
else builds BERT's WordPiece tokenizer from ``vocab.txt``
(`load_wordpiece_tokenizer`).  Either file is read only if it is a
regular file of at most `MAX_TOKENIZER_BYTES`, whose tables fit in the
memory available, and ``vocab.txt`` only if it holds no more tokens than
the model embeds.
"""
import os

from ..data.bounded import check_regular, read_bounded
from .errors import CheckpointError, check_memory
from .files import read_json

#: The largest tokenizer.json or vocab.txt read (BERT's are under 1 MB,
#: a multilingual model's tokenizer.json some 20 MB)
MAX_TOKENIZER_BYTES = 128 << 20
#: How many times its size a tokenizer.json takes in memory, at least
TOKENIZER_MEMORY = 8

SPECIAL_TOKENS = {'unk_token': '[UNK]', 'sep_token': '[SEP]',
                  'cls_token': '[CLS]', 'pad_token': '[PAD]',
                  'mask_token': '[MASK]'}


def load_tokenizer(model_dir, max_tokens=None):
    """Return the checkpoint's tokenizer and the file it comes from.

    ``tokenizer.json`` is preferred when present, as transformers does;
    its truncation and padding settings are dropped (the caller cuts and
    pads), and padding uses the ``pad_token`` of
    ``tokenizer_config.json`` (default ``[PAD]``).

    Parameters
    ----------
    model_dir : str
        The checkpoint directory.
    max_tokens : int, optional
        The most tokens ``vocab.txt`` may hold (config.json's
        vocab_size).

    Returns
    -------
    tokenizer : tokenizers.Tokenizer
        Its ``encode(text_a, text_b)`` gives `tokens`, `ids` and the
        segment ids `type_ids`.
    path : str
        ``tokenizer.json`` or ``vocab.txt``.

    Raises
    ------
    FileNotFoundError
        Neither file is there.
    CheckpointError
        ``tokenizer.json`` cannot be read, or a special token is missing.
    """
    path = os.path.join(model_dir, 'tokenizer.json')
    if not os.path.isfile(path):
        vocab_path = os.path.join(model_dir, 'vocab.txt')
        if not os.path.isfile(vocab_path):
            raise FileNotFoundError(
                f'{model_dir} has no tokenizer: expected tokenizer.json or '
                f'vocab.txt (the WordPiece vocabulary, one token a line)')
        return load_wordpiece_tokenizer(model_dir, max_tokens), vocab_path
    from tokenizers import Tokenizer
    size = check_regular(path, MAX_TOKENIZER_BYTES, CheckpointError)
    check_memory(path, TOKENIZER_MEMORY * size, 'the tables of the '
                 'tokenizer it holds')
    try:
        tokenizer = Tokenizer.from_file(path)
    except Exception as e:  # the library raises Exception itself
        raise CheckpointError(f'{path} cannot be read by tokenizers: '
                              f'{e}') from None
    tokenizer.no_truncation()
    tokenizer.no_padding()
    pad = _special_tokens(read_tokenizer_config(model_dir),
                          model_dir)['pad_token']
    pad_id = tokenizer.token_to_id(pad)
    if pad_id is None:
        raise CheckpointError(f'{path} lacks the padding token {pad!r} '
                              f'(pad_token)')
    tokenizer.enable_padding(pad_id=pad_id, pad_token=pad)
    return tokenizer, path


def read_tokenizer_config(model_dir):
    """``tokenizer_config.json`` as a dict ({} without the file)."""
    config_path = os.path.join(model_dir, 'tokenizer_config.json')
    if not os.path.lexists(config_path):
        return {}
    settings = read_json(config_path)
    for key, allowed in (('do_lower_case', (bool,)),
                         ('tokenize_chinese_chars', (bool,)),
                         ('strip_accents', (bool, type(None)))):
        if key in settings and not isinstance(settings[key], allowed):
            raise CheckpointError(
                f'{config_path}: {key} must be true or false'
                f'{" or null" if len(allowed) > 1 else ""}, got '
                f'{settings[key]!r:.60}')
    return settings


def _special_tokens(settings, model_dir):
    """The special tokens of tokenizer settings, by `SPECIAL_TOKENS` key."""
    special = {}
    for key, default in SPECIAL_TOKENS.items():
        value = settings.get(key) or default
        token = value.get('content') if isinstance(value, dict) else value
        if not isinstance(token, str):
            raise CheckpointError(
                f'{os.path.join(model_dir, "tokenizer_config.json")}: '
                f'{key} must be a token (a string), got {value!r:.60}')
        special[key] = token
    return special


def load_wordpiece_tokenizer(model_dir, max_tokens=None):
    """Build the checkpoint's WordPiece tokenizer from ``vocab.txt``.

    The pieces are those of BERT's tokenizer, from the `tokenizers`
    library: clean the text, split off Chinese characters, lower-case and
    strip accents; split at spaces and punctuation; cut each word into the
    longest vocabulary pieces (``##`` marks a piece inside a word); add
    ``[CLS]`` and ``[SEP]``.  Lower-casing and accent stripping follow
    ``tokenizer_config.json`` (``do_lower_case``, default True as in
    transformers' `BertTokenizer`; ``strip_accents``, default: as
    lower-casing).  `max_tokens`: the most tokens ``vocab.txt`` may
    hold.

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
    settings = read_tokenizer_config(model_dir)
    special = _special_tokens(settings, model_dir)
    vocab = read_vocab(vocab_path, max_tokens)
    for key, token in special.items():
        if token not in vocab:
            raise CheckpointError(f'{vocab_path} lacks the special token '
                                  f'{token!r} ({key})')
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


def read_vocab(vocab_path, max_tokens=None):
    """Return a WordPiece vocabulary file as a dict token -> id; refuse
    one of more than `max_tokens` tokens before it is split."""
    data = read_bounded(vocab_path, MAX_TOKENIZER_BYTES, CheckpointError)
    count = data.count(b'\n') + (not data.endswith(b'\n'))
    if max_tokens is not None and count > max_tokens:
        raise CheckpointError(f'{vocab_path} has {count} tokens, more than '
                              f'vocab_size={max_tokens} in config.json')
    try:
        tokens = data.decode('utf-8').split('\n')
    except UnicodeDecodeError as e:
        raise CheckpointError(f'{vocab_path} is not UTF-8 text: {e}') \
            from None
    if tokens and tokens[-1] == '':
        tokens.pop()
    if not tokens:
        raise CheckpointError(f'{vocab_path} is empty')
    return {token: i for i, token in enumerate(tokens)}
