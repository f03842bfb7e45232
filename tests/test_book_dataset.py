"""Tests of d2l_bert.book.dataset (sec_bert-dataset) and
d2l_bert.data.corpus."""
import os
import random
import socket

import numpy as onp
import pytest
from d2l import mxnet as d2l

from d2l_bert.book import dataset as D
from d2l_bert import fast
from d2l_bert.data import corpus
from d2l_bert.runs.wiki_data import WikiTextExamples, build_vocab
from d2l_bert.presets import DATA_ENV
from helpers import BOOK_BATCH_DTYPES as BOOK_DTYPES
from helpers import BOOK_BATCH_SHAPES as BOOK_SHAPES
from helpers import WIKITEXT_FIXTURE as FIXTURE


def _tokenized(paragraphs):
    return [d2l.tokenize(paragraph, token='word') for paragraph in paragraphs]


@pytest.fixture(scope='module')
def fixture_paragraphs():
    random.seed(0)
    return D._read_wiki(FIXTURE)


@pytest.fixture(scope='module')
def embedded():
    """The embedded training set at the book's sizes, built once, its
    fields stacked (`tests/test_fast_dataset.py` shows they are the
    book's lists of arrays)."""
    random.seed(0)
    paragraphs = D._read_wiki(corpus.DATA_DIR)
    return WikiTextExamples(paragraphs, 64,
                            pad=fast.pad_bert_inputs_stacked)


# -------------------------------------------------------------------------
# Reading WikiText

def test_read_wiki_matches_d2l_on_fixture():
    for seed in range(3):
        random.seed(seed)
        ours = D._read_wiki(FIXTURE)
        random.seed(seed)
        theirs = d2l._read_wiki(FIXTURE)
        assert ours == theirs


def test_read_wiki_lowercases_splits_sentences_and_drops_headings(
        fixture_paragraphs):
    tram = [p for p in fixture_paragraphs if p[0].startswith('motor buses')]
    assert tram == [[
        'motor buses reached edgemoor in 1929',
        'the tram company lost most of its passengers to the buses within '
        'two years , and the last car ran on 30 september 1931',
        'one car was kept and now stands in the town museum .']]
    sentences = [s for p in fixture_paragraphs for s in p]
    assert not any('=' in s for s in sentences)
    assert any('@-@' in s for s in sentences)
    assert any('<unk>' in s for s in sentences)
    # As in the book, the check counts a line's trailing ' . ', so a
    # one-sentence paragraph is kept (it gives no pair)
    assert ['the bent post was never repaired .'] in fixture_paragraphs
    assert len(fixture_paragraphs) == 10


# -------------------------------------------------------------------------
# Next sentence prediction

def test_next_sentence_is_true_half_the_time(fixture_paragraphs):
    paragraphs = _tokenized(fixture_paragraphs)
    sentences = [s for p in paragraphs for s in p]
    random.seed(1)
    draws = [D._get_next_sentence(['a'], ['b'], paragraphs)
             for _ in range(4000)]
    is_next = [d[2] for d in draws]
    assert abs(onp.mean(is_next) - 0.5) < 0.03
    assert all(d[1] == ['b'] for d in draws if d[2])
    assert all(d[1] in sentences for d in draws if not d[2])


def test_nsp_pairs_have_cls_seps_segments_and_fit_max_len(
        fixture_paragraphs):
    paragraphs = _tokenized(fixture_paragraphs)
    random.seed(2)
    for max_len in (20, 40, 64):
        for paragraph in paragraphs:
            for tokens, segments, is_next in D._get_nsp_data_from_paragraph(
                    paragraph, paragraphs, None, max_len):
                assert len(tokens) == len(segments) <= max_len
                assert tokens[0] == '<cls>' and tokens[-1] == '<sep>'
                first_sep = tokens.index('<sep>')
                assert tokens.count('<sep>') == 2
                assert segments == ([0] * (first_sep + 1) + [1] * (
                    len(tokens) - first_sep - 1))
                assert isinstance(is_next, bool)


