"""What BERT attends to: the weights the book's attention keeps, drawn.

The book's `DotProductAttention` keeps the weights of its last call in
``attention_weights``, and each `TransformerEncoderBlock` of a
`BERTEncoder` holds one in ``blk.attention.attention``.  So one forward
pass of the book's blocks on one input sequence leaves every block's
weights behind: `bert_attention` makes that pass and collects them, and
`show_bert_attention` draws the chosen blocks and heads with d2l's
`show_heatmaps`, one row a block and one column a head, labelled with
the tokens.  It takes the book's `BERTModel` or `BERTEncoder` (or a
model whose blocks are the book's, such as the fine-tuning section's
`BERTClassifier`), the fast twin `d2l_bert.fast.accelerate` made of one
(its book model runs, with the same parameters), or a pretrained
checkpoint loaded into the book's classes (`load_pretrained_bert`).

Dimension key used in the shape comments:

L: number of blocks, h: num_heads, T: tokens of the input sequence
"""
import math
from collections import namedtuple

import numpy as onp

#: Panels (blocks x heads) drawn at most when neither `layers` nor
#: `heads` is given; a larger grid is thinned to evenly spaced ones
MAX_PANELS = 48
#: Width of the figure at most, in inches, when neither is given
MAX_WIDTH = 24.0
#: The side of one panel, in inches: `PANEL_INCHES_PER_TOKEN` a token,
#: between `PANEL_MIN` and `PANEL_MAX`
PANEL_INCHES_PER_TOKEN, PANEL_MIN, PANEL_MAX = 0.16, 1.8, 7.0
#: Token labels an inch of a panel's side at most (7-point text); longer
#: sequences label every k-th token
LABELS_PER_INCH = 8


class AttentionMaps(namedtuple('AttentionMaps',
                               'tokens layers heads weights figure')):
    """What `show_bert_attention` drew.

    Attributes
    ----------
    tokens : list of str
        The T tokens of the input sequence, ``<cls>`` and ``<sep>``
        included, which label both axes.
    layers, heads : list of int
        The blocks (rows) and heads (columns) drawn, counted from 0.
    weights : numpy.ndarray, float32, shape (len(layers), len(heads), T, T)
        The weights drawn: ``weights[i, j, q, k]`` is how much query `q`
        attends to key `k` in head ``heads[j]`` of block ``layers[i]``.
    figure : matplotlib.figure.Figure
        The figure, to save (``.figure.savefig('attention.svg')``).
    """
    __slots__ = ()

    def __repr__(self):
        # A notebook cell that ends with the call shows one line, not
        # the arrays
        return (f'AttentionMaps({len(self.tokens)} tokens, blocks '
                f'{self.layers}, heads {self.heads})')


def bert_attention(net, vocab, tokens_a, tokens_b=None):
    """Every block's attention weights on one input sequence.

    One forward pass of the book's blocks, dropout off (outside
    ``autograd.record``), on the sequence of `tokens_a` (and `tokens_b`)
    without padding, so every position is valid.

    Parameters
    ----------
    net : BERTModel, BERTEncoder, a fast twin of one, or PretrainedBERT
        The model; a fast twin (`d2l_bert.fast.accelerate`) keeps no
        weights, so its book model runs instead, with the same
        parameters.
    vocab : d2l.Vocab or None
        The book's vocabulary, which maps the tokens to indices; None for
        a `PretrainedBERT`, which has its tokenizer.
    tokens_a : list of str, or str for a PretrainedBERT
        The first text's tokens, as `get_tokens_and_segments` takes them;
        for a `PretrainedBERT`, its text.
    tokens_b : list of str or str, optional
        The second text of a pair, likewise.

    Returns
    -------
    tokens : list of str
        The T tokens of the input sequence.
    weights : numpy.ndarray, float32, shape (L, h, T, T)
        ``weights[l, j]`` is head `j` of block `l`; each row (a query)
        sums to 1 over the keys.
    """
    from mxnet import autograd, np

    encoder, tokens, token_ids, segments = _sequence(net, vocab, tokens_a,
                                                     tokens_b)
    ctx = _context(encoder)
    with autograd.predict_mode():
        encoder(np.array([token_ids], ctx=ctx),
                np.array([segments], ctx=ctx),
                np.array([len(tokens)], ctx=ctx, dtype='float32'))
    weights = [_kept_weights(blk) for blk in encoder.blks]   # L x (h, T, T)
    return tokens, onp.stack(weights).astype('float32')      # (L, h, T, T)


