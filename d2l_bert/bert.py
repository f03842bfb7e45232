"""sec_bert: the BERT model, read top to bottom in the book's order.

Dimension key used in the shape comments:

B: batch size, T: sequence length, H: num_hiddens, V: vocab_size,
P: predicted positions per sequence
"""
import warnings

import mxnet as mx
import numpy as onp
from mxnet.gluon import nn

from . import _kernels
from .transformer import (LayerNorm, TransformerEncoderBlock,
                          _check_activation)

#: Keyword arguments that give the book's classes the original BERT's
#: architecture (GELU, LayerNorm after the embeddings, epsilon 1e-12)
ORIGINAL_BERT = dict(activation='gelu', epsilon=1e-12, embedding_norm=True)


def get_tokens_and_segments(tokens_a, tokens_b=None):
    """Build a BERT input sequence from one or two token lists.

    Defined in :numref:`subsec_bert_input_rep`.

    Parameters
    ----------
    tokens_a : list of str
        Tokens of the first text sequence.
    tokens_b : list of str, optional
        Tokens of the second text sequence.

    Returns
    -------
    tokens : list of str
        ``['<cls>'] + tokens_a + ['<sep>']``, followed by
        ``tokens_b + ['<sep>']`` when `tokens_b` is given.
    segments : list of int
        Segment id of each token: 0 for `<cls>`, `tokens_a` and the first
        `<sep>`; 1 for `tokens_b` and the last `<sep>`.
    """
    tokens = ['<cls>'] + list(tokens_a) + ['<sep>']
    segments = [0] * len(tokens)
    if tokens_b is not None:
        tokens += list(tokens_b) + ['<sep>']
        segments += [1] * (len(tokens_b) + 1)
    return tokens, segments


class BERTEncoder(nn.HybridBlock):
    """BERT's encoder: embeddings of tokens, segments and positions, summed,
    then `num_blks` transformer encoder blocks.

    Defined in :numref:`subsec_bert_input_rep`.

    Parameters
    ----------
    vocab_size : int
        V, the number of token ids.
    num_hiddens : int
        H, the hidden size.
    ffn_num_hiddens : int
        Hidden size of each block's position-wise FFN.
    num_heads : int
        Attention heads per block; must divide `num_hiddens`.
    num_blks : int
        Number of encoder blocks (`num_layers` in the 0.17 editions, also
        accepted as a keyword).
    dropout : float
        Dropout rate.
    max_len : int, default 1000
        Number of learnable positions: the longest sequence accepted.
    activation : {'relu', 'gelu'}, default 'relu'
        FFN activation; the original BERT uses 'gelu'.
    epsilon : float, default 1e-5
        LayerNorm epsilon; the original BERT uses 1e-12.
    embedding_norm : bool, default False
        Apply LayerNorm and dropout to the embedding sum, as the original
        BERT does; the book does not.

    Notes
    -----
    The positional embedding is a parameter of shape (1, max_len, H) made
    with ``self.params.get('pos_embedding', ...)`` as in the book; Gluon
    hands it to `hybrid_forward` on the input's context.
    """

    def __init__(self, vocab_size, num_hiddens, ffn_num_hiddens, num_heads,
                 num_blks=None, dropout=None, max_len=1000, activation='relu',
                 epsilon=1e-5, embedding_norm=False, num_layers=None,
                 **kwargs):
        super().__init__(**kwargs)
        num_blks = _num_blks(num_blks, num_layers)
        if dropout is None:
            raise TypeError('BERTEncoder needs the argument dropout')
        self.vocab_size, self.max_len = vocab_size, max_len
        self.token_embedding = nn.Embedding(vocab_size, num_hiddens)
        self.segment_embedding = nn.Embedding(2, num_hiddens)
        self.blks = nn.HybridSequential()
        for _ in range(num_blks):
            self.blks.add(TransformerEncoderBlock(
                num_hiddens, ffn_num_hiddens, num_heads, dropout, True,
                activation, epsilon))
        # Learnable positional embeddings, long enough for `max_len` tokens
        self.pos_embedding = self.params.get('pos_embedding',
                                             shape=(1, max_len, num_hiddens))
        if embedding_norm:
            self.embedding_norm = LayerNorm(epsilon=epsilon)
            self.embedding_dropout = nn.Dropout(dropout)
        else:
            self.embedding_norm = self.embedding_dropout = None

    def forward(self, tokens, segments, valid_lens=None):
        """Check the inputs (when they are arrays), then encode them."""
        if not isinstance(tokens, mx.sym.Symbol):
            _check_encoder_inputs(tokens, segments, valid_lens,
                                  self.vocab_size, self.max_len)
            _clear_cache_if_structure_changed(self, valid_lens)
        return super().forward(tokens, segments, valid_lens)

    def hybrid_forward(self, F, tokens, segments, valid_lens=None,
                       pos_embedding=None):
        """Encode a batch of BERT input sequences.

        Parameters
        ----------
        tokens : int array, shape (B, T)
            Token ids in [0, V).
        segments : int array, shape (B, T)
            Segment ids, 0 or 1.
        valid_lens : float or int array, shape (B,), optional
            Number of real (non-padding) tokens of each sequence; None means
            all T.

        Returns
        -------
        float32 array, shape (B, T, H)
        """
        positions = F.npx.arange_like(tokens, axis=1)        # (T,)
        X = _kernels.add_embeddings(
            F, self.token_embedding(tokens),                 # (B, T, H)
            self.segment_embedding(segments),                # (B, T, H)
            F.np.take(pos_embedding, positions.astype('int32'),
                      axis=1))                               # (1, T, H)
        if self.embedding_norm is not None:
            X = self.embedding_dropout(self.embedding_norm(X))  # (B, T, H)
        for blk in self.blks:
            X = blk(X, valid_lens)                           # (B, T, H)
        return X