def test_nsp_data_matches_d2l(fixture_paragraphs):
    paragraphs = _tokenized(fixture_paragraphs)
    random.seed(3)
    ours = [D._get_nsp_data_from_paragraph(p, paragraphs, None, 30)
            for p in paragraphs]
    random.seed(3)
    theirs = [d2l._get_nsp_data_from_paragraph(p, paragraphs, None, 30)
              for p in paragraphs]
    assert ours == theirs


# -------------------------------------------------------------------------
# Masked language modeling

@pytest.fixture(scope='module')
def fixture_vocab(fixture_paragraphs):
    return build_vocab(_tokenized(fixture_paragraphs))


def test_vocab_is_d2ls_with_reserved_tokens(fixture_paragraphs,
                                            fixture_vocab):
    sentences = [s for p in _tokenized(fixture_paragraphs) for s in p]
    book = d2l.Vocab(sentences, min_freq=5, reserved_tokens=[
        '<pad>', '<mask>', '<cls>', '<sep>'])
    assert fixture_vocab.idx_to_token == book.idx_to_token
    for token in ('<pad>', '<mask>', '<cls>', '<sep>', '<unk>', 'the'):
        assert token in fixture_vocab.token_to_idx
    # min_freq=5: the fixture's paragraphs have 'edgemoor' 5 times (once
    # more in a heading, which is not read), 'tram' 4 times
    assert 'edgemoor' in fixture_vocab.token_to_idx
    assert 'tram' not in fixture_vocab.token_to_idx


def test_mlm_data_matches_d2l(fixture_paragraphs, fixture_vocab):
    paragraphs = _tokenized(fixture_paragraphs)
    sequences = [d2l.get_tokens_and_segments(p[0], p[1])[0]
                 for p in paragraphs if len(p) > 1]
    for seed in range(5):
        random.seed(seed)
        ours = [D._get_mlm_data_from_tokens(t, fixture_vocab)
                for t in sequences]
        random.seed(seed)
        theirs = [d2l._get_mlm_data_from_tokens(t, fixture_vocab)
                  for t in sequences]
        assert ours == theirs


def test_random_replacements_are_vocabulary_tokens(fixture_vocab):
    tokens = ['<cls>'] + ['harbour'] * 40 + ['<sep>']
    random.seed(4)
    replaced = []
    for _ in range(300):
        mlm_input_tokens, pred = D._replace_mlm_tokens(
            tokens, list(range(1, 41)), 6, fixture_vocab)
        replaced += [mlm_input_tokens[i] for i, _ in pred
                     if mlm_input_tokens[i] not in ('<mask>', 'harbour')]
    assert replaced  # about 10% of 1800 predictions
    assert all(isinstance(t, str) for t in replaced)
    assert set(replaced) <= set(fixture_vocab.idx_to_token)


def test_pad_bert_inputs_matches_d2l(fixture_paragraphs, fixture_vocab):
    random.seed(5)
    theirs = d2l._WikiTextDataset(fixture_paragraphs, 40)
    examples = [((list(map(int, ids[:int(n)]))), list(map(int, pos[:int(
        w.sum())])), list(map(int, lab[:int(w.sum())])),
        list(map(int, seg[:int(n)])), bool(nsp))
        for ids, seg, n, pos, w, lab, nsp in zip(*(
            [a.asnumpy() for a in field] for field in (
                theirs.all_token_ids, theirs.all_segments,
                theirs.valid_lens, theirs.all_pred_positions,
                theirs.all_mlm_weights, theirs.all_mlm_labels,
                theirs.nsp_labels)))]
    ours = D._pad_bert_inputs(examples, 40, theirs.vocab)
    book = d2l._pad_bert_inputs(examples, 40, theirs.vocab)
    for our_field, book_field in zip(ours, book):
        for a, b in zip(our_field, book_field):
            assert a.dtype == b.dtype and a.shape == b.shape
            onp.testing.assert_array_equal(a.asnumpy(), b.asnumpy())


