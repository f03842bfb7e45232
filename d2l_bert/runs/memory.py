"""Whether a BERT of given sizes can train on this machine, before any
array is allocated.

`bert_bytes` estimates the memory of the model's parameters (with their
gradients and Adam's two moments) and of one batch's activations; it
errs on the small side, so that only what surely cannot fit is refused.
`available_bytes` reads what the machine has (``MemAvailable`` in
Linux's ``/proc/meminfo``, or less under a limit on the address space).

Nothing here imports `mxnet`.
"""
import math
import os

try:
    import resource
except ImportError:    # Windows
    resource = None

#: Bytes of a float32
FLOAT = 4


def bert_parameters(vocab_size, num_hiddens, ffn_num_hiddens, num_blks,
                    max_len):
    """How many numbers the parameters of a `BERTModel` hold."""
    V, H, F = vocab_size, num_hiddens, ffn_num_hiddens
    embeddings = V * H + 2 * H + max_len * H
    # Queries, keys, values and output; two layer norms; the FFN
    block = 4 * H * H + 4 * H + 2 * H * F + F + H
    # `hidden`, `MaskLM` (dense, layer norm, output) and `NextSentencePred`
    heads = (H * H + H) + (H * H + 3 * H + H * V + V) + (2 * H + 2)
    return embeddings + num_blks * block + heads


def bert_bytes(vocab_size, num_hiddens, ffn_num_hiddens, num_heads,
               num_blks, max_len, batch_size, seq_len):
    """Bytes a training step needs at least: the parameters four times
    (values, gradients, Adam's two moments) and a batch's activations.

    Parameters
    ----------
    vocab_size, num_hiddens, ffn_num_hiddens, num_heads, num_blks, max_len
        The `BERTModel`'s arguments.
    batch_size, seq_len : int
        B and T of a batch.

    Returns
    -------
    int
    """
    B, T, H, F = batch_size, seq_len, num_hiddens, ffn_num_hiddens
    params = bert_parameters(vocab_size, H, F, num_blks, max_len)
    # Per block: the inputs of its layers, and the attention weights
    per_block = B * T * (4 * H + F) + B * num_heads * T * T
    # The masked positions' scores over the vocabulary
    P = max(1, round(T * 0.15))
    heads = B * P * (H + vocab_size)
    return FLOAT * (4 * params + num_blks * per_block + heads)


def available_bytes(meminfo='/proc/meminfo'):
    """The memory this process can still take: ``MemAvailable`` of
    `meminfo`, or the soft limit of its address space if lower; None
    where neither is known."""
    known = []
    try:
        with open(meminfo) as f:
            for line in f:
                if line.startswith('MemAvailable:'):
                    known.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        pass
    if resource is not None:
        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft != resource.RLIM_INFINITY:
            known.append(soft)
    return min(known) if known else None


def check_files_fit(paths, per_byte, what):
    """Raise a ValueError if the files `paths` (those that exist), read
    and prepared at some `per_byte` bytes of memory a byte of theirs,
    need more memory than this process can still take; `what` names
    them, in the message.  Nothing is read: their sizes are the file
    system's."""
    size = sum(os.path.getsize(path) for path in paths
               if os.path.isfile(path))
    available = available_bytes()
    if available is not None and size * per_byte > available:
        raise ValueError(
            f'{what} ({size_text(size)}) would take some {per_byte} times '
            f'that in memory once read and prepared '
            f'({size_text(size * per_byte)}), and this machine has '
            f'{size_text(available)} available; give smaller files')


def size_text(num_bytes):
    """``1536`` -> ``'1.5 KB'``: bytes in a unit of 1,024."""
    units = ('bytes', 'KB', 'MB', 'GB', 'TB', 'PB', 'EB')
    power = min(int(math.log(max(num_bytes, 1), 1024)), len(units) - 1)
    if power == 0:
        return f'{num_bytes} bytes'
    return f'{num_bytes / 1024 ** power:.1f} {units[power]}'


def check_fits(num_bytes, what):
    """Raise a ValueError if `num_bytes` exceed what this process can
    still take; `what` names the sizes, in the message."""
    available = available_bytes()
    if available is not None and num_bytes > available:
        raise ValueError(
            f'{what}: the model and one batch need at least '
            f'{size_text(num_bytes)} of memory, and this machine has '
            f'{size_text(available)} available; use smaller sizes')
