"""Run a chapter's code cells in order, in one namespace, as a notebook would.

`d2l-bert chapter` and `d2l-bert check-text` both stand on this module.
Each cell is executed in a namespace shared with the cells before it; the
value of a final expression is displayed with `repr`, as IPython does, and
whatever the cell prints is captured.  A failing cell is reported with the
last line of its error (``sys.exit()`` too), and the next cells still run.

The namespace holds a `d2l` module that resolves each name to this
package's object first (the public names of `d2l_bert` and its section
modules) and to the real d2l 1.0.3 (``from d2l import mxnet as d2l``) for
everything else, so cells of both naming generations run
(``d2l.EncoderBlock`` and ``d2l.TransformerEncoderBlock``).  A cell that
imports d2l itself (``from d2l import mxnet as d2l``, ``import d2l``) gets
that same module: the namespace's `__import__` answers those two imports,
and only them.  An edition's own ``#@save`` definitions are its `d2l`:
after the cell that makes them, the shim answers them first
(`own_definitions`).  While a cell runs, Parameters that cells written
for MXNet 2.0's Gluon assign as block attributes are entered in their
blocks (`gluon2`).

Data and long training go through `DataHooks`: WikiText-2 is read from the
embedded corpus, data loaders use no worker process, and, at small sizes,
the code that sets the notebooks' sizes is replaced (`SMALL_CODE`, each
replacement printed as a note), every random generator is seeded, the
step count of every ``train_bert(...)`` call is capped and
``d2l.train_ch13`` trains on a few small batches.  A Jupyter kernel gets
the same small sizes from `small_sizes_in_kernel`, which the notebooks'
first cell calls when `D2L_BERT_SMALL` is set.
"""
import ast
import builtins
import contextlib
import functools
import importlib
import inspect
import io
import os
import pkgutil
import sys
import time
import traceback
import types
import warnings
import weakref
from dataclasses import dataclass, field

from . import edition_data, gluon2
from .notebooks import BOOK_SNLI_PAIRS, SMALL_ENV, small_sizes
from .own_definitions import rebound, saved_names
from ..views.pyplot import settle_backend

#: Modules of this package that are tools, not book sections
TOOL_MODULES = ('d2l_bert.cli', 'd2l_bert.chapter', 'd2l_bert.threads',
                'd2l_bert.__main__', 'd2l_bert.dist')

#: Packages whose modules, not the package itself, offer names
NAME_PACKAGES = ('d2l_bert.data', 'd2l_bert.runs')

#: Names of the 0.17 releases that d2l 1.0 renamed, old -> new
RENAMED_0_17 = {'EncoderBlock': 'TransformerEncoderBlock'}

#: Keyword arguments of the 0.17 releases that d2l 1.0 renamed, old ->
#: new: a cell's call ``d2l.BERTModel(..., num_layers=2)`` passes
#: ``num_blks=2`` (`with_0_17_keywords`)
KEYWORDS_0_17 = {'num_layers': 'num_blks'}

#: The name, in the cells' namespace, of `with_0_17_keywords`
ADAPTER_0_17 = '__d2l_0_17_keywords__'

#: Characters of a cell's output that its result keeps (about 250 lines
#: of 80); the rest is counted, not held, and said to be cut
MAX_OUTPUT_CHARS = 20_000

#: Step count that ``train_bert(...)`` calls are capped to at small sizes
SMALL_STEPS = 2

#: Batches an epoch below which d2l 1.0.3's ``train_ch13`` fails (it
#: takes the batch count's fifth modulo); fewer are cut again into this many
MIN_BATCHES = 5

#: At small sizes, ``d2l.train_ch13`` trains one epoch on this many
#: batches of at most `SMALL_BATCH` examples, and tests on one batch
SMALL_BATCHES, SMALL_BATCH = 5, 8

