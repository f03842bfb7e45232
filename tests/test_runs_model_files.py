"""Tests of d2l_bert/runs/model_files.py: a pretrained BERT saved in the layout
of d2l's `bert.small` (`save_pretrained`), read back (`load_pretrained`,
the book's `load_pretrained_model`) and encoding text (`D2LTextEncoder`).
"""
import json
import os

import mxnet as mx
import numpy as onp
import pytest
from d2l import mxnet as d2l
from mxnet import gluon, init, np

from d2l_bert import BERTModel
from d2l_bert.runs import model_files as M
from d2l_bert.book.pretraining import train_bert

from helpers import make_run, run_config, tiny


@pytest.fixture(scope='module')
def saved_model(small_corpus, tmp_path_factory):
    """A tiny BERT trained 2 steps and saved with `save_pretrained`."""
    train_iter, vocab, net = make_run(small_corpus)
    train_bert(train_iter, net, gluon.loss.SoftmaxCELoss(), len(vocab),
               [mx.cpu()], 2)
    model_dir = str(tmp_path_factory.mktemp('model'))
    config = run_config(vocab)
    M.save_pretrained(net, vocab, model_dir, config)
    return model_dir, net, vocab, config


def example_inputs(vocab):
    tokens, segments = d2l.get_tokens_and_segments(
        ['the', 'river', 'is', 'long'], ['it', 'flows', 'south'])
    return (np.array([vocab[tokens]], dtype='int32'),
            np.array([segments], dtype='int32'),
            np.array([len(tokens)], dtype='float32'),
            np.array([[1, 2, 6]], dtype='int32'))


def test_saved_model_loads_like_the_books_load_pretrained_model(
        saved_model):
    model_dir, net, vocab, config = saved_model
    assert sorted(os.listdir(model_dir)) == ['config.json',
                                             'pretrained.params',
                                             'vocab.json']
    # The book's `load_pretrained_model`, with d2l 1.0.3's own classes
    book_vocab = d2l.Vocab()
    with open(os.path.join(model_dir, 'vocab.json')) as f:
        book_vocab.idx_to_token = json.load(f)
    book_vocab.token_to_idx = {
        token: idx for idx, token in enumerate(book_vocab.idx_to_token)}
    bert = d2l.BERTModel(len(book_vocab), config['num_hiddens'],
                         config['ffn_num_hiddens'], config['num_heads'],
                         config['num_blks'], config['dropout'],
                         config['max_len'])
    bert.load_parameters(os.path.join(model_dir, 'pretrained.params'),
                         ctx=[mx.cpu()])
    assert book_vocab.idx_to_token == vocab.idx_to_token
    inputs = example_inputs(book_vocab)
    for ours, theirs in zip(net(*inputs), bert(*inputs)):
        assert ours.shape == theirs.shape
        onp.testing.assert_allclose(ours.asnumpy(), theirs.asnumpy(),
                                    rtol=1e-5, atol=1e-5)


def test_load_pretrained_gives_the_saved_model(saved_model):
    model_dir, net, vocab, config = saved_model
    loaded, loaded_vocab, loaded_config = M.load_pretrained(model_dir)
    assert loaded_config == json.load(open(os.path.join(model_dir,
                                                        'config.json')))
    assert loaded_vocab.idx_to_token == vocab.idx_to_token
    inputs = example_inputs(vocab)
    onp.testing.assert_allclose(loaded(*inputs)[0].asnumpy(),
                                net(*inputs)[0].asnumpy(), atol=1e-6)


def test_load_pretrained_reads_sizes_off_a_directory_without_config(
        saved_model, tmp_path):
    # As d2l's own `bert.small`: pretrained.params and vocab.json only.
    # Heads do not show in the shapes: 64 hidden units mean 1 head
    _, _, vocab, _ = saved_model
    net = BERTModel(len(vocab), num_hiddens=64, ffn_num_hiddens=96,
                    num_heads=1, num_blks=3, dropout=0.0, max_len=40)
    net.initialize(init.Xavier())
    inputs = example_inputs(vocab)
    expected = net(*inputs)[0].asnumpy()
    config = dict(vocab_size=len(vocab), num_hiddens=64, ffn_num_hiddens=96,
                  num_heads=1, num_blks=3, dropout=0.0, max_len=40)
    M.save_pretrained(net, vocab, str(tmp_path), config)
    os.remove(tmp_path / 'config.json')
    loaded, _, loaded_config = M.load_pretrained(str(tmp_path))
    assert loaded_config == config
    onp.testing.assert_allclose(loaded(*inputs)[0].asnumpy(), expected,
                                atol=1e-6)


@pytest.mark.parametrize('change, message', [
    ({'num_heads': '2'}, "num_heads must be a positive integer, got '2'"),
    ({'num_blks': 0}, 'num_blks must be a positive integer, got 0'),
    ({'max_len': True}, 'max_len must be a positive integer, got True'),
    ({'dropout': 1.5}, r'dropout must be a number in \[0, 1\), got 1.5'),
    ({'num_hiddens': 64}, 'does not fit the sizes of config.json '
                          r'\(num_hiddens=64, '),
])
def test_load_pretrained_names_what_is_wrong_in_config(saved_model, tmp_path,
                                                      change, message):
    model_dir, _, vocab, config = saved_model
    for name in ('pretrained.params', 'vocab.json'):
        (tmp_path / name).write_bytes(open(os.path.join(model_dir, name),
                                           'rb').read())
    (tmp_path / 'config.json').write_text(json.dumps(dict(config, **change)))
    with pytest.raises(ValueError, match=message):
        M.load_pretrained(str(tmp_path))


