"""Tests of d2l_bert.book.bert: the book's outputs, parity with d2l 1.0.3,
contexts, the original BERT's subclasses (`d2l_bert.hf.original`) and
clear errors on bad input (`d2l_bert.checks.check_inputs`)."""

import mxnet as mx
import numpy as onp
import pytest
from d2l import mxnet as d2l
from mxnet import autograd, gluon, np

from d2l_bert import fast
from d2l_bert import (BERTEncoder, BERTModel, MaskLM, NextSentencePred,
                      ORIGINAL_BERT, get_tokens_and_segments)
from d2l_bert.checks import check_inputs
from d2l_bert.hf.original import (OriginalBERTEncoder, OriginalBERTModel,
                                  OriginalEncoderBlock,
                                  OriginalPositionWiseFFN)

from helpers import (EXACT, GRADIENTS, OTHER_DEVICE, TINY, assert_close,
                     copy_params, kernel_params)


def tiny_pair(cls_ours, cls_ref, *args, **kwargs):
    """Our block and d2l's, initialized, run once, with equal parameters."""
    ours, ref = cls_ours(*args, **kwargs), cls_ref(*args, **kwargs)
    ours.initialize(mx.init.Normal(0.2))
    ref.initialize()
    return ours, ref


# --- get_tokens_and_segments ---------------------------------------------

def test_tokens_and_segments_for_one_sentence():
    tokens, segments = get_tokens_and_segments(['a', 'crane', 'flies'])
    assert tokens == ['<cls>', 'a', 'crane', 'flies', '<sep>']
    assert segments == [0, 0, 0, 0, 0]


def test_tokens_and_segments_for_two_sentences():
    tokens, segments = get_tokens_and_segments(['he', 'came'], ['left'])
    assert tokens == ['<cls>', 'he', 'came', '<sep>', 'left', '<sep>']
    assert segments == [0, 0, 0, 0, 1, 1]


def test_tokens_and_segments_match_d2l():
    for a, b in [(['x'], None), (['x', 'y'], ['z', 'w', 'v']), ([], [])]:
        assert get_tokens_and_segments(a, b) == \
            d2l.get_tokens_and_segments(a, b)


# --- The section's cells and the shapes the book prints ------------------

@pytest.fixture(scope='module')
def book_cells():
    """Run the section's demo cells once with the book's settings."""
    vocab_size, num_hiddens, ffn_num_hiddens, num_heads = 10000, 768, 1024, 4
    num_blks, dropout = 2, 0.2
    encoder = BERTEncoder(vocab_size, num_hiddens, ffn_num_hiddens,
                          num_heads, num_blks, dropout)
    encoder.initialize()
    tokens = np.random.randint(0, vocab_size, (2, 8))
    segments = np.array([[0, 0, 0, 0, 1, 1, 1, 1],
                         [0, 0, 0, 1, 1, 1, 1, 1]])
    encoded_X = encoder(tokens, segments, None)
    mlm = MaskLM(vocab_size, num_hiddens)
    mlm.initialize()
    mlm_positions = np.array([[1, 5, 2], [6, 1, 5]])
    mlm_Y_hat = mlm(encoded_X, mlm_positions)
    mlm_Y = np.array([[7, 8, 9], [10, 20, 30]])
    loss = gluon.loss.SoftmaxCrossEntropyLoss()
    mlm_l = loss(mlm_Y_hat.reshape((-1, vocab_size)), mlm_Y.reshape(-1))
    nsp = NextSentencePred()
    nsp.initialize()
    nsp_Y_hat = nsp(encoded_X)
    nsp_l = loss(nsp_Y_hat, np.array([0, 1]))
    return dict(encoded_X=encoded_X, mlm_Y_hat=mlm_Y_hat, mlm_l=mlm_l,
                nsp_Y_hat=nsp_Y_hat, nsp_l=nsp_l)


def test_encoder_cell_prints_book_shape(book_cells):
    assert book_cells['encoded_X'].shape == (2, 8, 768)


def test_mask_lm_cell_prints_book_shape(book_cells):
    assert book_cells['mlm_Y_hat'].shape == (2, 3, 10000)


