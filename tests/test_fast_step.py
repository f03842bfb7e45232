"""The one-graph pretraining step against the book's, its test oracle.

`d2l_bert.fast.batch_loss(net, loss, vocab_size)` is what `d2l-bert
pretrain` trains: the fast twin of `BERTModel` and both losses in one
hybridized graph (`fast/step.py`).  Here it and the book's
`_get_batch_loss_bert` on the book's `BERTModel` run on the same
parameters and batch, dropout off, and every loss and every parameter's
gradient is compared: with the compiled loops and with MXNet's operators
(``kernels``), on one device and split over two CPU contexts, with padded
predicted positions (weight 0) and valid lengths from 1 to T.

Tolerances: `helpers.REORDERED` for the losses (float32 sums taken in
another order: fused projections, an added mask, the compiled softmax
cross-entropy), `helpers.GRADIENTS` for the gradients.
"""
import mxnet as mx
import pytest
from mxnet import autograd, gluon, init, np

from d2l_bert import fast
from d2l_bert.book.bert import BERTModel
from d2l_bert.fast import _ops
from d2l_bert.fast import step as step_module
from d2l_bert.book.pretraining import _get_batch_loss_bert

from helpers import GRADIENTS, TINY, assert_close, kernel_params

KERNELS = kernel_params()

DEVICES = [pytest.param([mx.cpu(0)], id='one-device'),
           pytest.param([mx.cpu(0), mx.cpu(1)], id='two-cpu-contexts')]

V = TINY['vocab_size']


def pretraining_batch():
    """Four sequences of 12 tokens, valid lengths 12, 1, 7 and 3, up to 3
    predicted positions each; the padded ones (position 0, label 0)
    have weight 0, as `_pad_bert_inputs` makes them."""
    tokens = np.random.randint(0, V, (4, 12)).astype('int32')  # (B, T)
    segments = np.array([[0] * 6 + [1] * 6, [0] * 12,
                         [0] * 4 + [1] * 8, [0] * 2 + [1] * 10],
                        dtype='int32')                      # (B, T)
    valid_lens = np.array([12, 1, 7, 3], dtype='float32')   # (B,)
    pred_positions = np.array([[1, 5, 10], [0, 0, 0], [2, 6, 0],
                               [1, 0, 0]], dtype='int32')   # (B, P)
    mlm_weights = np.array([[1, 1, 1], [1, 0, 0], [1, 1, 0], [1, 0, 0]],
                           dtype='float32')                 # (B, P)
    mlm_Y = np.array([[3, 4, 5], [6, 0, 0], [8, 9, 0], [98, 0, 0]],
                     dtype='int32')                         # (B, P)
    nsp_y = np.array([0, 1, 1, 0], dtype='int32')           # (B,)
    return (tokens, segments, valid_lens, pred_positions, mlm_weights,
            mlm_Y, nsp_y)


def model_on(devices):
    """The tiny BERT on `devices`, every parameter (biases included)
    random and non-zero."""
    net = BERTModel(**TINY)
    net.initialize(init.Xavier(), ctx=devices)
    tokens = np.zeros((1, 2), dtype='int32', ctx=devices[0])
    net(tokens, tokens, None, np.zeros((1, 1), dtype='int32',
                                       ctx=devices[0]))
    for param in net.collect_params().values():
        param.set_data(np.random.normal(0, 0.3, size=param.shape))
    return net


def losses_and_grads(step, net, shards):
    """The three lists of per-shard losses of ``step(*shards)`` and every
    parameter's gradient on every device after ``l.backward()`` for each
    shard (as `train_bert` does), by structural name."""
    with autograd.record():
        mlm_ls, nsp_ls, ls = step(*shards)
    for l in ls:
        l.backward()
    grads = {name: [g.copy() for g in p.list_grad()]
             for name, p in net._collect_params_with_prefix().items()}
    return [[float(l) for l in losses] for losses in (mlm_ls, nsp_ls, ls)], \
        grads


#: The MLM head's rows: exactly the weighted predictions (1), those
#: rounded up to the default multiple (8), all B*P of a shard here (256)
ROW_MULTIPLES = [1, 8, 256]


#: The encoder's packed tokens: exactly the valid ones (1), those rounded
#: up to 8, all B*T of a shard here (the default, 1024)
TOKEN_MULTIPLES = [1, 8, 1024]


@pytest.mark.parametrize('row_multiple, token_multiple',
                         list(zip(ROW_MULTIPLES, TOKEN_MULTIPLES)))
