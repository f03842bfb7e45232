"""`load_pretrained_bert`: a Hugging Face BERT in the book's classes.

`PretrainedBERT` holds the book's `BERTEncoder`, its pooler
(`BERTModel.hidden`), the tokenizer, and the inference twin that runs
them; `load_pretrained_bert` builds it from a checkpoint directory.

Dimension key used in the shape comments:

B: batch size, T: sequence length, H: num_hiddens
"""
import os

import numpy as onp

from .convert import bert_options, convert_weights
from .files import CheckpointError, read_config, read_weights, \
    resolve_model_dir
from .tokenizer import load_wordpiece_tokenizer

# --- The book's classes, filled ---------------------------------------------

#: `bert_options` keys that are `BERTEncoder` arguments
ENCODER_ARGUMENTS = ('vocab_size', 'num_hiddens', 'ffn_num_hiddens',
                     'num_heads', 'num_blks', 'dropout', 'max_len',
                     'activation', 'epsilon', 'embedding_norm')


def load_pretrained_bert(model='minilm', ctx=None, heads=False, fast=True):
    """Load a Hugging Face BERT checkpoint into the book's classes.

    Parameters
    ----------
    model : str, default 'minilm'
        ``'minilm'`` (all-MiniLM-L6-v2, installed with `MINILM_INSTALL`)
        or a directory holding ``config.json``, ``model.safetensors`` or
        ``pytorch_model.bin``, and ``vocab.txt``.
    ctx : mxnet.Context, optional
        Where the parameters live; default CPU.
    heads : bool, default False
        Also load the pretraining heads of a `BertForPreTraining`
        checkpoint into a whole `BERTModel` (``.net`` of the result).
    fast : bool, default True
        Encode with the inference twin of the encoder and pooler
        (`d2l_bert.fast.inference`: one graph, same parameters, compiled
        attention); False calls the book's blocks, imperatively.

    Returns
    -------
    PretrainedBERT
        The `BERTEncoder`, the pooler (`BERTModel.hidden`) and the
        WordPiece tokenizer; with `heads`, the `BERTModel` holding them;
        with `fast`, the inference twin that calls run (``.fast``).

    Raises
    ------
    FileNotFoundError
        A file is missing (or 'minilm' is not installed).
    CheckpointError
        A file is corrupt, or the config and the weights disagree, or the
        config asks for what the book's classes cannot express.
    """
    import mxnet as mx
    from mxnet.gluon import nn

    from ..bert import BERTEncoder, BERTModel

    ctx = mx.cpu() if ctx is None else ctx
    model_dir = resolve_model_dir(model)
    options = bert_options(read_config(model_dir),
                           os.path.join(model_dir, 'config.json'))
    tokenizer = load_wordpiece_tokenizer(model_dir)
    vocab_path = os.path.join(model_dir, 'vocab.txt')
    if tokenizer.get_vocab_size() > options['vocab_size']:
        raise CheckpointError(
            f'{vocab_path} has {tokenizer.get_vocab_size()} tokens, more '
            f'than vocab_size={options["vocab_size"]} in config.json')
    weights, path = read_weights(model_dir)
    params = convert_weights(weights, options, path, heads)
    del weights
    arguments = {k: options[k] for k in ENCODER_ARGUMENTS}
    if heads:
        net = BERTModel(**arguments, tie_weights=options['tie_weights'])
        arrays = {f'{child}.{name}': value
                  for child, named in params.items()
                  for name, value in named.items()}
        if options['tie_weights']:
            arrays['mlm.mlp.2.weight'] = arrays[
                'encoder.token_embedding.weight']
        set_parameters(net, arrays, ctx)
        encoder, hidden = net.encoder, net.hidden
    else:
        net = None
        encoder = BERTEncoder(**arguments)
        hidden = nn.Dense(options['num_hiddens'], activation='tanh')
        set_parameters(encoder, params['encoder'], ctx)
        set_parameters(hidden, params['hidden'], ctx)
    name = 'minilm' if model == 'minilm' else os.path.basename(
        os.path.normpath(model_dir))
    twin = None
    if fast:
        # The fast layer's one visible call: a twin of the book's blocks
        # for inference, sharing their parameters
        from .. import fast as fast_layer
        twin = fast_layer.inference(encoder, hidden)
    return PretrainedBERT(encoder, hidden, tokenizer, options['max_len'],
                          options['num_segments'], name, ctx, net, twin)


