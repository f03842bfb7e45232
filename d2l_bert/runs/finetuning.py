"""Fine-tuning runs: what ``d2l-bert finetune`` and the notebook use
beside the book's objects of `d2l_bert.book.finetuning`.

The sizes a pretrained model was built with (`load_pretrained_config`),
where SNLI is found or written (`snli_data_dir`), how much the `<cls>`
encoding varies across inputs (`cls_spread`), the book's training loop
returning its history (`train_ch13_history`, its points taken as
`d2l_loops.train_ch13` takes them) and its plot (`plot_history`), and
the book's `read_snli` with the first pairs only (`read_snli_pairs`).
"""
import contextlib
import os
import sys
import time

import mxnet as mx

from d2l import mxnet as d2l
from mxnet import npx

from ..checks import (check_finite_loss, check_finite_parameters,
                      check_inputs)
from ..data.atomic import atomic_write
from ..data.hub import data_home, download_extract
from ..book.bert import BERTModel
from ..data.model_dir import (PARAMS_FILE, check_mxnet_path,
                              check_params_fit, damaged, infer_config,
                              is_mxnet_trace, load_vocab, read_config,
                              read_params)
from ..data.snli_synthetic import make_snli_synthetic
from ..book import finetuning as book_finetuning
from ..book.finetuning import load_pretrained_model
from ..data.snli import reading_first_pairs
from ..presets import BERT_SMALL, HUB_MODELS
from . import interrupts
from .d2l_loops import takes_point
from .model_files import check_memory, check_vocab_size

# the sizes `config.json` may record; `load_checked_model` checks them
CONFIG_KEYS = ('num_hiddens', 'ffn_num_hiddens', 'num_heads', 'num_blks',
               'max_len')


# --------------------------------------------------------------------------
# Loading a pretrained model, with errors a user can act on
# --------------------------------------------------------------------------

def _pretrained_dir(pretrained_model):
    """Return the directory holding `pretrained.params` and `vocab.json`."""
    if pretrained_model in HUB_MODELS:
        return download_extract(pretrained_model, stand_in=False)
    if isinstance(pretrained_model, (str, os.PathLike)) and os.path.isdir(
            pretrained_model):
        return os.fspath(pretrained_model)
    raise ValueError(
        "pretrained_model must be 'bert.small' or 'bert.base' or a "
        'directory holding pretrained.params and vocab.json (such as '
        f'`d2l-bert pretrain --out DIR` writes), got {pretrained_model!r}')


def _need_file(data_dir, name):
    """Return ``data_dir/name`` or raise `FileNotFoundError` saying why."""
    path = os.path.join(data_dir, name)
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f'{path} not found: a pretrained model directory holds '
            'pretrained.params and vocab.json (the layout of bert.small; '
            '`d2l-bert pretrain --out DIR` writes it)')
    return path


def _check_config(data_dir, vocab_size, sizes):
    """Raise `ValueError` when `data_dir`'s `config.json` (if any) gives
    other `sizes` or another `vocab_size` than those asked for."""
    config = read_config(data_dir) or {}
    wrong = [f'{k}={sizes[k]} (config.json: {config[k]})'
             for k in CONFIG_KEYS if k in config and config[k] != sizes[k]]
    if wrong:
        raise ValueError(
            f'the model in {data_dir} was pretrained with other sizes: '
            f'got {", ".join(wrong)}; pass the sizes of config.json')
    if config.get('vocab_size', vocab_size) != vocab_size:
        raise ValueError(
            f'{data_dir}: vocab.json has {vocab_size} tokens but '
            f'config.json says vocab_size={config["vocab_size"]}')


@contextlib.contextmanager
def _explain_load_errors(params_file, model):
    """Turn the errors of loading `params_file` into a `ValueError` that
    says whether the sizes differ (`model` names them) or the file is
    damaged, whole (the files are checked before: these are MXNet's
    errors on what the checks let through)."""
    try:
        yield
    except AssertionError as e:  # a missing parameter or another shape
        raise ValueError(f'{params_file} does not fit {model}: {e}') \
            from None
    except (ValueError, mx.base.MXNetError) as e:
        if not is_mxnet_trace(e):
            raise
        raise damaged(params_file) from None


