"""The fast layer against the book's blocks, its test oracle.

`d2l_bert.fast.accelerate` builds twins that share the book model's
parameters; every test here runs the book's block and its twin on the
same inputs and compares outputs and gradients (dropout off), with and
without `valid_lens`, with the compiled loops and with MXNet's operators
(``kernels``), within the tolerances of `helpers` (`REORDERED` unless
a test names another).  The whole models' twins are tested in
`test_fast_models.py`, the attention switch in
`test_fast_attention_path.py`.
"""
import mxnet as mx
import numpy as onp
import pytest
from d2l import mxnet as d2l
from mxnet import autograd, gluon, init, np

from d2l_bert import fast
from d2l_bert.book.attention import MultiHeadAttention
from d2l_bert.book.bert import BERTEncoder, BERTModel
from d2l_bert.fast import _build, blocks, models
from d2l_bert.book.pretraining import _get_batch_loss_bert, train_bert
from d2l_bert.runs.seeding import seed_everything
from d2l_bert.book.transformer import TransformerEncoderBlock
from d2l_bert.hf.original import OriginalAddNorm

from helpers import (EXACT, OTHER_DEVICE, TINY, assert_close,
                     kernel_params)

#: Each twin with the compiled loops (where numba works here) and with
#: MXNet's own operators
KERNELS = kernel_params()


def randomize(net, scale=0.3):
    """Non-zero values everywhere, biases included (they start at 0)."""
    for param in net.collect_params().values():
        param.set_data(np.random.normal(0, scale, size=param.shape))


def tiny_model(**overrides):
    """The tiny BERT, initialized, its deferred shapes known."""
    net = BERTModel(**dict(TINY, **overrides))
    net.initialize(init.Xavier())
    tokens = np.zeros((1, 2), dtype='int32')
    net(tokens, tokens, None, np.zeros((1, 1), dtype='int32'))
    return net


def outputs_and_grads(net, batch, head_grads):
    """The outputs of `net` on `batch` and the gradients of
    ``sum(output * head_grad)`` for every parameter, by structural name."""
    with autograd.record():
        outputs = net(*batch)
        outputs = [o for o in outputs if o is not None]
        total = sum((o * g).sum() for o, g in zip(outputs, head_grads))
    total.backward()
    grads = {name: p.grad().copy()
             for name, p in net._collect_params_with_prefix().items()}
    return [o.copy() for o in outputs], grads


# --- The pieces of the whole model ---------------------------------------

def test_distinct_positions_name_each_pair_once():
    pred_positions = np.array([[1, 5, 0, 0], [2, 2, 0, 7], [0, 0, 0, 0]],
                              dtype='int32')
    # Rounded up to 256 rows, but never more than B*P
    assert blocks.distinct_positions(pred_positions)[0].shape == (2, 12)
    rows, copies = blocks.distinct_positions(pred_positions, row_multiple=8)
    # 7 distinct pairs, rounded up to 8 rows with example 0's position 0
    assert rows.shape == (2, 8) and copies.shape == (3, 4)
    rows, copies = rows.asnumpy(), copies.asnumpy()
    pairs = [tuple(p) for p in rows.T]
    assert len(set(pairs[:7])) == 7 and pairs[7] == (0, 0)
    for b in range(3):
        for p in range(4):
            assert pairs[copies[b, p]] == (b, int(pred_positions[b, p]))


@pytest.mark.parametrize('kernels', KERNELS)
def test_fast_blocks_take_the_books_parameters_and_names(kernels):
    net = tiny_model()
    twin = fast.accelerate(net, kernels=kernels)
    ours = twin._collect_params_with_prefix()
    book = net._collect_params_with_prefix()
    assert sorted(ours) == sorted(book)
    assert all(ours[name] is book[name] for name in book)
    assert 'encoder.pos_embedding' in ours
    assert sorted(twin.collect_params().keys()) == sorted(
        net.collect_params().keys())


