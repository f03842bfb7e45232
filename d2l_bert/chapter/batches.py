"""Batches that d2l 1.0.3's ``train_ch13`` can train on.

d2l's loop draws its figure every fifth of an epoch's batches: it takes
``i % (num_batches // 5)``, a division by 0 for an epoch of fewer than
five batches (1,000 SNLI pairs at the book's batch of 512 are two).
`with_min_batches` is that fix, applied from outside the loop: such an
epoch is cut again into `MIN_BATCHES` batches (`Recut`).  `FewBatches`
is the small sizes' data: a few small batches cut from the first.
"""
from ..presets import MIN_BATCHES


def with_min_batches(train_iter, count=MIN_BATCHES):
    """Return `train_iter`, or, if an epoch of it holds from 1 to
    ``count - 1`` batches, its examples in `count` batches an epoch.

    Parameters
    ----------
    train_iter : iterable of (features, labels)
        Batches; features an array of shape (B, ...) or a list or tuple of
        such arrays, labels of shape (B,).
    count : int, default `MIN_BATCHES`

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


class FewBatches:
    """`count` batches of at most `size` examples, cut from the first
    batch of `data_iter` (examples repeat if it holds fewer than
    `count`)."""

    def __init__(self, data_iter, count, size):
        features, labels = next(iter(data_iter))
        n = len(labels)
        size = max(1, min(size, n // count))
        self.batches = []
        for k in range(count):
            picked = [(k * size + i) % n for i in range(size)]
            self.batches.append((rows(features, picked), labels[picked]))

    def __len__(self):
        return len(self.batches)

    def __iter__(self):
        return iter(self.batches)


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