class MaskLM(nn.HybridBlock):
    """The masked language model task: predict the tokens at given
    positions from their encodings.

    Defined in :numref:`subsec_mlm`.

    Parameters
    ----------
    vocab_size : int
        V, the number of token ids to choose from.
    num_hiddens : int
        H, the size of the MLP's hidden layer.
    activation : {'relu', 'gelu'}, default 'relu'
        Activation of the hidden layer; the original BERT uses 'gelu'.
    epsilon : float, default 1e-5
        LayerNorm epsilon.
    tied_embedding : nn.Embedding, optional
        If given, the output layer uses this embedding's weight (V, H)
        instead of a weight of its own, as the original BERT does.
    """

    def __init__(self, vocab_size, num_hiddens, activation='relu',
                 epsilon=1e-5, tied_embedding=None, **kwargs):
        super().__init__(**kwargs)
        _check_activation(activation)
        # Input sizes are given (the encoder's H) so that the parameters
        # get their shapes at `initialize()`, even if a hybridized
        # `BERTModel` is first called without `pred_positions`
        self.mlp = nn.HybridSequential()
        self.mlp.add(nn.Dense(num_hiddens, flatten=False,
                              in_units=num_hiddens,
                              activation='relu' if activation == 'relu'
                              else None))
        if activation == 'gelu':
            # Keep the book's indices mlp.0, mlp.1, mlp.2 for the weights
            self.mlp[0].act = nn.GELU()
        self.mlp.add(LayerNorm(epsilon=epsilon, in_channels=num_hiddens))
        shared = None if tied_embedding is None else tied_embedding.params
        self.mlp.add(nn.Dense(vocab_size, flatten=False, in_units=num_hiddens,
                              params=shared))

    def forward(self, X, pred_positions):
        """Check `pred_positions` (when arrays), then predict."""
        if not isinstance(pred_positions, mx.sym.Symbol):
            _check_pred_positions(pred_positions, X.shape[0], X.shape[1])
        return super().forward(X, pred_positions)

    def hybrid_forward(self, F, X, pred_positions):
        """Predict the tokens at `pred_positions` of each sequence.

        Parameters
        ----------
        X : float32 array, shape (B, T, H)
            Encoded sequences.
        pred_positions : int array, shape (B, P)
            Positions to predict, in [0, T).

        Returns
        -------
        mlm_Y_hat : float32 array, shape (B, P, V)
            Unnormalized scores of each token of the vocabulary.
        """
        pred_positions = pred_positions.astype('int32')      # (B, P)
        batch_idx = F.npx.arange_like(pred_positions,
                                      axis=0).astype('int32')  # (B,)
        # Row b of `batch_idx` repeats b once per predicted position
        batch_idx = (F.np.zeros_like(pred_positions)
                     + F.npx.reshape(batch_idx, (-1, 1)))    # (B, P)
        indices = F.np.stack([batch_idx, pred_positions])    # (2, B, P)
        masked_X = F.npx.gather_nd(X, indices)               # (B, P, H)
        return self.mlp(masked_X)                            # (B, P, V)