def test_saved_fast_parameters_load_into_the_book_and_d2l(tmp_path,
                                                          tiny_batch):
    net = tiny_model()
    randomize(net)
    twin = fast.accelerate(net)
    path = str(tmp_path / 'twin.params')
    twin.save_parameters(path)
    book = BERTModel(**TINY)
    book.load_parameters(path)
    ref = d2l.BERTModel(**TINY)
    ref.load_parameters(path)
    for a, b, c in zip(net(*tiny_batch), book(*tiny_batch),
                       ref(*tiny_batch)):
        assert_close(a, b, EXACT)
        assert_close(a, c)


def test_training_the_twin_trains_the_book_model(tiny_batch):
    net = tiny_model()
    twin = fast.accelerate(net)
    before = net.encoder.blks[0].attention.W_q.weight.data().copy()
    trainer = gluon.Trainer(twin.collect_params(), 'sgd',
                            {'learning_rate': 0.1})
    with autograd.record():
        _, mlm_Y_hat, nsp_Y_hat = twin(*tiny_batch)
        l = mlm_Y_hat.sum() + nsp_Y_hat.sum()
    l.backward()
    trainer.step(1)
    after = net.encoder.blks[0].attention.W_q.weight.data()
    assert float(np.abs(after - before).max()) > 1e-6


def test_accelerate_leaves_the_book_blocks_imperative():
    net = tiny_model()
    fast.accelerate(net)
    hybrid = [b for b in _build.walk(net) if hasattr(b, '_active')]
    assert hybrid and not any(b._active for b in hybrid)


def test_accelerate_gives_deferred_parameters_their_shapes(tiny_batch):
    net = BERTModel(**TINY)
    net.initialize()   # `Dense` layers wait for their input size
    assert any(p._deferred_init for p in net.collect_params().values())
    twin = fast.accelerate(net)
    assert not any(p._deferred_init for p in net.collect_params().values())
    assert_close(twin(*tiny_batch)[0], net(*tiny_batch)[0])


def test_accelerate_without_pred_positions_gives_none(tiny_batch):
    twin = fast.accelerate(tiny_model())
    tokens, segments, valid_lens, pred_positions = tiny_batch
    encoded_X, mlm_Y_hat, nsp_Y_hat = twin(tokens, segments, valid_lens)
    assert mlm_Y_hat is None and nsp_Y_hat.shape == (3, 2)
    # and back: the graph is built again for the other inputs
    assert twin(*tiny_batch)[1].shape == (3, 3, 99)
    assert twin(tokens, segments)[0].shape == (3, 12, 32)


def test_accelerate_refuses_an_uninitialized_model():
    with pytest.raises(ValueError, match=r'accelerate: parameter .* is not '
                                         r'initialized; call net.initialize'):
        fast.accelerate(BERTModel(**TINY))


def test_accelerate_refuses_other_blocks():
    block = MultiHeadAttention(8, 2, 0.0)
    block.initialize()
    with pytest.raises(TypeError, match='accelerate takes a BERTModel, '
                                        'BERTClassifier, BERTEncoder .*got '
                                        'MultiHeadAttention'):
        fast.accelerate(block)


def test_accelerate_catches_an_edited_forward():
    # A student's encoder that scales its embeddings: the twin would not
    class ScaledEncoder(BERTEncoder):
        def forward(self, tokens, segments, valid_lens=None):
            return super().forward(tokens, segments, valid_lens) * 2

    encoder = ScaledEncoder(**TINY)
    encoder.initialize()
    with pytest.raises(ValueError, match='different output 0 on a test '
                                         'batch.*without accelerate'):
        fast.accelerate(encoder)
    assert fast.accelerate(encoder, check=False) is not None


