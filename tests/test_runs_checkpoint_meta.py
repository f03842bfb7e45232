"""Tests of d2l_bert/runs/checkpoint_meta.py: every field of a
checkpoint's meta.json checked before it is used, the random states and
the position in the data."""
import copy
import json
import random

import numpy as onp
import pytest

from d2l_bert.runs.checkpoint_meta import (ResumeError, DataPosition,
                                           check_meta, check_rng,
                                           get_rng_states, set_rng_states)

PATH = 'run/checkpoint.zip'
DAMAGED = '; the checkpoint is damaged'
PYTHON = "not Python's random state ([3, 625 integers, a number or null])"
NUMPY = ("not NumPy's random state (['MT19937', 624 integers, 3 "
         'numbers])')
STATES = 'not an object of the Python and NumPy random states'


def valid_meta(step=3):
    """A meta.json of a checkpoint at `step`, as JSON gives it back."""
    rng = get_rng_states()
    return json.loads(json.dumps(dict(
        version=2, step=step,
        history=dict(devices=['cpu(0)'], mlm=[5.25] * step,
                     nsp=[0.75] * step, num_pairs=32 * step, seconds=1.5),
        rng=rng, data=dict(epoch=0, epoch_states=rng, num_batches=step),
        mx_seed=1234, config=dict(batch_size=32),
        adam=dict(hyper=dict(learning_rate=0.01, beta1=0.9, beta2=0.999,
                             epsilon=1e-08, wd=0.0, clip_gradient=None),
                  num_update=step, update_counts={'0': {'w': step}}))))


def changed(meta, keys, value):
    """`meta` with the field at `keys` set to `value` (deleted for
    `delete`)."""
    meta = copy.deepcopy(meta)
    inner = meta
    for key in keys[:-1]:
        inner = inner[key]
    if value is delete:
        del inner[keys[-1]]
    else:
        inner[keys[-1]] = value
    return meta


delete = object()

#: (the field, its new value, the message that follows `PATH`)
FIELDS = [
    (('step',), -3, "meta.json's step is -3, not an integer, 0 or more"
     + DAMAGED),
    (('step',), True, "meta.json's step is true, not an integer, 0 or more"
     + DAMAGED),
    (('step',), 3.0, "meta.json's step is 3.0, not an integer, 0 or more"
     + DAMAGED),
    (('version',), 7, "meta.json's version is 7, and this d2l-bert reads "
     'versions 1 and 2: a newer d2l-bert wrote it, or it is damaged'),
    (('rng',), delete, 'meta.json holds no rng' + DAMAGED),
    (('adam',), delete, 'meta.json holds no adam' + DAMAGED),
    (('history',), [1, 2], "meta.json's history is a list of 2 values, not "
     'an object of devices, mlm, nsp, num_pairs, seconds' + DAMAGED),
    (('history', 'devices'), 'cpu', "meta.json's history.devices is 'cpu', "
     "not a list of devices' names" + DAMAGED),
    (('history', 'mlm'), [1.0] * 5, "meta.json's history.mlm holds 5 "
     'losses, not one for each of the 3 steps done' + DAMAGED),
    (('history', 'nsp'), [0.5, 'x', 0.5], "meta.json's history.nsp is a "
     "list of 3 values, holding 'x', not a loss" + DAMAGED),
    (('history', 'nsp'), [0.5, float('nan'), 0.5], "meta.json's "
     'history.nsp is a list of 3 values, holding nan, not a loss'
     + DAMAGED),
    (('history', 'num_pairs'), -1, "meta.json's history.num_pairs is -1, "
     'not an integer, 0 or more' + DAMAGED),
    (('history', 'seconds'), 'fast', "meta.json's history.seconds is "
     "'fast', not a number of seconds (0 or more)" + DAMAGED),
    (('mx_seed',), 2**31, "meta.json's mx_seed is 2,147,483,648, not an "
     'integer from 0 to 2,147,483,647 or null' + DAMAGED),
    (('mx_seed',), 'abc', "meta.json's mx_seed is 'abc', not an integer "
     'from 0 to 2,147,483,647 or null' + DAMAGED),
    (('rng',), 'random', f"meta.json's rng is 'random', {STATES}"
     + DAMAGED),
    (('rng', 'python'), [3, [0] * 624, None], "meta.json's rng.python is a "
     f'list of 3 values, {PYTHON}' + DAMAGED),
    (('rng', 'python', 1, 624), 625, "meta.json's rng.python is a list of "
     f'3 values, {PYTHON}' + DAMAGED),
    (('rng', 'numpy', 0), 'PCG64', "meta.json's rng.numpy is a list of 5 "
     f'values, {NUMPY}' + DAMAGED),
    (('rng', 'numpy', 1, 0), 2**32, "meta.json's rng.numpy is a list of 5 "
     f'values, {NUMPY}' + DAMAGED),
    (('data',), 'start', "meta.json's data is 'start', not an object of "
     'epoch, epoch_states and num_batches, nor null' + DAMAGED),
    (('data', 'epoch'), 31337, "meta.json's data.epoch is 31,337, more than "
     'the 3 steps done' + DAMAGED),
    (('data', 'epoch'), -2, "meta.json's data.epoch is -2, not an integer, "
     '-1 or more' + DAMAGED),
    (('data', 'epoch_states'), None, "meta.json's data.epoch_states is "
     f'null, {STATES}' + DAMAGED),
    (('data', 'num_batches'), 4444, "meta.json's data.num_batches is "
     '4,444, more than the 3 steps done; the checkpoint is damaged, or of '
     'other data'),
    (('data', 'epoch'), -1, "meta.json's data is an object of 3 keys, a "
     'position in no epoch with steps done, batches or random states'
     + DAMAGED),
    (('config',), [1], "meta.json's config is a list of 1 value, not an "
     'object of settings, nor null' + DAMAGED),
    (('adam', 'num_update'), 9, "meta.json's adam.num_update is 9, not an "
     'integer from 0 to 3 (the 3 steps done)' + DAMAGED),
    (('adam', 'hyper'), {'learning_rate': 'fast'}, "meta.json's adam.hyper "
     "is an object of 1 key, not an object of Adam's settings (numbers, or "
     'null)' + DAMAGED),
    (('adam', 'update_counts'), {'cpu': {}}, "meta.json's "
     "adam.update_counts is an object of 1 key, not an object of devices' "
     'step counts' + DAMAGED),
    (('adam', 'update_counts', '0', 'w'), 4, "meta.json's "
     "adam.update_counts holds 4 updates of 'w', not 0 to the 3 steps done"
     + DAMAGED),
]


