"""Tests of the fast paths against the book's paths they stand beside.

The fused self-attention (`MultiHeadAttention.fused_self_attention`) is
checked against the book's attention with the same parameters:
outputs, attention weights and gradients, imperative and hybridized,
with and without `valid_lens`, and the order in which it stacks the
query, key and value projections (a fused attention once shipped with
its biases in the wrong order).  The pretraining graph
(`pretraining._batch_loss_function`) is checked against
`_get_batch_loss_bert`; a hybridized `BERTModel` against the imperative
one, and against what `export` and `SymbolBlock.imports` give back.
"""
import os
import sys

import mxnet as mx
import numpy as onp
import pytest
from mxnet import autograd, gluon, np

from d2l_bert import (AddNorm, BERTEncoder, BERTModel, DotProductAttention,
                      MaskLM, MultiHeadAttention, NextSentencePred,
                      PositionWiseFFN, TransformerEncoderBlock)
from d2l_bert import _threads
from d2l_bert import pretraining as P

from conftest import TINY


def set_fused(net, fused):
    """Choose the fused or the book's self-attention in every block."""
    def visit(block):
        if isinstance(block, MultiHeadAttention):
            block.fused = fused
    net.apply(visit)
    if net._active:
        net.hybridize()  # drop the graph built with the other path


@pytest.fixture
def fused_calls(monkeypatch):
    """Count the calls of the fused path (a graph calls it once)."""
    calls = []
    original = MultiHeadAttention.fused_self_attention

    def counted(self, *args, **kwargs):
        calls.append(self)
        return original(self, *args, **kwargs)
    monkeypatch.setattr(MultiHeadAttention, 'fused_self_attention', counted)
    return calls


def randomize(net, scale=0.3):
    """Non-zero values everywhere, biases included (they start at 0)."""
    for param in net.collect_params().values():
        param.set_data(np.random.normal(0, scale, size=param.shape))


def grads(net):
    return {name: p.grad().copy()
            for name, p in net._collect_params_with_prefix().items()
            if p.grad_req != 'null'}


def assert_close(a, b, atol=1e-5, rtol=1e-5):
    onp.testing.assert_allclose(a.asnumpy(), b.asnumpy(), rtol=rtol,
                                atol=atol)


def assert_grads_close(a, b):
    assert sorted(a) == sorted(b)
    for name in a:
        assert_close(a[name], b[name], atol=1e-5, rtol=1e-4)


# --- The fused self-attention ---------------------------------------------

def run_block(block, X, valid_lens, head_grad):
    """Output, input gradient, parameter gradients and attention weights."""
    X = X.copy()
    X.attach_grad()
    with autograd.record():
        Y = block(X, valid_lens)
    Y.backward(head_grad)
    weights = block.attention.attention.__dict__.get('attention_weights')
    return Y, X.grad.copy(), grads(block), weights


@pytest.mark.parametrize('hybridize', [False, True])
@pytest.mark.parametrize('valid_lens', [None, [5, 2, 3], [[1, 2, 3, 4, 5],
                                                          [5, 5, 5, 5, 5],
                                                          [3, 1, 4, 1, 5]]])
def test_fused_self_attention_equals_the_book_path(hybridize, valid_lens,
                                                   fused_calls):
    if hybridize and valid_lens is not None \
            and onp.array(valid_lens).ndim == 2:
        pytest.skip('a graph takes one length per sequence')
    block = TransformerEncoderBlock(16, 24, 4, 0.0, use_bias=True)
    block.initialize()
    X = np.random.normal(size=(3, 5, 16))
    lens = None if valid_lens is None else np.array(valid_lens, 'float32')
    block(X, lens)                     # gives the projections their shape
    randomize(block)
    head_grad = np.random.normal(size=(3, 5, 16))
    results = []
    for fused in (False, True):
        block.attention.fused = fused
        block.hybridize(active=hybridize)
        del fused_calls[:]
        results.append(run_block(block, X, lens, head_grad))
        assert bool(fused_calls) == fused
    (Y0, dX0, g0, w0), (Y1, dX1, g1, w1) = results
    assert_close(Y1, Y0)
    assert_close(dX1, dX0, rtol=1e-4)
    assert_grads_close(g1, g0)
    if not hybridize:
        assert w1.shape == (3 * 4, 5, 5)
        assert_close(w1, w0)