def set_parameters(block, arrays, ctx):
    """Initialize `block`'s parameters with `arrays`, by structural name.

    Parameters
    ----------
    block : mxnet.gluon.Block
        A block that is not initialized yet.
    arrays : dict of str to numpy.ndarray
        One array per parameter, named as ``save_parameters`` names them
        (``'blks.0.attention.W_q.weight'``).
    ctx : mxnet.Context
    """
    import mxnet as mx
    params = block._collect_params_with_prefix()
    if set(params) != set(arrays):
        raise RuntimeError(
            f'the conversion does not match {type(block).__name__}: '
            f'without a value: {sorted(set(params) - set(arrays))[:5]}, '
            f'without a parameter: {sorted(set(arrays) - set(params))[:5]}')
    for name, param in params.items():
        shape = arrays[name].shape
        known = tuple(param.shape or ())
        if len(known) != len(shape) or any(
                k not in (-1, 0, s) for k, s in zip(known, shape)):
            raise RuntimeError(f'{type(block).__name__}.{name} has shape '
                               f'{known}, the checkpoint gives {shape}')
        param.shape = shape  # fills the sizes Gluon infers at first use
    block.initialize(mx.init.Zero(), ctx=ctx)
    for name, param in params.items():
        param.set_data(mx.np.array(arrays[name], dtype='float32', ctx=ctx))


