"""d2l_bert.fast: the book's model, fast, by one visible call::

    net = d2l_bert.fast.accelerate(net)
    loss = d2l_bert.fast.accelerate(loss)

The first returns a twin of a book model (`BERTModel`, `BERTEncoder`, or the
fine-tuning section's `BERTClassifier`) that shares its parameters,
runs as one hybridized graph and, on the CPU, computes self-attention,
AddNorm and the LayerNorm gradients with compiled loops (`blocks`).  It
is called exactly as the book's model is, so the book's own `train_bert`
and d2l's `train_ch13` train it unchanged, and the book's model sees
every update (they are the same weights).  The second turns Gluon's
`SoftmaxCELoss` into one that computes the same numbers with a compiled
loop (`loss`): the MLM loss over the whole vocabulary is the largest
piece of the book's step that runs outside the model.

For inference, `inference(encoder, hidden)` returns the twin of a
pretrained encoder and its pooler that `load_pretrained_bert` runs by
default (`inference`).

Beyond that call, `batch_loss` builds the one-graph pretraining step of
the command line (`d2l-bert pretrain`): model and both losses in one
graph, with a compiled MLM loss (`step`).

For the dataset section, `pad_bert_inputs_stacked` pads the examples of
`runs.wiki_data.load_pretraining_data` into stacked arrays (its `pad`
argument), the same numbers as the book's lists of arrays, built much
faster (`dataset`).  For the book's own pipeline, `quick_arrays()` makes
`mxnet.np.array` fill a small host list's array without waiting on
MXNet's engine, the same arrays (`arrays`).

`compile_ahead()` starts compiling the CPU loops in processes of their
own, so that a later `accelerate` loads them from numba's cache (the
notebooks' kernels call it before the first cell that names
`accelerate`; `warm`).

Nothing here changes the book's classes; they stay the twins' test
oracle (`tests/test_fast_blocks.py`, `tests/test_fast_models.py`,
`tests/test_fast_attention_path.py`, `tests/test_fast_step.py`,
`tests/test_fast_dataset.py`, `tests/test_fast_arrays.py`).
"""
from mxnet import autograd, gluon

from . import _ops, warm
from ._build import (contexts, hybridize_twin, tiny_batch, walk,
                     warn_late_import)
from ._ops import describe as describe_loops  # noqa: F401
from .arrays import quick_arrays  # noqa: F401
from .attention_path import use_kernels
from .blocks import FastBERTEncoder, _Checked  # noqa: F401
from .dataset import pad_bert_inputs_stacked  # noqa: F401
from .inference import InferenceBERT, inference  # noqa: F401
from .loss import FastSoftmaxCELoss, accelerate_loss  # noqa: F401
from .models import FastBERTClassifier, FastBERTModel  # noqa: F401
from .step import TOKEN_MULTIPLE, FastBatchLoss  # noqa: F401

#: The kinds of model `accelerate` takes, by the children they have (a
#: class a notebook defines again counts by its structure, not its name)
KINDS = (
    ('BERTModel', FastBERTModel, ('encoder', 'hidden', 'mlm', 'nsp')),
    ('BERTClassifier', FastBERTClassifier, ('encoder', 'hidden', 'output')),
    ('BERTEncoder', FastBERTEncoder,
     ('token_embedding', 'segment_embedding', 'blks', 'pos_embedding')),
)


def accelerate(net, kernels=None, check=True):
    """Return the fast twin of the book model `net`, sharing its weights;
    or, for a loss, `accelerate_loss(net)`.

    Parameters
    ----------
    net : BERTModel, BERTEncoder, BERTClassifier or SoftmaxCELoss
        A model initialized (`net.initialize(...)` or loaded); deferred
        shapes are completed by one small forward pass.
    kernels : bool, optional
        Use the compiled loops.  Default: when numba works here, every
        context of `net`'s parameters is a CPU, and ``D2L_BERT_KERNELS``
        is not '0' (`attention_path.use_kernels`, which with
        `attention_path.choose_attention` chooses each block's attention
        path).
    check : bool, default True
        Run the twin and `net` on a small batch with dropout off and
        raise if their outputs differ: the twin computes what the book's
        classes compute, so a `forward` edited in a notebook is caught
        here rather than silently trained around.

    Returns
    -------
    FastBERTModel, FastBERTEncoder, FastBERTClassifier or loss
        Hybridized; called like `net`, with the same outputs.  Its
        ``book_model`` is `net` (which `d2l_bert.views` runs to read the
        attention weights that only the book's blocks keep).
    """
    if isinstance(net, gluon.loss.Loss):
        return accelerate_loss(net)
    if isinstance(net, _Checked):
        return net
    warn_late_import()
    name, twin_class = _kind(net)
    ctxs = contexts(net)
    _finish_deferred_init(net, name, ctxs[0])
    twin = twin_class(net, use_kernels(ctxs, kernels))
    # Not a child block: the twin's parameters and files stay the same
    object.__setattr__(twin, 'book_model', net)
    hybridize_twin(twin, net)
    if check:
        _check_twin(net, twin, name, ctxs[0])
    return twin