def test_fused_weight_stacks_query_key_value_head_by_head():
    # 2 heads of size 3: rows q0 k0 v0 q1 k1 v1, three rows each
    attention = MultiHeadAttention(6, 2, 0.0, use_bias=True)
    attention.initialize()
    X = np.zeros((1, 2, 4))
    attention(X, X, X)
    for offset, dense in ((100, attention.W_q), (200, attention.W_k),
                          (300, attention.W_v)):
        dense.weight.set_data(offset + np.arange(24).reshape(6, 4))
        dense.bias.set_data(offset + np.arange(6))
    weight, bias = attention.qkv_weight(mx.nd, X)
    assert weight.shape == (18, 4) and bias.shape == (18,)
    expected = [100, 101, 102, 200, 201, 202, 300, 301, 302,
                103, 104, 105, 203, 204, 205, 303, 304, 305]
    assert bias.asnumpy().astype(int).tolist() == expected
    # Each stacked row is the projection row its bias names: row 12 is
    # row 3 of `W_k` (head 1's first key row)
    rows = weight.asnumpy().astype(int)
    assert rows[:3].tolist() == [[100 + 4 * i + j for j in range(4)]
                                 for i in range(3)]
    assert rows[12].tolist() == [212, 213, 214, 215]


def test_fused_bias_order_shows_in_the_output():
    # Only biases differ from 0: a query/key/value mix-up changes the output
    block = TransformerEncoderBlock(8, 8, 2, 0.0, use_bias=True)
    block.initialize()
    X = np.random.normal(size=(2, 4, 8))
    block(X, None)
    randomize(block, scale=0.1)
    for dense in (block.attention.W_q, block.attention.W_k,
                  block.attention.W_v):
        dense.bias.set_data(np.random.normal(0, 3, size=(8,)))
    outputs = []
    for fused in (False, True):
        block.attention.fused = fused
        outputs.append(block(X, np.array([4, 2])))
    assert_close(outputs[1], outputs[0])


def test_attention_between_different_arrays_keeps_the_book_path(
        fused_calls):
    attention = MultiHeadAttention(8, 2, 0.0)
    attention.initialize()
    queries, keys = np.random.normal(size=(2, 3, 8)), \
        np.random.normal(size=(2, 5, 8))
    attention(queries, keys, keys, np.array([2, 5]))
    assert not fused_calls
    assert attention.attention.attention_weights.shape == (4, 3, 5)


def test_fractional_lengths_mask_as_the_book_does():
    block = TransformerEncoderBlock(8, 8, 2, 0.0)
    block.initialize()
    X = np.random.normal(size=(2, 4, 8))
    lens = np.array([2.5, 1.2])
    block(X, lens)
    outputs = []
    for fused in (False, True):
        block.attention.fused = fused
        outputs.append(block(X, lens))
        outputs.append(block.attention.attention.attention_weights)
    assert_close(outputs[2], outputs[0])
    assert_close(outputs[3], outputs[1])
    # Lengths 2.5 and 1.2 leave 3 and 2 positions
    assert float(outputs[3][0, :, 3:].sum()) == 0
    assert float(outputs[3][2, :, 2:].sum()) == 0


def test_fused_attention_gives_an_empty_sequence_finite_weights():
    # The book's -1e6 gives uniform weights there; adding -1e6 gives the
    # softmax of the scores rounded to 1/16 (BERT never has an empty input)
    block = TransformerEncoderBlock(8, 8, 2, 0.0)
    block.initialize()
    X = np.random.normal(size=(2, 4, 8))
    block(X, np.array([4, 4]))
    Y = block(X, np.array([4, 0]))
    empty = block.attention.attention.attention_weights[2:].asnumpy()
    assert onp.isfinite(Y.asnumpy()).all() and (empty >= 0).all()
    onp.testing.assert_allclose(empty.sum(axis=-1), onp.ones((2, 4)),
                                atol=1e-6)


