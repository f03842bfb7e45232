"""d2l's training loop of the fine-tuning section, fixed in one place.

d2l 1.0.3's `train_ch13` plots the training figures after every
``num_batches // 5``-th batch of an epoch, which is 0 below five batches
(1,000 SNLI pairs in the book's batches of 512): the loop then fails on
a modulo by zero.  The book's section (`d2l_bert.book.finetuning`) calls
d2l's loop; what trains on few batches applies one of the two fixes
here, from outside:

- where the loop is ours: `batches_per_point`, the one rule of where the
  figures are taken (`train_ch13`, d2l's loop with it, which the
  fine-tuning notebook calls; `d2l_bert.runs.finetuning.
  train_ch13_history` takes its history's points by it too);
- where the loop is d2l's own (an edition's ``d2l.train_ch13``, in the
  chapter runner): `with_min_batches`, an epoch of fewer than five
  batches cut again into `MIN_BATCHES`.
"""
from d2l import mxnet as d2l

from ..devices import try_all_gpus
from ..presets import MIN_BATCHES, POINTS_PER_EPOCH


def batches_per_point(num_batches):
    """Batches between two points of the training figures of an epoch.

    d2l's ``num_batches // 5``, but at least 1: an epoch of fewer than
    five batches is plotted after every batch instead of failing.

    Parameters
    ----------
    num_batches : int
        Batches an epoch, ``len(train_iter)``.

    Returns
    -------
    int
    """
    return max(num_batches // POINTS_PER_EPOCH, 1)


def takes_point(i, num_batches):
    """Whether the figures are taken after batch `i` (from 0) of an epoch
    of `num_batches`: every `batches_per_point` and after the last."""
    return (i + 1) % batches_per_point(num_batches) == 0 or \
        i == num_batches - 1


def train_ch13(net, train_iter, test_iter, loss, trainer, num_epochs,
               devices=None, split_f=None):
    """Train a model on several devices, plotting loss and accuracies.

    d2l 1.0.3's `train_ch13` (the loop the book's image chapter defines
    and sec_natural-language-inference-bert borrows), line for line,
    except that the plot's points are `takes_point`'s, so that an epoch of
    fewer than five batches is trained and plotted too.

    Parameters
    ----------
    net : gluon.Block
        Called on the shards `split_f` gives.
    train_iter, test_iter : iterable of (features, labels)
        Minibatches; `len(train_iter)` is the batch count of an epoch.
    loss : gluon.loss.Loss
        Per-example loss of the predictions and the labels.
    trainer : gluon.Trainer
        Steps with ``ignore_stale_grad=True``: parameters that get no
        gradient (BERT's pretraining heads) are left as they are.
    num_epochs : int
        Passes over `train_iter`.
    devices : list of mxnet.Context, optional
        Where `net` is; each batch is split over them.  Default:
        `d2l_bert.devices.try_all_gpus` when called (``[cpu(0)]`` without
        a GPU, where d2l's default, taken at import, is empty).
    split_f : callable, optional
        ``split_f(features, labels, devices)`` -> shards
        (`d2l.split_batch_multi_inputs` for BERT's three inputs); None,
        d2l's default, `d2l.split_batch`.

    Notes
    -----
    Prints the last epoch's loss and accuracies, and the throughput.
    """
    devices = try_all_gpus() if devices is None else devices
    split_f = d2l.split_batch if split_f is None else split_f
    timer, num_batches = d2l.Timer(), len(train_iter)
    animator = d2l.Animator(xlabel='epoch', xlim=[1, num_epochs], ylim=[0, 1],
                            legend=['train loss', 'train acc', 'test acc'])
    for epoch in range(num_epochs):
        # Sum of training loss, sum of training accuracy, no. of examples,
        # no. of predictions
        metric = d2l.Accumulator(4)
        for i, (features, labels) in enumerate(train_iter):
            timer.start()
            l, acc = d2l.train_batch_ch13(
                net, features, labels, loss, trainer, devices, split_f)
            metric.add(l, acc, labels.shape[0], labels.size)
            timer.stop()
            if takes_point(i, num_batches):
                animator.add(epoch + (i + 1) / num_batches,
                             (metric[0] / metric[2], metric[1] / metric[3],
                              None))
        test_acc = d2l.evaluate_accuracy_gpus(net, test_iter, split_f)
        animator.add(epoch + 1, (None, None, test_acc))
    print(f'loss {metric[0] / metric[2]:.3f}, train acc '
          f'{metric[1] / metric[3]:.3f}, test acc {test_acc:.3f}')
    print(f'{metric[2] * num_epochs / timer.sum():.1f} examples/sec on '
          f'{str(devices)}')


def with_min_batches(train_iter, count=MIN_BATCHES):
    """Return `train_iter`, or, if an epoch of it holds from 1 to
    ``count - 1`` batches, its examples in `count` batches an epoch.

    Parameters
    ----------
    train_iter : iterable of (features, labels)
        Batches; features an array of shape (B, ...) or a list or tuple of
        such arrays, labels of shape (B,).
    count : int, default `MIN_BATCHES`
        The batches an epoch that d2l's loop needs at least, and what an
        epoch of fewer is cut into.

    Returns
    -------
    iterable
        `train_iter` itself, or a `Recut` of it.
    """
    if len_or_none(train_iter) in range(1, count):
        return Recut(train_iter, count)
    return train_iter


class Recut:
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
            yield rows(features, slice(start, stop)), labels[start:stop]


def len_or_none(obj):
    """``len(obj)``, or None for an object without a length."""
    try:
        return len(obj)
    except TypeError:
        return None


def rows(features, picked):
    """Rows `picked` (indices or a slice) of an array, or of each array of
    a list or tuple."""
    if isinstance(features, (list, tuple)):
        return type(features)(f[picked] for f in features)
    return features[picked]