def test_mlm_loss_cell_prints_book_shape(book_cells):
    assert book_cells['mlm_l'].shape == (6,)


def test_next_sentence_pred_cell_prints_book_shape(book_cells):
    # Gluon's Dense flattens (2, 8, 768) to (2, 6144): hence (2, 2)
    assert book_cells['nsp_Y_hat'].shape == (2, 2)


def test_nsp_loss_cell_prints_book_shape(book_cells):
    assert book_cells['nsp_l'].shape == (2,)


# --- Parity with d2l 1.0.3 -------------------------------------------------

@pytest.mark.parametrize('accelerated', [False, True])
@pytest.mark.parametrize('with_valid_lens', [False, True])
def test_bert_model_equals_d2l(tiny_batch, accelerated, with_valid_lens):
    ours, ref = tiny_pair(BERTModel, d2l.BERTModel, **TINY)
    tokens, segments, valid_lens, pred_positions = tiny_batch
    valid_lens = valid_lens if with_valid_lens else None
    ref(tokens, segments, valid_lens, pred_positions)
    ours(tokens, segments, valid_lens, pred_positions)
    copy_params(ours, ref)
    if accelerated:
        ours = fast.accelerate(ours)
    for a, b in zip(ours(tokens, segments, valid_lens, pred_positions),
                    ref(tokens, segments, valid_lens, pred_positions)):
        assert a.shape == b.shape
        assert_close(a, b)


@pytest.mark.parametrize('with_valid_lens', [False, True])
def test_encoder_mlm_and_nsp_equal_d2l(tiny_batch, with_valid_lens):
    tokens, segments, valid_lens, pred_positions = tiny_batch
    valid_lens = valid_lens if with_valid_lens else None
    enc, enc_ref = tiny_pair(BERTEncoder, d2l.BERTEncoder, 99, 32, 48, 4, 2,
                             0.0, max_len=16)
    enc_ref(tokens, segments, valid_lens)
    X = enc(tokens, segments, valid_lens)
    copy_params(enc, enc_ref)
    assert_close(X, enc_ref(tokens, segments, valid_lens))
    mlm, mlm_ref = tiny_pair(MaskLM, d2l.MaskLM, 99, 32)
    mlm_ref(X, pred_positions)
    mlm(X, pred_positions)
    copy_params(mlm, mlm_ref)
    assert_close(mlm(X, pred_positions), mlm_ref(X, pred_positions))
    nsp, nsp_ref = tiny_pair(NextSentencePred, d2l.NextSentencePred)
    nsp_ref(X)
    nsp(X)
    copy_params(nsp, nsp_ref)
    assert_close(nsp(X), nsp_ref(X))


def test_gradients_equal_d2l(tiny_batch):
    ours, ref = tiny_pair(BERTModel, d2l.BERTModel, **TINY)
    tokens, segments, valid_lens, pred_positions = tiny_batch
    ref(tokens, segments, valid_lens, pred_positions)
    ours(tokens, segments, valid_lens, pred_positions)
    copy_params(ours, ref)
    ours = fast.accelerate(ours)  # the twin's gradients are the book's
    for net in (ours, ref):
        with autograd.record():
            _, mlm_Y_hat, nsp_Y_hat = net(tokens, segments, valid_lens,
                                          pred_positions)
            (mlm_Y_hat.sum() + (nsp_Y_hat ** 2).sum()).backward()
    ours_p = ours._collect_params_with_prefix()
    ref_p = ref._collect_params_with_prefix()
    for name in ours_p:
        assert_close(ours_p[name].grad(), ref_p[name].grad(), GRADIENTS)


def test_parameter_names_match_d2l():
    ours, ref = BERTModel(**TINY), d2l.BERTModel(**TINY)
    names = sorted(ours._collect_params_with_prefix())
    assert names == sorted(ref._collect_params_with_prefix())
    for expected in ['encoder.pos_embedding', 'mlm.mlp.2.weight',
                     'encoder.blks.0.attention.W_q.weight',
                     'nsp.output.weight', 'hidden.weight']:
        assert expected in names


