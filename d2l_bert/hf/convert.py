"""From a Hugging Face BERT to the book's classes: options and names.

`bert_options` maps ``config.json`` onto `BERTEncoder`'s arguments (or
refuses, naming the field and its value); `parameter_map` lists where each
checkpoint weight goes in the book's classes; `convert_weights` checks the
weights' names and shapes against the config and renames them.

Dimension key used in the shape comments:

H: num_hiddens, V: vocab_size, F: ffn_num_hiddens,
L: max_len (max_position_embeddings), S: type_vocab_size
"""
import numpy as onp

from ..checks import check_positive_int
from .errors import CheckpointError

# --- config.json: which of the book's options a checkpoint needs -----------

# Hugging Face's `hidden_act` -> our `activation`.  'gelu' is the exact
# (erf) GELU in both; 'gelu_new' and 'gelu_pytorch_tanh' are its tanh
# approximation, the transformer's 'gelu_tanh'
ACTIVATIONS = {'gelu': 'gelu', 'relu': 'relu', 'gelu_new': 'gelu_tanh',
               'gelu_pytorch_tanh': 'gelu_tanh'}

#: The pooler's weights, which sentence-embedding checkpoints often lack
POOLER_WEIGHTS = ('pooler.dense.weight', 'pooler.dense.bias')


def bert_options(config, source='config.json'):
    """Map a Hugging Face BERT config onto `BERTEncoder`'s arguments.

    Parameters
    ----------
    config : dict
        The content of ``config.json``.
    source : str
        Where `config` comes from, for error messages.

    Returns
    -------
    dict
        Keyword arguments of `OriginalBERTEncoder`: vocab_size,
        num_hiddens, ffn_num_hiddens, num_heads, num_blks, dropout,
        max_len, activation, epsilon; `OriginalBERTModel`'s tie_weights
        (the MLM decoder shares the token embedding unless the config
        says ``tie_word_embeddings: false``); and ``num_segments``: how
        many segment embeddings the checkpoint has (see Notes).

    Raises
    ------
    CheckpointError
        The config lacks a size or asks for something the book's classes
        cannot express.

    Notes
    -----
    The book's encoder has two segment embeddings, for segment ids 0 and 1,
    the only ids `get_tokens_and_segments` makes.  A checkpoint with more
    (``type_vocab_size`` > 2) loads its first two, which is exact for
    every input the book builds.  A checkpoint with one (RoBERTa-like) can
    encode single texts only.
    """
    _check_architecture(config, source)
    dropout, num_hiddens, num_heads, num_segments, epsilon = _read_sizes(
        config, source)

    def need(key):
        return _need(config, key, source)

    return dict(
        vocab_size=need('vocab_size'),
        num_hiddens=num_hiddens,
        ffn_num_hiddens=need('intermediate_size'),
        num_heads=num_heads,
        num_blks=need('num_hidden_layers'),
        dropout=float(dropout),
        max_len=need('max_position_embeddings'),
        activation=ACTIVATIONS[config.get('hidden_act', 'gelu')],
        epsilon=float(epsilon),
        tie_weights=config.get('tie_word_embeddings', True),
        num_segments=num_segments)


def num_weights(options):
    """How many numbers the encoder and pooler of `options`
    (`bert_options`') hold: what config.json asks memory for, known
    before any weight is read."""
    V, H, F = options['vocab_size'], options['num_hiddens'], \
        options['ffn_num_hiddens']
    embeddings = (V + options['max_len'] + options['num_segments'] + 2) * H
    # Queries, keys, values and output; the FFN; two layer norms
    block = 4 * H * H + 4 * H + 2 * H * F + F + H + 4 * H
    return embeddings + options['num_blks'] * block + H * H + H


def _need(config, key, source):
    """Return ``config[key]``, checked to be a positive int."""
    if key not in config:
        raise CheckpointError(f'{source} lacks {key!r}, which a BERT '
                              f'config needs')
    try:
        return check_positive_int(key, config[key])
    except ValueError as e:
        raise CheckpointError(f'{source}: {e}') from None