class NextSentencePred(nn.HybridBlock):
    """The next sentence prediction task: is the second sentence the one
    that followed the first?

    Defined in :numref:`subsec_nsp`.

    `output` is Gluon's ``nn.Dense(2)``, which flattens all but the first
    axis of its input: given `encoded_X` of shape (B, T, H) it still
    returns (B, 2), which is what the book's demo prints.
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.output = nn.Dense(2)

    def hybrid_forward(self, F, X):
        """Parameters: X, shape (B, H) (or (B, ...), flattened).
        Returns: nsp_Y_hat, float32, shape (B, 2)."""
        return self.output(X)                                # (B, 2)


class BERTModel(nn.HybridBlock):
    """BERT for pretraining: the encoder, the MLM head and the NSP head.

    Defined in :numref:`sec_bert`.

    Parameters
    ----------
    vocab_size, num_hiddens, ffn_num_hiddens, num_heads, num_blks : int
        As for `BERTEncoder` (`num_layers` is accepted for `num_blks`).
    dropout : float
        Dropout rate.
    max_len : int, default 1000
        Number of learnable positions.
    activation : {'relu', 'gelu'}, default 'relu'
        Activation of the FFNs and of the MLM head.
    epsilon : float, default 1e-5
        LayerNorm epsilon everywhere.
    embedding_norm : bool, default False
        LayerNorm and dropout after the embedding sum (original BERT).
    tie_weights : bool, default False
        Use the token embedding's weight in the MLM output layer (original
        BERT).

    Notes
    -----
    `hidden` is the dense tanh layer on the `<cls>` encoding that the
    original BERT calls its pooler.
    """

    def __init__(self, vocab_size, num_hiddens, ffn_num_hiddens, num_heads,
                 num_blks=None, dropout=None, max_len=1000, activation='relu',
                 epsilon=1e-5, embedding_norm=False, tie_weights=False,
                 num_layers=None):
        super().__init__()
        self.encoder = BERTEncoder(
            vocab_size, num_hiddens, ffn_num_hiddens, num_heads,
            _num_blks(num_blks, num_layers), dropout, max_len,
            activation=activation, epsilon=epsilon,
            embedding_norm=embedding_norm)
        self.hidden = nn.Dense(num_hiddens, activation='tanh')
        self.mlm = MaskLM(
            vocab_size, num_hiddens, activation, epsilon,
            self.encoder.token_embedding if tie_weights else None)
        self.nsp = NextSentencePred()

    def hybridize(self, active=True, backend=None, clear=True,
                  static_alloc=True, static_shape=True, *args, **kwargs):
        """Compile the model into one graph, with static memory by default.

        As Gluon's `HybridBlock.hybridize` (same arguments), but
        ``static_alloc`` and ``static_shape`` default to True: the graph
        keeps its buffers from one call to the next instead of allocating
        them again (a call with other shapes still works, planned anew).
        Pass them as False to get Gluon's defaults.
        """
        super().hybridize(active, backend, clear, static_alloc,
                          static_shape, *args, **kwargs)

    def forward(self, tokens, segments, valid_lens=None,
                pred_positions=None):
        """Check the inputs (when arrays), then run the model."""
        if not isinstance(tokens, mx.sym.Symbol) and self._active:
            # A hybridized model checks here: its children see symbols
            _check_encoder_inputs(tokens, segments, valid_lens,
                                  self.encoder.vocab_size,
                                  self.encoder.max_len)
            if pred_positions is not None:
                _check_pred_positions(pred_positions, *tokens.shape)
            _clear_cache_if_structure_changed(self, valid_lens,
                                              pred_positions)
            _finish_deferred_init(self, tokens, segments, valid_lens)
        with warnings.catch_warnings():
            # Without `pred_positions` the graph leaves `mlm` unused, as
            # it should: Gluon's warning about that would only confuse
            warnings.filterwarnings('ignore', 'Parameter .* is not used')
            outputs = super().forward(tokens, segments, valid_lens,
                                      pred_positions)
        if pred_positions is None:
            encoded_X, nsp_Y_hat = outputs
            return encoded_X, None, nsp_Y_hat
        return outputs

    def hybrid_forward(self, F, tokens, segments, valid_lens=None,
                       pred_positions=None):
        """Encode the sequences and run both pretraining heads.

        Parameters
        ----------
        tokens, segments : int arrays, shape (B, T)
        valid_lens : array, shape (B,), optional
        pred_positions : int array, shape (B, P), optional

        Returns
        -------
        encoded_X : float32 array, shape (B, T, H)
        mlm_Y_hat : float32 array, shape (B, P, V)
            Left out when `pred_positions` is None (`forward` then returns
            None in its place).
        nsp_Y_hat : float32 array, shape (B, 2)
        """
        encoded_X = self.encoder(tokens, segments, valid_lens)  # (B, T, H)
        # The NSP classifier reads the encoding of `<cls>`, at position 0
        nsp_Y_hat = self.nsp(self.hidden(encoded_X[:, 0, :]))  # (B, 2)
        if pred_positions is None:
            # A graph cannot output None: `forward` puts it back in between
            return encoded_X, nsp_Y_hat
        mlm_Y_hat = self.mlm(encoded_X, pred_positions)      # (B, P, V)
        return encoded_X, mlm_Y_hat, nsp_Y_hat


def _num_blks(num_blks, num_layers):
    """Accept the 1.0 name `num_blks` or the 0.17 name `num_layers`."""
    if num_blks is None and num_layers is None:
        raise TypeError('missing the number of blocks: pass num_blks '
                        '(num_layers in the 0.17 editions)')
    if num_blks is not None and num_layers is not None \
            and num_blks != num_layers:
        raise TypeError(f'num_blks={num_blks} and num_layers={num_layers} '
                        f'disagree; pass one of them')
    return num_blks if num_blks is not None else num_layers


# --- Checking the inputs a student passes ---------------------------------
# Shapes and dtypes are checked for free; value ranges cost one small
# device-to-host copy per call (`_check_ranges`)

def _require_array(name, value):
    if not isinstance(value, mx.nd.NDArray):
        raise TypeError(
            f'{name} must be an mxnet.np.ndarray, got '
            f'{type(value).__name__}; wrap it with `np.array(...)`')


def _check_ranges(checks):
    """Check value ranges with one host copy.

    `checks` holds (name, array, low, high, allowed) tuples; a value must lie
    in [low, high].  Raises a ValueError naming the first offender.
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
            value = values[where]
            raise ValueError(
                f'{name} must hold {allowed}, got {value:g} at '
                f'{[int(i) for i in where]}')