@pytest.mark.parametrize('direction', ['ours_to_d2l', 'd2l_to_ours'])
def test_params_files_load_both_ways(tmp_path, tiny_batch, direction):
    ours, ref = tiny_pair(BERTModel, d2l.BERTModel, **TINY)
    tokens, segments, valid_lens, pred_positions = tiny_batch
    ours(tokens, segments, valid_lens, pred_positions)
    ref(tokens, segments, valid_lens, pred_positions)
    src, dst = (ours, ref) if direction == 'ours_to_d2l' else (ref, ours)
    path = str(tmp_path / 'bert.params')
    src.save_parameters(path)
    dst.load_parameters(path)
    # Our blocks attend with the fused operators: equal up to rounding
    for a, b in zip(src(tokens, segments, valid_lens, pred_positions),
                    dst(tokens, segments, valid_lens, pred_positions)):
        assert_close(a, b)


# --- Properties --------------------------------------------------------------

@pytest.mark.parametrize('accelerated', [False, True])
def test_padding_does_not_change_valid_positions(tiny_batch, accelerated):
    net = BERTModel(**TINY)
    net.initialize(mx.init.Normal(0.2))
    if accelerated:
        net = fast.accelerate(net)
    tokens, segments, valid_lens, _ = tiny_batch
    encoded, _, _ = net(tokens, segments, valid_lens)
    # Overwrite every padding position with other tokens and segments
    pad = np.arange(12).reshape(1, 12) >= valid_lens.reshape(-1, 1)
    other = np.where(pad, (tokens + 7) % TINY['vocab_size'], tokens)
    other_seg = np.where(pad, 1 - segments, segments)
    encoded2, _, _ = net(other.astype('int32'), other_seg.astype('int32'),
                         valid_lens)
    for i, n in enumerate(valid_lens.asnumpy().astype(int)):
        assert_close(encoded[i, :n], encoded2[i, :n])


def test_mask_lm_equals_its_mlp_on_gathered_rows(tiny_batch):
    mlm = MaskLM(TINY['vocab_size'], TINY['num_hiddens'])
    mlm.initialize(mx.init.Normal(0.2))
    X = np.random.normal(size=(3, 12, TINY['num_hiddens']))
    pred_positions = tiny_batch[3]
    mlm_Y_hat = mlm(X, pred_positions)
    for b in range(3):
        rows = X[b][pred_positions[b]]
        assert_close(mlm_Y_hat[b], mlm.mlp(rows))


def test_mlm_is_none_without_pred_positions_even_accelerated(tiny_batch):
    net = BERTModel(**TINY)
    net.initialize()
    net = fast.accelerate(net)
    tokens, segments, valid_lens, pred_positions = tiny_batch
    outputs = net(tokens, segments, valid_lens, pred_positions)
    assert [o.shape for o in outputs] == [(3, 12, 32), (3, 3, 99), (3, 2)]
    encoded_X, mlm_Y_hat, nsp_Y_hat = net(tokens, segments)
    assert mlm_Y_hat is None
    assert encoded_X.shape == (3, 12, 32) and nsp_Y_hat.shape == (3, 2)


# --- Arguments and the original BERT's subclasses ---------------------------

@pytest.mark.parametrize('block_cls', [BERTEncoder, BERTModel])
def test_a_missing_dropout_is_named_at_construction(block_cls):
    # The book's signature: `dropout` has no default, as in the book
    with pytest.raises(TypeError, match="missing 1 required positional "
                       "argument: 'dropout'"):
        block_cls(100, 32, 64, 2, num_blks=2)


@pytest.mark.parametrize('block_cls', [OriginalBERTEncoder,
                                       OriginalBERTModel])
def test_a_dropout_of_none_is_named_by_the_original_classes(block_cls):
    with pytest.raises(TypeError, match='missing dropout: pass the '
                       'dropout rate'):
        block_cls(100, 32, 64, 2, 2, None)