def _read_sizes(config, source):
    """Return dropout, num_hiddens, num_heads, num_segments, epsilon,
    checked in that order."""
    # One `dropout` serves the book's blocks; `attention_probs_dropout_prob`
    # is not read: no dropout runs at inference, and fine-tuning uses
    # `hidden_dropout_prob` for both
    dropout = config.get('hidden_dropout_prob', 0.1)
    if not isinstance(dropout, (int, float)) or not 0 <= dropout < 1:
        _refuse(source, 'hidden_dropout_prob', dropout, 'a rate in [0, 1)')
    num_hiddens = _need(config, 'hidden_size', source)
    num_heads = _need(config, 'num_attention_heads', source)
    if num_hiddens % num_heads:
        _refuse(source, 'num_attention_heads', num_heads,
                f'a divisor of hidden_size={num_hiddens}')
    num_segments = (_need(config, 'type_vocab_size', source)
                    if 'type_vocab_size' in config else 2)
    epsilon = config.get('layer_norm_eps', 1e-12)
    if not isinstance(epsilon, (int, float)) or not epsilon > 0:
        _refuse(source, 'layer_norm_eps', epsilon, 'a positive number')
    return dropout, num_hiddens, num_heads, num_segments, epsilon


def _refuse(source, key, value, allowed):
    shown = repr(value)
    shown = shown if len(shown) <= 60 else f'{shown[:56]}...{shown[-1]}'
    raise CheckpointError(
        f'{source}: {key}={shown} cannot be expressed by the book\'s '
        f'classes, which allow {allowed}')


def _check_architecture(config, source):
    """Refuse a config that is not a BERT encoder the book's classes
    express, naming the field and its value."""
    model_type = config.get('model_type', 'bert')
    if model_type != 'bert':
        _refuse(source, 'model_type', model_type, "'bert'")
    hidden_act = config.get('hidden_act', 'gelu')
    if not isinstance(hidden_act, str) or hidden_act not in ACTIVATIONS:
        _refuse(source, 'hidden_act', hidden_act, f'{sorted(ACTIVATIONS)}')
    position_type = config.get('position_embedding_type', 'absolute')
    if position_type != 'absolute':
        _refuse(source, 'position_embedding_type', position_type,
                "'absolute' (one learned vector per position)")
    for key in ('is_decoder', 'add_cross_attention'):
        if config.get(key) not in (None, False):
            _refuse(source, key, config[key], 'false (an encoder without '
                    'cross-attention)')
    tied = config.get('tie_word_embeddings', True)
    if not isinstance(tied, bool):
        _refuse(source, 'tie_word_embeddings', tied, 'true or false')


# --- Names and shapes: the checkpoint's and the book's ----------------------

def parameter_map(options, heads=False):
    """List where each checkpoint weight goes in the book's classes.

    Parameters
    ----------
    options : dict
        As returned by `bert_options`.
    heads : bool, default False
        Include the pretraining heads of `BertForPreTraining` (MLM and
        NSP).

    Returns
    -------
    list of (hf_name, target, name, shape)
        `hf_name` is the Hugging Face name (after `normalize_names`);
        `target` the `BERTModel` child the weight belongs to:
        ``'encoder'`` (`BERTEncoder`), ``'hidden'`` (the pooler), ``'mlm'``
        or ``'nsp'``; `name` the parameter's name there (as in
        ``save_parameters``); `shape` what config.json implies.  Dense
        weights are (out, in) in both libraries.
    """
    V, H = options['vocab_size'], options['num_hiddens']
    L = options['max_len']
    S = options['num_segments']
    rows = [
        ('embeddings.word_embeddings.weight', 'encoder',
         'token_embedding.weight', (V, H)),
        ('embeddings.token_type_embeddings.weight', 'encoder',
         'segment_embedding.weight', (S, H)),
        ('embeddings.position_embeddings.weight', 'encoder',
         'pos_embedding', (L, H)),
        ('embeddings.LayerNorm.weight', 'encoder', 'embedding_norm.gamma',
         (H,)),
        ('embeddings.LayerNorm.bias', 'encoder', 'embedding_norm.beta',
         (H,)),
    ]
    for i in range(options['num_blks']):
        rows += _block_rows(i, H, options['ffn_num_hiddens'])
    rows.append(('pooler.dense.weight', 'hidden', 'weight', (H, H)))
    rows.append(('pooler.dense.bias', 'hidden', 'bias', (H,)))
    if heads:
        mlm = 'cls.predictions.'
        rows += [
            (f'{mlm}transform.dense.weight', 'mlm', 'mlp.0.weight', (H, H)),
            (f'{mlm}transform.dense.bias', 'mlm', 'mlp.0.bias', (H,)),
            (f'{mlm}transform.LayerNorm.weight', 'mlm', 'mlp.1.gamma', (H,)),
            (f'{mlm}transform.LayerNorm.bias', 'mlm', 'mlp.1.beta', (H,)),
            (f'{mlm}bias', 'mlm', 'mlp.2.bias', (V,)),
            ('cls.seq_relationship.weight', 'nsp', 'output.weight', (2, H)),
            ('cls.seq_relationship.bias', 'nsp', 'output.bias', (2,))]
        if not options['tie_weights']:
            rows.append((f'{mlm}decoder.weight', 'mlm', 'mlp.2.weight',
                         (V, H)))
    return rows