def test_accelerate_takes_a_model_class_defined_again():
    # A notebook's `#@save` cell defines its own BERTModel: same children
    class BERTModel(tiny_model().__class__):
        pass
    net = BERTModel(**TINY)
    net.initialize()
    assert isinstance(fast.accelerate(net), models.FastBERTModel)


def test_fast_model_checks_its_inputs(tiny_batch):
    twin = fast.accelerate(tiny_model())
    tokens, segments, valid_lens, pred_positions = tiny_batch
    with pytest.raises(ValueError, match=r'segments must hold segment ids 0 '
                                         r'or 1, got 2 at \[0, 6\]'):
        twin(tokens, segments * 2, valid_lens, pred_positions)
    with pytest.raises(ValueError, match=r'pred_positions must hold '
                                         r'positions in \[0, 12\)'):
        twin(tokens, segments, valid_lens, pred_positions + 2)


@pytest.mark.skipif(mx.context.num_gpus() == 0,
                    reason='no GPU that MXNet can use on this machine')
def test_fast_model_on_gpu_equals_the_book_model(tiny_batch):
    net = BERTModel(**TINY)
    net.initialize(init.Xavier(), ctx=[mx.gpu(0)])
    twin = fast.accelerate(net)
    assert 'compiled' not in fast.describe(twin)
    batch = [a.as_in_ctx(mx.gpu(0)) for a in tiny_batch]
    for a, b in zip(twin(*batch), net(*batch)):
        assert a.ctx == mx.gpu(0)
        assert_close(a, b, OTHER_DEVICE)


# --- The pieces -------------------------------------------------------------

def test_fused_weight_stacks_query_key_value_head_by_head():
    attention = MultiHeadAttention(8, 2, 0.0, use_bias=True)
    attention.initialize()
    X = np.random.normal(size=(1, 3, 5))
    attention(X, X, X, None)
    randomize(attention)
    twin = blocks.FastSelfAttention(attention, kernels=False)
    weight, bias = twin.qkv_weight(mx.nd, X)
    W = {n: getattr(attention, n).weight.data() for n in ('W_q', 'W_k',
                                                          'W_v')}
    b = {n: getattr(attention, n).bias.data() for n in ('W_q', 'W_k',
                                                        'W_v')}
    # rows: q of head 0, k of head 0, v of head 0, then head 1 (d = 4)
    for head in range(2):
        for i, name in enumerate(('W_q', 'W_k', 'W_v')):
            rows = slice((3 * head + i) * 4, (3 * head + i + 1) * 4)
            assert_close(weight[rows], W[name][head * 4:(head + 1) * 4],
                         EXACT)
            assert_close(bias[rows], b[name][head * 4:(head + 1) * 4],
                         EXACT)


@pytest.mark.parametrize('kernels', KERNELS)
@pytest.mark.parametrize('valid_lens', [None, [5, 2, 1]])
def test_fast_encoder_block_equals_the_books(kernels, valid_lens):
    blk = TransformerEncoderBlock(16, 24, 4, 0.0, True)
    blk.initialize()
    X = np.random.normal(size=(3, 5, 16))
    lens = None if valid_lens is None else np.array(valid_lens, 'float32')
    blk(X, lens)
    randomize(blk)
    twin = blocks.FastTransformerEncoderBlock(blk, kernels)
    twin.hybridize()
    assert_close(twin(X, lens), blk(X, lens))


@pytest.mark.parametrize('kernels', KERNELS)
def test_fast_add_norm_equals_the_books_with_its_epsilon(kernels):
    addnorm = OriginalAddNorm(0.0, epsilon=1e-12)
    addnorm.initialize()
    X, Y = np.random.normal(size=(2, 3, 8)), np.random.normal(size=(2, 3, 8))
    addnorm(X, Y)
    randomize(addnorm)
    twin = blocks.FastAddNorm(addnorm, kernels)
    assert twin.kernels == kernels
    assert_close(twin(X, Y), addnorm(X, Y))