@pytest.mark.parametrize('block_cls', [BERTEncoder, BERTModel])
def test_a_missing_number_of_blocks_is_named_at_construction(block_cls):
    with pytest.raises(TypeError, match="missing 1 required positional "
                       "argument: 'num_blks'"):
        block_cls(100, 32, 64, 2, dropout=0.1)


@pytest.mark.parametrize('block_cls', [BERTEncoder, BERTModel,
                                       OriginalBERTEncoder,
                                       OriginalBERTModel])
@pytest.mark.parametrize('dropout', [-0.1, 1.0, '0.1', True])
def test_a_dropout_outside_0_to_1_is_refused(block_cls, dropout):
    # The book's classes by `check_inputs`, as the command line and the
    # runs apply it; the original BERT's at construction
    with pytest.raises(ValueError, match=r'dropout must be a rate in '
                       rf'\[0, 1\), got {dropout!r}'):
        check_inputs(block_cls(100, 32, 64, 2, 2, dropout))


def test_original_bert_adds_only_the_embedding_norm(tiny_batch):
    book = BERTModel(**TINY)
    original = OriginalBERTModel(**TINY, **ORIGINAL_BERT)
    extra = set(original._collect_params_with_prefix()) - set(
        book._collect_params_with_prefix())
    assert extra == {'encoder.embedding_norm.gamma',
                     'encoder.embedding_norm.beta'}
    original.initialize()
    tokens, segments, valid_lens, pred_positions = tiny_batch
    shapes = [o.shape for o in original(tokens, segments, valid_lens,
                                        pred_positions)]
    assert shapes == [(3, 12, 32), (3, 3, 99), (3, 2)]


def test_gelu_ffn_computes_gelu():
    ffn = OriginalPositionWiseFFN(6, 4, activation='gelu')
    ffn.initialize(mx.init.Normal(0.5))
    X = np.random.normal(size=(2, 3, 5))
    ffn(X)
    # dense1's pre-activation, then GELU with erf, as the original BERT
    H = X.asnumpy() @ ffn.dense1.weight.data().asnumpy().T \
        + ffn.dense1.bias.data().asnumpy()
    from scipy.special import erf
    gelu = 0.5 * H * (1 + erf(H / onp.sqrt(2)))
    expected = gelu @ ffn.dense2.weight.data().asnumpy().T \
        + ffn.dense2.bias.data().asnumpy()
    assert_close(ffn(X), expected)


def test_gelu_tanh_ffn_computes_the_tanh_approximation():
    ffn = OriginalPositionWiseFFN(6, 4, activation='gelu_tanh')
    ffn.initialize(mx.init.Normal(0.5))
    X = np.random.normal(size=(2, 3, 5))
    ffn(X)
    # Hugging Face's 'gelu_new' and 'gelu_pytorch_tanh'
    H = X.asnumpy() @ ffn.dense1.weight.data().asnumpy().T \
        + ffn.dense1.bias.data().asnumpy()
    gelu = 0.5 * H * (1 + onp.tanh(onp.sqrt(2 / onp.pi)
                                   * (H + 0.044715 * H ** 3)))
    expected = gelu @ ffn.dense2.weight.data().asnumpy().T \
        + ffn.dense2.bias.data().asnumpy()
    onp.testing.assert_allclose(ffn(X).asnumpy(), expected, atol=1e-5)
    exact = OriginalPositionWiseFFN(6, 4, activation='gelu')
    exact.initialize()
    exact(X)
    for name in ('dense1', 'dense2'):
        for p in ('weight', 'bias'):
            getattr(getattr(exact, name), p).set_data(
                getattr(getattr(ffn, name), p).data())
    assert 1e-6 < float(abs(exact(X) - ffn(X)).max()) < 1e-2


def test_tied_weights_share_the_token_embedding(tmp_path, tiny_batch):
    net = OriginalBERTModel(**TINY, tie_weights=True)
    net.initialize()
    tokens, segments, valid_lens, pred_positions = tiny_batch
    net(tokens, segments, valid_lens, pred_positions)
    assert net.mlm.mlp[2].weight is net.encoder.token_embedding.weight
    path = str(tmp_path / 'tied.params')
    net.save_parameters(path)
    other = OriginalBERTModel(**TINY, tie_weights=True)
    other.load_parameters(path)
    assert_close(other(tokens, segments, valid_lens, pred_positions)[1],
                 net(tokens, segments, valid_lens, pred_positions)[1], EXACT)