@pytest.mark.parametrize('devices', DEVICES)
@pytest.mark.parametrize('kernels', KERNELS)
@pytest.mark.parametrize('length_step', [16, 4])
def test_one_graph_step_equals_the_books_losses_and_gradients(
        devices, kernels, row_multiple, token_multiple, length_step,
        monkeypatch):
    """With a `LENGTH_STEP` of 4, a shard without the sequence of 12
    attends in a layout of 4 or 8 positions of 12."""
    monkeypatch.setattr(step_module, 'LENGTH_STEP', length_step)
    net = model_on(devices)
    loss = gluon.loss.SoftmaxCELoss()
    shards = [gluon.utils.split_and_load(a, devices, even_split=False)
              for a in pretraining_batch()]

    def book(*shards):
        return _get_batch_loss_bert(net, loss, V, *shards)

    book_losses, book_grads = losses_and_grads(book, net, shards)
    step = fast.batch_loss(net, loss, V, kernels=kernels,
                           row_multiple=row_multiple,
                           token_multiple=token_multiple)
    assert step.graph.kernels == (kernels and _ops.usable(devices))
    fast_losses, fast_grads = losses_and_grads(step, net, shards)

    # one loss per shard, each of them a real one (not a trivial 0)
    assert [len(losses) for losses in fast_losses] == [len(devices)] * 3
    assert all(0.5 < l < 50 for l in book_losses[0] + book_losses[1])
    for ours, theirs in zip(fast_losses, book_losses):
        assert_close(ours, theirs)
    assert sorted(fast_grads) == sorted(book_grads)
    for name in book_grads:
        assert len(fast_grads[name]) == len(devices)
        for ours, theirs in zip(fast_grads[name], book_grads[name]):
            assert ours.ctx == theirs.ctx
            assert_close(ours, theirs, GRADIENTS, err_msg=name)
    # the MLM head's output layer gets a gradient (not all zeros)
    assert float(abs(book_grads['mlm.mlp.2.weight'][0]).sum()) > 0


@pytest.mark.parametrize('devices', DEVICES)
@pytest.mark.parametrize('kernels', KERNELS)
def test_books_loop_on_the_twin_equals_the_books_losses_and_gradients(
        devices, kernels):
    """The notebook's way: the book's `_get_batch_loss_bert` on
    ``accelerate(net)`` and ``accelerate(loss)``, whose MLM scores
    reshape to the graph's own output (`MLMScores`)."""
    net = model_on(devices)
    loss = gluon.loss.SoftmaxCELoss()
    shards = [gluon.utils.split_and_load(a, devices, even_split=False)
              for a in pretraining_batch()]
    book = losses_and_grads(
        lambda *s: _get_batch_loss_bert(net, loss, V, *s), net, shards)
    twin, fast_loss = fast.accelerate(net, kernels=kernels), \
        fast.accelerate(loss)
    ours = losses_and_grads(
        lambda *s: _get_batch_loss_bert(twin, fast_loss, V, *s), net,
        shards)
    for our_losses, book_losses in zip(ours[0], book[0]):
        assert_close(our_losses, book_losses)
    for name, grads in book[1].items():
        for our_grad, book_grad in zip(ours[1][name], grads):
            assert our_grad.ctx == book_grad.ctx
            assert_close(our_grad, book_grad, GRADIENTS, err_msg=name)
    assert float(abs(book[1]['mlm.mlp.2.weight'][0]).sum()) > 0


def test_mlm_scores_reshape_to_the_graphs_output_and_back_propagate():
    net = model_on([mx.cpu()])
    twin = fast.accelerate(net)
    tokens, segments, valid_lens, pred_positions = pretraining_batch()[:4]
    B, P = pred_positions.shape
    book_scores = net(tokens, segments, valid_lens, pred_positions)[1]
    scores = twin(tokens, segments, valid_lens, pred_positions)[1]
    assert isinstance(scores, np.ndarray) and scores.shape == (B, P, V)
    assert_close(scores, book_scores)
    rows = scores.reshape((-1, V))
    # the book's loss line gets the graph's output itself, no copy
    assert rows is scores.reshape(-1, V) is scores.reshape((B * P, V))
    assert rows.shape == (B * P, V) and type(rows) is np.ndarray
    assert_close(rows, book_scores.reshape((-1, V)))
    # other shapes are mxnet.numpy's copies, of the same numbers
    other = scores.reshape((B, -1))
    assert other.shape == (B, P * V) and other is not rows
    assert_close(other, book_scores.reshape((B, -1)))
    # a loss on the (B, P, V) view or on its reshape: the book's gradients
    weights = np.random.uniform(size=(B, P, V))
    grads = []
    for model, use_rows in ((net, False), (twin, False), (twin, True)):
        with autograd.record():
            Y = model(tokens, segments, valid_lens, pred_positions)[1]
            Y = Y.reshape((-1, V)) if use_rows else Y
            l = (Y * weights.reshape(Y.shape)).sum()
        l.backward()
        grads.append(net.mlm.mlp[0].weight.grad().copy())
    assert_close(grads[1], grads[0], GRADIENTS)
    assert_close(grads[2], grads[0], GRADIENTS)