def load_checked_model(pretrained_model, num_hiddens, ffn_num_hiddens,
                       num_heads, num_blks, dropout, max_len, devices):
    """The book's `load_pretrained_model`, after checking the model's files.

    What the command line and the API call: the book's function loads,
    and this one first says in one line what is wrong with a model
    directory (a missing file, other sizes than its `config.json`), and
    turns a load that fails into one line (other sizes, a damaged file).

    Parameters
    ----------
    pretrained_model, num_hiddens, ffn_num_hiddens, num_heads, num_blks, \
dropout, max_len, devices
        As for `d2l_bert.book.finetuning.load_pretrained_model`.

    Returns
    -------
    bert : BERTModel
    vocab : d2l.Vocab

    Raises
    ------
    FileNotFoundError
        A file of the layout is missing.
    ValueError
        `pretrained_model` names neither a hub model nor a directory; the
        sizes differ from `config.json` or from the saved parameters; or
        a file is corrupt.
    """
    data_dir = _pretrained_dir(pretrained_model)
    vocab_file = _need_file(data_dir, 'vocab.json')
    params_file = _need_file(data_dir, 'pretrained.params')
    vocab_size = len(load_vocab(vocab_file))
    sizes = dict(num_hiddens=num_hiddens, ffn_num_hiddens=ffn_num_hiddens,
                 num_heads=num_heads, num_blks=num_blks, max_len=max_len)
    _check_config(data_dir, vocab_size, sizes)
    params = read_params(params_file)
    check_vocab_size(data_dir, vocab_size, {}, params)
    check_memory(params_file, params)
    model = f'BERTModel(vocab_size={vocab_size}, ' + ', '.join(
        f'{k}={v}' for k, v in sizes.items()) + ')'
    check_params_fit(BERTModel(vocab_size, dropout=dropout, **sizes),
                     params, params_file, model)
    check_mxnet_path(params_file)
    with _explain_load_errors(params_file, model):
        return load_pretrained_model(data_dir, num_hiddens, ffn_num_hiddens,
                                     num_heads, num_blks, dropout, max_len,
                                     devices)




def load_pretrained_config(pretrained_model):
    """Return the constructor arguments a pretrained model was built with.

    Parameters
    ----------
    pretrained_model : str
        ``'bert.small'``, ``'bert.base'`` (`presets.HUB_MODELS`, no download)
        or a directory: its `config.json` (as `d2l-bert pretrain` writes)
        gives the sizes; without one they are read off the shapes in
        `pretrained.params`, which works for an unzipped `bert.small` or
        `bert.base` (the number of heads does not show in the shapes).

    Returns
    -------
    dict
        `num_hiddens`, `ffn_num_hiddens`, `num_heads`, `num_blks`,
        `dropout` and `max_len`.
    """
    if pretrained_model in HUB_MODELS:
        return dict(HUB_MODELS[pretrained_model])
    data_dir = _pretrained_dir(pretrained_model)
    config = read_config(data_dir)
    if config is None:
        sizes = infer_config(_need_file(data_dir, PARAMS_FILE))
        return dict({k: sizes[k] for k in CONFIG_KEYS},
                    dropout=BERT_SMALL['dropout'])
    missing = [k for k in CONFIG_KEYS if k not in config]
    if missing:
        raise ValueError(
            f'{os.path.join(data_dir, "config.json")} lacks {missing}')
    out = {k: int(config[k]) for k in CONFIG_KEYS}
    out['dropout'] = float(config.get('dropout', BERT_SMALL['dropout']))
    return out


#: The book's `read_snli`, reading only the first pairs of each split
#: when ``D2L_BERT_SNLI_PAIRS`` says so, and naming the file and the line
#: of what it cannot read (`data.snli.reading_first_pairs`): what
#: ``d2l-bert finetune`` and the fine-tuning notebook read SNLI with
read_snli_pairs = reading_first_pairs(book_finetuning.read_snli)