def _block_rows(i, H, F):
    """`parameter_map`'s rows of transformer block `i`."""
    rows = []
    hf, ours = f'encoder.layer.{i}.', f'blks.{i}.'
    for hf_dense, our_dense, shape in [
            ('attention.self.query', 'attention.W_q', (H, H)),
            ('attention.self.key', 'attention.W_k', (H, H)),
            ('attention.self.value', 'attention.W_v', (H, H)),
            ('attention.output.dense', 'attention.W_o', (H, H)),
            ('intermediate.dense', 'ffn.dense1', (F, H)),
            ('output.dense', 'ffn.dense2', (H, F))]:
        rows.append((f'{hf}{hf_dense}.weight', 'encoder',
                     f'{ours}{our_dense}.weight', shape))
        rows.append((f'{hf}{hf_dense}.bias', 'encoder',
                     f'{ours}{our_dense}.bias', shape[:1]))
    for hf_norm, our_norm in [('attention.output.LayerNorm', 'addnorm1'),
                              ('output.LayerNorm', 'addnorm2')]:
        rows.append((f'{hf}{hf_norm}.weight', 'encoder',
                     f'{ours}{our_norm}.ln.gamma', (H,)))
        rows.append((f'{hf}{hf_norm}.bias', 'encoder',
                     f'{ours}{our_norm}.ln.beta', (H,)))
    return rows


# Saved with the weights but not weights of the encoder: buffers, and the
# heads of BertForPreTraining / BertForMaskedLM / classifiers
_NOT_ENCODER = ('embeddings.position_ids', 'embeddings.token_type_ids')
_ENCODER_PREFIXES = ('embeddings.', 'encoder.', 'pooler.')


def normalize_names(weights, source):
    """Give a checkpoint's weights the names of Hugging Face's `BertModel`.

    Drops the ``bert.`` prefix of `BertForPreTraining` and similar
    checkpoints and renames the TensorFlow-era LayerNorm names ``gamma``
    and ``beta`` to ``weight`` and ``bias``, as transformers does.
    """
    normalized = {}
    for name, value in weights.items():
        new = name[len('bert.'):] if name.startswith('bert.') else name
        if '.LayerNorm.' in new:
            new = new.replace('.gamma', '.weight').replace('.beta', '.bias')
        if new in normalized:
            raise CheckpointError(f'{source} holds {new!r} twice (once as '
                                  f'{name!r})')
        normalized[new] = value
    return normalized


def convert_weights(weights, options, source='the checkpoint',
                    heads=False):
    """Check a checkpoint's weights and give them the book's names.

    Parameters
    ----------
    weights : dict of str to numpy.ndarray
        As read by `read_weights`.
    options : dict
        As returned by `bert_options`.
    source : str
        The weights' file, for error messages.
    heads : bool, default False
        Convert the pretraining heads too (see `parameter_map`).

    Returns
    -------
    dict of str to dict of str to float32 numpy.ndarray
        For each `BERTModel` child (``'encoder'``, ``'hidden'``, and with
        `heads` ``'mlm'`` and ``'nsp'``) its parameters by name.  The
        encoder's ``pos_embedding`` has shape (1, L, H) and its
        ``segment_embedding.weight`` (2, H).  A tied MLM decoder has no
        entry of its own: it is the token embedding.  ``'hidden'`` is
        empty when the checkpoint has no pooler (`POOLER_WEIGHTS`).

    Raises
    ------
    CheckpointError
        A weight is missing, has an unexpected shape, or is left over;
        the message names the weight and both shapes.
    """
    weights = normalize_names(weights, source)
    _check_num_blocks(weights, options, source)
    rows = parameter_map(options, heads)
    if not any(name in weights for name in POOLER_WEIGHTS):
        # No pooler (as in many sentence-embedding checkpoints): `hidden`
        # stays empty, and `PretrainedBERT` names the weights when asked
        # for the pooled vector
        rows = [row for row in rows if row[0] not in POOLER_WEIGHTS]
    _check_missing(weights, rows, source)
    _check_shapes(weights, rows, options, source)
    if heads and options['tie_weights']:
        _check_tied(weights, 'cls.predictions.decoder.weight',
                    'embeddings.word_embeddings.weight', source)
        _check_tied(weights, 'cls.predictions.decoder.bias',
                    'cls.predictions.bias', source)
    params = _as_float32(weights, rows, source)
    encoder = params['encoder']
    encoder['pos_embedding'] = encoder['pos_embedding'][None]  # (1, L, H)
    segment = encoder['segment_embedding.weight']            # (S, H)
    if segment.shape[0] == 1:
        # Single-segment checkpoint: row 1 is never used (see bert_options)
        segment = onp.concatenate([segment, onp.zeros_like(segment)])
    encoder['segment_embedding.weight'] = segment[:2]        # (2, H)
    return params


