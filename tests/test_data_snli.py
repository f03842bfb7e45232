"""`reading_first_pairs`: the book's `read_snli` from outside, with the
first pairs `D2L_BERT_SNLI_PAIRS` asks for and errors that name the file
and the line."""
import pytest
from d2l import mxnet as d2l

from d2l_bert.book.finetuning import read_snli
from d2l_bert.data.snli import reading_first_pairs, snli_pairs
from d2l_bert.data.snli_synthetic import make_snli_synthetic
from d2l_bert.presets import SNLI_PAIRS_ENV
from d2l_bert.runs.finetuning import read_snli_pairs


@pytest.fixture(scope='module')
def snli_dir(tmp_path_factory):
    return make_snli_synthetic(str(tmp_path_factory.mktemp('snli')),
                               num_train=60, num_dev=4, num_test=20)


def test_the_books_read_snli_is_d2ls(snli_dir):
    for is_train in (True, False):
        assert read_snli(snli_dir, is_train) == d2l.read_snli(snli_dir,
                                                              is_train)


def test_the_runs_read_snli_with_the_hook():
    assert read_snli_pairs.__wrapped__ is read_snli


def test_read_snli_errors_name_the_file_and_line(tmp_path):
    read = reading_first_pairs(read_snli)
    with pytest.raises(FileNotFoundError,
                       match='snli_1.0_train.txt not found'):
        read(str(tmp_path), True)
    path = tmp_path / 'snli_1.0_test.txt'
    path.write_text('gold_label\tsentence1_binary_parse\n')
    with pytest.raises(ValueError, match='holds no labelled example'):
        read(str(tmp_path), False)
    path.write_text('gold_label\tsentence1_binary_parse\nneutral\ta b\n')
    with pytest.raises(ValueError, match='line 2: expected tab-separated'):
        read(str(tmp_path), False)


def test_read_snli_reads_the_first_pairs_asked_for(snli_dir, monkeypatch,
                                                   capsys):
    monkeypatch.delenv(SNLI_PAIRS_ENV, raising=False)
    every = read_snli_pairs(snli_dir, True)
    assert every == read_snli(snli_dir, True)
    monkeypatch.setenv(SNLI_PAIRS_ENV, '7')
    first = read_snli_pairs(snli_dir, True)
    assert first == tuple(part[:7] for part in every)
    # beside the download's lines, apart from what the book's cell prints
    assert capsys.readouterr().err == (
        f'read_snli: the first 7 of {len(every[2]):,} pairs of '
        'snli_1.0_train.txt (D2L_BERT_SNLI_PAIRS=7; all reads every pair)\n')
    monkeypatch.setenv(SNLI_PAIRS_ENV, 'all')
    assert read_snli_pairs(snli_dir, True) == every
    monkeypatch.setenv(SNLI_PAIRS_ENV, 'many')
    with pytest.raises(ValueError, match="must be a number of pairs or all, "
                                         "got 'many'"):
        read_snli_pairs(snli_dir, True)


def test_snli_pairs_reads_a_number_or_all():
    assert snli_pairs({}) == 0
    assert snli_pairs({SNLI_PAIRS_ENV: ' All '}) == 0
    assert snli_pairs({SNLI_PAIRS_ENV: '0'}) == 0
    assert snli_pairs({SNLI_PAIRS_ENV: '1000'}) == 1000
