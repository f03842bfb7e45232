"""Checking editions: cells run in order, outputs held to the book's."""
import os
import shutil

import pytest

from d2l_bert import editions
from d2l_bert.editions import read_edition
from d2l_bert.runner import DataHooks, Runner

FIXTURES = os.path.join(os.path.dirname(__file__), 'fixtures', 'editions')
BOOK = os.path.join(os.path.dirname(__file__), '..', '..', 'shared', 'book')


def fixture(name):
    return os.path.join(FIXTURES, name)


def check(path, **kwargs):
    edition = read_edition(path, **kwargs)
    return editions.check_edition(edition, Runner(hooks=DataHooks(False)))


@pytest.mark.parametrize('name, summary', [
    ('bilingual.md', '3 cells, 3 ran, 1 outputs documented, 1 matched'),
    ('old-0.17.md', '4 cells, 4 ran, 2 outputs documented, 2 matched'),
    ('one-line.rst', '5 cells, 5 ran, 2 outputs documented, 2 matched'),
    ('rendered.rst', '3 cells, 3 ran, 2 outputs documented, 2 matched'),
])
def test_fixture_editions_run_and_match(name, summary):
    report = check(fixture(name))
    assert report.summary_line() == summary
    assert report.ok


def test_0_17_names_are_noted_as_information():
    report = check(fixture('old-0.17.md'))
    assert report.names_0_17 == [
        'd2l.EncoderBlock (1.0: d2l.TransformerEncoderBlock)',
        'num_layers (1.0: num_blks)']


def test_failing_cell_is_reported_and_the_rest_runs():
    report = check(fixture('failing-cell.md'))
    assert [c.status for c in report.cells] == ['ran', 'failed', 'ran']
    assert report.cells[1].error.startswith(
        "AttributeError: module 'd2l' has no attribute 'no_such_helper'")
    assert report.cells[2].match == 'match'
    assert not report.ok


def test_output_that_differs_is_a_mismatch():
    report = check(fixture('mismatch.md'))
    cell = report.cells[-1]
    assert (cell.output.strip(), cell.documented, cell.match) == \
        ('(2, 8, 64)', '(2, 8, 768)', 'mismatch')
    assert cell.source == 'book table'
    assert not report.ok


def test_findings_are_cells_that_did_not_run():
    report = check(fixture('broken-fence.md'))
    assert [c.status for c in report.cells] == [
        'ran', 'not run', 'ran', 'not run', 'not run']
    assert report.summary_line() == \
        '5 cells, 2 ran, 0 outputs documented, 0 matched'
    assert not report.ok


# --- the editions of sec_bert in ../shared/book ------------------------------

def _book(*parts):
    path = os.path.normpath(os.path.join(BOOK, *parts))
    if not os.path.exists(path):
        pytest.skip(f'{path} is not here (the shared book sources are '
                    'only on the project machines)')
    return path


@pytest.mark.parametrize('parts', [('en', 'bert.md'), ('pt', 'bert.md'),
                                   ('pt', 'bert.rst')])
def test_shared_sec_bert_editions_match_every_documented_output(parts):
    report = check(_book(*parts))
    assert report.summary_line() == \
        '12 cells, 12 ran, 5 outputs documented, 5 matched'
    assert report.ok


def test_one_line_rst_runs_without_its_markdown_beside_it(tmp_path):
    path = tmp_path / 'bert.rst'
    shutil.copy(_book('pt', 'bert.rst'), path)
    report = check(str(path))
    assert report.summary_line() == \
        '12 cells, 12 ran, 5 outputs documented, 5 matched'


def test_pretraining_edition_runs_small_on_the_embedded_corpus():
    edition = read_edition(_book('en', 'bert-pretraining.md'))
    report = editions.check_edition(
        edition, Runner(hooks=DataHooks(small=True, steps=1)))
    assert [c.status for c in report.cells] == ['ran'] * 9
    verdicts = [(c.number, c.match) for c in report.cells if c.match]
    assert verdicts == [(6, 'shown'), (8, 'match'), (9, 'match')]
    assert report.cells[5].output.startswith('MLM loss ')
    assert 'train_bert steps capped to 1' in report.notes
    assert 'WikiText-2 read from the embedded corpus' in report.notes
