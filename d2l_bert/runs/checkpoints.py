"""Pretraining checkpoints: written atomically, read without running code.

`train_bert_history` (`d2l_bert.runs.pretraining`) saves a checkpoint
every few steps with `save_checkpoint`, and a resumed run
(``d2l-bert pretrain --resume``) reads it back with `load_checkpoint`,
so that it repeats an uninterrupted run exactly.  A checkpoint is one
zip file of three members, none of which holds code:

- ``meta.json``: the step, the losses so far, Python's and NumPy's
  random states, the position in the data, the seed MXNet is reseeded
  from, the caller's settings, and Adam's numbers: its settings
  (learning rate, betas, epsilon, ...), its step count and the step
  count of each parameter on each device
  (`d2l_bert.runs.checkpoint_meta` checks them all);
- ``model.params``: the parameters, as `Block.save_parameters` writes
  them;
- ``adam.params``: Adam's moments, as `mx.nd.save` writes them,
  ``PATH/mean`` and ``PATH/var`` for the parameter at ``PATH`` in the
  model (``encoder.blks.0.ffn.dense1.weight``).

Both array files are read by `d2l_bert.data.ndarray_bytes`, each
member's size checked first against what the model's shapes take: a
damaged file, or one made to exhaust memory, is one line naming the
checkpoint and the cause.  Checkpoints of version 1 held a pickle of
Adam's state instead of ``adam.params`` (``trainer.states``); they are
read by `d2l_bert.runs.checkpoint_pickle`, which runs no code.
"""
import contextlib
import json
import os
import tempfile
import zipfile
import zlib

import mxnet as mx
import numpy as onp
from mxnet.util import is_np_array, is_np_shape

from ..data.atomic import atomic_write, sigterm_after, write_failure
from ..data.bounded import json_value
from ..data.ndarray_bytes import NDArrayFileError, file_size, read_ndarrays
from .checkpoint_meta import (CHECKPOINT_VERSION, MAX_DEVICES,
                              ResumeError, check_meta, get_rng_states,
                              set_rng_states)
from .checkpoint_pickle import (HYPER, AdamState, RefusedPickle,
                                UnreadablePickle, read_pickled_adam)

#: The largest ``meta.json`` read (some 1.5 million steps of losses)
MAX_META_BYTES = 64 << 20
#: The compressions a member may have (the checkpoint stores them
#: uncompressed); others would inflate without a bound on each read
COMPRESSIONS = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED)
#: The slots of Adam's state of each parameter
SLOTS = ('mean', 'var')


# ---------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------

def save_checkpoint(path, net, trainer, step, history, *, data_state=None,
                    mx_seed=None, config=None):
    """Write everything needed to continue training, atomically.

    The checkpoint is one zip file: ``meta.json`` (step, loss history,
    Python/NumPy random states, the data position, the seed MXNet is
    reseeded from, the caller's `config`, Adam's settings and step
    counts), ``model.params`` (what `net.save_parameters` writes) and
    ``adam.params`` (Adam's moments, by parameter path); see the
    module's docstring.

    Parameters
    ----------
    path : str
        The zip file to write.
    net : gluon.Block
        The model being trained.
    trainer : gluon.Trainer
        Its trainer, with MXNet's Adam, whose state is saved.
    step : int
        Steps done.
    history : PretrainingHistory
        The losses so far.
    data_state : dict, optional
        From `DataPosition.state`.
    mx_seed : int, optional
        MXNet's random generator is reseeded with ``mx_seed + step`` before
        each step (its state cannot be read back).
    config : dict, optional
        Hyper-parameters; `load_checkpoint` refuses a different one.
    """
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    moments, adam = _adam_state(trainer, _trainer_names(net, trainer))
    meta = dict(version=CHECKPOINT_VERSION, step=int(step),
                history=history.to_dict(), rng=get_rng_states(),
                data=data_state, mx_seed=mx_seed, config=config, adam=adam)
    params = _file_bytes(path, net.save_parameters)
    states = _file_bytes(path, lambda tmp: mx.nd.save(tmp, moments))

    def write(tmp):
        with zipfile.ZipFile(tmp, 'w') as z:
            z.writestr('meta.json', json.dumps(meta))
            z.writestr('model.params', params)
            z.writestr('adam.params', states)
    atomic_write(path, write)


