"""What the notebooks do beyond the book's cells: one call each.

The book's pretraining and fine-tuning sections download WikiText-2,
`bert.small` and SNLI and train for minutes on two GPUs.  d2l-bert's
notebooks of those sections also run offline, and in seconds when asked
for small sizes; two calls, each in a cell of its own, choose how::

    settings = d2l_bert.chapter.finetuning_settings()
    pretrained, sizes = d2l_bert.chapter.model_to_finetune(settings)

The settings are the only code of the notebooks that reads the
environment (`small_sizes`, `finetuning_settings`); each says in one line
what it chose.  At small sizes they seed every random generator, so that
a small run prints the same numbers every time.
"""
import ast
import os
from dataclasses import dataclass

from ..presets import BERT_SMALL

#: Environment variable that asks the notebooks for small sizes
SMALL_ENV = 'D2L_BERT_SMALL'

#: Environment variable that gives the fine-tuning notebook its
#: pretrained model (a hub name or a directory)
PRETRAINED_ENV = 'D2L_BERT_PRETRAINED'

#: Environment variable that gives the fine-tuning notebook its SNLI:
#: 'snli', 'synthetic' or a directory (`runs.finetuning.snli_data_dir`)
SNLI_ENV = 'D2L_BERT_SNLI'

#: Environment variable that sets how many pairs of each SNLI split the
#: fine-tuning notebook reads: a number, or 0 or ``all`` for the book's
#: run (`d2l-bert chapter --full`)
SNLI_PAIRS_ENV = 'D2L_BERT_SNLI_PAIRS'

#: The pairs the fine-tuning notebook reads unless `SNLI_PAIRS_ENV` asks
#: for the book's run: five epochs over all of SNLI take hours on a CPU
CHAPTER_SNLI_PAIRS = 1000

#: The pairs of the book's run (SNLI's training split)
BOOK_SNLI_PAIRS = 549367

#: The functions that read the environment, as the cells call them
SETTINGS_FUNCTIONS = ('finetuning_settings',)

#: The fine-tuning notebook at small sizes: synthetic SNLI pairs
SMALL_SNLI = dict(num_train=1000, num_dev=10, num_test=200)

#: The tiny BERT the fine-tuning notebook pretrains at small sizes, and
#: its run: 10 steps at 1e-3 (the book's 0.01 leaves so short a run
#: saturated and hard to fine-tune) on batches of 64 pairs of 32 tokens
TINY_BERT = dict(num_hiddens=32, ffn_num_hiddens=64, num_heads=2,
                 num_blks=2, dropout=0.1, max_len=64)
TINY_PRETRAINING = dict(batch_size=64, max_len=32, num_steps=10, lr=1e-3)


def small_sizes(environ=None):
    """Return True if `SMALL_ENV` of `environ` (default `os.environ`)
    asks for small sizes (set, and neither empty nor 0)."""
    environ = os.environ if environ is None else environ
    return environ.get(SMALL_ENV, '').strip() not in ('', '0')


