"""The fast twins of the book's whole models (`d2l_bert.fast.models`)
against the book's `BERTModel` and `BERTClassifier`, their test oracle:
the outputs' shapes exactly, the outputs and gradients within the
tolerances of `helpers` (`REORDERED` for outputs, `GRADIENTS` for
gradients), with dropout off, with the compiled loops and with MXNet's
operators (``kernels``).
"""
import numpy as onp
import pytest
from mxnet import autograd, np

from d2l_bert import fast
from d2l_bert.book.finetuning import BERTClassifier
from d2l_bert.fast import models, step

from helpers import GRADIENTS, REORDERED, TINY, assert_close, kernel_params
from test_fast_blocks import outputs_and_grads, randomize, tiny_model

KERNELS = kernel_params()

#: B, T, H, P, V of `tiny_batch` and `TINY`
B, T, H, P, V = 3, 12, TINY['num_hiddens'], 3, TINY['vocab_size']


@pytest.mark.parametrize('kernels', KERNELS)
@pytest.mark.parametrize('recording', [False, True],
                         ids=['predicting', 'recording'])
def test_fast_model_gives_the_books_shapes(tiny_batch, kernels, recording):
    net = tiny_model()
    twin = fast.accelerate(net, kernels=kernels)
    assert isinstance(twin, models.FastBERTModel)
    tokens, segments, valid_lens, pred_positions = tiny_batch
    with autograd.record(recording):
        encoded_X, mlm_Y_hat, nsp_Y_hat = twin(*tiny_batch)
        no_mlm = twin(tokens, segments, valid_lens)
    assert encoded_X.shape == (B, T, H)
    assert mlm_Y_hat.shape == (B, P, V)
    assert nsp_Y_hat.shape == (B, 2)
    # the book's loop reshapes the scores for its loss: the graph's own
    # output, (B*P, V), no copy
    assert mlm_Y_hat.reshape(-1, V).shape == (B * P, V)
    assert mlm_Y_hat.reshape(-1, V) is mlm_Y_hat.rows_view
    assert no_mlm[1] is None
    assert no_mlm[0].shape == (B, T, H) and no_mlm[2].shape == (B, 2)


@pytest.mark.parametrize('kernels', KERNELS)
def test_fast_model_gives_the_books_outputs_at_valid_length_0(tiny_batch,
                                                             kernels):
    # A sequence with no valid position: the book's `masked_softmax`
    # spreads its attention uniformly over every key; so do the twins
    net = tiny_model()
    randomize(net)
    tokens, segments, _, pred_positions = tiny_batch
    valid_lens = np.array([12, 0, 9], dtype='float32')
    twin = fast.accelerate(net, kernels=kernels)
    with autograd.predict_mode():
        ours = twin(tokens, segments, valid_lens, pred_positions)
        book = net(tokens, segments, valid_lens, pred_positions)
    for a, b in zip(ours, book):
        assert a.shape == b.shape
        assert_close(a, b, REORDERED)


# --- The whole model, as `train_bert` calls it -----------------------------

@pytest.mark.parametrize('kernels', KERNELS)
@pytest.mark.parametrize('with_valid_lens', [True, False])
def test_fast_model_equals_the_book_model(tiny_batch, kernels,
                                          with_valid_lens):
    net = tiny_model()
    randomize(net)
    tokens, segments, valid_lens, pred_positions = tiny_batch
    batch = (tokens, segments, valid_lens if with_valid_lens else None,
             pred_positions)
    twin = fast.accelerate(net, kernels=kernels)
    head_grads = [np.random.normal(size=s)
                  for s in [(3, 12, 32), (3, 3, 99), (3, 2)]]
    # Recording, with valid lengths, the twin packs the tokens: a padded
    # position of `encoded_X` (none is predicted here) is not computed,
    # and nothing of the book reads it; no gradient flows from there
    lengths = valid_lens.asnumpy() if with_valid_lens else onp.full(3, 12)
    kept = onp.arange(12)[None, :] < lengths[:, None]        # (B, T)
    head_grads[0] = head_grads[0] * np.array(kept[:, :, None])
    book_out, book_grads = outputs_and_grads(net, batch, head_grads)
    fast_out, fast_grads = outputs_and_grads(twin, batch, head_grads)
    for a, b in zip(fast_out, book_out):
        assert a.shape == b.shape
    assert_close(fast_out[0].asnumpy()[kept], book_out[0].asnumpy()[kept])
    for a, b in zip(fast_out[1:], book_out[1:]):
        assert_close(a, b)
    # ... it holds its sequence's <cls> encoding
    encoded = fast_out[0].asnumpy()
    for b, t in zip(*onp.nonzero(~kept)):
        assert (encoded[b, t] == encoded[b, 0]).all()
    assert sorted(fast_grads) == sorted(book_grads)
    for name in book_grads:
        # W_k's bias has a zero gradient in exact arithmetic (a softmax
        # ignores a constant added to every score): only rounding is left
        assert_close(fast_grads[name], book_grads[name], GRADIENTS)