def test_dataset_matches_d2ls_dataset(fixture_paragraphs):
    random.seed(7)
    ours = D._WikiTextDataset(fixture_paragraphs, 40)
    random.seed(7)
    theirs = d2l._WikiTextDataset(fixture_paragraphs, 40)
    assert ours.vocab.idx_to_token == theirs.vocab.idx_to_token
    assert len(ours) == len(theirs) > 0
    for i in range(len(ours)):
        for a, b in zip(ours[i], theirs[i]):
            assert a.dtype == b.dtype and a.shape == b.shape
            onp.testing.assert_array_equal(a.asnumpy(), b.asnumpy())


# -------------------------------------------------------------------------
# Invariants of the whole pipeline, over the embedded corpus

def _fields(dataset):
    return (dataset.all_token_ids, dataset.all_segments, dataset.valid_lens,
            dataset.all_pred_positions, dataset.all_mlm_weights,
            dataset.all_mlm_labels, dataset.nsp_labels)


def test_embedded_corpus_is_large_enough_for_50_book_steps(embedded):
    assert len(embedded) >= 50 * 512
    assert 1000 < len(embedded.vocab) < 5000


def test_padding_weights_and_valid_lens_agree(embedded):
    tokens, segments, valid_lens, positions, weights, labels, _ = (
        _fields(embedded))
    vocab = embedded.vocab
    n = valid_lens.astype(int)                                    # (N,)
    num_preds = weights.sum(axis=1).astype(int)                   # (N,)
    T = tokens.shape[1]
    real = onp.arange(T)[None, :] < n[:, None]                    # (N, T)
    assert (tokens[~real] == vocab['<pad>']).all()
    assert (segments[~real] == 0).all()
    assert (tokens[real] != vocab['<pad>']).mean() > 0.99
    # Weights are 1s then 0s; padded predictions point at 0 with label 0
    P = weights.shape[1]
    expected = (onp.arange(P)[None, :] < num_preds[:, None])
    onp.testing.assert_array_equal(weights, expected.astype('float32'))
    assert (positions[~expected] == 0).all()
    assert (labels[~expected] == 0).all()
    # Predicted positions are increasing and inside the valid tokens
    assert (onp.diff(onp.where(expected, positions, T + onp.arange(P)),
                     axis=1) > 0).all()
    assert (positions[expected] < onp.repeat(n, num_preds)).all()


def test_fifteen_percent_of_tokens_are_predicted(embedded):
    valid_lens, weights = embedded.valid_lens, embedded.all_mlm_weights
    num_preds = weights.sum(axis=1)
    expected = onp.maximum(1, onp.round(valid_lens * 0.15))
    onp.testing.assert_array_equal(num_preds, expected)
    assert abs(num_preds.sum() / valid_lens.sum() - 0.15) < 0.01


def _originals(dataset):
    """Token ids before masking: labels put back at predicted positions."""
    tokens, _, _, positions, weights, labels, _ = _fields(dataset)
    original = tokens.copy()
    rows, cols = onp.nonzero(weights)
    original[rows, positions[rows, cols]] = labels[rows, cols]
    return original, rows, cols


def test_special_tokens_are_never_predicted(embedded):
    vocab = embedded.vocab
    _, rows, cols = _originals(embedded)
    labels = embedded.all_mlm_labels[rows, cols]
    for special in ('<cls>', '<sep>', '<pad>'):
        assert not (labels == vocab[special]).any()


def test_original_sequences_are_cls_a_sep_b_sep(embedded):
    vocab = embedded.vocab
    original, _, _ = _originals(embedded)
    n = embedded.valid_lens.astype(int)
    segments = embedded.all_segments
    assert (original[:, 0] == vocab['<cls>']).all()
    assert (original[onp.arange(len(n)), n - 1] == vocab['<sep>']).all()
    is_sep = original == vocab['<sep>']
    assert (is_sep.sum(axis=1) == 2).all()
    first_sep = is_sep.argmax(axis=1)
    T = original.shape[1]
    expected = ((onp.arange(T)[None, :] > first_sep[:, None])
                & (onp.arange(T)[None, :] < n[:, None]))
    onp.testing.assert_array_equal(segments, expected.astype('int32'))