def calls_settings(code):
    """Whether the cell `code` calls one of `SETTINGS_FUNCTIONS`: a cell
    that reads the environment."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = getattr(func, 'attr', getattr(func, 'id', None))
            if name in SETTINGS_FUNCTIONS:
                return True
    return False


def _seed():
    from ..runs.seeding import seed_everything
    seed_everything(0)


@dataclass(frozen=True)
class FinetuningNotebookSettings:
    """Which model the fine-tuning notebook starts from, and which pairs.

    Attributes
    ----------
    small : bool
        Small sizes: set by `SMALL_ENV`, or chosen when `bert.small` or
        SNLI cannot be downloaded.
    pretrained : str
        ``'bert.small'`` (downloaded) or a directory holding
        ``pretrained.params`` and ``vocab.json`` (`PRETRAINED_ENV`).
    snli : str
        `runs.finetuning.snli_data_dir`'s `data` (`SNLI_ENV`): ``'snli'``
        (downloaded), ``'synthetic'`` or a directory; at small sizes the
        synthetic pairs of `SMALL_SNLI`, with `SNLI_PAIRS_ENV` the first
        pairs of each split.
    snli_pairs : int
        The pairs of each split read with `SNLI_PAIRS_ENV`; 0, all.
    work_dir : str
        Where small runs keep their files (in the cache, `data.hub`).
    """
    small: bool
    pretrained: str
    snli: str
    snli_pairs: int
    work_dir: str

    def snli_dir(self):
        """Return the directory of the SNLI files (``'snli'``: downloaded,
        as the book's ``d2l.download_extract('SNLI')``)."""
        from ..runs.finetuning import snli_data_dir
        return snli_data_dir(self.snli)

    def __str__(self):
        return (f'small={self.small}, pretrained={self.pretrained!r}, '
                f'data={self.snli!r}')


def finetuning_settings(environ=None, reachable=None):
    """Choose the fine-tuning notebook's model and data, and print them.

    By default the book's model and data, `bert.small` and SNLI,
    downloaded, of which the first `CHAPTER_SNLI_PAIRS` pairs of each
    split are read (`SNLI_PAIRS_ENV` says how many; 0 or ``all``, the
    book's run).  When one of them can be neither downloaded nor found
    in the cache, and the environment names no other model or data, the
    small offline run, which says so.  At small sizes, unless the
    environment names SNLI's files, synthetic pairs (`SMALL_SNLI`), and
    every random generator is seeded.

    Parameters
    ----------
    environ : mapping, optional
        Where to read `SMALL_ENV`, `PRETRAINED_ENV`, `SNLI_ENV` and
        `SNLI_PAIRS_ENV` (default: `os.environ`).
    reachable : callable, optional
        ``reachable(name) -> bool``, whether a file of the data hub can
        be had (default: `data.hub.reachable`).

    Returns
    -------
    FinetuningNotebookSettings

    Raises
    ------
    ValueError
        If `SNLI_PAIRS_ENV` is not a whole number of pairs.
    """
    from ..data import hub
    environ = os.environ if environ is None else environ
    reachable = hub.reachable if reachable is None else reachable
    small, snli_pairs = small_sizes(environ), _snli_pairs(environ)
    pretrained = environ.get(PRETRAINED_ENV, 'bert.small')
    snli = environ.get(SNLI_ENV, 'snli')
    work_dir = os.path.join(hub.data_home(), 'notebook-small')
    if not small and (pretrained, snli) == ('bert.small', 'snli') and not (
            reachable('bert.small') and reachable('SNLI')):
        print('bert.small or SNLI cannot be downloaded here: running the '
              'offline version (small sizes, a tiny BERT pretrained here, '
              'synthetic SNLI data)')
        small = True
    if small:
        _seed()
        if snli == 'snli':
            from ..data.snli_synthetic import make_snli_synthetic
            snli = make_snli_synthetic(work_dir, **SMALL_SNLI)
    elif snli_pairs:
        from ..data.snli_subset import first_snli_pairs
        from ..runs.finetuning import snli_data_dir
        snli = first_snli_pairs(
            snli_data_dir(snli), snli_pairs,
            os.path.join(hub.data_home(), f'snli-first-{snli_pairs}'))
        print(f'the first {snli_pairs:,} pairs of each SNLI split '
              f"({SNLI_PAIRS_ENV}=all for the book's run, on all "
              f'{BOOK_SNLI_PAIRS:,} training pairs)')
    settings = FinetuningNotebookSettings(small, pretrained, snli,
                                          snli_pairs, work_dir)
    print(settings)
    return settings


def _snli_pairs(environ):
    """`SNLI_PAIRS_ENV` of `environ` as a number, 0 for all pairs;
    `CHAPTER_SNLI_PAIRS` when not set."""
    text = environ.get(SNLI_PAIRS_ENV, '').strip()
    if text.isdigit():
        return int(text)
    if text.lower() == 'all':
        return 0
    if text:
        raise ValueError(f'{SNLI_PAIRS_ENV} must be a whole number of '
                         f'pairs (0 or all for all of them), got {text!r}')
    return CHAPTER_SNLI_PAIRS


def model_to_finetune(settings):
    """Return the pretrained model the fine-tuning notebook loads.

    At small sizes, instead of downloading `bert.small`, pretrain a tiny
    BERT (`TINY_BERT`, `TINY_PRETRAINING`) on the embedded corpus and
    save it in `bert.small`'s layout in ``settings.work_dir``, as
    ``d2l-bert pretrain`` does: it has learned little, but it has the
    right format and a vocabulary that covers the synthetic pairs.

    Parameters
    ----------
    settings : FinetuningNotebookSettings
        What `finetuning_settings` chose.

    Returns
    -------
    pretrained : str
        ``'bert.small'`` or a directory, for `load_pretrained_model`.
    sizes : dict
        Its `load_pretrained_model` sizes: `presets.BERT_SMALL` for
        `bert.small`, else those its ``config.json`` records, with
        `bert.small`'s dropout.
    """
    if settings.pretrained == 'bert.small' and not settings.small:
        return 'bert.small', dict(BERT_SMALL)
    pretrained = settings.pretrained
    if pretrained == 'bert.small':
        pretrained = _pretrain_tiny_bert(
            os.path.join(settings.work_dir, 'tiny-bert'))
    from ..runs.finetuning import load_pretrained_config
    return pretrained, dict(load_pretrained_config(pretrained),
                            dropout=BERT_SMALL['dropout'])


def _pretrain_tiny_bert(model_dir):
    """Pretrain `TINY_BERT` as `TINY_PRETRAINING` says; save it in
    `model_dir` and return that."""
    import mxnet as mx
    from mxnet import gluon, init

    from ..bert import BERTModel
    from ..dataset import load_data_wiki
    from ..devices import num_gpus
    from ..runs.model_files import save_pretrained
    from ..runs.pretraining import train_bert_history
    run = TINY_PRETRAINING
    train_iter, vocab = load_data_wiki(run['batch_size'], run['max_len'],
                                       seed=0)
    net = BERTModel(len(vocab), **TINY_BERT)
    devices = [mx.gpu(i) for i in range(num_gpus())] or [mx.cpu()]
    net.initialize(init.Xavier(), ctx=devices)
    train_bert_history(train_iter, net, gluon.loss.SoftmaxCELoss(),
                       len(vocab), devices, run['num_steps'],
                       learning_rate=run['lr'], plot=False, progress=False)
    return save_pretrained(net, vocab, model_dir,
                           dict(TINY_BERT, vocab_size=len(vocab)))
