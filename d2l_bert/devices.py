"""Turn the command line's device strings into MXNet contexts.

`--devices` (`--ctx`, its old spelling) takes one device (`cpu`,
`cpu:N`, `gpu`, `gpu:N`), a comma-separated list of them, or `all-gpus`
(`parse_devices`; `d2l_bert.cli._args` checks the form before `mxnet`
is imported).  Asking for a GPU on a
machine without one is a `ValueError` with a one-line message, never a
CUDA traceback.
"""
import mxnet as mx


def num_gpus():
    """Return the number of GPUs MXNet can use (0 on a CPU-only build)."""
    try:
        return mx.context.num_gpus()
    except mx.base.MXNetError:  # a CPU-only build may raise here
        return 0


def try_all_gpus():
    """Return all available GPUs, or ``[cpu()]`` if there is no GPU.

    What the docstring of d2l's `try_all_gpus` promises; d2l 1.0.3's
    returns an empty list on a machine without a GPU, on which no
    `initialize(ctx=devices)` or `split_and_load` can run.

    Returns
    -------
    list of mxnet.Context
    """
    return [mx.gpu(i) for i in range(num_gpus())] or [mx.cpu()]


def parse_ctx(text):
    """Parse one device string such as ``'cpu'``, ``'cpu:1'`` or ``'gpu:0'``.

    Parameters
    ----------
    text : str
        ``cpu``, ``cpu:N``, ``gpu`` (meaning ``gpu:0``) or ``gpu:N``.

    Returns
    -------
    mxnet.Context

    Raises
    ------
    ValueError
        If the string is not of that form, or names a GPU this machine does
        not have.
    """
    kind, _, index = str(text).strip().lower().partition(':')
    if kind not in ('cpu', 'gpu') or (index and not index.isdigit()):
        raise ValueError(
            f"device must be cpu, cpu:N, gpu or gpu:N, got {text!r}")
    index = int(index) if index else 0
    if kind == 'cpu':
        return mx.cpu(index)
    available = num_gpus()
    if index >= available:
        have = (f'{available} GPU(s): gpu:0 to gpu:{available - 1}'
                if available else 'no GPU that MXNet can use')
        raise ValueError(
            f"device {text!r} is not available: this machine has {have}; "
            "ask for cpu instead, or install a CUDA build of MXNet (see the "
            "docs' install page)")
    return mx.gpu(index)


def parse_devices(text):
    """Parse a device list such as ``'cpu:0,cpu:1'`` or ``'all-gpus'``.

    Parameters
    ----------
    text : str
        Comma-separated device strings (see `parse_ctx`), or ``all-gpus``.

    Returns
    -------
    list of mxnet.Context
        Distinct contexts in the order given.

    Raises
    ------
    ValueError
        On an unknown or unavailable device, a repeated device, or
        ``all-gpus`` on a machine without a GPU.
    """
    text = str(text).strip().lower()
    if text == 'all-gpus':
        available = num_gpus()
        if not available:
            raise ValueError(
                "devices 'all-gpus' asked for, but this machine has no GPU "
                "that MXNet can use; use --devices cpu")
        return [mx.gpu(i) for i in range(available)]
    parts = [p for p in text.split(',') if p.strip()]
    if not parts:
        raise ValueError(
            f"devices must name at least one device, got {text!r}")
    ctxs = [parse_ctx(p) for p in parts]
    if len(set(ctxs)) != len(ctxs):
        raise ValueError(f"devices lists a device twice: {text!r}")
    return ctxs
