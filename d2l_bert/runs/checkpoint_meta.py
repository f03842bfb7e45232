"""What a checkpoint's ``meta.json`` holds beside the weights, checked.

A resumed run repeats an uninterrupted one exactly (`d2l_bert.runs.
checkpoints`): besides the weights and Adam's state it needs the step,
the losses so far, Python's and NumPy's random states
(`get_rng_states`), the position in the data (`DataPosition`), the seed
MXNet is reseeded from, and Adam's step counts.  They are JSON, written
as this module reads them, and `check_meta` checks every one of them,
their types, sizes and ranges, before anything is used: a damaged or
hand-edited ``meta.json`` is one line that names the file and the
field, never a hang in a loop of a billion epochs or a run that trains
more steps than it asked for.
"""
import math
import random

import numpy as onp

#: The checkpoint format that `d2l_bert.runs.checkpoints` writes: 2 keeps
#: Adam's state as arrays and JSON; 1 pickled it (still read, without
#: running code)
CHECKPOINT_VERSION = 2
#: The largest seed MXNet is reseeded from, and the most devices a
#: checkpoint may record
MAX_SEED, MAX_DEVICES = 2**31 - 1, 4096
#: The keys of ``meta.json``, of its history and of Adam's state
KEYS = ('version', 'step', 'history', 'rng', 'data', 'mx_seed', 'config')
HISTORY_KEYS = ('devices', 'mlm', 'nsp', 'num_pairs', 'seconds')
ADAM_KEYS = ('hyper', 'num_update', 'update_counts')


class ResumeError(ValueError):
    """A checkpoint that cannot be resumed from: its message is one line
    that names the file and the cause."""


# ---------------------------------------------------------------------------
# Random states and the position in the data, for exact resumption
# ---------------------------------------------------------------------------

def get_rng_states():
    """Python's and NumPy's global random states, as JSON-ready lists."""
    version, internal, gauss = random.getstate()
    name, keys, pos, has_gauss, cached = onp.random.get_state()
    return dict(python=[version, list(internal), gauss],
                numpy=[name, keys.tolist(), int(pos), int(has_gauss),
                       float(cached)])


def set_rng_states(states):
    """Set the random states `get_rng_states` returned (and `check_rng`
    checked)."""
    version, internal, gauss = states['python']
    random.setstate((version, tuple(internal), gauss))
    name, keys, pos, has_gauss, cached = states['numpy']
    onp.random.set_state((name, onp.array(keys, dtype=onp.uint32), pos,
                          has_gauss, cached))


class DataPosition:
    """Walk `train_iter` epoch after epoch, able to come back to a step.

    A data loader shuffles when an epoch starts, drawing either from
    NumPy's global random state (Gluon's `RandomSampler`) or from a
    generator of its own, seeded when the loader was made (the seeded
    loaders of `wiki_data.load_pretraining_data`).  To stand again where
    a checkpoint was taken, with a loader made afresh the same way,
    `restore` draws the first batch of each earlier epoch (moving a
    sampler's own generator on), sets the global random states of the
    current epoch's start, and skips the batches this epoch already gave.
    """

    def __init__(self, train_iter):
        self.train_iter = train_iter
        self.epoch, self.epoch_states, self.num_batches = -1, None, 0
        self._it = None

    def epoch_length(self):
        """The batches of an epoch (None: `train_iter` does not say)."""
        if hasattr(self.train_iter, '__len__'):
            return len(self.train_iter)
        return None

    def _start_epoch(self):
        self.epoch += 1
        self.epoch_states = get_rng_states()
        self._it, self.num_batches = iter(self.train_iter), 0

    def next_batch(self, min_rows=1):
        """The next batch with at least `min_rows` rows; smaller ones
        (an epoch's last, when `min_rows` devices share each batch) are
        skipped."""
        # The rest of this epoch, then (at least) one whole epoch
        largest = 0
        for _ in range(2):
            if self._it is None:
                self._start_epoch()
            for batch in self._it:
                self.num_batches += 1
                if len(batch[0]) >= min_rows:
                    return batch
                largest = max(largest, len(batch[0]))
            self._it = None
        if self.num_batches == 0:
            raise ValueError('train_iter yielded no batch: the dataset is '
                             'empty')
        raise ValueError(f'train_iter yielded no batch of {min_rows} or '
                         f'more pairs (the largest held {largest}), one for '
                         f'each of the {min_rows} devices of the job: use '
                         f'batch_size={min_rows} or more and a corpus of '
                         f'{min_rows} pairs or more, or fewer devices or '
                         'workers')

    def state(self):
        return dict(epoch=self.epoch, epoch_states=self.epoch_states,
                    num_batches=self.num_batches)

    def restore(self, state, path):
        """Replay the shuffles and skip the batches already used, as
        the `state` of the checkpoint `path` (checked by `check_meta`)
        says."""
        if state['epoch'] < 0:
            return
        try:
            for _ in range(state['epoch']):
                next(iter(self.train_iter))
            set_rng_states(state['epoch_states'])
            self.epoch = state['epoch']
            self.epoch_states = state['epoch_states']
            self._it, self.num_batches = iter(self.train_iter), 0
            for _ in range(state['num_batches']):
                next(self._it)
                self.num_batches += 1
        except StopIteration:
            raise ResumeError(
                f"{path}: meta.json's data.num_batches is "
                f"{state['num_batches']:,}, more than the "
                f'{self.num_batches:,} batches of an epoch of the data; the '
                'checkpoint is of other data, or damaged') from None


