"""`first_snli_pairs`: the first labelled pairs of each SNLI split, in
SNLI's layout, read as `read_snli` reads the real files."""
import os

import pytest

from d2l_bert.book.finetuning import read_snli
from d2l_bert.data.snli_subset import SPLITS, first_snli_pairs
from d2l_bert.data.snli_synthetic import make_snli_synthetic


@pytest.fixture
def snli(tmp_path):
    """Synthetic SNLI (30 train, 12 test pairs), with an unlabelled row
    (``-``: annotators disagreed) as the second training row."""
    data_dir = make_snli_synthetic(str(tmp_path / 'snli'), num_train=30,
                                   num_dev=2, num_test=12)
    path = os.path.join(data_dir, SPLITS[0])
    with open(path, encoding='utf-8', newline='') as f:
        lines = f.readlines()
    unlabelled = '-' + lines[2][lines[2].index('\t'):]
    with open(path, 'w', encoding='utf-8', newline='') as f:
        f.writelines(lines[:2] + [unlabelled] + lines[2:])
    return data_dir


def test_first_pairs_are_the_first_labelled_rows_of_each_split(snli,
                                                               tmp_path):
    folder = first_snli_pairs(snli, 10, str(tmp_path / 'first'))
    for is_train in (True, False):
        premises, hypotheses, labels = read_snli(folder, is_train)
        every = read_snli(snli, is_train)
        assert (premises, hypotheses, labels) == tuple(
            part[:10] for part in every)


def test_a_split_with_fewer_pairs_keeps_them_all(snli, tmp_path):
    folder = first_snli_pairs(snli, 20, str(tmp_path / 'first'))
    assert [len(read_snli(folder, t)[2]) for t in (True, False)] == [20, 12]


def test_the_files_keep_snlis_header_and_rows_byte_for_byte(snli,
                                                            tmp_path):
    folder = first_snli_pairs(snli, 3, str(tmp_path / 'first'))
    with open(os.path.join(snli, SPLITS[1]), 'rb') as f:
        expected = b''.join(f.readline() for _ in range(4))
    with open(os.path.join(folder, SPLITS[1]), 'rb') as f:
        assert f.read() == expected


def test_a_missing_split_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match='snli_1.0_train.txt not '
                                                'found'):
        first_snli_pairs(str(tmp_path), 10, str(tmp_path / 'first'))


@pytest.mark.parametrize('num_pairs', [0, -1, 2.5, True])
def test_num_pairs_must_be_a_positive_int(snli, tmp_path, num_pairs):
    with pytest.raises(ValueError, match='num_pairs must be a positive '
                                         'integer'):
        first_snli_pairs(snli, num_pairs, str(tmp_path / 'first'))