def _adam_state(trainer, names):
    """Adam's moments by ``PATH/SLOT``, and its numbers for
    ``meta.json``: settings, step count, step counts by device and
    path."""
    optimizer = trainer.optimizer
    if not isinstance(optimizer, mx.optimizer.Adam) or \
            optimizer.lr_scheduler is not None:
        raise ValueError('save_checkpoint saves the state of Adam without '
                         f'a learning-rate schedule, not of {optimizer!r}')
    moments = {}
    for index, state in _updaters(trainer)[0].states.items():
        if not (isinstance(state, tuple) and len(state) == 2):
            raise ValueError(f"Adam's state of {names[index]} is not a "
                             'mean and a variance (multi_precision?)')
        for slot, array in zip(SLOTS, state):
            moments[f'{names[index]}/{slot}'] = array
    counts = {str(device): {names[i]: c for i, c in by_index.items()}
              for device, by_index in
              optimizer._all_index_update_counts.items()}
    hyper = {key: getattr(optimizer, name) for key, name in HYPER.items()}
    return moments, dict(hyper=hyper, num_update=optimizer.num_update,
                         update_counts=counts)


@sigterm_after()
def _file_bytes(path, write):
    """Return the bytes that ``write(tmp)`` writes, via a temporary file
    beside `path` (the file they are for, named by a failure); a SIGTERM
    or SIGHUP waits until the file is removed."""
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)),
                               prefix='.part.', suffix='.tmp')
    os.close(fd)
    try:
        write(tmp)
        with open(tmp, 'rb') as f:
            return f.read()
    except Exception as e:
        failure = write_failure(e, path, tmp)
        if failure is None:
            raise
        raise failure from None
    finally:
        os.remove(tmp)


# ---------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------

def read_checkpoint_meta(path):
    """Return the ``meta.json`` of a checkpoint as a dict, every field
    checked (`d2l_bert.runs.checkpoint_meta.check_meta`).

    Raises
    ------
    ResumeError
        If `path` is not a checkpoint, or is damaged.
    """
    with _open(path) as z:
        return check_meta(path, _read_json(path, z))


def load_checkpoint(path, net, trainer, devices, *, config=None,
                    num_batches=None):
    """Restore `net`, `trainer` and the random states from `path`.

    Everything is read and checked before anything is restored: a
    checkpoint that cannot be resumed from leaves `net` and `trainer`
    as they were.

    Parameters
    ----------
    path : str
        The checkpoint `save_checkpoint` wrote (version 1 or 2).
    net : gluon.Block
        The model, initialized on `devices`.
    trainer : gluon.Trainer
        Its trainer, with MXNet's Adam of the checkpoint's settings.
    devices : list of mxnet.Context
        Where the parameters go.
    config : dict, optional
        The settings of this run: a checkpoint written with other ones
        is refused.
    num_batches : int, optional
        The batches of an epoch of the data, if known: a checkpoint
        whose position in the data is further is refused.

    Returns
    -------
    dict
        The checkpoint's meta data (``step``, ``history``, ``data``,
        ``mx_seed``, ``config``, ...).

    Raises
    ------
    ResumeError
        In one line naming `path`: the file is not a checkpoint, is
        damaged, holds code, is of another model or other settings.
    """
    with _open(path) as z:
        meta = check_meta(path, _read_json(path, z), num_batches)
        _check_config(path, meta.get('config'), config)
        params = _read_params(path, z, net)
        names = _trainer_names(net, trainer)
        if meta['version'] == 1:
            adam = _read_pickled_adam(path, z, names, params)
        else:
            adam = _read_adam(path, z, meta['adam'], names, params)
    _check_adam(path, adam, trainer, (names, params), meta['step'])
    _load_params(net, params, devices)
    _restore_adam(trainer, adam)
    set_rng_states(meta['rng'])
    return meta