def test_fused_attention_runs_on_the_input_context():
    block = TransformerEncoderBlock(8, 8, 2, 0.0)
    block.initialize(ctx=[mx.cpu(0), mx.cpu(1)])
    X = np.random.normal(size=(2, 4, 8))
    lens = np.array([3, 4])
    block(X, lens)
    block(X.as_in_ctx(mx.cpu(1)), lens.as_in_ctx(mx.cpu(1)))
    Y1 = block(X.as_in_ctx(mx.cpu(1)), lens.as_in_ctx(mx.cpu(1)))
    assert Y1.ctx == mx.cpu(1)
    assert_close(Y1.as_in_ctx(mx.cpu(0)), block(X, lens))


# --- The whole model, imperative and hybridized ----------------------------

def run_model(net, batch, head_grads):
    tokens, segments, valid_lens, pred_positions = batch
    with autograd.record():
        outputs = net(tokens, segments, valid_lens, pred_positions)
    autograd.backward(list(outputs), list(head_grads))
    return outputs, grads(net)


def test_bert_model_equals_itself_fused_or_not_hybridized_or_not(
        tiny_batch, fused_calls):
    net = BERTModel(**TINY)
    net.initialize()
    net(*tiny_batch)
    randomize(net, 0.2)
    shapes = [(3, 12, 32), (3, 3, 99), (3, 2)]
    head_grads = [np.random.normal(size=s) for s in shapes]
    set_fused(net, False)
    oracle = run_model(net, tiny_batch, head_grads)
    for fused, hybridize in ((True, False), (False, True), (True, True)):
        net.hybridize(active=hybridize)
        set_fused(net, fused)
        del fused_calls[:]
        outputs, gradients = run_model(net, tiny_batch, head_grads)
        assert len(fused_calls) == (TINY['num_blks'] if fused else 0)
        for a, b in zip(outputs, oracle[0]):
            assert a.shape == b.shape
            assert_close(a, b)
        assert_grads_close(gradients, oracle[1])


def block_cases():
    """(name, block factory, input factory): every block of the chapter."""
    def X():
        return np.random.normal(size=(3, 5, 8))

    def tokens():
        return np.random.randint(0, 20, (3, 5)).astype('int32')

    def lens():
        return np.array([5, 2, 3], 'float32')
    return [
        ('DotProductAttention', lambda: DotProductAttention(0.0),
         lambda: (X(), X(), X(), lens())),
        ('MultiHeadAttention', lambda: MultiHeadAttention(8, 2, 0.0, True),
         lambda: (X(), X(), X(), lens())),
        ('PositionWiseFFN', lambda: PositionWiseFFN(12, 8), lambda: (X(),)),
        ('AddNorm', lambda: AddNorm(0.0), lambda: (X(), X())),
        ('TransformerEncoderBlock',
         lambda: TransformerEncoderBlock(8, 12, 2, 0.0, True),
         lambda: (X(), lens())),
        ('BERTEncoder', lambda: BERTEncoder(20, 8, 12, 2, 2, 0.0, 10),
         lambda: (tokens(), np.zeros((3, 5), 'int32'), lens())),
        ('MaskLM', lambda: MaskLM(20, 8),
         lambda: (X(), np.array([[0, 4], [1, 1], [2, 0]], 'int32'))),
        ('NextSentencePred', lambda: NextSentencePred(),
         lambda: (np.random.normal(size=(3, 8)),)),
    ]


@pytest.mark.parametrize('name,make_block,make_inputs', block_cases(),
                         ids=[case[0] for case in block_cases()])