#: At small sizes, the code of the notebooks' cells that sets the book's
#: sizes, and what runs in its place, by notebook: each pair is (the code
#: as the cell writes it, the small run's code), and each must be found
#: exactly once among all the notebooks, in its own (a test holds them to
#: that, so a cell that drifts from the table fails).  The pretraining
#: notebook keeps its batches of 512 (sec_bert-dataset prints their
#: shapes from the same line): its steps are capped (`SMALL_STEPS`, as
#: `_CapSteps` caps any ``train_bert(...)`` call)
SMALL_CODE = {
    'bert-pretraining.ipynb': [
        ('train_bert(train_iter, net, loss, len(vocab), devices, 50)',
         'train_bert(train_iter, net, loss, len(vocab), devices, 2)'),
    ],
    'natural-language-inference-bert.ipynb': [
        ('batch_size, max_len, num_workers = 512, 128, '
         'd2l.get_dataloader_workers()',
         # no loader processes: a kernel ending leaves their shared
         # memory's temporary folder behind
         'batch_size, max_len, num_workers = 32, 64, 0'),
        ('lr, num_epochs = 1e-4, 5', 'lr, num_epochs = 1e-4, 1'),
    ],
    'what-bert-learned.ipynb': [
        ('batch_size, max_len, num_steps = 128, 64, 100',
         'batch_size, max_len, num_steps = 32, 64, 2'),
    ],
}

#: The seed of every random generator at small sizes
SMALL_SEED = 0

_FRAMEWORK_SUBMODULES = ('torch', 'tensorflow', 'jax', 'paddle')


def package_names():
    """Collect the names `d2l_bert` offers to the book's `d2l` namespace.

    Returns
    -------
    names : dict of str to object
        Public functions, classes and constants of `d2l_bert` and of its
        section modules (tools such as this runner left out), plus private
        helpers whose name the real d2l also has (the book's ``#@save``
        helpers such as `_read_wiki`).
    failed : dict of str to str
        Section modules that could not be imported, with the error.
    """
    import d2l_bert
    real = _real_d2l()
    modules, failed = [d2l_bert], {}
    for name in _offering_modules(d2l_bert.__path__):
        try:
            modules.append(importlib.import_module(name))
        except Exception as e:  # a section being written must not stop us
            failed[name] = f'{type(e).__name__}: {e}'
    names = {}
    for module in modules:
        exported = getattr(module, '__all__', None)
        for name, obj in vars(module).items():
            if exported is not None and name not in exported:
                continue
            if name.startswith('__') or inspect.ismodule(obj):
                continue
            if name.startswith('_') and not hasattr(real, name):
                continue
            origin = getattr(obj, '__module__', None)
            defined_here = (origin or '').startswith('d2l_bert')
            constant = name.isupper() and origin is None
            if defined_here or constant or exported is not None:
                names.setdefault(name, obj)
    return names, failed


def _offering_modules(path):
    """Names of the modules whose names `package_names` collects: the
    package's modules but its tools, with the modules of `NAME_PACKAGES`
    in place of those packages."""
    for info in pkgutil.iter_modules(path, 'd2l_bert.'):
        if info.name.startswith(TOOL_MODULES):
            continue
        if info.name not in NAME_PACKAGES:
            yield info.name
            continue
        package = importlib.import_module(info.name)
        for sub_info in pkgutil.iter_modules(package.__path__,
                                             f'{info.name}.'):
            yield sub_info.name


@functools.lru_cache(maxsize=None)
def _real_d2l():
    from d2l import mxnet as d2l
    return d2l


