"""The synthetic SNLI corpus: SNLI's format, balanced, deterministic, and
made of words both pretrained vocabularies know."""
import collections
import os

import pytest
from d2l import mxnet as d2l

from d2l_bert.data import corpus, snli_synthetic
from d2l_bert.book.finetuning import read_snli


def test_d2l_read_snli_reads_the_files_like_real_snli(tmp_path):
    data_dir = snli_synthetic.make_snli_synthetic(
        str(tmp_path), num_train=300, num_dev=10, num_test=60)
    assert sorted(os.listdir(data_dir)) == [
        'snli_1.0_dev.txt', 'snli_1.0_test.txt', 'snli_1.0_train.txt']
    premises, hypotheses, labels = d2l.read_snli(data_dir, True)
    assert len(premises) == len(hypotheses) == len(labels) == 300
    assert len(d2l.read_snli(data_dir, False)[2]) == 60
    # parentheses of the binary parses are gone, words are single-spaced
    assert all('(' not in s and '  ' not in s for s in premises)
    assert premises[0].endswith(' .')


def test_rows_hold_snli_columns_and_skipped_gold_labels():
    rows = snli_synthetic.generate_snli_rows(2000, seed=1)
    assert all(len(row) == len(snli_synthetic.SNLI_HEADER) for row in rows)
    gold = collections.Counter(row[0] for row in rows)
    assert sum(gold[label] for label in snli_synthetic.LABELS) == 2000
    # as in SNLI, some rows have no gold label and `read_snli` skips them
    assert 5 <= gold['-'] <= 40


def test_labels_are_balanced():
    rows = snli_synthetic.generate_snli_rows(3000, seed=0)
    counts = collections.Counter(row[0] for row in rows if row[0] != '-')
    for label in snli_synthetic.LABELS:
        assert 900 <= counts[label] <= 1100, counts


def test_same_seed_writes_same_bytes_and_other_seed_differs(tmp_path):
    def train_bytes(folder, seed):
        data_dir = snli_synthetic.make_snli_synthetic(
            str(folder), 50, 5, 5, seed=seed)
        with open(os.path.join(data_dir, 'snli_1.0_train.txt'), 'rb') as f:
            return f.read()

    first = train_bytes(tmp_path / 'a', 0)
    assert train_bytes(tmp_path / 'b', 0) == first
    assert train_bytes(tmp_path / 'c', 1) != first


def test_same_hypothesis_gets_different_labels_after_different_premises():
    # the label is a property of the pair, not of the hypothesis alone
    rows = snli_synthetic.generate_snli_rows(5000, seed=0)
    labels_of = collections.defaultdict(set)
    for row in rows:
        if row[0] != '-':
            labels_of[row[6]].add(row[0])
    shared = [h for h, labels in labels_of.items()
              if {'entailment', 'contradiction'} <= labels]
    assert len(shared) >= 20


def test_every_word_is_frequent_in_the_embedded_corpus():
    # `d2l-bert pretrain` builds its vocabulary from the embedded corpus
    # with min_freq 5: a rarer word would become `<unk>` when fine-tuning
    with open(os.path.join(corpus.DATA_DIR, 'wiki.train.tokens'),
              encoding='utf-8') as f:
        counts = collections.Counter(f.read().lower().split())
    rows = snli_synthetic.generate_snli_rows(3000, seed=0)
    words = {w for row in rows for text in row[1:3] for w in text.split()
             if w not in '()'}
    rare = sorted(w for w in words if counts[w] < 5)
    assert rare == []


def test_our_read_snli_equals_d2l_read_snli(tmp_path):
    data_dir = snli_synthetic.make_snli_synthetic(str(tmp_path), 200, 5, 40)
    for is_train in (True, False):
        assert read_snli(data_dir, is_train) == d2l.read_snli(
            data_dir, is_train)


@pytest.mark.parametrize('num_examples', [0, -3, 2.5, True])
def test_bad_size_is_a_clear_error(num_examples):
    with pytest.raises(ValueError, match=f'num_examples must be a positive '
                                         f'integer, got {num_examples!r}'):
        snli_synthetic.generate_snli_rows(num_examples)