def test_every_block_hybridized_equals_itself_imperative(
        name, make_block, make_inputs):
    block, inputs = make_block(), make_inputs()
    block.initialize()
    block(*inputs)                    # gives deferred parameters a shape
    randomize(block, 0.3)
    float_inputs = [x for x in inputs if x.dtype == onp.float32][:1]
    results = []
    for hybridize in (False, True):
        block.hybridize(active=hybridize)
        for x in float_inputs:
            x.attach_grad()
        with autograd.record():
            Y = block(*inputs)
        head = np.ones_like(Y) * np.arange(Y.shape[-1])
        Y.backward(head)
        results.append((Y, [x.grad.copy() for x in float_inputs],
                        grads(block)))
    (Y0, dX0, g0), (Y1, dX1, g1) = results
    assert_close(Y1, Y0)
    for a, b in zip(dX1, dX0):
        assert_close(a, b)
    assert_grads_close(g1, g0)


def test_hybridize_keeps_buffers_unless_told_otherwise():
    net = BERTModel(**TINY)
    net.hybridize()
    assert dict(net._flags)['static_alloc'] is True
    assert dict(net._flags)['static_shape'] is True
    net.hybridize(static_alloc=False, static_shape=False)
    assert dict(net._flags)['static_alloc'] is False


def test_hybridized_model_accepts_other_shapes(tiny_batch):
    net = BERTModel(**TINY)
    net.initialize()
    net(*tiny_batch)
    tokens, segments, valid_lens, pred_positions = tiny_batch
    small = (tokens[:2, :7], segments[:2, :7], np.array([7, 5]),
             pred_positions[:2, :2] % 7)
    expected = [net(*tiny_batch), net(*small)]
    net.hybridize()
    for batch, outputs in zip((tiny_batch, small, tiny_batch), expected * 2):
        for a, b in zip(net(*batch), outputs):
            assert_close(a, b)


def test_export_then_imports_gives_the_same_outputs(tmp_path, tiny_batch):
    net = BERTModel(**TINY)
    net.initialize()
    net(*tiny_batch)
    randomize(net, 0.2)
    net.hybridize()
    expected = net(*tiny_batch)
    prefix = str(tmp_path / 'bert')
    net.export(prefix)
    imported = gluon.SymbolBlock.imports(
        f'{prefix}-symbol.json', ['data0', 'data1', 'data2', 'data3'],
        f'{prefix}-0000.params')
    outputs = imported(*tiny_batch)
    assert len(outputs) == 3
    for a, b in zip(outputs, expected):
        assert_close(a, b, atol=1e-6)


def test_optimize_for_onednn_gives_the_same_encodings(tiny_batch):
    # Gluon's `optimize_for` calls `hybridize` with positional arguments
    tokens, segments, valid_lens, _ = tiny_batch
    net = BERTModel(**TINY)
    net.initialize()
    net(*tiny_batch)
    randomize(net, 0.2)
    expected = net(tokens, segments, valid_lens)
    net.optimize_for(tokens, segments, valid_lens, backend='MKLDNN')
    outputs = net(tokens, segments, valid_lens)
    assert outputs[1] is None
    assert_close(outputs[0], expected[0])
    assert_close(outputs[2], expected[2])


# --- One pretraining graph ---------------------------------------------------