@contextlib.contextmanager
def _open(path):
    """The checkpoint `path`, opened as a zip file."""
    if not os.path.isfile(path):
        what = ('is a directory' if os.path.isdir(path) else
                'is not a regular file' if os.path.exists(path) else
                'does not exist')
        raise ResumeError(f'{path} {what}, not a d2l-bert checkpoint')
    try:
        z = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, zlib.error, ValueError, EOFError) as e:
        raise ResumeError(f'{path} is not a d2l-bert checkpoint ({e})') \
            from None
    with z:
        yield z


def _read_member(path, z, name, limit, what,
                 then='the checkpoint is of another model, or damaged'):
    """The bytes of the member `name`, at most `limit` of them (`what`
    says what takes them, `then` what a larger member means)."""
    try:
        info = z.getinfo(name)
    except KeyError:
        if name == 'meta.json':
            raise ResumeError(f'{path} is not a d2l-bert checkpoint (it '
                              'holds no meta.json)') from None
        raise ResumeError(f'{path} holds no {name}; the checkpoint is '
                          'damaged') from None
    if info.compress_type not in COMPRESSIONS or info.flag_bits & 0x1:
        raise ResumeError(f'{path}: {name} is encrypted or compressed '
                          'in a way d2l-bert never writes; the '
                          'checkpoint is damaged')
    if info.file_size > limit:
        raise ResumeError(
            f'{path}: {name} is {info.file_size:,} bytes, more than the '
            f'{limit:,} that {what}; {then}')
    try:
        return z.read(info)
    except (zipfile.BadZipFile, zlib.error, EOFError, ValueError) as e:
        raise ResumeError(f'{path}: {name} cannot be read ({e}); the '
                          'checkpoint is damaged') from None


def _read_json(path, z):
    """The JSON of ``meta.json``."""
    data = _read_member(path, z, 'meta.json', MAX_META_BYTES,
                        'a meta.json may take', 'the checkpoint is damaged')
    try:
        return json_value(data)
    except ValueError as e:
        raise ResumeError(f'{path}: meta.json is not valid JSON '
                          f'({e}); the checkpoint is damaged') from None


def _check_config(path, saved, config):
    """Refuse a checkpoint written with other settings than `config`."""
    if config is None or saved is None:
        return
    diff = sorted(k for k in set(config) | set(saved)
                  if config.get(k) != saved.get(k))
    if diff:
        details = ', '.join(f'{k}: checkpoint {saved.get(k)!r}, now '
                            f'{config.get(k)!r}' for k in diff)
        raise ResumeError(f'{path} was written with other settings '
                          f'({details}); resume with the same settings '
                          'or start afresh')


# ---------------------------------------------------------------------------
# The parameters
# ---------------------------------------------------------------------------

def _read_params(path, z, net):
    """``model.params`` as NumPy arrays by path, each of the shape and
    dtype of `net`'s parameter there."""
    params = net._collect_params_with_prefix()
    unknown = -1 if is_np_shape() else 0
    shapes = {name: tuple(p.shape) if p.shape is not None else None
              for name, p in params.items()}
    # A deferred dimension (`unknown`) is at most the model's largest
    largest = max((d for shape in shapes.values() if shape for d in shape
                   if d != unknown), default=1)
    limit = file_size(
        (name, (largest,) * 2 if shape is None else tuple(
            largest if d == unknown else d for d in shape),
         onp.dtype(params[name].dtype)) for name, shape in shapes.items())
    data = _read_member(path, z, 'model.params', limit,
                        "the model's parameters take")
    arrays = _read_arrays(path, 'model.params', data)
    for name in params:
        if name not in arrays:
            raise ResumeError(
                f'{path}: model.params holds no {name}, a parameter of the '
                'model; the checkpoint is of another model, or damaged')
    for name, array in arrays.items():
        if name not in params:
            raise ResumeError(
                f'{path}: model.params holds {name!r:.80}, which is no '
                'parameter of the model; the checkpoint is of another '
                'model, or damaged')
        shape, dtype = shapes[name], onp.dtype(params[name].dtype)
        if array.dtype != dtype or (shape is not None and (
                len(shape) != array.ndim or any(
                    d not in (unknown, a) for d, a in zip(shape,
                                                          array.shape)))):
            raise ResumeError(
                f'{path}: model.params holds {name} of shape '
                f'{array.shape} and dtype {array.dtype}, and the model has '
                f'{shape} and {dtype}; the checkpoint is of another model')
    return arrays