def test_packed_tokens_are_the_valid_ones_and_the_predicted_ones():
    """Lengths 3, 0 (all T) and 1 with a prediction at position 2, T = 4:
    3 + 4 + 3 tokens, rounded up to 12 with token (0, 0)."""
    valid_lens = np.array([3, 0, 1], dtype='float32')
    rows = np.array([[0, 1, 2, 2], [1, 3, 0, 2]], dtype='int32')  # (2, K)
    pack, positions, unpack, kept_rows, query_lens, cls_rows, mlm_rows = [
        a.asnumpy().tolist() for a in step_module.packed_tokens(
            valid_lens, rows, 3, 4, multiple=4)]
    assert pack == [0, 1, 2, 4, 5, 6, 7, 8, 9, 10, 0, 0]
    assert query_lens == [3, 4, 3]
    assert positions == [0, 1, 2, 0, 1, 2, 3, 0, 1, 2, 0, 0]
    assert cls_rows == [0, 3, 7]
    # position (0, 3) is left out: it reads example 0's <cls> row; the
    # attention's layout is all of T (a length of 0 attends to every key)
    assert unpack == [[0, 1, 2, 0], [3, 4, 5, 6], [7, 8, 9, 7]]
    assert kept_rows == pack
    assert mlm_rows == [1, 6, 7, 9]
    # at most B*T rows, whatever the multiple
    assert step_module.packed_tokens(valid_lens, rows, 3, 4,
                                     multiple=1024)[0].shape == (12,)


def test_the_attention_reads_the_longest_packed_sequence_rounded_up():
    """Lengths 3, 17 and 5 of T = 40: S = 17 rounded up to 32, so the
    attention's layout leaves out 8 positions of padding of every
    sequence; its rows are the packed rows' places there."""
    no_rows = np.zeros((2, 0), dtype='int32')
    arrays = step_module.packed_tokens(
        np.array([3, 17, 5], dtype='float32'), no_rows, 3, 40, multiple=1)
    pack, positions, unpack, kept_rows = [a.asnumpy() for a in arrays[:4]]
    assert step_module.LENGTH_STEP == 16
    assert unpack.shape == (3, 32) and pack.shape == (25,)
    assert unpack[0].tolist() == [0, 1, 2] + [0] * 29        # <cls> of 0
    assert unpack[1].tolist() == list(range(3, 20)) + [3] * 15
    assert unpack[2].tolist() == list(range(20, 25)) + [20] * 27
    # each packed row, read back from the layout, is itself
    assert unpack.reshape(-1)[kept_rows].tolist() == list(range(25))
    assert (kept_rows % 32).tolist() == positions.tolist()


def test_the_step_packs_a_batchs_valid_tokens():
    """The batch's 23 valid tokens of 48 (lengths 12, 1, 7, 3), and two
    predicted positions (0, 10) and (2, 6) within them."""
    net = model_on([mx.cpu()])
    step = fast.batch_loss(net, gluon.loss.SoftmaxCELoss(), V,
                           token_multiple=1)
    batch = pretraining_batch()
    rows = step.graph.weighted_predictions(*batch[3:6])[0]
    pack = step_module.packed_tokens(batch[2], rows, 4, 12, 1)[0]
    assert pack.shape == (23,)