# ---------------------------------------------------------------------------
# Checking meta.json
# ---------------------------------------------------------------------------

def check_meta(path, meta, num_batches=None):
    """Return `meta`, the ``meta.json`` of the checkpoint `path`, once
    every field is checked.

    Parameters
    ----------
    path : str
        The checkpoint, named by the errors.
    meta : object
        What ``meta.json`` holds.
    num_batches : int, optional
        The batches of an epoch of the data the run walks, if known:
        ``data.num_batches`` may not be more.

    Raises
    ------
    ResumeError
        Naming the first field of another type, size or range than a
        checkpoint of `CHECKPOINT_VERSION` (or of version 1) holds.
    """
    if not isinstance(meta, dict):
        raise ResumeError(f'{path}: meta.json holds {_shown(meta)}, not '
                          'an object; the checkpoint is damaged')
    version = meta.get('version')
    if type(version) is not int or version not in (1, CHECKPOINT_VERSION):
        raise ResumeError(
            f"{path}: meta.json's version is {_shown(version)}, and this "
            f'd2l-bert reads versions 1 and {CHECKPOINT_VERSION}: a newer '
            'd2l-bert wrote it, or it is damaged')
    for key in KEYS + (('adam',) if version > 1 else ()):
        if key not in meta:
            raise ResumeError(f'{path}: meta.json holds no {key}; the '
                              'checkpoint is damaged')
    step = _int(path, 'step', meta['step'], 0)
    _check_history(path, meta['history'], step)
    check_rng(path, 'rng', meta['rng'])
    _check_data(path, meta['data'], step, num_batches)
    if meta['mx_seed'] is not None:
        _int(path, 'mx_seed', meta['mx_seed'], 0, MAX_SEED, 'or null')
    if meta['config'] is not None and not isinstance(meta['config'], dict):
        raise _damaged(path, 'config', meta['config'],
                       'not an object of settings, nor null')
    if version > 1:
        _check_adam(path, meta['adam'], step)
    return meta


def check_rng(path, field, states):
    """Raise a ResumeError unless `states` (the `field` of
    ``meta.json``) are random states as `get_rng_states` returns
    them."""
    if not (isinstance(states, dict) and set(states) == {'python',
                                                         'numpy'}):
        raise _damaged(path, field, states, 'not an object of the Python '
                       'and NumPy random states')
    python, numpy = states['python'], states['numpy']
    if not (_is_list(python, 3) and python[0] == 3
            and _is_list(python[1], 625)
            and _words(python[1][:624]) and _is_int(python[1][624], 0, 624)
            and (python[2] is None or _is_number(python[2]))):
        raise _damaged(path, f'{field}.python', python, "not Python's "
                       'random state ([3, 625 integers, a number or null])')
    if not (_is_list(numpy, 5) and numpy[0] == 'MT19937'
            and _is_list(numpy[1], 624) and _words(numpy[1])
            and _is_int(numpy[2], 0, 624) and _is_int(numpy[3], 0, 1)
            and _is_number(numpy[4])):
        raise _damaged(path, f'{field}.numpy', numpy, "not NumPy's random "
                       "state (['MT19937', 624 integers, 3 numbers])")


def _check_history(path, history, step):
    """The losses of every step done, the pairs and the seconds."""
    if not (isinstance(history, dict) and set(history) == set(
            HISTORY_KEYS)):
        raise _damaged(path, 'history', history, 'not an object of '
                       f"{', '.join(HISTORY_KEYS)}")
    devices = history['devices']
    if not (_is_list(devices) and len(devices) <= MAX_DEVICES and all(
            isinstance(d, str) and len(d) <= 100 for d in devices)):
        raise _damaged(path, 'history.devices', devices,
                       "not a list of devices' names")
    for name in ('mlm', 'nsp'):
        losses = history[name]
        if not _is_list(losses):
            raise _damaged(path, f'history.{name}', losses, 'not a list '
                           'of losses')
        if len(losses) != step:
            raise ResumeError(
                f"{path}: meta.json's history.{name} holds "
                f'{len(losses):,} losses, not one for each of the '
                f'{step:,} steps done; the checkpoint is damaged')
        if not all(_is_number(loss) for loss in losses):
            bad = next(loss for loss in losses if not _is_number(loss))
            raise _damaged(path, f'history.{name}', losses, f'holding '
                           f'{_shown(bad)}, not a loss')
    _int(path, 'history.num_pairs', history['num_pairs'], 0)
    seconds = history['seconds']
    if not (_is_number(seconds) and seconds >= 0):
        raise _damaged(path, 'history.seconds', seconds, 'not a number of '
                       'seconds (0 or more)')


