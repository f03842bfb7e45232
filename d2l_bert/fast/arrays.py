"""`mxnet.np.array` of a host list without waiting on MXNet's engine.

The book's `_pad_bert_inputs` makes seven small arrays an example with
`np.array(list, dtype=...)`: 193,487 of them for the embedded corpus at
``max_len=64``.  MXNet fills each with a synchronous copy that first
waits on its engine (a hand-over to its threads and back), and those
waits are most of `load_data_wiki`'s time.  A new array has no operation
pending on it, so the copy may go straight to its memory.

`quick_arrays()` is the one visible call: it makes `mxnet.np.array` do
that for Python lists, tuples and numbers bound for the CPU, and leaves
every other call (a device array, a NumPy array, a GPU context, a dtype
MXNet's memory does not share with NumPy) to MXNet's own function.  The
arrays are the same, dtype, shape and values (tests/test_fast_arrays.py
compares both on the book's inputs and on the whole dataset).  The
change lasts for the process; `undo()` gives MXNet's function back.
"""
import ctypes

import numpy as onp
from mxnet import context
from mxnet import numpy as mnp
from mxnet.base import _LIB, check_call

#: MXNet's own `mxnet.np.array`, which `quick_arrays` replaces
ORIGINAL = mnp.array

#: The dtypes whose bytes MXNet keeps as NumPy does (bool is left to
#: MXNet: its own function is kept there)
DTYPES = frozenset(onp.dtype(t) for t in (
    'float16', 'float32', 'float64', 'uint8', 'int8', 'int32', 'int64'))


def array(object, dtype=None, ctx=None):  # noqa: A002 (MXNet's names)
    """`mxnet.np.array`, same arguments and result; a host list or
    number for the CPU is written into the new array's memory at once.

    Parameters
    ----------
    object : list, tuple, int, float or bool, or what MXNet's takes
        The values, nested as the array's shape.
    dtype : data-type, optional
        As MXNet's: float32 where not given.
    ctx : mxnet.Context, optional
        Default `mxnet.context.current_context()`.

    Returns
    -------
    mxnet.np.ndarray
        Of the shape of `object`.
    """
    if ctx is None:
        ctx = context.current_context()
    # arrays of every kind (MXNet's, NumPy's) have a dtype: MXNet's own
    if ctx.device_type != 'cpu' or hasattr(object, 'dtype'):
        return ORIGINAL(object, dtype=dtype, ctx=ctx)
    try:
        host = onp.array(object, dtype=onp.float32 if dtype is None
                         else dtype)
    except Exception as e:  # as MXNet's function says it
        raise TypeError(str(e)) from None
    if host.dtype not in DTYPES:
        return ORIGINAL(object, dtype=dtype, ctx=ctx)
    out = mnp.empty(host.shape, dtype=host.dtype, ctx=ctx)
    if host.nbytes:
        pointer = ctypes.c_void_p()
        # allocates the new array's memory; nothing is pending on it
        check_call(_LIB.MXNDArrayGetData(out.handle, ctypes.byref(pointer)))
        ctypes.memmove(pointer, host.ctypes.data, host.nbytes)
    return out


def quick_arrays():
    """Make `mxnet.np.array` the `array` above, for this process.

    Returns
    -------
    bool
        Whether it was MXNet's until now (a second call changes nothing).
    """
    changed = mnp.array is not array
    mnp.array = array
    return changed


def undo():
    """Give `mxnet.np.array` back to MXNet's own function."""
    mnp.array = ORIGINAL