def test_the_original_block_takes_the_layer_norm_epsilon():
    blk = OriginalEncoderBlock(8, 16, 2, 0.0, epsilon=1e-12)
    assert blk.addnorm1.ln._kwargs['eps'] == 1e-12
    assert blk.addnorm2.ln._kwargs['eps'] == 1e-12


def test_the_original_model_builds_none_of_the_books_blocks(monkeypatch):
    from d2l_bert.book import bert as book_bert

    def refuse(*args, **kwargs):
        raise AssertionError("the book's block was built")
    monkeypatch.setattr(book_bert, 'TransformerEncoderBlock', refuse)
    monkeypatch.setattr(book_bert, 'BERTEncoder', refuse)
    monkeypatch.setattr(book_bert, 'MaskLM', refuse)
    net = OriginalBERTModel(**TINY)
    assert [type(blk) for blk in net.encoder.blks] == [
        OriginalEncoderBlock] * TINY['num_blks']
    assert type(net.encoder.blks[0].ffn) is OriginalPositionWiseFFN


def test_unknown_activation_is_refused():
    with pytest.raises(ValueError, match="activation must be one of.*"
                                         "got 'tanh'"):
        OriginalBERTModel(**TINY, activation='tanh')


# --- Contexts ---------------------------------------------------------------

def test_blocks_run_on_the_callers_context(tiny_batch):
    ctx = mx.cpu(1)
    net = BERTModel(**TINY)
    net.initialize(ctx=ctx)
    batch = [a.as_in_ctx(ctx) for a in tiny_batch]
    outputs = net(*batch)
    assert all(o.ctx == ctx for o in outputs)


# The book's model, and its twin with the compiled loops and with MXNet's
# operators: the one multi-context test of the model
@pytest.mark.parametrize('kernels', [pytest.param(None, id='book')]
                         + kernel_params())
def test_batch_split_across_two_contexts_equals_one(tiny_batch, kernels):
    ctxs = [mx.cpu(0), mx.cpu(1)]
    net = BERTModel(**TINY)
    net.initialize(mx.init.Normal(0.2), ctx=ctxs)
    if kernels is not None:
        net = fast.accelerate(net, kernels=kernels)
    whole = net(*[a.as_in_ctx(ctxs[0]) for a in tiny_batch])
    shards = [gluon.utils.split_and_load(a, ctxs, even_split=False)
              for a in tiny_batch]
    parts = [net(*shard) for shard in zip(*shards)]
    assert [p[0].ctx for p in parts] == ctxs
    for i in range(3):
        joined = np.concatenate([p[i].as_in_ctx(ctxs[0]) for p in parts])
        assert_close(joined, whole[i])


@pytest.mark.skipif(mx.context.num_gpus() == 0,
                    reason='no GPU that MXNet can use on this machine')
def test_bert_model_on_gpu_equals_cpu(tiny_batch):
    net = BERTModel(**TINY)
    net.initialize(mx.init.Normal(0.2), ctx=[mx.cpu(), mx.gpu(0)])
    on_cpu = net(*tiny_batch)
    on_gpu = net(*[a.as_in_ctx(mx.gpu(0)) for a in tiny_batch])
    for a, b in zip(on_cpu, on_gpu):
        assert_close(a, b.as_in_ctx(mx.cpu()), OTHER_DEVICE)


# --- Bad input ---------------------------------------------------------------

@pytest.fixture(scope='module')
def net():
    # The checks as the command line, `PretrainedBERT` and the runs apply
    # them
    net = check_inputs(BERTModel(**TINY))
    net.initialize()
    return net


def _bad(batch, **changes):
    names = ['tokens', 'segments', 'valid_lens', 'pred_positions']
    args = dict(zip(names, batch))
    args.update(changes)
    return [args[n] for n in names]