def test_fast_layer_norm_over_another_axis_keeps_mxnets_operator():
    ln = gluon.nn.LayerNorm(axis=1)
    ln.initialize()
    X = np.random.normal(size=(2, 3, 4))
    ln(X)
    twin = blocks.FastLayerNorm(ln, kernels=True)
    assert not twin.kernels
    assert_close(twin(X), ln(X))


# --- Training with the book's own loops -------------------------------------

def test_book_batch_loss_on_the_twin_equals_the_book_model(tiny_batch):
    tokens, segments, valid_lens, pred_positions = tiny_batch
    weights = np.array([[1, 1, 1], [1, 1, 0], [1, 0, 0]], dtype='float32')
    mlm_Y = np.array([[3, 4, 5], [6, 7, 0], [8, 0, 0]], dtype='int32')
    nsp_y = np.array([0, 1, 1], dtype='int32')
    shards = [[a] for a in (tokens, segments, valid_lens, pred_positions,
                            weights, mlm_Y, nsp_y)]
    net = tiny_model()
    loss = gluon.loss.SoftmaxCELoss()
    book = _get_batch_loss_bert(net, loss, 99, *shards)
    ours = _get_batch_loss_bert(fast.accelerate(net), loss, 99, *shards)
    for our_list, book_list in zip(ours, book):
        assert abs(float(our_list[0]) - float(book_list[0])) < 1e-5
    assert abs(float(book[0][0]) - onp.log(99)) < 1.0  # not a trivial 0


def test_books_train_bert_on_the_twin_trains_as_on_the_book_model(
        tiny_batch, capsys):
    tokens, segments, valid_lens, pred_positions = tiny_batch
    batch = (tokens, segments, valid_lens, pred_positions,
             np.ones((3, 3), dtype='float32'),
             np.array([[3, 4, 5], [6, 7, 8], [9, 1, 2]], dtype='int32'),
             np.array([0, 1, 1], dtype='int32'))
    results = []
    for accelerated in (False, True):
        seed_everything(0)
        net, loss = tiny_model(), gluon.loss.SoftmaxCELoss()
        if accelerated:
            net, loss = fast.accelerate(net), fast.accelerate(loss)
        train_bert([batch], net, loss, 99, [mx.cpu()], 2)
        results.append({name: p.data().asnumpy() for name, p in
                        net._collect_params_with_prefix().items()})
    capsys.readouterr()
    for name in results[0]:
        # W_k's bias has a zero gradient in exact arithmetic; Adam scales
        # its rounding noise up to steps of the learning rate (0.01), so
        # after two steps it may differ by up to 2 * 2 * 0.01
        atol = 0.04 if 'W_k.bias' in name else 1e-4
        onp.testing.assert_allclose(results[1][name], results[0][name],
                                    rtol=1e-4, atol=atol, err_msg=name)


# --- The loss ---------------------------------------------------------------

@pytest.mark.parametrize('with_weights', [False, True])
def test_fast_loss_equals_gluons_with_its_gradient(with_weights):
    pytest.importorskip('numba')
    scores = np.random.normal(0, 3, size=(6, 11))
    labels = np.array([0, 3, 10, 2, 2, 7], dtype='int32')
    weights = np.array([[1], [0], [1], [1], [0], [1]], dtype='float32')
    args = (labels, weights) if with_weights else (labels,)
    results = []
    for loss in (gluon.loss.SoftmaxCELoss(),
                 fast.accelerate(gluon.loss.SoftmaxCELoss())):
        scores.attach_grad()
        with autograd.record():
            l = loss(scores, *args)
        l.backward()
        results.append((l.copy(), scores.grad.copy()))
    assert isinstance(loss, fast.FastSoftmaxCELoss)
    assert results[1][0].shape == (6,)
    assert_close(results[1][0], results[0][0])
    assert_close(results[1][1], results[0][1])