def snli_data_dir(data='snli'):
    """Return a directory for `read_snli`: real, synthetic or local SNLI.

    Parameters
    ----------
    data : str
        ``'snli'`` downloads SNLI (checked against its SHA-1);
        ``'synthetic'`` writes `d2l_bert.data.snli_synthetic`'s corpus into the
        cache, no network needed; anything else is a directory holding
        ``snli_1.0_train.txt`` and ``snli_1.0_test.txt`` (or their
        ``snli_1.0`` folder).
    """
    if data == 'snli':
        return download_extract('SNLI', stand_in=False)
    if data == 'synthetic':
        return make_snli_synthetic(os.path.join(data_home(),
                                                'snli-synthetic'))
    if not os.path.isdir(data):
        raise ValueError(
            f"data must be 'snli', 'synthetic' or a directory holding "
            f'snli_1.0_train.txt and snli_1.0_test.txt, got {data!r}')
    nested = os.path.join(data, 'snli_1.0')
    if not os.path.isfile(os.path.join(data, 'snli_1.0_train.txt')) and \
            os.path.isdir(nested):
        return nested
    return data


def cls_spread(bert, dataset, num_examples=64):
    """Measure how much the `<cls>` encoding varies across inputs.

    A pretraining that collapsed gives every input the same encoding; the
    classifier then starts from no information about the pair, and
    fine-tuning may stay at chance.  This returns the mean over hidden
    units of the standard deviation across the first `num_examples`
    examples of `dataset`: about 0.1 for a randomly initialised model,
    near 0 (below 1e-3) for a collapsed one.

    Parameters
    ----------
    bert : BERTModel
        The pretrained model to check.
    dataset : SNLIBERTDataset
        Pairs to encode.
    num_examples : int
        How many of its first examples to encode.

    Returns
    -------
    float
    """
    ctx = bert.encoder.token_embedding.weight.list_ctx()[0]
    n = min(num_examples, len(dataset))
    (tokens, segments, valid_lens), _ = dataset[0:n]
    encoded_X = bert.encoder(tokens.as_in_context(ctx),
                             segments.as_in_context(ctx),
                             valid_lens.as_in_context(ctx))  # (n, T, H)
    return float(encoded_X[:, 0, :].std(axis=0).mean())


@interrupts.between_steps()
def train_ch13_history(net, train_iter, test_iter, loss, trainer,
                       num_epochs, devices,
                       split_f=d2l.split_batch_multi_inputs, progress=False):
    """d2l's `train_ch13` with a progress bar, returning the history.

    The same steps as `d2l.train_ch13` (`d2l.train_batch_ch13` for each
    minibatch, `d2l.evaluate_accuracy_gpus` after each epoch) and the
    same two closing lines; the history takes the place of the book's
    animated plot (`plot_history` draws it, ``d2l-bert finetune`` saves
    it).  Apply `d2l_bert.fast.accelerate` to `net` first for speed.  A
    Ctrl-C ends the current minibatch first (`interrupts.between_steps`).

    Parameters
    ----------
    net : BERTClassifier
        Initialized on every context of `devices`.
    train_iter, test_iter : gluon.data.DataLoader
        Batches of ``(inputs, labels)`` for training and for the test
        accuracy after each epoch.
    loss : gluon.loss.Loss
        Per-example loss, as `d2l.train_ch13` takes it.
    trainer : gluon.Trainer
        The optimizer of `net`'s parameters.
    num_epochs : int
        Passes over `train_iter`.
    devices : list of mxnet.Context
        Each batch is split over them.
    split_f : callable
        Splits a minibatch over `devices`.
    progress : bool
        Show a progress bar per epoch (on standard error).

    Returns
    -------
    dict
        ``'epoch'`` (fractional epochs at which the training figures were
        taken, five per epoch as in the book's plot), ``'train loss'``,
        ``'train acc'``, then ``'test epoch'`` and ``'test acc'`` once per
        epoch, and ``'examples/sec'``.
    """
    check_inputs(net)  # the book's blocks in `net` (a twin checks itself)
    history = {'epoch': [], 'train loss': [], 'train acc': [],
               'test epoch': [], 'test acc': []}
    seconds, examples = 0.0, 0
    for epoch in range(num_epochs):
        train_l, train_acc, examples, epoch_seconds = _train_epoch_ch13(
            net, train_iter, loss, trainer, devices, split_f, history,
            epoch, num_epochs, progress)
        seconds += epoch_seconds
        # (the weights are saved after the last epoch: never NaN)
        check_finite_parameters(net.collect_params().values(),
                                trainer.learning_rate,
                                (epoch + 1) * len(train_iter))
        test_acc = d2l.evaluate_accuracy_gpus(
            net, interrupts.checked(test_iter), split_f)
        history['test epoch'].append(epoch + 1)
        history['test acc'].append(test_acc)
        if progress:
            print(f'epoch {epoch + 1}: loss {train_l:.3f}, '
                  f'train acc {train_acc:.3f}, '
                  f'test acc {test_acc:.3f}', file=sys.stderr)
    history['examples/sec'] = examples * num_epochs / seconds
    print(f'loss {train_l:.3f}, train acc '
          f'{train_acc:.3f}, test acc {test_acc:.3f}')
    print(f'{history["examples/sec"]:.1f} examples/sec on {devices}')
    return history


