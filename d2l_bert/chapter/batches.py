"""The small sizes' batches: a few small batches cut from the first.

The fix of an epoch of fewer than five batches, for d2l's own
``train_ch13``, is `d2l_bert.runs.d2l_loops.with_min_batches`.
"""
from ..runs.d2l_loops import rows


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