def _read_arrays(path, member, data):
    """The named arrays of the array file `member`."""
    try:
        return read_ndarrays(data)
    except NDArrayFileError as e:
        raise ResumeError(f'{path}: {member} {e}; the checkpoint is '
                          'damaged') from None


def _load_params(net, arrays, devices):
    """Give each parameter of `net` its array, on `devices` (what
    `Block.load_parameters` does once it has read the file)."""
    make = mx.np.array if is_np_array() else mx.nd.array
    for name, param in net._collect_params_with_prefix().items():
        array = arrays[name]
        param._load_init(make(array, dtype=array.dtype), devices)


# ---------------------------------------------------------------------------
# Adam's state
# ---------------------------------------------------------------------------

def _trainer_names(net, trainer):
    """The path in `net` of each parameter of `trainer`, by index."""
    paths = {}
    for path, param in sorted(net._collect_params_with_prefix().items()):
        paths.setdefault(id(param), path)
    names = [paths.get(id(param)) for param in trainer._params]
    if None in names:
        raise ValueError("the trainer updates a parameter that is not the "
                         f"model's: {trainer._params[names.index(None)]}")
    return names


def _read_adam(path, z, numbers, names, params):
    """Adam's state of a checkpoint of version 2: ``adam.params`` and
    the numbers of ``meta.json`` (`numbers`), by trainer index."""
    shapes = [(f'{name}/{slot}', params[name].shape, params[name].dtype)
              for name in names for slot in SLOTS]
    data = _read_member(path, z, 'adam.params', file_size(shapes),
                        "Adam's moments of the model take")
    arrays = _read_arrays(path, 'adam.params', data)
    index = {name: i for i, name in enumerate(names)}
    moments = {}
    for name in arrays:
        param, _, slot = name.rpartition('/')
        if param not in index or slot not in SLOTS or not all(
                f'{param}/{s}' in arrays for s in SLOTS):
            raise ResumeError(
                f"{path}: adam.params holds {name!r:.80}, which is not "
                "Adam's mean and variance of a parameter of the model; the "
                'checkpoint is of another model, or damaged')
        moments[index[param]] = tuple(arrays[f'{param}/{s}'] for s in SLOTS)
    counts = {}
    for device, by_name in numbers['update_counts'].items():
        unknown = sorted(set(by_name) - set(index))
        if unknown:
            raise ResumeError(
                f"{path}: meta.json's adam.update_counts counts the "
                f'updates of {unknown[0]!r:.80}, which is no parameter of '
                'the model; the checkpoint is of another model, or damaged')
        counts[int(device)] = {index[n]: c for n, c in by_name.items()}
    return AdamState(moments, counts, numbers['num_update'],
                     numbers['hyper'])


def _read_pickled_adam(path, z, names, params):
    """Adam's state of a checkpoint of version 1: the pickle
    ``trainer.states``, read without running code."""
    # Two moments a parameter, and some bytes of pickle and header each
    limit = 65536 + sum(2 * (params[name].nbytes + 64 + 8
                             * params[name].ndim) + 64 for name in names)
    data = _read_member(path, z, 'trainer.states', limit,
                        "Adam's state of the model takes")
    try:
        return read_pickled_adam(data, len(names))
    except RefusedPickle as e:
        raise ResumeError(f'{path}: trainer.states holds {e}, which a '
                          'checkpoint never holds; refusing to load '
                          'it') from None
    except UnreadablePickle as e:
        raise ResumeError(f"{path}: trainer.states is not Adam's "
                          f'state: it holds {e}; the checkpoint is '
                          'damaged') from None