class D2LShim(types.ModuleType):
    """The `d2l` the cells see: this package first, then d2l 1.0.3.

    Parameters
    ----------
    overrides : dict, optional
        Names answered before anything else (the data hooks).

    Attributes
    ----------
    met : dict of str to str
        Each name looked up so far and where it came from: ``'d2l_bert'``,
        ``'d2l 1.0.3'``, ``'hook'`` or ``'0.17 name of NEW'``.
    failed_modules : dict of str to str
        Section modules of this package that could not be imported.
    """

    def __init__(self, overrides=None, used=None):
        super().__init__('d2l', 'd2l_bert first, then d2l 1.0.3')
        names, failed = package_names()
        object.__setattr__(self, '_package', names)
        object.__setattr__(self, '_overrides', dict(overrides or {}))
        object.__setattr__(self, 'met', {})
        object.__setattr__(self, 'failed_modules', failed)
        # the edition's own ``#@save`` definitions (`save`), and where the
        # notes on them go
        object.__setattr__(self, 'saved', {})
        object.__setattr__(self, '_used', set() if used is None else used)

    def save(self, names, namespace):
        """Enter the edition's ``#@save`` definitions `names`, as bound in
        `namespace`: ``d2l.NAME`` answers them from now on
        (`own_definitions`)."""
        for name in names:
            if name in namespace:
                self.saved[name] = namespace[name]

    def _resolve(self, name):
        if name in self.saved:
            if name in self._package or hasattr(_real_d2l(), name):
                self._used.add(f"d2l.{name}: the edition's own #@save "
                               "definition (d2l-bert's is not used)")
            return self.saved[name], 'edition'
        value, origin = self._resolve_ours(name)
        value, calls = rebound(value, self.saved)
        if calls:
            self._used.add(f"d2l.{name} ({origin}'s) calls the edition's "
                           f"{', '.join(calls)}, as in the edition's d2l")
        return value, origin

    def _resolve_ours(self, name):
        if name in self._overrides:
            return self._overrides[name], 'hook'
        if name in self._package:
            return self._package[name], 'd2l_bert'
        real = _real_d2l()
        if hasattr(real, name):
            return getattr(real, name), 'd2l 1.0.3'
        if name in RENAMED_0_17:
            new = RENAMED_0_17[name]
            value, _ = self._resolve_ours(new)
            return value, f'0.17 name of {new}'
        raise AttributeError(
            f"module 'd2l' has no attribute {name!r} (neither d2l_bert nor "
            "d2l 1.0.3 defines it)")

    def __getattr__(self, name):
        if name.startswith('__'):
            raise AttributeError(name)
        value, origin = self._resolve(name)
        self.met[name] = origin
        return value

    def __dir__(self):
        return sorted(set(dir(_real_d2l())) | set(self._package)
                      | set(self._overrides) | set(self.saved))


class _D2LPackage(types.ModuleType):
    """What ``import d2l`` gives a cell: `.mxnet` (and bare names) are the
    shim; `.torch` and the other frameworks are the real submodules."""

    def __init__(self, shim):
        super().__init__('d2l')
        object.__setattr__(self, '_shim', shim)

    def __getattr__(self, name):
        if name == 'mxnet':
            return self._shim
        if name in _FRAMEWORK_SUBMODULES:
            return importlib.import_module(f'd2l.{name}')
        return getattr(self._shim, name)