def show_bert_attention(net, vocab, tokens_a, tokens_b=None, layers=None,
                        heads=None, figsize=None, cmap='Reds'):
    """Draw what each head of each block attends to, on one sequence.

    The weights of `bert_attention`, drawn by d2l's `show_heatmaps`: a
    row a block, a column a head, queries down and keys across, each
    axis labelled with the tokens (every k-th one for long sequences).
    Without `layers` and `heads`, a grid of more than `MAX_PANELS`
    panels, or wider than `MAX_WIDTH` inches, is thinned to evenly
    spaced blocks (the last one kept) and heads, and a line says which;
    choose them to read a sequence of up to 512 tokens.

    Parameters
    ----------
    net, vocab, tokens_a, tokens_b
        As for `bert_attention`.
    layers : int or list of int, optional
        The blocks to draw, counted from 0; default all.
    heads : int or list of int, optional
        The heads to draw, counted from 0; default all.
    figsize : (float, float), optional
        The figure's size in inches; default from the sequence's length
        and the grid.
    cmap : str, default 'Reds'
        The colour map, as for `show_heatmaps`.

    Returns
    -------
    AttentionMaps
        The tokens, the blocks and heads drawn, their weights
        (len(layers), len(heads), T, T) and the figure.
    """
    from d2l import mxnet as d2l
    from mxnet import np

    from .pyplot import settle_backend

    settle_backend()    # outside a notebook: Agg, to save the figure
    tokens, weights = bert_attention(net, vocab, tokens_a, tokens_b)
    L, h, T, _ = weights.shape
    panel = min(max(PANEL_INCHES_PER_TOKEN * T, PANEL_MIN), PANEL_MAX)
    layers, heads = _grid(layers, heads, L, h, panel)
    drawn = weights[layers][:, heads]                  # (L', h', T, T)
    if figsize is None:
        figsize = (panel * len(heads) + 1.5, panel * len(layers) + 0.8)
    d2l.show_heatmaps(np.array(drawn), xlabel='keys', ylabel='queries',
                      titles=[f'head {j}' for j in heads], figsize=figsize,
                      cmap=cmap)
    figure = d2l.plt.gcf()
    # One colour scale for every panel, the colour bar's (`show_heatmaps`
    # scales each panel by itself, beside the last one's bar)
    for ax in figure.axes[:-1]:
        ax.images[0].set_clim(0, float(drawn.max()))
    _label(figure, tokens, layers, panel)
    return AttentionMaps(tokens, layers, heads, drawn, figure)


def _sequence(net, vocab, tokens_a, tokens_b):
    """The book encoder of `net` and the input sequence: its tokens,
    their indices and the segments."""
    net = getattr(net, 'book_model', net)    # a fast twin's book model
    if hasattr(net, 'tokenize') and hasattr(net, 'encoder'):
        for name, text in (('tokens_a', tokens_a), ('tokens_b', tokens_b)):
            if not isinstance(text, str) and text is not None:
                raise TypeError(f'{name} must be a str for a pretrained '
                                f'BERT, which tokenizes it, got '
                                f'{type(text).__name__}')
        tokens, token_ids, segments = net.tokenize(tokens_a, tokens_b)
        return net.encoder, list(tokens), list(token_ids), list(segments)
    from ..book.bert import get_tokens_and_segments

    encoder = getattr(net, 'encoder', net)
    if not hasattr(encoder, 'blks'):
        raise TypeError(f'net must be a BERTModel, a BERTEncoder or a '
                        f'PretrainedBERT, got {type(net).__name__}')
    for name, toks in (('tokens_a', tokens_a), ('tokens_b', tokens_b)):
        if toks is not None and (isinstance(toks, str) or not all(
                isinstance(t, str) for t in toks)):
            raise TypeError(f'{name} must be a list of str tokens, as '
                            f'get_tokens_and_segments takes them, got '
                            f'{toks!r:.60}')
    tokens, segments = get_tokens_and_segments(list(tokens_a), None
                                                if tokens_b is None
                                                else list(tokens_b))
    max_len = encoder.pos_embedding.shape[1]
    if len(tokens) > max_len:
        raise ValueError(f'the sequence has {len(tokens)} tokens with '
                         f'<cls> and <sep>, more than the {max_len} '
                         f'positions of the encoder (max_len); shorten it')
    return encoder, tokens, list(vocab[tokens]), segments