def copy_model(saved_model, tmp_path, without=()):
    model_dir = saved_model[0]
    for name in ('pretrained.params', 'vocab.json', 'config.json'):
        if name not in without:
            (tmp_path / name).write_bytes(open(os.path.join(model_dir, name),
                                               'rb').read())
    return str(tmp_path)


def test_a_vocab_json_of_another_model_is_named(saved_model, tmp_path):
    # Without config.json, the vocabulary is checked against the rows of
    # the token embedding
    _, _, vocab, _ = saved_model
    model_dir = copy_model(saved_model, tmp_path, without=('config.json',))
    (tmp_path / 'vocab.json').write_text(json.dumps(
        vocab.idx_to_token + ['heron', 'egret', 'stork']))
    with pytest.raises(ValueError, match=(
            f'^{model_dir}: vocab.json has {len(vocab) + 3} tokens but '
            rf'pretrained.params embeds {len(vocab)} \(its encoder\.token_'
            rf'embedding\.weight has shape \({len(vocab)}, 32\)\): the two '
            'files are not of one model$')):
        M.load_pretrained(model_dir)


def test_a_config_json_of_another_vocabulary_is_named(saved_model,
                                                      tmp_path):
    _, _, vocab, config = saved_model
    model_dir = copy_model(saved_model, tmp_path)
    (tmp_path / 'config.json').write_text(json.dumps(
        dict(config, vocab_size=7 * 10 ** 11)))
    with pytest.raises(ValueError, match=(
            f'^{model_dir}: vocab.json has {len(vocab)} tokens but '
            'config.json says vocab_size=700000000000$')):
        M.load_pretrained(model_dir)


def test_parameters_larger_than_the_memory_available_are_not_loaded(
        saved_model, tmp_path, monkeypatch):
    model_dir = copy_model(saved_model, tmp_path)
    monkeypatch.setattr(M, 'available_bytes', lambda: 50_000)
    monkeypatch.setattr(BERTModel, 'load_parameters', None)  # not reached
    with pytest.raises(ValueError, match=(
            f'^{model_dir}/pretrained.params: its parameters take '
            r'[\d.]+ KB of memory, and this machine has 48\.8 KB '
            'available$')):
        M.load_pretrained(model_dir)


def test_parameters_saved_as_a_list_are_named(saved_model, tmp_path):
    model_dir = copy_model(saved_model, tmp_path, without=('config.json',))
    params = mx.npx.load(os.path.join(model_dir, 'pretrained.params'))
    mx.npx.save(os.path.join(model_dir, 'pretrained.params'),
                list(params.values())[::-1])
    with pytest.raises(ValueError, match=(
            f'^{model_dir}/pretrained.params holds {len(params)} arrays '
            'without names')):
        M.load_pretrained(model_dir)


def test_load_pretrained_names_what_is_missing(tmp_path):
    with pytest.raises(FileNotFoundError, match='does not exist'):
        M.load_pretrained(str(tmp_path / 'nowhere'))
    with pytest.raises(FileNotFoundError, match='has no pretrained.params'):
        M.load_pretrained(str(tmp_path))


def test_text_encoder_lowercases_and_marks_unknown_words(saved_model):
    model_dir, net, vocab, _ = saved_model
    w1, w2, w3 = [t for t in vocab.idx_to_token if t.isalpha()][:3]
    encoder = M.D2LTextEncoder(model_dir)
    tokens, encoded, pooled = encoder.encode(
        f'{w1.upper()} {w2.capitalize()} zzqx', f'  {w3}  ')
    assert tokens == ['<cls>', w1, w2, '<unk>', '<sep>', w3, '<sep>']
    assert encoded.shape == (7, 32) and pooled.shape == (32,)
    expected = M.encode_tokens(net, [w1, w2, 'zzqx'], [w3], vocab=vocab)
    onp.testing.assert_allclose(encoded, expected[0].asnumpy(), atol=1e-6)
    onp.testing.assert_allclose(
        pooled, net.hidden(expected[:, 0, :])[0].asnumpy(), atol=1e-6)


def test_text_encoder_refuses_texts_longer_than_the_model(saved_model,
                                                          tmp_path):
    _, _, vocab, _ = saved_model
    config = tiny(vocab_size=len(vocab), max_len=8)
    net = BERTModel(**config)
    net.initialize(init.Xavier())
    # One forward pass gives the deferred parameters their shapes
    net(np.zeros((1, 4), dtype='int32'), np.zeros((1, 4), dtype='int32'),
        np.array([4.0]), np.array([[1]], dtype='int32'))
    M.save_pretrained(net, vocab, str(tmp_path), config)
    encoder = M.D2LTextEncoder(str(tmp_path))
    assert len(encoder.encode('a b c d e f')[0]) == 8
    with pytest.raises(ValueError, match='has 9 tokens with <cls> and '
                                         '<sep>; the model takes at most 8'):
        encoder.encode('a b c d e f g')
