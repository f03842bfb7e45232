"""``d2l-bert encode --attention FILE``: what each head attends to, drawn.

The attention weights of one text (or pair), from one forward pass of
the book's blocks (`d2l_bert.views.show_bert_attention`), saved as a PNG
or SVG picture: a row a block, a column a head.
"""
import argparse
import os

from ._paths import output_file

#: The pictures ``--attention`` writes, by the file's suffix
FORMATS = {'.png': 'png', '.svg': 'svg'}


def picture_file(text):
    """A validator of ``--attention``: a .png or .svg file to write."""
    suffix = os.path.splitext(text)[1].lower()
    if suffix not in FORMATS:
        raise argparse.ArgumentTypeError(
            f'must name a .png or .svg file, got {text!r}')
    return output_file(suffix)(text)


def numbers(text):
    """A validator of ``--layers`` and ``--heads``: ``0,2,5``."""
    try:
        found = [int(part) for part in text.split(',')]
    except ValueError:
        found = []
    if not found or min(found) < 0:
        raise argparse.ArgumentTypeError(
            f'must be numbers from 0 separated by commas (0,2,5), got '
            f'{text!r}')
    return found


def add_arguments(parser):
    group = parser.add_argument_group('attention')
    group.add_argument(
        '--attention', metavar='FILE.png|FILE.svg', type=picture_file,
        help="draw what each head of each block attends to in TEXT (and "
             'TEXT_B), one row a block and one column a head, into FILE '
             '(an existing FILE is replaced only with --overwrite)')
    group.add_argument('--layers', type=numbers, metavar='0,2,5',
                       help='with --attention: the blocks to draw '
                            '(default: all, thinned for a long text)')
    group.add_argument('--heads', type=numbers, metavar='0,1',
                       help='with --attention: the heads to draw (default: '
                            'all, thinned for a long text)')


def usage_problem(args):
    """What is wrong with the attention options of `args`, or None."""
    if args.attention is None:
        if args.layers is not None or args.heads is not None:
            return '--layers and --heads go with --attention FILE'
        return None
    if args.file is not None or args.compare is not None or args.json:
        return ('--attention draws one text (and TEXT_B): give no --file, '
                '--compare or --json with it')
    if os.path.lexists(args.attention) and not args.overwrite:
        return (f'--attention {args.attention} exists, and this run would '
                'replace it: give --overwrite to replace it, or another '
                'file')
    return None


def draw(encoder, texts, path, layers=None, heads=None):
    """Draw the attention of `texts` (one or two) by `encoder` (what
    `encode.load_text_encoder` returns) into `path`, atomically; say
    where in one line."""
    from ..data.atomic import atomic_write
    from ..views import show_bert_attention
    if hasattr(encoder, 'net') and hasattr(encoder, 'vocab'):
        # a model in the d2l layout: the book's token lists
        maps = show_bert_attention(encoder.net, encoder.vocab,
                                   *[encoder.tokenize(t) for t in texts],
                                   layers=layers, heads=heads)
    else:
        maps = show_bert_attention(encoder, None, *texts, layers=layers,
                                   heads=heads)
    kind = FORMATS[os.path.splitext(path)[1].lower()]
    atomic_write(path, lambda tmp: maps.figure.savefig(
        tmp, format=kind, dpi=120, bbox_inches='tight'))
    print(f'attention of {len(maps.tokens)} tokens, blocks {maps.layers} '
          f'and heads {maps.heads}, drawn into {path}')