def test_pretraining_graph_equals_get_batch_loss_bert(tiny_batch):
    tokens, segments, valid_lens, pred_positions = tiny_batch
    mlm_weights = np.array([[1, 1, 1], [1, 1, 0], [1, 0, 0]], 'float32')
    mlm_Y = np.random.randint(0, TINY['vocab_size'], (3, 3)).astype('int32')
    nsp_y = np.array([0, 1, 1], 'float32')
    shards = [[a] for a in (tokens, segments, valid_lens, pred_positions,
                            mlm_weights, mlm_Y, nsp_y)]
    net = BERTModel(**TINY)
    net.initialize()
    net(*tiny_batch)
    randomize(net, 0.2)
    loss = gluon.loss.SoftmaxCELoss()
    V = TINY['vocab_size']

    def losses_and_grads(batch_loss):
        with autograd.record():
            mlm_ls, nsp_ls, ls = batch_loss(*shards)
        ls[0].backward()
        return [float(x[0]) for x in (mlm_ls, nsp_ls, ls)], grads(net)

    set_fused(net, False)
    expected = losses_and_grads(
        lambda *s: P._get_batch_loss_bert(net, loss, V, *s))
    set_fused(net, True)
    batch_loss = P._batch_loss_function(net, loss, V)
    assert net._active  # the graph hybridized the model
    got = losses_and_grads(batch_loss)
    onp.testing.assert_allclose(got[0], expected[0], rtol=1e-5)
    assert_grads_close(got[1], expected[1])


def test_pretraining_graph_is_not_used_for_d2l_models():
    from d2l import mxnet as d2l
    net = d2l.BERTModel(99, 32, 48, 4, 2, 0.0)
    batch_loss = P._batch_loss_function(net, gluon.loss.SoftmaxCELoss(), 99)
    assert batch_loss.func is P._get_batch_loss_bert


# --- Every core --------------------------------------------------------------

@pytest.fixture
def before_mxnet(monkeypatch):
    """Pretend MXNet is not imported yet, and OMP_NUM_THREADS unset."""
    monkeypatch.delitem(sys.modules, 'mxnet')
    monkeypatch.delenv('OMP_NUM_THREADS', raising=False)
    return monkeypatch


def test_all_physical_cores_are_asked_for_before_mxnet(before_mxnet):
    message = _threads.use_all_cores()
    cores = _threads.physical_cores()
    assert os.environ['OMP_NUM_THREADS'] == str(cores)
    assert message.startswith(f'CPU threads: {cores} of {cores} cores')


def test_a_thread_count_from_the_environment_is_kept(before_mxnet):
    before_mxnet.setenv('OMP_NUM_THREADS', '3')
    assert 'from the environment' in _threads.use_all_cores()
    assert os.environ['OMP_NUM_THREADS'] == '3'


def test_an_explicit_thread_count_wins(before_mxnet):
    _threads.use_all_cores(1)
    assert os.environ['OMP_NUM_THREADS'] == '1'
    with pytest.raises(ValueError, match='num_threads must be a positive '
                                         'integer, got 0'):
        _threads.use_all_cores(0)


def test_on_macos_the_thread_count_sizes_only_the_compiled_loops(
        before_mxnet):
    # MXNet 1.9.1's macOS wheel links no OpenMP runtime
    before_mxnet.setattr(sys, 'platform', 'darwin')
    assert not _threads.mxnet_has_openmp()
    message = _threads.use_all_cores(2)
    assert os.environ['OMP_NUM_THREADS'] == '2'
    assert message.startswith('CPU threads: 2 of ')
    assert "for the compiled loops (MXNet's macOS wheel has no OpenMP" \
        in message
    assert 'MXNet alone would use' not in message


def test_too_late_once_mxnet_is_imported():
    assert 'MXNet was imported before' in _threads.use_all_cores()


@pytest.fixture
def before_openmp(before_mxnet):
    """`before_mxnet`, and neither GOMP_SPINCOUNT nor OMP_WAIT_POLICY
    set."""
    before_mxnet.delenv('GOMP_SPINCOUNT', raising=False)
    before_mxnet.delenv('OMP_WAIT_POLICY', raising=False)
    return before_mxnet


def test_idle_openmp_threads_spin_shortly_before_mxnet(before_openmp):
    message = _threads.shorten_openmp_spin()
    assert os.environ['GOMP_SPINCOUNT'] == '1000'
    assert message.startswith('OpenMP idle threads: sleep after 1000 spins')


@pytest.mark.parametrize('name, value', [('GOMP_SPINCOUNT', '0'),
                                         ('OMP_WAIT_POLICY', 'ACTIVE')])
