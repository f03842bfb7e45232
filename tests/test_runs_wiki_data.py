"""Tests of d2l_bert.runs.wiki_data: the pretraining data beyond the
book's `load_data_wiki` (a corpus, a split, a seed, a padding, checked)."""
import os
import random
import shutil

import numpy as onp
import pytest

from d2l_bert.book import dataset as D
from d2l_bert import fast
from d2l_bert.data import corpus
from d2l_bert.data.wikitext import CorpusError, CorpusNotFoundError
from d2l_bert.runs.wiki_data import WikiTextExamples, load_pretraining_data
from helpers import BOOK_BATCH_DTYPES as BOOK_DTYPES
from helpers import BOOK_BATCH_SHAPES as BOOK_SHAPES
from helpers import WIKITEXT_FIXTURE as FIXTURE


def test_seeded_examples_are_the_books_after_random_seed():
    random.seed(5)
    book = D._WikiTextDataset(D._read_wiki(FIXTURE), 40)
    data_iter, vocab = load_pretraining_data(4, 40, corpus=FIXTURE, seed=5)
    ours = data_iter._dataset
    assert vocab.idx_to_token == book.vocab.idx_to_token
    assert len(ours) == len(book) > 10
    for i in range(len(book)):
        for x, y in zip(ours[i], book[i]):
            onp.testing.assert_array_equal(x.asnumpy(), y.asnumpy())


def test_embedded_batch_has_book_shapes_and_dtypes():
    train_iter, vocab = load_pretraining_data(
        512, 64, seed=0, pad=fast.pad_bert_inputs_stacked)
    batch = next(iter(train_iter))
    assert [x.shape for x in batch] == BOOK_SHAPES
    assert [str(x.dtype) for x in batch] == BOOK_DTYPES
    assert len(vocab) == len(vocab.idx_to_token) > 1000


def test_seed_makes_loading_reproducible():
    def batches(seed):
        data_iter, vocab = load_pretraining_data(4, 40, corpus=FIXTURE,
                                            seed=seed)
        return vocab, [[x.asnumpy() for x in b] for b in data_iter]
    vocab_a, a = batches(11)
    vocab_b, b = batches(11)
    _, c = batches(12)
    assert vocab_a.idx_to_token == vocab_b.idx_to_token
    assert len(a) == len(b) > 1
    for batch_a, batch_b in zip(a, b):
        for x, y in zip(batch_a, batch_b):
            onp.testing.assert_array_equal(x, y)
    assert any((x.shape != z.shape) or (x != z).any()
               for batch_a, batch_c in zip(a, c)
               for x, z in zip(batch_a, batch_c))


def test_valid_split_uses_training_vocabulary_in_order():
    _, train_vocab = load_pretraining_data(4, 64, corpus=FIXTURE, seed=0)
    valid_iter, vocab = load_pretraining_data(4, 64, corpus=FIXTURE,
                                         split='valid', seed=0)
    assert vocab.idx_to_token == train_vocab.idx_to_token
    # 'foundry' is frequent in the held-out split but rare in training
    assert 'foundry' not in vocab.token_to_idx
    lens = [x for batch in valid_iter for x in batch[2].asnumpy()]
    assert len(lens) == 3  # two paragraphs: 2 + 1 sentence pairs
    given, _ = load_pretraining_data(4, 64, corpus=FIXTURE, split='valid',
                                vocab=train_vocab)
    assert given._dataset.vocab is train_vocab


def test_embedded_valid_split_is_held_out():
    with open(os.path.join(corpus.DATA_DIR, 'wiki.train.tokens')) as f:
        train = set(f.read().split('\n'))
    with open(os.path.join(corpus.DATA_DIR, 'wiki.valid.tokens')) as f:
        valid = [line for line in f.read().split('\n')
                 if len(line.split(' . ')) > 2]
    assert len(valid) > 500
    # Whole paragraphs of several sentences are hardly ever repeated
    assert sum(line in train for line in valid) / len(valid) < 0.05


def test_corpus_file_given_by_path(tmp_path):
    path = tmp_path / 'my.tokens'
    shutil.copy(os.path.join(FIXTURE, 'wiki.train.tokens'), path)
    data_iter, vocab = load_pretraining_data(4, 64, corpus=str(path), seed=0)
    assert len(data_iter._dataset) > 10


# -------------------------------------------------------------------------
# Bad input

def test_missing_corpus_path_is_named(tmp_path):
    missing = str(tmp_path / 'nowhere' / 'wiki.train.tokens')
    with pytest.raises(CorpusNotFoundError, match='no such file'):
        load_pretraining_data(4, 64, corpus=missing)


def test_directory_without_tokens_file_is_named(tmp_path):
    with pytest.raises(CorpusNotFoundError,
                       match='directory without wiki.train.tokens'):
        load_pretraining_data(4, 64, corpus=str(tmp_path))


def test_empty_corpus_file_is_named(tmp_path):
    (tmp_path / 'wiki.train.tokens').write_text(' \n \n')
    with pytest.raises(CorpusError, match='is empty'):
        load_pretraining_data(4, 64, corpus=str(tmp_path))


def test_a_corpus_that_is_not_utf8_is_named(tmp_path):
    (tmp_path / 'wiki.train.tokens').write_bytes(b' a b . c d \n \xe9t\xe9\n')
    with pytest.raises(CorpusError) as e:
        load_pretraining_data(4, 64, corpus=str(tmp_path))
    assert str(e.value) == (
        f"corpus file {str(tmp_path / 'wiki.train.tokens')!r} is not UTF-8 "
        "text (byte 0xe9); expected text in WikiText's token format")


def test_a_corpus_larger_than_memory_is_refused_before_it_is_read(
        tmp_path, monkeypatch):
    from d2l_bert.runs import memory
    with open(tmp_path / 'wiki.train.tokens', 'wb') as f:
        f.truncate(3 << 30)      # (sparse: nothing written)
    monkeypatch.setattr(memory, 'available_bytes', lambda: 8 << 30)
    with pytest.raises(ValueError) as e:
        load_pretraining_data(4, 64, corpus=str(tmp_path))
    assert str(e.value) == (
        f"corpus file {str(tmp_path / 'wiki.train.tokens')!r} (3.0 GB) "
        'would take some 40 times that in memory once read and prepared '
        '(120.0 GB), and this machine has 8.0 GB available; give smaller '
        'files')


def test_corpus_without_sentence_pairs_is_explained(tmp_path):
    (tmp_path / 'wiki.train.tokens').write_text(
        ' \n = Title = \n \n One sentence only . \n \n No period here \n')
    with pytest.raises(CorpusError,
                       match='no paragraph of two sentences'):
        load_pretraining_data(4, 64, corpus=str(tmp_path))


def test_max_len_too_small_for_any_pair():
    with pytest.raises(ValueError, match=r'max_len=8 is too small .* needs '
                                         r'\d+ tokens'):
        load_pretraining_data(4, 8, corpus=FIXTURE)


def test_unknown_corpus_name_lists_the_choices():
    with pytest.raises(CorpusError,
                       match="unknown corpus='wikitext-103': use 'embedded'"):
        load_pretraining_data(4, 64, corpus='wikitext-103')


@pytest.mark.parametrize('kwargs, match', [
    (dict(batch_size=0), 'batch_size must be a positive integer, got 0'),
    (dict(max_len=6.5), 'max_len must be a positive integer, got 6.5'),
    (dict(split='test'), "split must be 'train' or 'valid', got 'test'"),
])
def test_bad_arguments_are_named(kwargs, match):
    args = dict(batch_size=4, max_len=64, corpus=FIXTURE)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        load_pretraining_data(**args)