class DataHooks:
    """How cells that need data or long training run here.

    Parameters
    ----------
    small : bool, optional
        Cap the step count of ``train_bert(...)`` calls to `steps`
        (default: whether `D2L_BERT_SMALL` is set).
    steps : int or None
        The cap; None leaves the step counts and ``d2l.train_ch13`` as
        they are (for notebooks that choose their own small sizes).

    Notes
    -----
    Always: ``d2l.download_extract('wikitext-2')`` returns the embedded
    corpus (the book's address no longer serves WikiText-2),
    ``d2l.get_dataloader_workers()`` is 0, and
    ``d2l.try_all_gpus()`` gives ``[cpu(0)]`` on a machine without a GPU,
    as its docstring promises (d2l 1.0.3 returns an empty list).
    ``d2l.DATA_HUB`` is the cells' own copy of the data hub's, and
    ``d2l.download`` fetches its entries, with a stand-in for WikiText-2
    in parquet (`edition_data`).  At
    small sizes with a cap, ``d2l.train_ch13`` trains one epoch on
    `SMALL_BATCHES` batches of at most `SMALL_BATCH` examples cut from the
    first batch, and tests on one such batch (d2l's loop divides by a
    fifth of the batch count, which a small data set leaves at 0).
    Otherwise it gets an epoch of fewer than `MIN_BATCHES` batches (1,000
    pairs at the book's 512) cut again into `MIN_BATCHES`, for the same
    reason.  In the fine-tuning notebook, ``d2l.train_ch13`` also says
    what it fine-tunes (`fine_tuning_note`).
    """

    def __init__(self, small=None, steps=SMALL_STEPS):
        self.small = small_sizes() if small is None else bool(small)
        self.steps = steps
        self.used = set()  # short descriptions of the hooks that acted
        from ..data import hub
        self.data_hub = dict(hub.DATA_HUB)
        # the cells' namespace (`Runner` sets it), where `train_ch13`
        # reads what the fine-tuning notebook's settings chose
        self.namespace = {}

    def overrides(self, package):
        """Return the `d2l` names these hooks answer, given `package_names`.
        """
        hooks = {'get_dataloader_workers': self._no_workers,
                 'download_extract': self._download_extract,
                 'try_all_gpus': self._try_all_gpus,
                 # the cells' own: an edition's entries stay its own
                 'DATA_HUB': self.data_hub,
                 'download': functools.partial(edition_data.download,
                                               self.data_hub, self.used)}
        hooks['train_ch13'] = self._train_ch13
        return hooks

    def notebook_environment(self):
        """The variables that make d2l-bert's notebooks run at the sizes
        of these hooks: `SMALL_ENV` at small sizes (in a kernel, the
        set-up cell then replaces the cells' sizes as `DataHooks` does);
        empty at the book's sizes."""
        return {SMALL_ENV: '1'} if self.small else {}

    def _train_ch13(self, net, train_iter, test_iter, loss, trainer,
                    num_epochs, *args, **kwargs):
        note = fine_tuning_note(train_iter, num_epochs)
        if note:
            self.used.add(note)
        if not self.small or self.steps is None:
            if _len_or_none(train_iter) in range(1, MIN_BATCHES):
                train_iter = self._recut(train_iter)
            return _real_d2l().train_ch13(net, train_iter, test_iter, loss,
                                          trainer, num_epochs, *args,
                                          **kwargs)
        self.used.add(f'd2l.train_ch13 trained 1 epoch on {SMALL_BATCHES} '
                      f'batches of at most {SMALL_BATCH} examples')
        with warnings.catch_warnings():
            # one epoch: the plot's x-axis runs from 1 to 1
            warnings.filterwarnings('ignore', 'Attempting to set identical')
            return _real_d2l().train_ch13(
                net, _FewBatches(train_iter, SMALL_BATCHES, SMALL_BATCH),
                _FewBatches(test_iter, 1, SMALL_BATCH), loss, trainer,
                min(num_epochs, 1), *args, **kwargs)

    def _recut(self, train_iter):
        """`train_iter`'s examples in `MIN_BATCHES` batches an epoch."""
        examples = _len_or_none(getattr(train_iter, '_dataset', None))
        size = f' of about {examples // MIN_BATCHES}' if examples else ''
        self.used.add(
            f'd2l.train_ch13 got each epoch in {MIN_BATCHES} batches{size} '
            f'(d2l 1.0.3 divides by a fifth of the batch count, 0 below '
            f'{MIN_BATCHES} batches)')
        return _Recut(train_iter, MIN_BATCHES)

    def _no_workers(self):
        self.used.add('data loaders run without worker processes')
        return 0

    def _try_all_gpus(self):
        from ..devices import num_gpus, try_all_gpus
        if not num_gpus():
            self.used.add('d2l.try_all_gpus() gives [cpu(0)] without a GPU '
                          '(d2l 1.0.3 gives [], which no cell can train on)')
        return try_all_gpus()

    def _download_extract(self, name, folder=None):
        if name == 'wikitext-2':
            from ..data import corpus
            self.used.add('WikiText-2 read from the embedded corpus')
            return corpus.DATA_DIR
        from ..book import finetuning  # noqa: F401  (registers its stand-ins)
        from ..data.hub import download_extract
        target, _ = edition_data.hub_entry(self.data_hub, name)
        return download_extract(target, folder)

    def shrink(self, source):
        """At small sizes, `source` with the code of `SMALL_CODE` replaced
        by the small run's (one line in `used` for each replacement)."""
        if not self.small:
            return source
        source, made = small_code(source)
        self.used.update(made)
        return source

    def transform(self, tree):
        """Cap ``train_bert(...)`` step counts in a cell's syntax tree."""
        if not self.small or self.steps is None:
            return tree
        capper = _CapSteps(self.steps)
        tree = capper.visit(tree)
        if capper.capped:
            self.used.add(f'train_bert steps capped to {self.steps}')
        return ast.fix_missing_locations(tree)