def compile_ahead():
    """Start compiling the compiled loops in processes of their own
    (`warm.start`), so that the first `accelerate` loads them from
    numba's cache; nothing where ``D2L_BERT_KERNELS=0`` turns them off.
    Returns whether the compile started."""
    return not _ops.disabled() and warm.start()


def describe(net):
    """One line saying which path `net` takes: the book's blocks, or the
    fast twin with or without the compiled loops."""
    if not isinstance(net, _Checked):
        return "book's blocks (imperative; d2l_bert.fast.accelerate not used)"
    kernels = any(getattr(block, 'kernels', False)
                  for block in walk(net))
    return ('fast twin (one graph' + (', compiled attention, AddNorm and '
                                      'LayerNorm loops)' if kernels
                                      else ", MXNet's operators)"))


def _kind(net):
    for name, twin_class, children in KINDS:
        if all(hasattr(net, child) for child in children):
            return name, twin_class
    kinds = ', '.join(name for name, _, _ in KINDS)
    raise TypeError(f'accelerate takes a {kinds} (or a block with the same '
                    f'children), got {type(net).__name__}')


def _max_len(net, name):
    encoder = net if name == 'BERTEncoder' else net.encoder
    return encoder.pos_embedding.shape[1]


def _finish_deferred_init(net, name, ctx):
    """Give deferred parameters their shapes with one small forward pass
    of the book model (dropout off, nothing recorded)."""
    if any(p._deferred_init for p in net.collect_params().values()):
        with autograd.predict_mode():
            net(*tiny_batch(name, ctx, _max_len(net, name)))


def _check_twin(net, twin, name, ctx, rtol=1e-3, atol=1e-4):
    """Raise if `twin` and `net` disagree on a small batch (dropout off).

    The tolerances are float32's: the twin sums and normalizes in another
    order (fused projections, added mask, compiled loops)."""
    import numpy as onp
    batch = tiny_batch(name, ctx, _max_len(net, name))
    with autograd.predict_mode():
        ours, book = twin(*batch), net(*batch)
    ours = ours if isinstance(ours, tuple) else (ours,)
    book = book if isinstance(book, tuple) else (book,)
    for i, (a, b) in enumerate(zip(ours, book)):
        if a is None and b is None:
            continue
        if (a is None) != (b is None) or a.shape != b.shape or not \
                onp.allclose(a.asnumpy(), b.asnumpy(), rtol, atol):
            raise ValueError(
                f'accelerate: the fast twin and {type(net).__name__} give '
                f'different output {i} on a test batch; the fast layer '
                "computes what the book's classes compute, so if you "
                'edited a forward method, train the model without '
                'accelerate (or pass check=False if you know why)')


def batch_loss(net, loss, vocab_size, kernels=None, row_multiple=8,
               token_multiple=TOKEN_MULTIPLE):
    """Return ``f(*shards) -> (mlm_ls, nsp_ls, ls)``: what
    ``_get_batch_loss_bert(net, loss, vocab_size, *shards)`` returns,
    each shard's losses computed by one `FastBatchLoss` graph.

    Parameters
    ----------
    net : BERTModel or FastBERTModel
        The book model (made fast here) or its twin.
    loss : gluon.loss.SoftmaxCELoss
        The book's ``gluon.loss.SoftmaxCELoss()``, used for both tasks.
    vocab_size : int
        V, the number of classes of the MLM loss.
    kernels : bool, optional
        As for `accelerate`.
    row_multiple : int, default 8
        As for `FastBatchLoss`.
    token_multiple : int, default 1024
        As for `FastBatchLoss`.
    """
    kernels = use_kernels(contexts(net), kernels)
    twin = accelerate(net, kernels=kernels, check=False)
    graph = FastBatchLoss(twin, loss, vocab_size, kernels, row_multiple,
                          token_multiple)
    hybridize_twin(graph, net, loss)      # `net` and `loss` stay as they were

    def compute(*shards):
        mlm_ls, nsp_ls, ls = [], [], []
        for shard in zip(*shards):
            mlm_l, nsp_l, l = graph(*shard)
            mlm_ls.append(mlm_l)
            nsp_ls.append(nsp_l)
            ls.append(l)
        return mlm_ls, nsp_ls, ls
    compute.graph = graph
    return compute