def test_openmp_waiting_from_the_environment_is_kept(before_openmp, name,
                                                     value):
    before_openmp.setenv(name, value)
    assert _threads.shorten_openmp_spin() == (
        f'OpenMP idle threads: {name}={value} (from the environment)')
    assert os.environ[name] == value
    if name == 'OMP_WAIT_POLICY':
        assert 'GOMP_SPINCOUNT' not in os.environ


def test_no_openmp_spin_is_set_on_macos(before_openmp):
    before_openmp.setattr(sys, 'platform', 'darwin')
    assert _threads.shorten_openmp_spin() == (
        "OpenMP idle threads: none (MXNet's macOS wheel is built without "
        'OpenMP)')
    assert 'GOMP_SPINCOUNT' not in os.environ


def test_too_late_for_openmp_spin_once_mxnet_is_imported(monkeypatch):
    monkeypatch.delenv('GOMP_SPINCOUNT', raising=False)
    monkeypatch.delenv('OMP_WAIT_POLICY', raising=False)
    assert "MXNet was imported before d2l_bert could shorten it" in \
        _threads.shorten_openmp_spin()
    assert 'GOMP_SPINCOUNT' not in os.environ


@pytest.fixture
def before_openblas(before_mxnet):
    """`before_mxnet`, and SciPy's linalg not imported yet either, and
    OPENBLAS_CORETYPE unset."""
    before_mxnet.delitem(sys.modules, 'scipy.linalg', raising=False)
    before_mxnet.delenv('OPENBLAS_CORETYPE', raising=False)
    return before_mxnet


@pytest.mark.parametrize('has_avx512', [True, False])
def test_avx512_kernels_are_asked_for_only_on_an_avx512_cpu(
        before_openblas, has_avx512):
    before_openblas.setattr(_threads, 'avx512', lambda: has_avx512)
    message = _threads.use_avx512_blas()
    if has_avx512:
        assert os.environ['OPENBLAS_CORETYPE'] == 'SkylakeX'
        assert message.startswith('OpenBLAS kernels: SkylakeX (AVX-512')
    else:
        assert 'OPENBLAS_CORETYPE' not in os.environ
        assert message == ("OpenBLAS kernels: OpenBLAS's own choice (no "
                           "AVX-512 here)")


def test_openblas_kernels_from_the_environment_are_kept(before_openblas):
    before_openblas.setattr(_threads, 'avx512', lambda: True)
    before_openblas.setenv('OPENBLAS_CORETYPE', 'Haswell')
    assert _threads.use_avx512_blas() == (
        'OpenBLAS kernels: Haswell (OPENBLAS_CORETYPE from the environment)')
    assert os.environ['OPENBLAS_CORETYPE'] == 'Haswell'


def test_too_late_for_openblas_kernels_once_mxnet_is_imported(monkeypatch):
    monkeypatch.setattr(_threads, 'avx512', lambda: True)
    monkeypatch.delenv('OPENBLAS_CORETYPE', raising=False)
    assert 'it was loaded before d2l_bert could ask for the AVX-512' in \
        _threads.use_avx512_blas()
    assert 'OPENBLAS_CORETYPE' not in os.environ


@pytest.mark.parametrize('flags, expected', [
    ('fpu sse avx2 avx512f avx512dq avx512bw avx512vl avx512cd', True),
    ('fpu sse avx2 avx512f avx512cd', False),        # no BW, DQ, VL
    ('fpu sse avx2 fma', False)])
def test_avx512_reads_the_cpus_flags(tmp_path, flags, expected):
    cpuinfo = tmp_path / 'cpuinfo'
    cpuinfo.write_text(f'processor\t: 0\nflags\t\t: {flags}\n\n')
    assert _threads.avx512(str(cpuinfo)) is expected
    assert _threads.avx512(str(tmp_path / 'missing')) is False


def test_physical_cores_counts_within_the_affinity_mask():
    cores = _threads.physical_cores()
    assert 1 <= cores <= len(os.sched_getaffinity(0))