def _check_adam(path, adam, trainer, model, step):
    """Refuse Adam's state of other settings, shapes or step counts than
    `trainer`, the parameters (`model`: their names by trainer index,
    and their arrays by name) and the checkpoint's `step` allow."""
    names, params = model
    optimizer = trainer.optimizer
    if not isinstance(optimizer, mx.optimizer.Adam):
        raise ResumeError(f"{path} holds Adam's state, and the "
                          f'trainer has {type(optimizer).__name__}')
    if set(adam.hyper) != set(HYPER):
        raise ResumeError(f"{path}: Adam's settings are not "
                          f"{', '.join(HYPER)}; the checkpoint is "
                          'damaged')
    for key, name in HYPER.items():
        if adam.hyper[key] != getattr(optimizer, name):
            raise ResumeError(
                f"{path} was written with Adam's {key} {adam.hyper[key]!r}, "
                f'and the trainer has {getattr(optimizer, name)!r}; resume '
                'with the same settings or start afresh')
    for index, (mean, var) in adam.moments.items():
        shape, dtype = params[names[index]].shape, params[names[index]].dtype
        for slot, array in zip(SLOTS, (mean, var)):
            if array.shape != shape or array.dtype != dtype:
                raise ResumeError(
                    f"{path}: Adam's {slot} of {names[index]} has shape "
                    f'{array.shape} and dtype {array.dtype}, and the '
                    f'parameter {shape} and {dtype}; the checkpoint is '
                    'damaged')
    missing = [names[i] for i, p in enumerate(trainer._params)
               if p.grad_req != 'null' and i not in adam.moments]
    if adam.num_update and missing:
        raise ResumeError(f"{path} holds no Adam state of {missing[0]}; "
                          'the checkpoint is damaged')
    _check_counts(path, adam, len(names), step)


def _check_counts(path, adam, num_params, step):
    """Adam's step counts: 0 to `step`, by device and parameter."""
    if not 0 <= adam.num_update <= step or len(adam.counts) > MAX_DEVICES:
        raise ResumeError(f"{path}: Adam's step count "
                          f'{adam.num_update:,} is not 0 to the {step:,} '
                          'steps done; the checkpoint is damaged')
    for device, by_index in adam.counts.items():
        if not 0 <= device < 2**31 or any(
                not 0 <= i < num_params or not 0 <= c <= step
                for i, c in by_index.items()):
            raise ResumeError(f"{path}: Adam's step counts of device "
                              f'{device} are not 0 to the {step:,} '
                              'steps done of parameters of the model; '
                              'the checkpoint is damaged')


def _updaters(trainer):
    """The updaters of `trainer` that hold Adam's state: the kvstore's,
    when the updates run there, or one for each device."""
    if not trainer._kv_initialized:
        trainer._init_kvstore()
    if trainer._params_to_init:
        trainer._init_params()
    if trainer._update_on_kvstore:
        return [trainer._kvstore._updater]
    return trainer._updaters


def _restore_adam(trainer, adam):
    """Give `trainer` the (checked) Adam state `adam`, as MXNet's
    `Trainer` gives a pickled one when it loads its states: each updater
    its own copy of the moments, moved to its device when first used."""
    for updater in _updaters(trainer):
        updater.states = {
            i: tuple(mx.nd.array(a, dtype=a.dtype) for a in pair)
            for i, pair in adam.moments.items()}
        updater.states_synced = dict.fromkeys(updater.states, False)
    optimizer = trainer.optimizer
    optimizer.num_update = adam.num_update
    optimizer._all_index_update_counts = {
        device: dict(by_index) for device, by_index in adam.counts.items()}
    _share_update_counts(trainer)


def _share_update_counts(trainer):
    """Give every device of `trainer` the loaded Adam step counts.

    Adam's bias correction uses the number of updates of each weight,
    which MXNet's optimizer counts per device.  A checkpoint holds the
    counts of the devices that saved it: one, when the updates ran in a
    kvstore (one process with several devices), and a trainer that
    updates on each of several devices itself (a worker of a job with
    several devices) would restart the others' counts at 1, so that
    their copies of the weights drift apart.
    """
    optimizer = trainer.optimizer
    counts = optimizer._all_index_update_counts
    loaded = max(counts.values(), key=lambda c: sum(c.values()),
                 default={})
    for ctx in trainer._contexts:
        counts[ctx.device_id] = dict(loaded)
    optimizer._index_update_count = counts[trainer._contexts[0].device_id]
