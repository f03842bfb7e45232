"""Adam's state in a checkpoint of version 1, read without running code.

Version 1 of the checkpoint format kept ``trainer.states``: what
MXNet's `Trainer.save_states` writes, a pickle of
``(states, optimizer)``, which MXNet's `Trainer` unpickles as it is
when it loads its states back; and a pickle can call any function.
`read_pickled_adam` reads it with an unpickler that admits the four
names such a pickle holds, and builds from each a stand-in that runs
nothing of its own:

- ``mxnet.ndarray.ndarray.NDArray`` (``mxnet.numpy.multiarray.ndarray``
  under NumPy semantics), built as ``NDArray(None)`` and then given its
  raw bytes (``{'handle': bytearray(...)}``): the bytes are read by
  `d2l_bert.data.ndarray_bytes.read_ndarray`, never by MXNet's
  ``MXNDArrayLoadFromRawBytes``, which allocates the size the bytes
  declare before it reads them;
- ``builtins.bytearray``, those bytes (only bytes: a count would
  allocate that many);
- ``mxnet.optimizer.optimizer.Adam``, made without ``__init__`` and
  given its ``__dict__``: numbers, None, True and False, dicts and an
  empty tuple.

Any other name is refused, and its function never called.
"""
import io
import pickle
from collections import namedtuple

from ..data.ndarray_bytes import NDArrayFileError, read_ndarray

#: Adam's state, whatever the format: the moments of each parameter by
#: its index in the trainer (``{index: (mean, var)}``, NumPy arrays),
#: the step counts by device and index, the optimizer's step count, and
#: its settings (`HYPER`)
AdamState = namedtuple('AdamState', 'moments counts num_update hyper')
#: The settings of Adam that a checkpoint records, and the names MXNet's
#: optimizer keeps them under
HYPER = dict(learning_rate='lr', beta1='beta1', beta2='beta2',
             epsilon='epsilon', wd='wd', clip_gradient='clip_gradient')


class RefusedPickle(Exception):
    """The pickle names something that Adam's state never holds; the
    message is ``module.name``."""


class UnreadablePickle(Exception):
    """The pickle is not Adam's state; the message says what it holds
    instead."""


class _PickledArray:
    """Stands in for an MXNet array: ``NDArray(None)``, then its raw
    bytes, read as a NumPy array."""

    def __init__(self, handle=None):
        if handle is not None:
            raise UnreadablePickle('an array made from something else '
                                   'than its bytes')
        self.array = None

    def __setstate__(self, state):
        if not (isinstance(state, dict) and set(state) == {'handle'}
                and isinstance(state['handle'], bytes)):
            raise UnreadablePickle('an array without its bytes')
        data = state['handle']
        self.array, end = read_ndarray(data, 0, 'an array')
        if end != len(data):
            raise UnreadablePickle(f'an array with {len(data) - end:,} '
                                   'bytes past its end')


class _PickledAdam:
    """Stands in for MXNet's `Adam`: only its ``__dict__``, kept."""

    def __setstate__(self, state):
        if not isinstance(state, dict):
            raise UnreadablePickle("an optimizer without a __dict__")
        self.state = state


def _bytearray(data=b''):
    """``bytearray(data)`` of a pickle, for bytes only: the bytes."""
    if not isinstance(data, bytes):
        raise UnreadablePickle(f'a bytearray made from {type(data).__name__}')
    return data


_STAND_INS = {
    ('mxnet.ndarray.ndarray', 'NDArray'): _PickledArray,
    ('mxnet.numpy.multiarray', 'ndarray'): _PickledArray,
    ('builtins', 'bytearray'): _bytearray,
    ('mxnet.optimizer.optimizer', 'Adam'): _PickledAdam,
}


class _AdamUnpickler(pickle.Unpickler):
    """An unpickler that finds the stand-ins of `_STAND_INS` and nothing
    else (and no persistent id: `pickle.Unpickler` refuses those)."""

    def find_class(self, module, name):
        try:
            return _STAND_INS[module, name]
        except KeyError:
            raise RefusedPickle(f'{module}.{name}'[:100]) from None


def read_pickled_adam(data, num_params):
    """Adam's state from a version-1 ``trainer.states``, running no code.

    Parameters
    ----------
    data : bytes
        The pickle (its size checked by the caller).
    num_params : int
        The trainer's parameters: the indices run from 0 to
        ``num_params - 1``.

    Returns
    -------
    AdamState

    Raises
    ------
    RefusedPickle
        If the pickle names anything else than Adam's state holds.
    UnreadablePickle
        If it is damaged, or holds something else than Adam's state.
    """
    try:
        loaded = _AdamUnpickler(io.BytesIO(data)).load()
    except (RefusedPickle, UnreadablePickle):
        raise
    except NDArrayFileError as e:
        raise UnreadablePickle(f'an array that {e}') from None
    except Exception as e:  # a damaged pickle fails in many ways
        raise UnreadablePickle(f'no pickle ({type(e).__name__}: '
                               f'{str(e)[:80]})') from None
    if not (isinstance(loaded, tuple) and len(loaded) == 2
            and isinstance(loaded[0], dict)
            and isinstance(loaded[1], _PickledAdam)):
        raise UnreadablePickle('no pair of states and Adam optimizer')
    states, optimizer = loaded[0], loaded[1].state
    moments = {}
    for index, pair in states.items():
        if not (type(index) is int and 0 <= index < num_params
                and isinstance(pair, tuple) and len(pair) == 2
                and all(isinstance(a, _PickledArray) and a.array is not None
                        for a in pair)):
            raise UnreadablePickle(f'a state other than the mean and '
                                   f'variance of parameter 0 to '
                                   f'{num_params - 1}')
        moments[index] = (pair[0].array, pair[1].array)
    return AdamState(moments, *_optimizer_numbers(optimizer))


def _optimizer_numbers(optimizer):
    """The step counts by device and index, the step count and the
    settings in the ``__dict__`` of a pickled `Adam`."""
    counts, num_update = (optimizer.get('_all_index_update_counts'),
                          optimizer.get('num_update'))
    if not (isinstance(counts, dict) and all(
            type(device) is int and isinstance(by_index, dict)
            and all(type(i) is int and type(c) is int
                    for i, c in by_index.items())
            for device, by_index in counts.items())):
        raise UnreadablePickle("an optimizer's step counts other than "
                               'integers by device and index')
    if type(num_update) is not int:
        raise UnreadablePickle('an optimizer without its step count')
    if optimizer.get('lr_scheduler') is not None:
        raise UnreadablePickle('an optimizer with a learning-rate schedule')
    hyper = {key: optimizer.get(name) for key, name in HYPER.items()}
    if not all(v is None or type(v) in (int, float) for v in hyper.values()):
        raise UnreadablePickle("an optimizer's settings other than numbers")
    return ({device: dict(by_index) for device, by_index in counts.items()},
            num_update, hyper)