@pytest.mark.parametrize('kernels', KERNELS)
def test_fast_model_outside_training_computes_every_position(tiny_batch,
                                                             kernels):
    net = tiny_model()
    randomize(net)
    twin = fast.accelerate(net, kernels=kernels)
    for ours, theirs in zip(twin(*tiny_batch), net(*tiny_batch)):
        assert_close(ours, theirs)


def test_the_twin_packs_the_books_training_calls_only(tiny_batch,
                                                      monkeypatch):
    seen = []
    original = step.packed_tokens

    def recording(*args, **kwargs):
        arrays = original(*args, **kwargs)
        seen.append(arrays[0].shape)
        return arrays
    monkeypatch.setattr(step, 'packed_tokens', recording)
    twin = models.FastBERTModel(tiny_model(), kernels=False,
                                token_multiple=1)
    tokens, segments, valid_lens, pred_positions = tiny_batch
    twin(tokens, segments, valid_lens, pred_positions)
    with autograd.record():
        twin(tokens, segments, None, pred_positions)
        twin(tokens, segments, valid_lens, None)
    assert seen == []
    with autograd.record():
        twin(tokens, segments, valid_lens, pred_positions)
    assert seen == [(28,)]                   # 12 + 7 + 9 of 3 * 12


# --- Fine-tuning ------------------------------------------------------------

@pytest.mark.parametrize('kernels', KERNELS)
def test_fast_classifier_equals_the_books(tiny_batch, kernels):
    net = BERTClassifier(tiny_model())
    net.output.initialize()
    tokens, segments, valid_lens, _ = tiny_batch
    expected = net((tokens, segments, valid_lens))
    twin = fast.accelerate(net, kernels=kernels)
    assert isinstance(twin, models.FastBERTClassifier)
    assert_close(twin((tokens, segments, valid_lens)), expected)
    assert sorted(twin._collect_params_with_prefix()) == sorted(
        net._collect_params_with_prefix())


@pytest.mark.parametrize('kernels', KERNELS)
@pytest.mark.parametrize('lengths', [[12, 7, 9], [3, 0, 1], [5, 7, 3],
                                     None],
                         ids=['valid', 'length-0', 'shorter-layout',
                              'no-valid-lens'])
def test_packed_classifier_gives_the_books_scores_and_gradients(
        tiny_batch, kernels, lengths, monkeypatch):
    """The twin encodes the valid tokens only (a length of 0: all of
    its sequence's); the scores and every gradient are the book's.  At
    lengths of at most 7 of 12, the attention reads a layout of 8
    positions (a `LENGTH_STEP` of 4)."""
    monkeypatch.setattr(step, 'LENGTH_STEP', 4)
    net = BERTClassifier(tiny_model())
    net.output.initialize()
    tokens, segments = tiny_batch[:2]
    valid_lens = None if lengths is None else np.array(lengths,
                                                       dtype='float32')
    net((tokens, segments, valid_lens))      # the output's shape known
    randomize(net)
    head_grad = np.random.normal(size=(3, 3))
    twin = fast.accelerate(net, kernels=kernels)
    results = []
    for model in (net, twin):
        with autograd.record():
            scores = model((tokens, segments, valid_lens))
            total = (scores * head_grad).sum()
        total.backward()
        results.append((scores.copy(), {
            name: p.grad().copy()
            for name, p in net._collect_params_with_prefix().items()}))
    (book_scores, book_grads), (scores, grads) = results
    assert scores.shape == (3, 3)
    assert_close(scores, book_scores)
    for name, grad in book_grads.items():
        assert_close(grads[name], grad, GRADIENTS, err_msg=name)
    assert float(abs(book_grads['encoder.token_embedding.weight']).sum()) > 0


def test_packed_classifier_encodes_only_the_valid_tokens(tiny_batch,
                                                         monkeypatch):
    seen = []
    original = step.packed_tokens

    def recording(*args):
        arrays = original(*args)
        seen.append(arrays[0].shape)
        return arrays
    monkeypatch.setattr(step, 'packed_tokens', recording)
    net = BERTClassifier(tiny_model())
    net.output.initialize()
    twin = models.FastBERTClassifier(net, kernels=False, token_multiple=1)
    tokens, segments = tiny_batch[:2]
    twin((tokens, segments, np.array([12, 7, 9], dtype='float32')))
    assert seen == [(28,)]                   # 12 + 7 + 9 of 3 * 12