def test_padded_predictions_change_nothing():
    """A padded position (weight 0) adds nothing to the MLM loss or to a
    gradient, whatever its label: the same batch with other labels there
    gives the same numbers."""
    net = model_on([mx.cpu()])
    step = fast.batch_loss(net, gluon.loss.SoftmaxCELoss(), V)
    batch = pretraining_batch()
    relabelled = list(batch)
    weights = batch[4].asnumpy()
    labels = batch[5].asnumpy().copy()
    labels[weights == 0] = 17
    relabelled[5] = np.array(labels, dtype='int32')
    results = [losses_and_grads(step, net, [[a] for a in b])
               for b in (batch, relabelled)]
    assert results[0][0] == results[1][0]
    for name, grads in results[0][1].items():
        assert (grads[0] == results[1][1][name][0]).all(), name


def test_the_mlm_head_runs_on_the_weighted_predictions_only():
    """7 of the 12 predictions have a weight: the rows are those 7 first
    (example, position), then padded ones of weight 0 up to the multiple."""
    net = model_on([mx.cpu()])
    step = fast.batch_loss(net, gluon.loss.SoftmaxCELoss(), V,
                           row_multiple=4)
    (_, _, _, pred_positions, weights, mlm_Y, _) = pretraining_batch()
    rows, w, labels = step.graph.weighted_predictions(pred_positions,
                                                      weights, mlm_Y)
    assert rows.shape == (2, 8) and w.shape == labels.shape == (8,)
    assert rows.asnumpy()[:, :7].tolist() == [[0, 0, 0, 1, 2, 2, 3],
                                              [1, 5, 10, 0, 2, 6, 1]]
    assert w.asnumpy().tolist() == [1] * 7 + [0]
    assert labels.asnumpy()[:7].tolist() == [3, 4, 5, 6, 8, 9, 98]


@pytest.mark.parametrize('kernels', KERNELS)
def test_batches_with_other_numbers_of_predictions_share_the_step(kernels):
    """The graph's MLM rows change with the batch (7, then 3, then 0
    weighted predictions): each step still equals the book's."""
    net = model_on([mx.cpu()])
    loss = gluon.loss.SoftmaxCELoss()
    step = fast.batch_loss(net, loss, V, kernels=kernels, row_multiple=1)
    batch = pretraining_batch()
    for keep in (12, 3, 0):
        weights = batch[4].asnumpy()
        weights.reshape(-1)[keep:] = 0
        shards = [[a] for a in batch[:4]] + [[np.array(weights)]] + \
            [[a] for a in batch[5:]]
        book = losses_and_grads(
            lambda *s: _get_batch_loss_bert(net, loss, V, *s), net, shards)
        ours = losses_and_grads(step, net, shards)
        assert_close(ours[0], book[0])
        for name, grads in book[1].items():
            assert_close(ours[1][name][0], grads[0], GRADIENTS,
                         err_msg=f'{keep} {name}')
    assert book[0][0] == [0.0]                      # no weighted prediction


@pytest.mark.parametrize('name', ['row_multiple', 'token_multiple'])
@pytest.mark.parametrize('multiple', [0, -2, 1.5, '4', True])
def test_the_multiples_must_be_positive_ints(name, multiple):
    net = model_on([mx.cpu()])
    with pytest.raises(ValueError, match=f'{name} must be a '
                       f'positive int, got {multiple!r}'):
        fast.batch_loss(net, gluon.loss.SoftmaxCELoss(), V,
                        **{name: multiple})


@pytest.mark.parametrize('kernels', KERNELS)
def test_a_weighted_prediction_past_the_valid_length_gets_the_books_loss(
        kernels):
    """Example 1 (valid length 1) predicts position 9, past its length
    and past the length rounded up to 8: the step packs its positions up
    to 9, and their encodings must be the book's (attention over the
    one valid key)."""
    devices = [mx.cpu(0)]
    net = model_on(devices)
    loss = gluon.loss.SoftmaxCELoss()
    batch = list(pretraining_batch())
    batch[3] = np.array([[1, 5, 10], [9, 0, 0], [2, 6, 0], [1, 0, 0]],
                        dtype='int32')                      # (B, P)
    shards = [[a] for a in batch]

    def book(*shards):
        return _get_batch_loss_bert(net, loss, V, *shards)

    book_losses, book_grads = losses_and_grads(book, net, shards)
    step = fast.batch_loss(net, loss, V, kernels=kernels, row_multiple=1,
                           token_multiple=1)
    fast_losses, fast_grads = losses_and_grads(step, net, shards)
    for ours, theirs in zip(fast_losses, book_losses):
        assert_close(ours, theirs)
    for name in book_grads:
        assert_close(fast_grads[name][0], book_grads[name][0], GRADIENTS,
                     err_msg=name)
