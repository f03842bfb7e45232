"""Input checks that turn a student's mistake into one clear sentence.

The book's blocks are the book's lines, without checks; the checks of
their inputs are applied from outside, by one visible call:
``check_inputs(net)`` (the command line, `PretrainedBERT` and the runs
call it).  Without them a wrong shape or an id out of range ends in a
deep MXNet traceback, or worse, in a silently wrong result.  Each message
names the argument, the value received and what is allowed.

Shapes and dtypes are checked for free; value ranges cost one small
device-to-host copy per call (`check_ranges`).
"""
import math
import weakref

import mxnet as mx
import numpy as onp

#: The end of the messages of `check_finite_parameters` and
#: `check_finite_loss`: what to do
SMALLER_LR = ('use a smaller learning rate (0.01 in the book, 0.001 is '
              'safer)')


def require_array(name, value):
    """Raise a TypeError unless `value` is an MXNet array."""
    if not isinstance(value, mx.nd.NDArray):
        raise TypeError(
            f'{name} must be an mxnet.np.ndarray, got '
            f'{type(value).__name__}; wrap it with `np.array(...)`')


def check_ranges(checks):
    """Check value ranges with one host copy.

    Parameters
    ----------
    checks : list of (name, array, low, high, allowed)
        Every value of `array` must lie in [low, high]; `allowed` says so
        in words.

    Raises
    ------
    ValueError
        Naming the first offender, its value and its index.
    """
    if not checks:
        return
    bounds = mx.np.stack([mx.np.stack([a.min(), a.max()]).astype('float64')
                          for _, a, _, _, _ in checks]).asnumpy()
    for (name, array, low, high, allowed), (lo, hi) in zip(checks, bounds):
        if lo < low or hi > high:
            # The error path may be slow: find the offender on the host
            values = array.asnumpy()
            where = tuple(onp.argwhere((values < low) | (values > high))[0])
            raise ValueError(
                f'{name} must hold {allowed}, got {values[where]:g} at '
                f'{[int(i) for i in where]}')


def check_encoder_inputs(tokens, segments, valid_lens, vocab_size, max_len):
    """Raise a clear error for inputs `BERTEncoder` cannot encode.

    Parameters
    ----------
    tokens, segments : arrays, shape (B, T)
        The encoder's token indices and segment ids.
    valid_lens : array of shape (B,), or None
        Number of real tokens of each sequence.
    vocab_size, max_len : int
        The encoder's vocabulary size and number of positions.
    """
    require_array('tokens', tokens)
    require_array('segments', segments)
    if tokens.ndim != 2:
        raise ValueError(
            f'tokens must have shape (batch size, sequence length), got '
            f'shape {tokens.shape}')
    if segments.shape != tokens.shape:
        raise ValueError(
            f'segments must have the shape of tokens {tokens.shape}, got '
            f'{segments.shape}')
    batch_size, seq_len = tokens.shape
    if seq_len > max_len:
        raise ValueError(
            f'tokens has sequence length {seq_len}, longer than '
            f'max_len={max_len} positions the encoder has; truncate the '
            f'input or build the encoder with a larger max_len')
    checks = [('tokens', tokens, 0, vocab_size - 1,
               f'ids in [0, {vocab_size}) (vocab_size)'),
              ('segments', segments, 0, 1, 'segment ids 0 or 1')]
    if tokens.dtype.kind == 'f':
        values = tokens.asnumpy()
        fractional = values != onp.round(values)
        if fractional.any():
            where = tuple(onp.argwhere(fractional)[0])
            raise TypeError(
                f'tokens must hold integer ids, got {values[where]:g} at '
                f'{[int(i) for i in where]}; use an integer dtype such as '
                f'int32')
    if valid_lens is not None:
        require_array('valid_lens', valid_lens)
        if valid_lens.shape != (batch_size,):
            raise ValueError(
                f'valid_lens must have shape ({batch_size},), one length '
                f'per sequence, got {valid_lens.shape}')
        checks.append(('valid_lens', valid_lens, 0, seq_len,
                       f'lengths in [0, {seq_len}] (sequence length)'))
    check_ranges(checks)


