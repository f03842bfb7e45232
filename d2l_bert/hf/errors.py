"""What the readers of a checkpoint's files share: the error they raise,
the memory check before a large read, and bfloat16's widening.

`files` (config.json, safetensors, shards) and `torch_pickle`
(``pytorch_model.bin``) both import from here, and neither imports the
other at its top.
"""
import numpy as onp


class CheckpointError(ValueError):
    """A checkpoint file is missing, corrupt, or disagrees with config.json.
    """


def check_memory(path, num_bytes, what):
    """Raise `CheckpointError` if `num_bytes` (what reading `path` takes,
    `what` says for what) exceed the memory this process can still take.
    """
    from ..runs.memory import available_bytes, size_text
    available = available_bytes()
    if available is not None and num_bytes > available:
        raise CheckpointError(
            f'{path}: {what} take {size_text(num_bytes)} of memory, and '
            f'this machine has {size_text(available)} available')


def bfloat16_to_float32(bits):
    """Widen bfloat16 values, given as their uint16 bits, to float32.

    A bfloat16 is the top half of a float32's bits: shifted there, with
    zeros below, they are that float32, exactly.

    Parameters
    ----------
    bits : array_like of uint16, any shape
        The bfloat16 values' bits, as a checkpoint stores them.

    Returns
    -------
    numpy.ndarray of float32, the shape of `bits`
    """
    return (onp.asarray(bits, dtype='<u2').astype(onp.uint32)
            << 16).view(onp.float32)