class PretrainedBERT:
    """A pretrained BERT encoder, its pooler and its tokenizer.

    Made by `load_pretrained_bert`.  Called on arrays it runs the
    inference twin of the book's `BERTEncoder` and `BERTModel.hidden`
    (`fast`), or the book's blocks themselves when there is none; `encode`
    goes from text to vectors, for the ``d2l-bert encode`` command.

    Attributes
    ----------
    encoder : BERTEncoder
    hidden : mxnet.gluon.nn.Dense
        The pooler: a dense tanh layer on the encoding of ``[CLS]``.
    tokenizer : tokenizers.Tokenizer
    max_len : int
        The longest BERT input sequence, in tokens.
    name : str
    ctx : mxnet.Context
    net : BERTModel or None
        The whole model with its pretraining heads, when loaded with
        ``heads=True``.
    fast : d2l_bert.fast.InferenceBERT or None
        The inference twin of `encoder` and `hidden` (same parameters)
        that calls run; None: the book's blocks run.
    """

    def __init__(self, encoder, hidden, tokenizer, max_len, num_segments,
                 name, ctx, net=None, fast=None):
        self.encoder, self.hidden, self.tokenizer = encoder, hidden, tokenizer
        self.net, self.fast = net, fast
        self.max_len, self.num_segments = max_len, num_segments
        self.name, self.ctx = name, ctx
        self.pad_id = tokenizer.padding['pad_id']

    def __call__(self, tokens, segments, valid_lens=None):
        """Encode a batch of token ids.

        Parameters
        ----------
        tokens, segments : int array, shape (B, T)
        valid_lens : float32 array, shape (B,), optional

        Returns
        -------
        encoded_X : float32 mxnet.np.ndarray, shape (B, T, H)
        pooled : float32 mxnet.np.ndarray, shape (B, H)
            The pooler's output on each sequence's ``[CLS]``.
        """
        if self.fast is not None:
            return self.fast(tokens, segments, valid_lens)   # the same two
        encoded_X = self.encoder(tokens, segments, valid_lens)  # (B, T, H)
        pooled = self.hidden(encoded_X[:, 0, :])             # (B, H)
        return encoded_X, pooled

    def tokenize(self, text_a, text_b=None):
        """Turn one text or a text pair into a BERT input sequence.

        Returns
        -------
        tokens : list of str
            ``[CLS]``, the WordPieces of `text_a`, ``[SEP]`` (and those of
            `text_b` and ``[SEP]``).
        token_ids : list of int
        segments : list of int
            0 up to the first ``[SEP]``, then 1.
        """
        for arg, text in (('text_a', text_a), ('text_b', text_b)):
            if not isinstance(text, str) and not (arg == 'text_b'
                                                  and text is None):
                raise TypeError(f'{arg} must be a str, got '
                                f'{type(text).__name__}')
        if text_b is not None and self.num_segments < 2:
            raise ValueError(
                f'{self.name} has a single segment embedding '
                f'(type_vocab_size=1): it encodes one text, not a pair')
        encoding = self.tokenizer.encode(text_a, text_b)
        if len(encoding.ids) > self.max_len:
            raise ValueError(
                f'the text makes {len(encoding.ids)} tokens with [CLS] and '
                f'[SEP], more than the {self.max_len} positions of '
                f'{self.name} (max_position_embeddings); shorten it')
        return encoding.tokens, encoding.ids, encoding.type_ids

    def encode(self, text_a, text_b=None):
        """Encode one text or a text pair.

        Parameters
        ----------
        text_a : str
        text_b : str, optional

        Returns
        -------
        tokens : list of str
            The T WordPiece tokens, with ``[CLS]`` and ``[SEP]``.
        encoded : float32 numpy.ndarray, shape (T, H)
            One vector per token: the last block's output.
        pooled : float32 numpy.ndarray, shape (H,)
            The pooler's output (`BERTModel.hidden` on ``[CLS]``).
        """
        tokens, encoded, pooled, _ = self.encode_batch([(text_a, text_b)])
        T = len(tokens[0])
        return tokens[0], encoded[0, :T], pooled[0]          # (T, H), (H,)

    def encode_batch(self, texts):
        """Encode texts (or pairs) padded into one batch.

        Parameters
        ----------
        texts : list of str or of (str, str or None)

        Returns
        -------
        tokens : list of list of str
            Each sequence's tokens, without padding.
        encoded : float32 numpy.ndarray, shape (B, T, H)
            T is the longest sequence; positions past a sequence's length
            are padding.
        pooled : float32 numpy.ndarray, shape (B, H)
        valid_lens : int numpy.ndarray, shape (B,)
        """
        if isinstance(texts, str) or not len(texts):
            raise TypeError('texts must be a non-empty list of str or of '
                            '(text_a, text_b) pairs')
        pairs = [(t, None) if isinstance(t, str) else tuple(t)
                 for t in texts]
        sequences = [self.tokenize(*pair) for pair in pairs]
        encoded, pooled, lengths = self.encode_ids(
            [ids for _, ids, _ in sequences],
            [segs for _, _, segs in sequences])
        return ([tokens for tokens, _, _ in sequences], encoded, pooled,
                lengths)                                # (B, T, H), (B, H)

    def encode_ids(self, token_ids, segments):
        """Encode tokenized sequences padded into one batch.

        Parameters
        ----------
        token_ids, segments : list of list of int
            Each sequence's ids and segments, as `tokenize` returns them.

        Returns
        -------
        encoded : float32 numpy.ndarray, shape (B, T, H)
            T is the longest sequence; positions past a sequence's length
            are padding.
        pooled : float32 numpy.ndarray, shape (B, H)
        valid_lens : int numpy.ndarray, shape (B,)
        """
        from mxnet import np
        lengths = onp.array([len(ids) for ids in token_ids])   # (B,)
        T = int(lengths.max())
        padded = onp.full((len(token_ids), T), self.pad_id,
                          dtype='int32')                     # (B, T)
        padded_segments = onp.zeros((len(token_ids), T),
                                    dtype='int32')           # (B, T)
        for i, (ids, segs) in enumerate(zip(token_ids, segments)):
            padded[i, :len(ids)] = ids
            padded_segments[i, :len(segs)] = segs
        encoded_X, pooled = self(
            np.array(padded, ctx=self.ctx),
            np.array(padded_segments, ctx=self.ctx),
            np.array(lengths, dtype='float32', ctx=self.ctx))
        return encoded_X.asnumpy(), pooled.asnumpy(), lengths