@pytest.mark.parametrize('accelerated', [False, True])
@pytest.mark.parametrize('change, error, message', [
    (lambda b: dict(tokens=np.zeros((3, 17), dtype='int32'),
                    segments=np.zeros((3, 17), dtype='int32'),
                    valid_lens=None, pred_positions=None),
     ValueError, r'sequence length 17, longer than max_len=16'),
    (lambda b: dict(segments=b[1] * 2),
     ValueError, r'segments must hold segment ids 0 or 1, got 2 at \[0, 6\]'),
    (lambda b: dict(tokens=b[0] * 0 + 99),
     ValueError, r'tokens must hold ids in \[0, 99\) \(vocab_size\), got 99'),
    (lambda b: dict(tokens=b[0] * 0 - 1),
     ValueError, r'tokens must hold ids in \[0, 99\).*got -1 at \[0, 0\]'),
    (lambda b: dict(segments=b[1][:, :10]),
     ValueError, r'segments must have the shape of tokens \(3, 12\), '
                 r'got \(3, 10\)'),
    (lambda b: dict(valid_lens=b[2][:2]),
     ValueError, r'valid_lens must have shape \(3,\).*got \(2,\)'),
    (lambda b: dict(valid_lens=np.array([12., 13., 9.])),
     ValueError, r'valid_lens must hold lengths in \[0, 12\].*got 13 at '
                 r'\[1\]'),
    (lambda b: dict(valid_lens=b[2] - 10),
     ValueError, r'valid_lens must hold lengths in \[0, 12\].*got -3'),
    (lambda b: dict(pred_positions=b[3] + 2),
     ValueError, r'pred_positions must hold positions in \[0, 12\).*got 12 '
                 r'at \[0, 2\]'),
    (lambda b: dict(pred_positions=b[3][:2]),
     ValueError, r'pred_positions must have shape \(3, P\).*got \(2, 3\)'),
    (lambda b: dict(tokens=b[0].astype('float32') + 0.5),
     TypeError, r'tokens must hold integer ids, got 0?\.?\d*\.5 at '
                r'\[0, 0\]'),
    (lambda b: dict(tokens=b[0].asnumpy()),
     TypeError, r'tokens must be an mxnet.np.ndarray, got ndarray'),
])
def test_bad_input_gets_a_clear_error(net, tiny_batch, accelerated, change,
                                      error, message):
    model = fast.accelerate(net) if accelerated else net
    with pytest.raises(error, match=message):
        model(*_bad(tiny_batch, **change(tiny_batch)))


def test_float_tokens_with_integer_values_are_accepted(net, tiny_batch):
    tokens, segments, valid_lens, pred_positions = tiny_batch
    a = net(tokens.astype('float32'), segments, valid_lens, pred_positions)
    b = net(tokens, segments, valid_lens, pred_positions)
    assert_close(a[0], b[0], EXACT)


def test_encoder_alone_checks_its_inputs(tiny_batch):
    encoder = check_inputs(BERTEncoder(**TINY))
    encoder.initialize()
    with pytest.raises(ValueError, match='segments must hold segment ids'):
        encoder(tiny_batch[0], tiny_batch[1] + 1, None)
    mlm = check_inputs(MaskLM(99, 32))
    mlm.initialize()
    with pytest.raises(ValueError, match=r'pred_positions must hold '
                                         r'positions in \[0, 12\)'):
        mlm(np.zeros((3, 12, 32)), tiny_batch[3] + 12)


@pytest.mark.parametrize('module', ['bert', 'dataset', 'pretraining',
                                    'finetuning'])
def test_importing_a_section_turns_on_numpy_semantics_as_the_book_does(
        module):
    # In a new interpreter: this process's conftest turned them on already
    import subprocess
    import sys
    code = ('import mxnet as mx\n'
            'print(mx.util.is_np_array())\n'
            f'import d2l_bert.book.{module}\n'
            'print(mx.util.is_np_array(), mx.util.is_np_shape())\n')
    done = subprocess.run([sys.executable, '-c', code], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ['False', 'True', 'True']