def _as_float32(weights, rows, source):
    """Return the weights `rows` name as float32 arrays, by target."""
    params = {target: {} for _, target, _, _ in rows}
    params.setdefault('hidden', {})
    for hf, target, name, _ in rows:
        value = weights[hf]
        if value.dtype.kind != 'f':
            raise CheckpointError(f'{source}: {hf} has dtype {value.dtype}, '
                                  f'expected floating point')
        params[target][name] = onp.ascontiguousarray(value,
                                                     dtype=onp.float32)
    return params


def _check_shapes(weights, rows, options, source):
    """Raise if a weight's shape is not what config.json implies, or if
    encoder weights are left over."""
    for hf, _, _, shape in rows:
        found = tuple(weights[hf].shape)
        if found != shape:
            raise CheckpointError(
                f'{source}: {hf} has shape {found}, but config.json implies '
                f'{shape} (vocab_size={options["vocab_size"]}, hidden_size='
                f'{options["num_hiddens"]}, intermediate_size='
                f'{options["ffn_num_hiddens"]}, max_position_embeddings='
                f'{options["max_len"]}, type_vocab_size='
                f'{options["num_segments"]})')
    known = {hf for hf, _, _, _ in rows} | set(_NOT_ENCODER)
    extra = sorted(name for name in weights if name not in known
                   and name.startswith(_ENCODER_PREFIXES))
    if extra:
        raise CheckpointError(
            f'{source} holds encoder weights that config.json does not '
            f'describe (num_hidden_layers={options["num_blks"]}?): '
            f'{", ".join(extra[:5])}{", ..." if len(extra) > 5 else ""}')


def _check_num_blocks(weights, options, source):
    """Raise if config.json asks for more blocks than the weights hold
    (before `parameter_map` lists each of them)."""
    found = {name.split('.')[2] for name in weights
             if name.startswith('encoder.layer.')}
    if options['num_blks'] > len(found):
        raise CheckpointError(
            f'{source} holds the weights of {len(found)} block(s) '
            f'(encoder.layer.N), but config.json says num_hidden_layers='
            f'{options["num_blks"]}')


def _check_missing(weights, rows, source):
    """Raise if a weight of `rows` (`parameter_map`'s) is not in `weights`,
    naming what asked for it: config.json, or ``heads=True``."""
    def shown(names):
        return ', '.join(names[:5]) + (', ...' if len(names) > 5 else '')
    missing = [hf for hf, target, _, _ in rows if hf not in weights
               and target not in ('mlm', 'nsp')]
    if missing:
        raise CheckpointError(
            f'{source} lacks {len(missing)} weight(s) that config.json '
            f'implies: {shown(missing)}')
    missing = [hf for hf, _, _, _ in rows if hf not in weights]
    if missing:
        raise CheckpointError(
            f'{source} lacks {len(missing)} weight(s) of the pretraining '
            f'heads that heads=True asks for: {shown(missing)} (an '
            f'encoder without heads loads with heads=False)')


def _check_tied(weights, name, tied_to, source):
    """A weight the book's classes share must equal the one it shares."""
    if name in weights and not onp.array_equal(weights[name],
                                               weights[tied_to]):
        raise CheckpointError(
            f'{source}: {name} differs from {tied_to}, but config.json '
            f'ties them (tie_word_embeddings is true or absent); set '
            f'"tie_word_embeddings": false to load them apart')