def small_code(source):
    """Replace in `source` the code `SMALL_CODE` lists by the small run's.

    Returns
    -------
    source : str
    made : list of str
        One line per replacement made, which names the code replaced
        and the code that runs instead.
    """
    made = []
    for pairs in SMALL_CODE.values():
        for book, small in pairs:
            if book in source:
                source = source.replace(book, small)
                made.append(f'small sizes: `{book}` -> `{small}`')
    return source, made


#: The generated articles (count, seed) of each split of the corpus that
#: stands in for WikiText-2 at small sizes: about 860 sentence pairs of at
#: most 64 tokens, so that the book's batch of 512 fills, built in seconds
#: where the embedded corpus's 27,641 take a minute in the book's padding
SMALL_WIKITEXT = {'train': (100, 1), 'valid': (10, 2)}


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

    What `DataHooks` does for the chapter runner at small sizes, for a
    kernel (the test suite executes the notebooks in one): each cell's
    `SMALL_CODE` is replaced before it runs, ``train_bert(...)`` step
    counts are capped to `SMALL_STEPS`, the random generators are
    seeded, a small corpus stands in for WikiText-2 (`small_wikitext`),
    and d2l's data loaders start no worker process
    (`no_loader_workers`).  The set-up cell calls it when
    `D2L_BERT_SMALL` is set; a cell whose code was replaced prints what
    was, first.

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
    if any(getattr(t, '__name__', '') == 'small_code_lines'
           for t in shell.input_transformers_post):
        return True

    def small_code_lines(lines):
        # the cell says what was replaced in it, first: the set-up cell
        # stays silent
        source, made = small_code(''.join(lines))
        if made:
            source = (f'print({chr(10).join(made)!r}, flush=True)\n'
                      + source)
        return source.splitlines(keepends=True)
    shell.input_transformers_post.append(small_code_lines)
    shell.ast_transformers.append(_CapSteps(SMALL_STEPS))
    seed_small_run()
    # for the kernel's life (a context entered here would be left as soon
    # as its object is collected, at once)
    from ..data import hub
    hub.STAND_INS['wikitext-2'] = small_wikitext
    no_loader_workers()
    return True


def no_loader_workers():
    """Make d2l's data loaders in this kernel start no worker process, as
    in the chapter runner (`DataHooks`): ``d2l.get_dataloader_workers()``
    is 0.

    Each of d2l's 4 workers, forked from the kernel, copies the pages of
    the dataset's arrays that it reads (0.85 GB more in the pretraining
    notebook), their temporary folders (``pymp-*``) outlive a kernel that is
    shut down, and on a 2-core runtime they take the cores the training
    needs.
    """
    from d2l import mxnet as d2l
    d2l.get_dataloader_workers = _no_dataloader_workers


def _no_dataloader_workers():
    """d2l's `get_dataloader_workers` in a d2l-bert kernel: 0."""
    return 0


def fine_tuning_note(train_iter, num_epochs):
    """Say what a ``d2l.train_ch13`` call of the fine-tuning section trains.

    Parameters
    ----------
    train_iter : iterable
        The training batches: a DataLoader of SNLI pairs (a data set that
        holds `all_token_ids`, as the book's `SNLIBERTDataset` does) is
        counted.
    num_epochs : int
        The epochs ``train_ch13`` was asked for.

    Returns
    -------
    str or None
        One line, such as ``fine-tuned on 1,000 SNLI pairs, 5 epoch(s);
        --full for the book's 549,367``; None for other data.
    """
    dataset = getattr(train_iter, '_dataset', train_iter)
    if not hasattr(dataset, 'all_token_ids'):
        return None
    pairs = len(dataset)
    note = f'fine-tuned on {pairs:,} SNLI pairs, {num_epochs} epoch(s)'
    if pairs < BOOK_SNLI_PAIRS:
        note += f"; --full for the book's {BOOK_SNLI_PAIRS:,}"
    return note