def _check_data(path, data, step, num_batches):
    """The position in the data: no more epochs than steps, and no more
    batches than an epoch has (or than steps, where it does not say)."""
    if data is None:
        return
    if not (isinstance(data, dict) and set(data) == {
            'epoch', 'epoch_states', 'num_batches'}):
        raise _damaged(path, 'data', data, 'not an object of epoch, '
                       'epoch_states and num_batches, nor null')
    epoch = _int(path, 'data.epoch', data['epoch'], -1)
    if epoch > step:
        raise ResumeError(
            f"{path}: meta.json's data.epoch is {epoch:,}, more than the "
            f'{step:,} steps done; the checkpoint is damaged')
    count = _int(path, 'data.num_batches', data['num_batches'], 0)
    if epoch < 0:
        if data['epoch_states'] is not None or count or step:
            raise _damaged(path, 'data', data, 'a position in no epoch '
                           'with steps done, batches or random states')
        return
    check_rng(path, 'data.epoch_states', data['epoch_states'])
    for limit, what in ((num_batches, 'batches of an epoch of the data'),
                        (step, 'steps done')):
        if limit is not None and count > limit:
            raise ResumeError(
                f"{path}: meta.json's data.num_batches is {count:,}, more "
                f'than the {limit:,} {what}; the checkpoint is damaged, or '
                'of other data')


def _check_adam(path, adam, step):
    """Adam's settings and step counts, by device and parameter."""
    if not (isinstance(adam, dict) and set(adam) == set(ADAM_KEYS)):
        raise _damaged(path, 'adam', adam, 'not an object of '
                       f"{', '.join(ADAM_KEYS)}")
    hyper = adam['hyper']
    if not (isinstance(hyper, dict) and len(hyper) <= 100 and all(
            v is None or _is_number(v) for v in hyper.values())):
        raise _damaged(path, 'adam.hyper', hyper, "not an object of Adam's "
                       'settings (numbers, or null)')
    _int(path, 'adam.num_update', adam['num_update'], 0, step,
         f'(the {step:,} steps done)')
    counts = adam['update_counts']
    if not (isinstance(counts, dict) and len(counts) <= MAX_DEVICES
            and all(k.isdigit() and len(k) <= 9 and isinstance(c, dict)
                    for k, c in counts.items())):
        raise _damaged(path, 'adam.update_counts', counts, 'not an object '
                       "of devices' step counts")
    for device, by_name in counts.items():
        for name, count in by_name.items():
            if not _is_int(count, 0, step):
                raise ResumeError(
                    f"{path}: meta.json's adam.update_counts holds "
                    f'{_shown(count)} updates of {name!r:.80}, not 0 to '
                    f'the {step:,} steps done; the checkpoint is damaged')


# ---------------------------------------------------------------------------
# Types, ranges and how a value is shown
# ---------------------------------------------------------------------------

def _int(path, field, value, low, high=None, detail=''):
    """`value`, the `field` of ``meta.json``, if it is an integer from
    `low` to `high` (None: no limit)."""
    if _is_int(value, low, high):
        return value
    allowed = f'an integer from {low:,} to {high:,}' if high is not None \
        else f'an integer, {low} or more'
    raise _damaged(path, field, value, f'not {allowed}'
                   + (f' {detail}' if detail else ''))


def _damaged(path, field, value, allowed):
    return ResumeError(f"{path}: meta.json's {field} is {_shown(value)}, "
                       f'{allowed}; the checkpoint is damaged')


def _is_int(value, low, high=None):
    # (`type`, not `isinstance`: JSON's true and false are no numbers)
    return type(value) is int and value >= low and (
        high is None or value <= high)


def _is_number(value):
    return type(value) in (int, float) and math.isfinite(value)


def _is_list(value, length=None):
    return type(value) is list and (length is None or len(value) == length)


def _words(values):
    """Whether `values` are all 32-bit unsigned integers."""
    return all(_is_int(v, 0, 2**32 - 1) for v in values)


def _shown(value):
    """`value` in a message: short, and in JSON's words."""
    if value is None:
        return 'null'
    if isinstance(value, bool):
        return 'true' if value else 'false'
    if isinstance(value, list):
        return f"a list of {len(value):,} value{'s' * (len(value) != 1)}"
    if isinstance(value, dict):
        return f"an object of {len(value):,} key{'s' * (len(value) != 1)}"
    if isinstance(value, int):
        return f'{value:,}' if abs(value) < 10**30 else 'a huge integer'
    text = repr(value)
    return text if len(text) <= 40 else f'{text[:36]}...{text[-1]}'