def test_other_losses_are_not_accelerated():
    dense_labels = gluon.loss.SoftmaxCELoss(sparse_label=False)
    assert fast.accelerate(dense_labels) is dense_labels
    l2 = gluon.loss.L2Loss()
    assert fast.accelerate(l2) is l2


def test_fast_loss_takes_scores_of_other_ranks_as_gluon_does():
    scores = np.random.normal(size=(2, 3, 5))
    labels = np.array([[0, 1, 4], [2, 2, 3]], dtype='int32')
    loss = fast.accelerate(gluon.loss.SoftmaxCELoss())
    assert_close(loss(scores, labels),
                 gluon.loss.SoftmaxCELoss()(scores, labels))


def test_the_operators_take_numpy_arrays_when_imported_before_set_np():
    # MXNet fixes an operator's array type when it is registered; the
    # chapter's runner imports the fast layer before any cell has called
    # `npx.set_np()`
    pytest.importorskip('numba', reason='the compiled loops need numba')
    import subprocess
    import sys
    code = ('import d2l_bert.fast\n'
            'from mxnet import init, npx\n'
            'npx.set_np()\n'
            'import d2l_bert\n'
            'net = d2l_bert.BERTModel(50, 16, 32, 2, 1, 0.0)\n'
            'net.initialize(init.Xavier())\n'
            'print(type(d2l_bert.fast.accelerate(net, kernels=True))'
            '.__name__)\n')
    done = subprocess.run([sys.executable, '-c', code], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.split()[-1] == 'FastBERTModel'


def test_optimize_for_traces_the_inputs_it_is_given(tiny_batch):
    # `accelerate` ran the twin with `pred_positions`; Gluon's
    # `optimize_for` would reuse that graph, whose `pred_positions` input
    # then has no shape
    net = tiny_model()
    tokens, segments, valid_lens, _ = tiny_batch
    twin = fast.accelerate(net, kernels=False)
    twin.optimize_for(tokens, segments, valid_lens, backend='MKLDNN')
    encoded_X, mlm_Y_hat, nsp_Y_hat = twin(tokens, segments, valid_lens)
    assert mlm_Y_hat is None
    assert_close(encoded_X, net(tokens, segments, valid_lens)[0])
    assert nsp_Y_hat.shape == (3, 2)


def test_a_twin_warns_once_when_mxnet_has_half_the_cores():
    # A new interpreter that imports mxnet before choosing its threads, as
    # a user's script may; the hint depends on this machine's cores and on
    # the venv's hook (which chooses them quietly at mxnet's import), so
    # the child compares the warnings with what `late_import_hint` says
    import os
    import subprocess
    import sys
    code = (
        'import warnings, mxnet\n'
        'from mxnet import gluon, init\n'
        'from d2l_bert import fast, threads\n'
        'from d2l_bert.book.bert import BERTEncoder\n'
        'net = BERTEncoder(100, 8, 16, 2, 1, 0.0, max_len=16)\n'
        'net.initialize(init.Normal(0.02))\n'
        'with warnings.catch_warnings(record=True) as caught:\n'
        '    warnings.simplefilter("always", RuntimeWarning)\n'
        '    fast.accelerate(net, check=False)\n'
        '    fast.accelerate(net, check=False)\n'
        'shown = [str(w.message) for w in caught\n'
        '         if w.category is RuntimeWarning]\n'
        'hint = threads.late_import_hint()\n'
        'print(shown == ([hint] if hint else []), bool(hint))\n')
    env = {k: v for k, v in os.environ.items() if k != 'OMP_NUM_THREADS'}
    done = subprocess.run([sys.executable, '-c', code], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    same, hinted = done.stdout.split()
    assert same == 'True'
    from d2l_bert.threads import physical_cores
    if os.cpu_count() == physical_cores() == 2:
        # a 2-core machine, as CI's: MXNet alone would take 1 of 2, but
        # in the venv the hook gave it both before it loaded
        assert hinted == 'False'