def check_pred_positions(pred_positions, batch_size, seq_len):
    """Raise a clear error for positions `MaskLM` cannot gather.

    Parameters
    ----------
    pred_positions : array, shape (B, P)
        Positions to predict, each in [0, T).
    batch_size, seq_len : int
        B and T of the encoded sequences.
    """
    require_array('pred_positions', pred_positions)
    if pred_positions.ndim != 2 or pred_positions.shape[0] != batch_size:
        raise ValueError(
            f'pred_positions must have shape ({batch_size}, P), P positions '
            f'per sequence of the batch, got {pred_positions.shape}')
    check_ranges([('pred_positions', pred_positions, 0, seq_len - 1,
                   f'positions in [0, {seq_len}) (sequence length)')])


#: The blocks `check_inputs` gave hooks, each once
_CHECKED = weakref.WeakSet()


def check_inputs(net):
    """Check the inputs of the book's blocks in `net` at every call.

    Registers a Gluon forward pre-hook on each `BERTEncoder` (its
    `tokens`, `segments` and `valid_lens`: `check_encoder_inputs`) and
    each `MaskLM` (its `pred_positions`: `check_pred_positions`) that
    `net` is or holds (subclasses and a notebook's classes of these
    names included), after checking the dropout rates of the encoders
    (`check_dropout`) and that each `MultiHeadAttention`'s heads divide
    its `num_hiddens` (`check_num_heads`).  Calling it again on the same
    blocks adds nothing.

    Parameters
    ----------
    net : mxnet.gluon.Block
        A `BERTModel`, a `BERTEncoder`, a `MaskLM` or a block holding
        them (a `BERTClassifier`).

    Returns
    -------
    net
        The same block, for ``net = check_inputs(BERTModel(...))``.

    Raises
    ------
    ValueError
        An encoder's dropout rate is not in [0, 1), or an attention's
        heads do not divide its `num_hiddens`.
    """
    blocks = [net]
    while blocks:
        block = blocks.pop()
        blocks.extend(block._children.values())
        kind = _book_class(block)
        if kind == 'BERTEncoder':
            _check_dropout_rates(block)
        if _is_a(block, 'MultiHeadAttention'):
            check_num_heads(block.W_q._units, block.num_heads)
        if kind is not None and block not in _CHECKED:
            block.register_forward_pre_hook(_HOOKS[kind])
            _CHECKED.add(block)
    return net


def _is_a(block, name):
    """Whether `block` is of the book's class `name` or a subclass (by
    name, as `_book_class`)."""
    return any(cls.__name__ == name for cls in type(block).__mro__)


def _book_class(block):
    """'BERTEncoder' or 'MaskLM' if `block` is one (or a subclass), else
    None.  By name: the sections import this module, and a notebook's
    ``#@save`` cell defines the class again."""
    for cls in type(block).__mro__:
        if cls.__name__ in _HOOKS:
            return cls.__name__
    return None


def _check_dropout_rates(encoder):
    """`check_dropout` on the rate of every `nn.Dropout` of `encoder`."""
    blocks = [encoder]
    while blocks:
        block = blocks.pop()
        blocks.extend(block._children.values())
        if isinstance(block, mx.gluon.nn.Dropout):
            check_dropout(block._rate)


def _check_encoder_call(encoder, args):
    """Forward pre-hook of a `BERTEncoder`: `args` are its inputs."""
    tokens, segments = args[:2]
    valid_lens = args[2] if len(args) > 2 else None
    vocab_size = encoder.token_embedding.weight.shape[0]
    max_len = encoder.pos_embedding.shape[1]
    check_encoder_inputs(tokens, segments, valid_lens, vocab_size, max_len)


def _check_mask_lm_call(mlm, args):
    """Forward pre-hook of a `MaskLM`: `args` are `X` and
    `pred_positions`."""
    X, pred_positions = args
    check_pred_positions(pred_positions, X.shape[0], X.shape[1])


#: The forward pre-hook of each book class whose inputs are checked
_HOOKS = {'BERTEncoder': _check_encoder_call,
          'MaskLM': _check_mask_lm_call}


def check_num_heads(num_hiddens, num_heads):
    """Return `num_heads` if it divides `num_hiddens` (each head attends in
    ``num_hiddens // num_heads`` dimensions), else raise a ValueError."""
    if num_hiddens % num_heads:
        raise ValueError(
            f'num_hiddens must be divisible by num_heads, got '
            f'num_hiddens={num_hiddens} and num_heads={num_heads}')
    return num_heads