def _train_epoch_ch13(net, train_iter, loss, trainer, devices, split_f,
                      history, epoch, num_epochs, progress):
    """One epoch of `train_ch13_history`: record the training figures in
    `history` after `takes_point`'s batches; return the epoch's mean loss,
    its accuracy, its number of examples and the seconds its steps
    took."""
    from tqdm import tqdm
    num_batches = len(train_iter)
    # Sum of losses, correct predictions, examples, predictions
    loss_sum, correct, examples, predictions = 0.0, 0.0, 0, 0
    seconds = 0.0
    bar = tqdm(interrupts.checked(train_iter), total=num_batches,
               disable=not progress,
               desc=f'epoch {epoch + 1}/{num_epochs}', leave=False,
               file=sys.stderr)
    for i, (features, labels) in enumerate(bar):
        start = time.time()
        l, acc = d2l.train_batch_ch13(
            net, features, labels, loss, trainer, devices, split_f)
        if epoch == 0 and i == 0:   # the first update
            check_finite_parameters(net.collect_params().values(),
                                    trainer.learning_rate)
        check_finite_loss('loss', l / labels.shape[0],
                          epoch * num_batches + i + 1,
                          trainer.learning_rate)
        # The losses are read after the forward pass; the timer waits
        # for the backward pass and the update too (the book's does
        # not, which overstates the throughput)
        npx.waitall()
        loss_sum, correct = loss_sum + l, correct + acc
        examples += labels.shape[0]
        predictions += labels.size
        seconds += time.time() - start
        if takes_point(i, num_batches):
            history['epoch'].append(epoch + (i + 1) / num_batches)
            history['train loss'].append(loss_sum / examples)
            history['train acc'].append(correct / predictions)
            bar.set_postfix(loss=f'{loss_sum / examples:.3f}',
                            acc=f'{correct / predictions:.3f}')
    bar.close()
    return loss_sum / examples, correct / predictions, examples, seconds


def plot_history(history, file_name):
    """Plot training loss and accuracies against epochs into a PNG file.

    The file is written whole or not at all (`atomic_write`).
    """
    atomic_write(file_name, history_png(history))


def history_png(history):
    """The PNG image (bytes) of `plot_history`'s plot of `history`."""
    import io

    import matplotlib
    matplotlib.use('Agg')
    from matplotlib import pyplot as plt
    fig, ax = plt.subplots(figsize=(4.5, 3.2))
    ax.plot(history['epoch'], history['train loss'], label='train loss')
    ax.plot(history['epoch'], history['train acc'], '--',
            label='train acc')
    ax.plot(history['test epoch'], history['test acc'], 'o-',
            label='test acc')
    ax.set_xlabel('epoch')
    ax.set_xlim(0, max(history['test epoch']))
    ax.set_ylim(0, max(1.0, max(history['train loss']) * 1.05))
    ax.grid(True)
    ax.legend()
    fig.tight_layout()
    image = io.BytesIO()
    try:
        fig.savefig(image, format='png', dpi=120)
    finally:
        plt.close(fig)
    return image.getvalue()