class _FewBatches:
    """`count` batches of at most `size` examples, cut from the first
    batch of `data_iter` (examples repeat if it holds fewer than
    `count`)."""

    def __init__(self, data_iter, count, size):
        features, labels = next(iter(data_iter))
        n = len(labels)
        size = max(1, min(size, n // count))
        self.batches = []
        for k in range(count):
            rows = [(k * size + i) % n for i in range(size)]
            self.batches.append((_rows(features, rows), labels[rows]))

    def __len__(self):
        return len(self.batches)

    def __iter__(self):
        return iter(self.batches)


class _Recut:
    """The examples of one pass over `data_iter`, in `count` batches of
    nearly equal sizes; each pass reads `data_iter` again, so a loader
    that shuffles still shuffles."""

    def __init__(self, data_iter, count):
        self.data_iter, self.count = data_iter, count

    def __len__(self):
        return self.count

    def __iter__(self):
        from mxnet import np
        batches = list(self.data_iter)
        labels = np.concatenate([y for _, y in batches])           # (N,)
        if isinstance(batches[0][0], (list, tuple)):
            features = type(batches[0][0])(
                np.concatenate(parts)
                for parts in zip(*[X for X, _ in batches]))
        else:
            features = np.concatenate([X for X, _ in batches])
        n = len(labels)
        bounds = [n * k // self.count for k in range(self.count + 1)]
        for start, stop in zip(bounds, bounds[1:]):
            yield _rows(features, slice(start, stop)), labels[start:stop]


def _len_or_none(obj):
    try:
        return len(obj)
    except TypeError:
        return None


def _rows(features, rows):
    """Rows `rows` (indices or a slice) of an array, or of each array of a
    list or tuple."""
    if isinstance(features, (list, tuple)):
        return type(features)(f[rows] for f in features)
    return features[rows]


def with_0_17_keywords(callee):
    """`callee`, also taking the 0.17 keyword names of `KEYWORDS_0_17`.

    The book's classes take the 1.0 names only (``num_blks``); the 0.17
    editions' cells call them with ``num_layers``, which this adapter
    passes on as ``num_blks``.

    Raises
    ------
    TypeError
        Both names are given, with different values.
    """
    @functools.wraps(callee)
    def call(*args, **kwargs):
        for old, new in KEYWORDS_0_17.items():
            if old not in kwargs:
                continue
            value = kwargs.pop(old)
            if new in kwargs and kwargs[new] != value:
                raise TypeError(f'{new}={kwargs[new]} and {old}={value} '
                                f'disagree; pass one of them')
            kwargs[new] = value
        return callee(*args, **kwargs)
    return call


class _Keywords017(ast.NodeTransformer):
    """``d2l.X(..., num_layers=n)`` -> ``adapter(d2l.X)(..., num_layers=n)``
    (`with_0_17_keywords`), for the calls of `d2l` names that pass a 0.17
    keyword or ``**`` a dict."""

    def visit_Call(self, node):
        self.generic_visit(node)
        func = node.func
        on_d2l = (isinstance(func, ast.Attribute)
                  and isinstance(func.value, ast.Name)
                  and func.value.id == 'd2l')
        if on_d2l and any(kw.arg is None or kw.arg in KEYWORDS_0_17
                          for kw in node.keywords):
            node.func = ast.Call(func=ast.Name(ADAPTER_0_17, ast.Load()),
                                 args=[func], keywords=[])
        return node


class _CapSteps(ast.NodeTransformer):
    """``train_bert(a, b, c, d, e, n)`` -> ``train_bert(..., min(n, cap))``
    (also ``num_steps=n``)."""

    def __init__(self, cap):
        self.cap, self.capped = cap, False

    def _wrap(self, node):
        self.capped = True
        return ast.Call(func=ast.Name('min', ast.Load()),
                        args=[node, ast.Constant(self.cap)], keywords=[])

    def visit_Call(self, node):
        self.generic_visit(node)
        func = node.func
        name = (func.id if isinstance(func, ast.Name)
                else func.attr if isinstance(func, ast.Attribute) else None)
        if name != 'train_bert':
            return node
        if len(node.args) >= 6:
            node.args[5] = self._wrap(node.args[5])
        for kw in node.keywords:
            if kw.arg == 'num_steps':
                kw.value = self._wrap(kw.value)
        return node


@dataclass
class CellResult:
    """What running one cell gave.

    Attributes
    ----------
    status : str
        ``'ran'`` or ``'failed'``.
    output : str
        Printed text, then the `repr` of a final expression's value.
    error : str or None
        Last line of the error (``'NameError: name ...'``) if failed.
    traceback : str or None
        The full traceback if failed.
    seconds : float
        Wall-clock time of the cell.
    figures : int
        Matplotlib figures the cell displayed.
    skipped_lines : list of str
        IPython magics and shell lines (``%...``, ``!...``) not run.
    notes : list of str
        How the cell was run, when that is worth saying (in a new process,
        see `editions.child`).
    """
    status: str
    output: str = ''
    error: str = None
    traceback: str = None
    seconds: float = 0.0
    figures: int = 0
    skipped_lines: list = field(default_factory=list)
    notes: list = field(default_factory=list)

    @property
    def ran(self):
        return self.status == 'ran'


class Runner:
    """Execute cells in one namespace with a `d2l` shim, as a notebook.

    Parameters
    ----------
    ctx : mxnet.Context, optional
        Run every cell under ``with ctx:`` so arrays and parameters that a
        cell creates without naming a device land there.
    hooks : DataHooks, optional
        Data and training hooks (default: `DataHooks()`).

    Examples
    --------
    >>> runner = Runner()
    >>> runner.run('x = 2\\nprint(x)\\nx + 1').output
    '2\\n3\\n'
    """

    _count = 0  # runners made, for unique module names


    def __init__(self, ctx=None, hooks=None):
        settle_backend()
        self.ctx = ctx
        self.hooks = hooks if hooks is not None else DataHooks()
        names, _ = package_names()
        self.d2l = D2LShim(self.hooks.overrides(names), self.hooks.used)
        package = _D2LPackage(self.d2l)
        cell_builtins = dict(vars(builtins))
        cell_builtins['__import__'] = functools.partial(_import, package)
        # The namespace is a registered module's, so that pickle finds the
        # classes cells define (the book's `SNLIBERTDataset` hands its
        # methods to a `multiprocessing.Pool`)
        Runner._count += 1
        module = types.ModuleType(f'__d2l_bert_cells_{Runner._count}__')
        sys.modules[module.__name__] = module
        # and only while the runner lives: the namespace holds whatever
        # the cells made (sec_bert's models, 150 MB a run)
        weakref.finalize(self, sys.modules.pop, module.__name__, None)
        self.namespace = vars(module)
        self.namespace.update({'__builtins__': cell_builtins,
                               'd2l': self.d2l,
                               ADAPTER_0_17: with_0_17_keywords})
        self.hooks.namespace = self.namespace
        self.count = 0
        if self.hooks.small:
            seed_small_run()

    def run(self, source):
        """Run one cell; return its `CellResult`."""
        self.count += 1
        source, skipped = _drop_magics(source)
        start = time.perf_counter()
        out = CappedOutput()
        figures = []
        try:
            source = self.hooks.shrink(source)
            body, last = self._compile(source)
            with contextlib.ExitStack() as stack:
                stack.enter_context(contextlib.redirect_stdout(out))
                stack.enter_context(_capture_display(out, figures))
                if self.ctx is not None:
                    stack.enter_context(self.ctx)
                if self.hooks.small:
                    stack.enter_context(small_wikitext_stand_in())
                stack.enter_context(
                    gluon2.parameters_as_attributes(self.hooks.used))
                # the edition's ``#@save`` definitions, made or not
                stack.callback(self.d2l.save, saved_names(source),
                               self.namespace)
                exec(body, self.namespace)
                if last is not None:
                    value = eval(last, self.namespace)
                    if value is not None:
                        print(repr(value), file=out)
        # a cell's error is a result, not a crash; so is `sys.exit()`,
        # which must not end the runner's process
        except (Exception, SystemExit) as e:
            return CellResult(
                'failed', out.getvalue(), _last_line(e),
                ''.join(traceback.format_exception(type(e), e,
                                                   e.__traceback__)),
                time.perf_counter() - start, _unique(figures), skipped)
        finally:
            _close_figures()
        return CellResult('ran', out.getvalue(), None, None,
                          time.perf_counter() - start, _unique(figures),
                          skipped)

    def _compile(self, source):
        name = f'<cell {self.count}>'
        tree = ast.parse(source, name)
        # The 0.17 editions' keyword names (`KEYWORDS_0_17`)
        tree = ast.fix_missing_locations(_Keywords017().visit(tree))
        tree = self.hooks.transform(tree)
        last = None
        quiet = source.rstrip().endswith(';')
        if tree.body and isinstance(tree.body[-1], ast.Expr) and not quiet:
            last = ast.Expression(tree.body.pop().value)
            last = compile(last, name, 'eval')
        return compile(tree, name, 'exec'), last


class CappedOutput(io.TextIOBase):
    """A cell's standard output: its first `limit` characters, and a
    count of the rest, which is not held.

    Parameters
    ----------
    limit : int, default `MAX_OUTPUT_CHARS`
        How many characters are kept; those past it are only counted.

    Examples
    --------
    >>> out = CappedOutput(limit=4)
    >>> print('abcdefgh', file=out)
    >>> out.getvalue()
    'abcd\\n... 5 more characters cut\\n'
    """

    def __init__(self, limit=MAX_OUTPUT_CHARS):
        super().__init__()
        self.limit, self.parts, self.kept, self.cut = limit, [], 0, 0

    def writable(self):
        return True

    def write(self, text):
        room = max(0, self.limit - self.kept)
        if room:
            self.parts.append(text[:room])
            self.kept += min(room, len(text))
        self.cut += max(0, len(text) - room)
        return len(text)

    def getvalue(self):
        """The characters kept, then a line that says how many were cut
        (none when nothing was)."""
        text = ''.join(self.parts)
        if not self.cut:
            return text
        end = '' if text.endswith('\n') or not text else '\n'
        return f'{text}{end}... {self.cut:,} more characters cut\n'


def _import(package, name, globals=None, locals=None, fromlist=(),
            level=0):
    """`__import__` of the cells: d2l imports get the shim."""
    if level == 0 and name in ('d2l', 'd2l.mxnet'):
        return package
    return builtins.__import__(name, globals, locals, fromlist, level)


def _drop_magics(source):
    kept, skipped = [], []
    for line in source.splitlines():
        if line.lstrip().startswith(('%', '!')):
            skipped.append(line.strip())
        else:
            kept.append(line)
    return '\n'.join(kept) + '\n', skipped


def _last_line(e):
    if isinstance(e, SyntaxError):
        where = f' (line {e.lineno})' if e.lineno else ''
        return f'SyntaxError: {e.msg}{where}'
    lines = traceback.format_exception_only(type(e), e)
    return lines[-1].strip() if lines else type(e).__name__


@contextlib.contextmanager
def _capture_display(out, figures):
    """Make `IPython.display.display` count figures and print the rest,
    and `clear_output` do nothing, for the duration of a cell."""
    try:
        from IPython import display as ipy_display
    except ImportError:
        yield
        return

    def display(*objs, **kwargs):
        for obj in objs:
            if type(obj).__name__ == 'Figure':
                figures.append(obj)
            else:
                print(repr(obj), file=out)

    saved = ipy_display.display, ipy_display.clear_output
    ipy_display.display = display
    ipy_display.clear_output = lambda *args, **kwargs: None
    try:
        yield
    finally:
        ipy_display.display, ipy_display.clear_output = saved


def _unique(figures):
    return len({id(f) for f in figures})


def _close_figures():
    plt = sys.modules.get('matplotlib.pyplot')
    if plt is not None:
        plt.close('all')
