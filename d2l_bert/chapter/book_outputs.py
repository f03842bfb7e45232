"""What the book prints, cell by cell, and how our runs are held to it.

The markdown sources of the book carry no outputs; the rendered MXNet
notebooks of release 1.0.3 do.  `DOCUMENTED` lists those outputs for the
chapter's sections, as data.  A cell is recognised by its content, never
by its position, because editions add and drop cells: each entry names the
cell's final expression and/or fragments of code it contains, compared on
the normalized code (comments, blank space and quote style removed).

Each entry also says how a run is compared with it:

``exact``
    The text must be the same (shapes, printed once the model is built).
``batch``
    Shapes whose leading dimension is the batch size: the other dimensions
    must be the same, and all leading dimensions must agree with each other
    (a small corpus or a small batch gives a shorter first batch).
``shapes``
    The shapes in the text must be the same; the numbers beside them come
    from training and are only shown, so that a run whose shapes are the
    book's is ``shown``, never ``ok``, and one whose shapes differ is a
    mismatch.
``shown``
    Only shown beside ours: trained losses, throughput, or values that
    depend on the data (a vocabulary built from another corpus).
"""
import ast
import io
import re
import tokenize
from dataclasses import dataclass

MODES = ('exact', 'batch', 'shapes', 'shown')


@dataclass(frozen=True)
class Documented:
    """One output of the rendered book.

    Attributes
    ----------
    label : str
        The section's label (``'sec_bert'``).
    cell : int
        Its code cell in the book's MXNet notebook, counted from 1.
    prints : str
        What the book prints.
    mode : str
        How a run is compared with it: one of `MODES`.
    final : str or None
        The cell's final expression, normalized (see `normalize`).
    contains : tuple of str
        Normalized fragments the cell's code contains.
    why : str
        For outputs that are not compared exactly, the reason.
    """
    label: str
    cell: int
    prints: str
    mode: str
    final: str = None
    contains: tuple = ()
    why: str = ''

    def matches(self, code):
        """Return True if `code` is this entry's cell (by its content)."""
        if self.final is not None and final_expression(code) != self.final:
            return False
        text = normalize(code)
        return all(fragment in text for fragment in self.contains)


_TRAINED = 'the numbers come from training (data, seed, devices)'

DOCUMENTED = (
    # sec_bert: the five shapes every release and translation prints
    Documented('sec_bert', 5, '(2, 8, 768)', 'exact',
               final='encoded_X.shape'),
    Documented('sec_bert', 7, '(2, 3, 10000)', 'exact',
               final='mlm_Y_hat.shape'),
    Documented('sec_bert', 8, '(6,)', 'exact', final='mlm_l.shape'),
    # `nn.Dense(2)` flattens the 3-D `encoded_X` (flatten=True)
    Documented('sec_bert', 10, '(2, 2)', 'exact', final='nsp_Y_hat.shape'),
    Documented('sec_bert', 11, '(2,)', 'exact', final='nsp_l.shape'),
    # sec_bert-dataset
    Documented('sec_bert-dataset', 10,
               '(512, 64) (512, 64) (512,) (512, 10) (512, 10) (512, 10) '
               '(512,)', 'batch',
               contains=('load_data_wiki(batch_size,max_len)',
                         'print(tokens_X.shape,')),
    Documented('sec_bert-dataset', 11, '20256', 'shown',
               final='len(vocab)',
               why='vocabulary of WikiText-2 (train split, min_freq 5); '
                   'another corpus gives another size'),
    # sec_bert-pretraining
    Documented('sec_bert-pretraining', 6,
               'MLM loss 7.292, NSP loss 0.822\n'
               '2417.3 sentence pairs/sec on [gpu(0), gpu(1)]', 'shown',
               contains=('train_bert(train_iter,net,loss,len(vocab),'
                         'devices,',),
               why=_TRAINED + '; throughput depends on the hardware'),
    Documented('sec_bert-pretraining', 8,
               '((1, 6, 128), (1, 128), '
               'array([-1.2760178, -0.79205, -1.0534445]))', 'shapes',
               final='(encoded_text.shape,encoded_text_cls.shape,'
                     'encoded_text_crane[0][:3])',
               why=_TRAINED),
    Documented('sec_bert-pretraining', 9,
               '((1, 10, 128), (1, 128), '
               'array([-1.2759778, -0.79211384, -1.0534613]))', 'shapes',
               final='(encoded_pair.shape,encoded_pair_cls.shape,'
                     'encoded_pair_crane[0][:3])',
               why=_TRAINED),
    # sec_natural-language-inference-bert
    Documented('sec_natural-language-inference-bert', 6,
               'read 549367 examples\nread 9824 examples', 'shown',
               contains=('SNLIBERTDataset(', 'read_snli(data_dir,True)'),
               why='counts of the SNLI files; other data gives others'),
    Documented('sec_natural-language-inference-bert', 9,
               'loss 0.477, train acc 0.811, test acc 0.789\n'
               '4652.5 examples/sec on [gpu(0), gpu(1)]', 'shown',
               contains=('train_ch13(',),
               why=_TRAINED + '; throughput depends on the hardware'),
)