def _check_encoder_inputs(tokens, segments, valid_lens, vocab_size, max_len):
    """Raise a clear error for inputs `BERTEncoder` cannot encode."""
    _require_array('tokens', tokens)
    _require_array('segments', segments)
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
        _require_array('valid_lens', valid_lens)
        if valid_lens.shape != (batch_size,):
            raise ValueError(
                f'valid_lens must have shape ({batch_size},), one length '
                f'per sequence, got {valid_lens.shape}')
        checks.append(('valid_lens', valid_lens, 0, seq_len,
                       f'lengths in [0, {seq_len}] (sequence length)'))
    _check_ranges(checks)


def _check_pred_positions(pred_positions, batch_size, seq_len):
    """Raise a clear error for positions `MaskLM` cannot gather."""
    _require_array('pred_positions', pred_positions)
    if pred_positions.ndim != 2 or pred_positions.shape[0] != batch_size:
        raise ValueError(
            f'pred_positions must have shape ({batch_size}, P), P positions '
            f'per sequence of the batch, got {pred_positions.shape}')
    _check_ranges([('pred_positions', pred_positions, 0, seq_len - 1,
                    f'positions in [0, {seq_len}) (sequence length)')])


def _clear_cache_if_structure_changed(block, *optional_args):
    """Rebuild a hybridized block's graph when None-ness of inputs changes.

    A hybridized block caches one graph per pattern of given/None inputs;
    calling it with `valid_lens` once and without it next is legitimate
    in the book, so the cached graph is dropped rather than refused.
    """
    structure = tuple(arg is None for arg in optional_args)
    if getattr(block, '_input_structure', structure) != structure:
        block._clear_cached_op()
    block._input_structure = structure


def _finish_deferred_init(net, tokens, segments, valid_lens):
    """Give shapes to a hybridized model's deferred parameters.

    A graph without `pred_positions` leaves `mlm` out, and Gluon cannot
    infer shapes for a graph that misses some of the block's parameters;
    the fused self-attention needs the projections' input size to build
    its graph.  One imperative pass gives the deferred parameters their
    shapes instead (as the book's imperative first call does).
    """
    if getattr(net, '_shapes_known', False):
        return  # shapes do not become deferred again: look once
    if any(p._deferred_init for p in net.collect_params().values()):
        net._active = False
        try:
            nn.HybridBlock.forward(net, tokens, segments, valid_lens)
        finally:
            net._active = True
    net._shapes_known = True