@pytest.mark.parametrize('keys, value, message', FIELDS,
                         ids=['.'.join(map(str, k)) + f'={v!r:.20}'
                              for k, v, _ in FIELDS])
def test_a_field_of_another_type_or_range_is_one_line(keys, value,
                                                      message):
    with pytest.raises(ResumeError) as e:
        check_meta(PATH, changed(valid_meta(), keys, value))
    assert str(e.value) == f'{PATH}: {message}'


def test_a_meta_json_that_is_no_object_is_one_line():
    with pytest.raises(ResumeError) as e:
        check_meta(PATH, [])
    assert str(e.value) == (f'{PATH}: meta.json holds a list of 0 values, '
                            'not an object' + DAMAGED)


def test_a_valid_meta_json_is_returned_as_it_is():
    meta = valid_meta()
    assert check_meta(PATH, meta) is meta
    # version 1 has no Adam numbers (they were pickled), and no position
    # in the data may be null
    old = changed(changed(changed(meta, ('version',), 1), ('adam',),
                          delete), ('data',), None)
    assert check_meta(PATH, old) is old
    # a run of no step yet, that is in no epoch
    assert check_meta(PATH, changed(valid_meta(0), ('data',), dict(
        epoch=-1, epoch_states=None, num_batches=0)))


def test_no_more_batches_than_an_epoch_of_the_data_has():
    meta = valid_meta()
    check_meta(PATH, meta, num_batches=3)
    with pytest.raises(ResumeError) as e:
        check_meta(PATH, meta, num_batches=2)
    assert str(e.value) == (
        f"{PATH}: meta.json's data.num_batches is 3, more than the 2 "
        'batches of an epoch of the data; the checkpoint is damaged, or of '
        'other data')


def test_the_random_states_come_back_and_check():
    random.gauss(0, 1)          # (a cached normal in both generators)
    onp.random.standard_normal()
    states = json.loads(json.dumps(get_rng_states()))
    check_rng(PATH, 'rng', states)
    expected = random.random(), onp.random.random()
    random.seed(5)
    onp.random.seed(5)
    set_rng_states(states)
    assert (random.random(), onp.random.random()) == expected


class Batches:
    """A re-iterable of `count` batches, shuffled from NumPy's global
    state, that does not say its length."""

    def __init__(self, count):
        self.count = count

    def __iter__(self):
        order = onp.random.permutation(self.count)
        return iter([(onp.zeros((2, 1)) + i,) for i in order])


def test_a_position_in_the_data_comes_back_where_it_was():
    onp.random.seed(3)
    walked = DataPosition(Batches(4))
    for _ in range(6):   # into the second epoch
        walked.next_batch()
    state = json.loads(json.dumps(walked.state()))
    expected = [walked.next_batch()[0][0, 0] for _ in range(5)]
    onp.random.seed(99)
    resumed = DataPosition(Batches(4))
    resumed.restore(state, PATH)
    assert [resumed.next_batch()[0][0, 0] for _ in range(5)] == expected
    assert resumed.epoch_length() is None


def test_a_position_past_the_end_of_an_epoch_is_one_line():
    state = dict(epoch=1, epoch_states=get_rng_states(), num_batches=3)
    with pytest.raises(ResumeError) as e:
        DataPosition(Batches(2)).restore(state, PATH)
    assert str(e.value) == (
        f"{PATH}: meta.json's data.num_batches is 3, more than the 2 "
        'batches of an epoch of the data; the checkpoint is of other data, '
        'or damaged')
