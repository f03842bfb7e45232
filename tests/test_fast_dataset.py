"""Tests of d2l_bert.fast.dataset: the stacked padding gives the book's
examples (`d2l_bert.book.dataset._pad_bert_inputs` is the oracle)."""
import random

import numpy as onp
import pytest
from d2l import mxnet as d2l

from d2l_bert.book import dataset as D
from d2l_bert import fast
from d2l_bert.runs.wiki_data import (WikiTextExamples, build_vocab,
                                     load_pretraining_data)
from helpers import WIKITEXT_FIXTURE as FIXTURE


@pytest.fixture(scope='module')
def fixture_paragraphs():
    random.seed(0)
    return D._read_wiki(FIXTURE)


def test_stacked_padding_equals_the_books_padding(fixture_paragraphs):
    paragraphs = [d2l.tokenize(p, token='word') for p in fixture_paragraphs]
    fixture_vocab = build_vocab(paragraphs)
    random.seed(6)
    examples = [e for p in paragraphs
                for e in D._get_nsp_data_from_paragraph(
                    p, paragraphs, fixture_vocab, 40)]
    examples = [D._get_mlm_data_from_tokens(t, fixture_vocab) + (s, n)
                for t, s, n in examples]
    plain = D._pad_bert_inputs(examples, 40, fixture_vocab)
    stacked = fast.pad_bert_inputs_stacked(examples, 40, fixture_vocab)
    for plain_field, stacked_field in zip(plain, stacked):
        expected = onp.stack([a.asnumpy() for a in plain_field])
        assert stacked_field.dtype == expected.dtype
        onp.testing.assert_array_equal(stacked_field, expected)


def test_stacked_dataset_serves_the_books_items(fixture_paragraphs):
    random.seed(8)
    book = D._WikiTextDataset(fixture_paragraphs, 40)
    random.seed(8)
    stacked = WikiTextExamples(fixture_paragraphs, 40,
                               pad=fast.pad_bert_inputs_stacked)
    assert stacked.vocab.idx_to_token == book.vocab.idx_to_token
    assert len(stacked) == len(book) > 0
    assert stacked.all_token_ids.shape == (len(book), 40)
    for i in range(len(book)):
        for a, b in zip(stacked[i], book[i]):
            assert a.dtype == b.dtype and a.shape == b.shape
            onp.testing.assert_array_equal(a, b.asnumpy())


def test_stacked_loader_gives_the_books_batches():
    def batches(pad):
        data_iter, _ = load_pretraining_data(4, 40, corpus=FIXTURE,
                                             seed=3, pad=pad)
        return [[x.asnumpy() for x in batch] for batch in data_iter]
    book = batches(D._pad_bert_inputs)
    stacked = batches(fast.pad_bert_inputs_stacked)
    assert len(book) == len(stacked) > 1
    for book_batch, stacked_batch in zip(book, stacked):
        for a, b in zip(book_batch, stacked_batch):
            assert a.dtype == b.dtype
            onp.testing.assert_array_equal(a, b)