def check_activation(activation):
    """Return `activation` if it is one the original BERT's blocks know
    (`d2l_bert.hf.original`), else raise."""
    allowed = ('relu', 'gelu', 'gelu_tanh')
    if activation not in allowed:
        raise ValueError(f'activation must be one of {allowed}, got '
                         f'{activation!r}')
    return activation


def check_positive_int(name, value):
    """Return `value` as an int if it is a positive integer, else raise a
    ValueError naming `name`."""
    if isinstance(value, bool) or not isinstance(value, (int, onp.integer)) \
            or value < 1:
        raise ValueError(f'{name} must be a positive integer, got '
                         f'{value!r}')
    return int(value)


def check_dropout(dropout):
    """Return `dropout` if it is a rate in [0, 1), else raise.

    The book's blocks take it without a default; missing, it would fail
    only at the first forward pass, inside Gluon's `Dropout`.
    """
    if dropout is None:
        raise TypeError('missing dropout: pass the dropout rate, a float in '
                        '[0, 1) (0.2 in the book\'s pretraining)')
    if isinstance(dropout, bool) or not isinstance(
            dropout, (int, float, onp.integer, onp.floating)) \
            or not 0 <= dropout < 1:
        raise ValueError(f'dropout must be a rate in [0, 1), got '
                         f'{dropout!r}')
    return dropout


def check_kvstore(kvstore):
    """Refuse the name of a distributed kvstore (``'dist_sync'``...): a
    second kvstore of a job would wait forever for the other workers."""
    if isinstance(kvstore, str) and kvstore.startswith('dist'):
        raise ValueError(
            f'kvstore {kvstore!r} needs a worker of a job and the job\'s '
            'kvstore object: pass kvstore=create_kvstore() '
            '(d2l_bert.dist.workers), made once per process')


def check_finite_parameters(params, learning_rate, step=None):
    """Raise a ValueError unless every value of `params` is finite.

    Called after the first update of a run: a learning rate that makes
    the weights overflow (``learning_rate=1e300``) is then named before
    any further step trains on infinities; and before a run saves its
    weights, which are then never saved half-made of NaN.

    Parameters
    ----------
    params : iterable of gluon.Parameter
        The parameters just updated.
    learning_rate : float
        The trainer's, said in the message.
    step : int, optional
        The step just taken, said in the message (None: the first).
    """
    when = 'the first update' if step is None else \
        f'step {step}, and are not saved'
    for param in params:
        for data in param.list_data():
            if not bool(mx.np.isfinite(data).all()):
                raise ValueError(
                    f'learning_rate={learning_rate:g}: {param.name} holds '
                    f'values that are not finite after {when}; '
                    f'{SMALLER_LR}')


def check_finite_loss(name, loss, step, learning_rate):
    """Raise a ValueError unless the loss `loss` of step `step` is
    finite: a NaN or infinite loss means weights no longer finite, which
    the run must not save nor train on.

    Parameters
    ----------
    name : str
        The loss, said in the message (``'MLM loss'``).
    loss : float
        The loss of step `step`, as the run reads it back.
    step : int
        The step whose loss it is, counted from 1.
    learning_rate : float
        The trainer's, said in the message.
    """
    if not math.isfinite(loss):
        raise ValueError(
            f'learning_rate={learning_rate:g}: {name} {loss} at step '
            f'{step}: the weights are no longer finite, and are not '
            f'saved; {SMALLER_LR}')


def check_snli_dataset(dataset, max_len, vocab):
    """Check the arguments of `SNLIBERTDataset`: `vocab` given, `max_len`
    an int of at least 3, `dataset` three lists of equal lengths."""
    if vocab is None:
        raise ValueError(
            'vocab is required: pass the vocabulary the BERT model was '
            'pretrained with (load_pretrained_model returns it)')
    if not isinstance(max_len, int) or max_len < 3:
        raise ValueError(
            'max_len must be an int of at least 3 (<cls> and two '
            f'<sep>), got {max_len!r}')
    if len(dataset) != 3 or not (
            len(dataset[0]) == len(dataset[1]) == len(dataset[2])):
        raise ValueError(
            'dataset must be (premises, hypotheses, labels) of equal '
            'lengths, as read_snli returns')
