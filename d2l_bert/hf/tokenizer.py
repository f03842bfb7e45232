"""The checkpoint's tokenizer, from the `tokenizers` library.

`load_tokenizer` reads ``tokenizer.json`` when the checkpoint has one
(the tokenizer transformers saves, added tokens and normalizer included),
else builds BERT's WordPiece tokenizer from ``vocab.txt``
(`load_wordpiece_tokenizer`).
"""
import json
import os

from .files import CheckpointError

SPECIAL_TOKENS = {'unk_token': '[UNK]', 'sep_token': '[SEP]',
                  'cls_token': '[CLS]', 'pad_token': '[PAD]',
                  'mask_token': '[MASK]'}


def load_tokenizer(model_dir):
    """Return the checkpoint's tokenizer and the file it comes from.

    ``tokenizer.json`` is preferred when present, as transformers does;
    its truncation and padding settings are dropped (the caller cuts and
    pads), and padding uses the ``pad_token`` of
    ``tokenizer_config.json`` (default ``[PAD]``).

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
        return load_wordpiece_tokenizer(model_dir), vocab_path
    from tokenizers import Tokenizer
    try:
        tokenizer = Tokenizer.from_file(path)
    except Exception as e:  # the library raises Exception itself
        raise CheckpointError(f'{path} cannot be read by tokenizers: '
                              f'{e}') from None
    tokenizer.no_truncation()
    tokenizer.no_padding()
    pad = _special_tokens(read_tokenizer_config(model_dir))['pad_token']
    pad_id = tokenizer.token_to_id(pad)
    if pad_id is None:
        raise CheckpointError(f'{path} lacks the padding token {pad!r} '
                              f'(pad_token)')
    tokenizer.enable_padding(pad_id=pad_id, pad_token=pad)
    return tokenizer, path


def read_tokenizer_config(model_dir):
    """``tokenizer_config.json`` as a dict ({} without the file)."""
    config_path = os.path.join(model_dir, 'tokenizer_config.json')
    if not os.path.isfile(config_path):
        return {}
    try:
        with open(config_path, encoding='utf-8') as f:
            return json.load(f)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CheckpointError(f'{config_path} is not valid JSON: '
                              f'{e}') from None


def _special_tokens(settings):
    """The special tokens of tokenizer settings, by `SPECIAL_TOKENS` key."""
    special = {}
    for key, default in SPECIAL_TOKENS.items():
        value = settings.get(key) or default
        special[key] = value['content'] if isinstance(value, dict) else value
    return special


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
    settings = read_tokenizer_config(model_dir)
    special = _special_tokens(settings)
    vocab = read_vocab(vocab_path)
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
