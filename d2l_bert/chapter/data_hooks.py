"""How the chapter runner's cells get their data and train: `DataHooks`.

The hooks are names the runner's `d2l` answers before anything else
(`d2l_shim.D2LShim`'s overrides): WikiText-2 is read from the embedded
corpus, data loaders use no worker process, ``d2l.try_all_gpus()`` is
`d2l_bert.devices.try_all_gpus`, ``d2l.DATA_HUB`` and ``d2l.download``
are the cells' own (`edition_data`), and ``d2l.train_ch13`` trains on
batches d2l's loop can take (`batches`).  At small sizes the hooks also
rewrite each cell (`small_sizes.SmallSizes`) and ``d2l.train_ch13``
trains on a few small batches.  The real d2l module is never changed.
"""
import functools
import warnings

from . import edition_data
from .batches import FewBatches
from ..runs.d2l_loops import len_or_none, with_min_batches
from .d2l_shim import real_d2l
from .notebooks import small_sizes
from .small_sizes import SmallSizes
from ..presets import (BOOK_SNLI_PAIRS, MIN_BATCHES, SMALL_BATCH,
                       SMALL_BATCHES, SMALL_ENV, SMALL_STEPS)


class DataHooks:
    """How cells that need data or long training run here.

    Parameters
    ----------
    small : bool, optional
        Small sizes: each cell rewritten by `small_sizes.SmallSizes`
        (default: whether `D2L_BERT_SMALL` is set).
    steps : int or None
        The cap of ``train_bert(...)`` step counts at small sizes; None
        leaves the step counts and ``d2l.train_ch13`` as they are (for
        notebooks that choose their own small sizes).

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
    reason (`d2l_bert.runs.d2l_loops.with_min_batches`).  In the fine-tuning notebook,
    ``d2l.train_ch13`` also says what it fine-tunes (`fine_tuning_note`).
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

    def overrides(self):
        """Return the `d2l` names these hooks answer."""
        return {'get_dataloader_workers': self._no_workers,
                'download_extract': self._download_extract,
                'try_all_gpus': self._try_all_gpus,
                # the cells' own: an edition's entries stay its own
                'DATA_HUB': self.data_hub,
                'download': functools.partial(edition_data.download,
                                              self.data_hub, self.used),
                'train_ch13': self._train_ch13}

    def notebook_environment(self):
        """The variables that make d2l-bert's notebooks run at the sizes
        of these hooks: `SMALL_ENV` at small sizes (in a kernel, the
        set-up cell then rewrites the cells as `transform` does); empty
        at the book's sizes."""
        return {SMALL_ENV: '1'} if self.small else {}

    def transform(self, tree):
        """At small sizes, a cell's syntax tree rewritten by
        `small_sizes.SmallSizes` (one line in `used` for each code
        replaced, one if step counts were capped)."""
        if not self.small:
            return tree
        sizes = SmallSizes(self.steps)
        tree = sizes.visit(tree)
        self.used.update(sizes.replaced)
        if sizes.capped:
            self.used.add(f'train_bert steps capped to {self.steps}')
        return tree

    def _train_ch13(self, net, train_iter, test_iter, loss, trainer,
                    num_epochs, *args, **kwargs):
        note = fine_tuning_note(train_iter, num_epochs)
        if note:
            self.used.add(note)
        if not self.small or self.steps is None:
            train_iter = self._with_min_batches(train_iter)
            return real_d2l().train_ch13(net, train_iter, test_iter, loss,
                                         trainer, num_epochs, *args,
                                         **kwargs)
        self.used.add(f'd2l.train_ch13 trained 1 epoch on {SMALL_BATCHES} '
                      f'batches of at most {SMALL_BATCH} examples')
        with warnings.catch_warnings():
            # one epoch: the plot's x-axis runs from 1 to 1
            warnings.filterwarnings('ignore', 'Attempting to set identical')
            return real_d2l().train_ch13(
                net, FewBatches(train_iter, SMALL_BATCHES, SMALL_BATCH),
                FewBatches(test_iter, 1, SMALL_BATCH), loss, trainer,
                min(num_epochs, 1), *args, **kwargs)

    def _with_min_batches(self, train_iter):
        """`batches.with_min_batches`, and a line in `used` if it cut."""
        recut = with_min_batches(train_iter, MIN_BATCHES)
        if recut is not train_iter:
            examples = len_or_none(getattr(train_iter, '_dataset', None))
            size = f' of about {examples // MIN_BATCHES}' if examples else ''
            self.used.add(
                f'd2l.train_ch13 got each epoch in {MIN_BATCHES} batches'
                f'{size} (d2l 1.0.3 divides by a fifth of the batch count, '
                f'0 below {MIN_BATCHES} batches)')
        return recut

    def _no_workers(self):
        self.used.add('data loaders run without worker processes')
        return 0

    def _try_all_gpus(self):
        # here, not at the top: importing the hooks imports no `mxnet`
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
        from ..data.hub import download_extract
        target, _ = edition_data.hub_entry(self.data_hub, name)
        return download_extract(target, folder)


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
