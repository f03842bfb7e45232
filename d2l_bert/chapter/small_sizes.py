"""Small sizes: the notebooks' cells at sizes a quick run can afford.

One mechanism, in the chapter runner and in a Jupyter kernel alike:
`SmallSizes` rewrites a cell's syntax tree.  It replaces the code of
`presets.SMALL_CODE` (the statements and expressions of the notebooks'
cells that set the book's sizes) by the small run's, and caps the step
count of every ``train_bert(...)`` call to `presets.SMALL_STEPS`.  The
runner applies it to each cell it compiles (`DataHooks.transform`); a
kernel gets it from `small_sizes_in_kernel`, which the notebooks' first
cell calls when `D2L_BERT_SMALL` is set, and there each cell whose code
was replaced prints what was, first.

A small run also seeds every random generator (`seed_small_run`) and
reads a small generated corpus in place of WikiText-2
(`small_wikitext`).
"""
import ast
import contextlib
import copy
import os

from ..presets import SMALL_CODE, SMALL_SEED, SMALL_STEPS, SMALL_WIKITEXT


class SmallSizes(ast.NodeTransformer):
    """Rewrite a cell's syntax tree to the small sizes.

    Each statement or expression that is, node for node, the code of a
    pair of `table` is replaced by the pair's small code; then the step
    count of each ``train_bert(a, b, c, d, e, n)`` call (or
    ``num_steps=n``) becomes ``min(n, steps)``.

    Parameters
    ----------
    steps : int or None, default `SMALL_STEPS`
        The cap; None leaves the step counts as they are.
    table : dict, default `SMALL_CODE`
        Lists of (book's code, small code) pairs, by notebook.
    announce : bool, default False
        Begin a tree whose code was replaced with a ``print`` of what was
        (in a kernel, where the cell shows it).

    Attributes
    ----------
    replaced : list of str
        After `visit` of a module: one line per pair replaced, in the
        table's order, naming the book's code and the small code (see the
        example).
    capped : bool
        Whether a step count was capped.

    Examples
    --------
    >>> sizes = SmallSizes()
    >>> tree = sizes.visit(ast.parse('lr, num_epochs = 1e-4, 5'))
    >>> ast.unparse(tree)
    'lr, num_epochs = (0.0001, 1)'
    >>> sizes.replaced
    ['small sizes: `lr, num_epochs = 1e-4, 5` -> `lr, num_epochs = 1e-4, 1`']
    """

    def __init__(self, steps=SMALL_STEPS, table=SMALL_CODE, announce=False):
        self.steps, self.announce = steps, announce
        pairs = [pair for pairs in table.values() for pair in pairs]
        self._pairs = {ast.dump(_node(book)): (k, book, _node(small))
                       for k, (book, small) in enumerate(pairs)}
        self._notes = [f'small sizes: `{book}` -> `{small}`'
                       for book, small in pairs]
        self._types = tuple({type(_node(book)) for book, _ in pairs})
        self._found, self.capped = set(), False

    @property
    def replaced(self):
        return [self._notes[k] for k in sorted(self._found)]

    def visit(self, node):
        if isinstance(node, self._types):
            found = self._pairs.get(ast.dump(node))
            if found is not None:
                k, _, small = found
                self._found.add(k)
                node = _located(small, node)
        return super().visit(node)

    def visit_Module(self, tree):
        self._found, self.capped = set(), False
        self.generic_visit(tree)
        if self.announce and self._found:
            text = '\n'.join(self.replaced)
            tree.body.insert(0, ast.parse(
                f'print({text!r}, flush=True)').body[0])
        return ast.fix_missing_locations(tree)

    def visit_Call(self, node):
        self.generic_visit(node)
        func = node.func
        name = (func.id if isinstance(func, ast.Name)
                else func.attr if isinstance(func, ast.Attribute) else None)
        if name != 'train_bert' or self.steps is None:
            return node
        if len(node.args) >= 6:
            node.args[5] = self._cap(node.args[5])
        for kw in node.keywords:
            if kw.arg == 'num_steps':
                kw.value = self._cap(kw.value)
        return node

    def _cap(self, node):
        self.capped = True
        return ast.Call(func=ast.Name('min', ast.Load()),
                        args=[node, ast.Constant(self.steps)], keywords=[])


def _node(code):
    """The one statement of `code`, or its expression if it is one."""
    body = ast.parse(code).body
    if len(body) != 1:
        raise ValueError(f'small sizes replace one statement or expression '
                         f'at a time, got {len(body)} in {code!r}')
    node, = body
    return node.value if isinstance(node, ast.Expr) else node


def _located(node, where):
    """A copy of `node`, every part of it at the place of `where`."""
    node = copy.deepcopy(node)
    for part in ast.walk(node):
        if 'lineno' in part._attributes:
            for name in ('lineno', 'col_offset', 'end_lineno',
                         'end_col_offset'):
                setattr(part, name, getattr(where, name, None))
    return node


def small_wikitext(folder):
    """Fill `folder` with `SMALL_WIKITEXT`'s corpus: WikiText-2's stand-in
    at small sizes (`data.hub.STAND_INS`); return it and what it is."""
    from ..data import corpus
    from ..data.atomic import atomic_write
    for split, (num_articles, seed) in SMALL_WIKITEXT.items():
        path = os.path.join(folder, corpus.FILE_NAMES[split])
        if not os.path.isfile(path):
            atomic_write(path, corpus.generate(num_articles, seed))
    return folder, (f"a corpus of {SMALL_WIKITEXT['train'][0]} generated "
                    'articles (small sizes)')


@contextlib.contextmanager
def small_wikitext_stand_in():
    """While in this context, `small_wikitext` stands in for WikiText-2."""
    from ..data import hub
    before = hub.STAND_INS.get('wikitext-2')
    hub.STAND_INS['wikitext-2'] = small_wikitext
    try:
        yield
    finally:
        hub.STAND_INS['wikitext-2'] = before


def seed_small_run():
    """Seed every random generator (Python's, NumPy's, MXNet's) with
    `SMALL_SEED`, so that a small run gives the same numbers each time."""
    from ..runs.seeding import seed_everything
    seed_everything(SMALL_SEED)


def small_sizes_in_kernel(shell=None):
    """Make an IPython kernel run the notebooks' cells at small sizes.

    What the chapter runner does at small sizes, for a kernel (the test
    suite executes the notebooks in one): each cell's syntax tree goes
    through `SmallSizes` (its `SMALL_CODE` replaced, ``train_bert(...)``
    step counts capped to `SMALL_STEPS`; a cell whose code was replaced
    prints what was, first), the random generators are seeded, and a
    small corpus stands in for WikiText-2 (`small_wikitext`).  The
    set-up cell calls it when `D2L_BERT_SMALL` is set
    (`hosted.in_kernel`, which also makes d2l's data loaders start no
    worker process, at every size).

    Parameters
    ----------
    shell : IPython.core.interactiveshell.InteractiveShell, optional
        Default: the running one; outside IPython nothing is done.

    Returns
    -------
    bool
        Whether the kernel's cells now run at small sizes.
    """
    if shell is None:
        try:
            shell = get_ipython()  # noqa: F821  (IPython's builtin)
        except NameError:
            return False
    if any(isinstance(t, SmallSizes) for t in shell.ast_transformers):
        return True
    shell.ast_transformers.append(SmallSizes(SMALL_STEPS, announce=True))
    seed_small_run()
    # for the kernel's life (a context entered here would be left as soon
    # as its object is collected, at once)
    from ..data import hub
    hub.STAND_INS['wikitext-2'] = small_wikitext
    return True