def _context(encoder):
    """The context of the encoder's parameters (where inputs go)."""
    import mxnet as mx

    for param in encoder.collect_params().values():
        return param.list_ctx()[0]
    return mx.cpu()


def _kept_weights(blk):
    """The weights block `blk`'s attention kept on its last call, (h, T,
    T) for a batch of one sequence."""
    weights = getattr(getattr(getattr(blk, 'attention', None), 'attention',
                              None), 'attention_weights', None)
    if weights is None:
        raise TypeError(f"net's blocks ({type(blk).__name__}) keep no "
                        f'attention weights, as the book\'s do in '
                        f'blk.attention.attention.attention_weights: pass '
                        f'the book model (a fast twin keeps none)')
    return weights.asnumpy()                                 # (h, T, T)


def _indices(name, chosen, count, what):
    """`chosen` (None, an int or ints) as a list of ints in [0, count)."""
    if chosen is None:
        return list(range(count))
    items = [chosen] if isinstance(chosen, (int, onp.integer)) \
        else list(chosen)
    bad = [i for i in items if isinstance(i, bool)
           or not isinstance(i, (int, onp.integer)) or not 0 <= i < count]
    if not items or bad:
        raise ValueError(f'{name} must be {what} numbers from 0 to '
                         f'{count - 1}, got {chosen!r}')
    return [int(i) for i in items]


def _evenly(count, keep):
    """`keep` of `count` indices, evenly spaced, the first and last kept."""
    if keep >= count:
        return list(range(count))
    if keep == 1:
        return [count - 1]
    return sorted({round(i * (count - 1) / (keep - 1)) for i in range(keep)})


def _grid(layers, heads, L, h, panel):
    """The blocks and heads to draw: the chosen ones, or all of them,
    thinned when neither was chosen and the grid is too large."""
    chose = layers is not None or heads is not None
    layers = _indices('layers', layers, L, 'block')
    heads = _indices('heads', heads, h, 'head')
    if chose:
        return layers, heads
    columns = max(1, min(h, int(MAX_WIDTH // panel)))
    rows = max(1, min(L, MAX_PANELS // columns))
    if (rows, columns) == (L, h):
        return layers, heads
    layers, heads = _evenly(L, rows), _evenly(h, columns)
    print(f'show_bert_attention: drawing blocks {layers} of {L} and heads '
          f'{heads} of {h}; choose others with layers= and heads=')
    return layers, heads


def _label(figure, tokens, layers, panel):
    """Label the panels' axes with the tokens and each row with its
    block."""
    T = len(tokens)
    every = max(1, math.ceil(T / (panel * LABELS_PER_INCH)))
    ticks = list(range(0, T, every))
    labels = [tokens[i] for i in ticks]
    axes = onp.array(figure.axes[:-1]).reshape(len(layers), -1)
    for i, row in enumerate(axes):
        row[0].set_yticks(ticks)
        row[0].set_yticklabels(labels, fontsize=7)
        row[0].set_ylabel(f'block {layers[i]}\nqueries')
    for ax in axes[-1]:
        ax.set_xticks(ticks)
        ax.set_xticklabels(labels, fontsize=7, rotation=90)