def test_masks_follow_80_10_10(embedded):
    vocab = embedded.vocab
    _, rows, cols = _originals(embedded)
    inputs = embedded.all_token_ids[rows,
                                    embedded.all_pred_positions[rows, cols]]
    labels = embedded.all_mlm_labels[rows, cols]
    masked = (inputs == vocab['<mask>']).mean()
    kept = (inputs == labels).mean()
    replaced = 1 - masked - kept
    # About 170 000 predictions: a standard error near 0.001
    assert abs(masked - 0.8) < 0.01
    assert abs(kept - 0.1) < 0.01
    assert abs(replaced - 0.1) < 0.01


def test_next_sentence_labels_are_balanced(embedded):
    assert abs(embedded.nsp_labels.mean() - 0.5) < 0.02
    assert set(onp.unique(embedded.nsp_labels)) == {0.0, 1.0}


# -------------------------------------------------------------------------
# load_data_wiki: the book's, with the data hub's stand-in

def test_load_data_wiki_reads_the_stand_in_where_wikitext_2_cannot_be_had(
        tmp_path, monkeypatch, capsys):
    from d2l_bert.data import hub
    monkeypatch.setenv(DATA_ENV, str(tmp_path))
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        closed = f'http://127.0.0.1:{sock.getsockname()[1]}/wikitext-2.zip'
    monkeypatch.setitem(hub.DATA_HUB, 'wikitext-2',
                        (closed, hub.DATA_HUB['wikitext-2'][1]))
    monkeypatch.setitem(hub.STAND_INS, 'wikitext-2',
                        lambda folder: (FIXTURE, 'the test fixture'))
    random.seed(0)
    train_iter, vocab = D.load_data_wiki(4, 40)
    assert 'wikitext-2 cannot be downloaded here' in capsys.readouterr().err
    random.seed(0)
    book = D._WikiTextDataset(D._read_wiki(FIXTURE), 40)
    assert vocab.idx_to_token == book.vocab.idx_to_token
    assert len(train_iter._dataset) == len(book)
    batch = next(iter(train_iter))
    assert [x.shape for x in batch] == [(4, 40), (4, 40), (4,), (4, 6),
                                        (4, 6), (4, 6), (4,)]
    assert [str(x.dtype) for x in batch] == BOOK_DTYPES


def test_book_hub_entry_of_wikitext_2():
    from d2l_bert.data import hub
    assert hub.DATA_HUB['wikitext-2'] == (
        'https://s3.amazonaws.com/research.metamind.io/wikitext/'
        'wikitext-2-v1.zip', '3c914d17d80b1459be871a5039ac23e752a53cbe')


def test_read_wiki_of_a_folder_without_the_file_names_it(tmp_path):
    with pytest.raises(FileNotFoundError, match='wiki.train.tokens'):
        D._read_wiki(str(tmp_path))


# -------------------------------------------------------------------------
# The embedded corpus

def test_regenerating_the_corpus_gives_the_shipped_bytes():
    for split, (num_articles, seed) in {
            'train': (corpus.TRAIN_ARTICLES, corpus.TRAIN_SEED),
            'valid': (corpus.VALID_ARTICLES, corpus.VALID_SEED)}.items():
        path = os.path.join(corpus.DATA_DIR, corpus.FILE_NAMES[split])
        with open(path, 'rb') as f:
            shipped = f.read()
        assert corpus.generate(num_articles, seed).encode('utf-8') == shipped


def test_embedded_corpus_is_in_wikitext_format():
    path = os.path.join(corpus.DATA_DIR, 'wiki.train.tokens')
    assert os.path.getsize(path) < 4_000_000
    with open(path, encoding='utf-8') as f:
        lines = f.readlines()
    assert all(line.startswith(' ') and line.endswith(' \n')
               for line in lines)
    text = ''.join(lines)
    for mark in (' = = ', ' @-@ ', ' @,@ ', ' @.@ ', ' <unk> ', ' . \n'):
        assert mark in text
    assert lines[1].startswith(' = ') and lines[1].endswith(' = \n')