def documented(label, code):
    """Return the `Documented` entry of `label` whose cell `code` is, or
    None."""
    for entry in DOCUMENTED:
        if entry.label == label and entry.matches(code):
            return entry
    return None


def labels():
    """Return the section labels the table knows, in the book's order."""
    seen = []
    for entry in DOCUMENTED:
        if entry.label not in seen:
            seen.append(entry.label)
    return seen


# --- normalizing code --------------------------------------------------------

_SKIP = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
         tokenize.DEDENT, tokenize.ENCODING, tokenize.ENDMARKER}


def normalize(code):
    """Return `code` without comments, blank space or quote style.

    ``x = f( 'a' )  # note`` and ``x=f("a")`` both give ``x=f('a')``.
    Code that does not tokenize loses only its blank space.
    """
    try:
        parts = []
        for tok in tokenize.generate_tokens(io.StringIO(code).readline):
            if tok.type in _SKIP:
                continue
            text = tok.string
            if tok.type == tokenize.STRING:
                try:
                    text = repr(ast.literal_eval(text))
                except (ValueError, SyntaxError):
                    pass
            parts.append(text)
        return ''.join(parts)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return re.sub(r'\s+', '', code)


def final_expression(code):
    """Return the normalized final expression of `code`, or None if the
    code does not parse or does not end with an expression."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    if not tree.body or not isinstance(tree.body[-1], ast.Expr):
        return None
    return normalize(ast.unparse(tree.body[-1].value))


# --- comparing outputs -------------------------------------------------------

# Lines that are not part of an output: MXNet's storage manager and
# download messages, which the book's tables leave out
_NOISE = re.compile(
    r'^\s*(\[\d\d:\d\d:\d\d\] .*(StorageManager|storage\.cc).*'
    r'|Downloading .* from .*)\s*$')
_SHAPE = re.compile(r'\((\d+(?:,\s*\d+)*),?\s*\)')


def clean(text):
    """Return `text` without noise lines, with blank space collapsed."""
    lines = [line for line in (text or '').splitlines()
             if not _NOISE.match(line)]
    return ' '.join(' '.join(lines).split())


def shapes(text):
    """Return the tuples of integers in `text`, as tuples."""
    return [tuple(int(d) for d in m.group(1).split(','))
            for m in _SHAPE.finditer(text)]


def guess_mode(text):
    """How to compare an output an edition carries but the table lacks:
    ``'exact'`` unless it holds decimals (trained numbers), ``'shown'``."""
    return 'shown' if re.search(r'\d\.\d', text or '') else 'exact'


def compare(expected, actual, mode):
    """Compare a run's output with a documented one.

    Parameters
    ----------
    expected, actual : str
        The documented output and ours.
    mode : str
        One of `MODES`.

    Returns
    -------
    str
        ``'match'``, ``'mismatch'`` or ``'shown'``.
    """
    if mode not in MODES:
        raise ValueError(f'mode must be one of {MODES}, got {mode!r}')
    expected, actual = clean(expected), clean(actual)
    if mode == 'shown':
        return 'shown'
    if mode == 'exact':
        return 'match' if expected == actual else 'mismatch'
    want, got = shapes(expected), shapes(actual)
    if mode == 'shapes':
        return 'shown' if want == got and want else 'mismatch'
    # 'batch': same shapes but for one common leading dimension
    same_rest = [w[1:] for w in want] == [g[1:] for g in got]
    batches = {g[0] for g in got if g}
    rest_text = _SHAPE.sub('()', expected) == _SHAPE.sub('()', actual)
    ok = want and same_rest and len(batches) == 1 and rest_text
    return 'match' if ok else 'mismatch'
