"""Checking editions: cells run in order, outputs held to the book's."""
import contextlib
import os
import re
import shutil
import tempfile

import pytest

import excerpts
from d2l_bert import presets
from d2l_bert.book import dataset
from d2l_bert.chapter import book_outputs, edition_data, editions, gluon2
from d2l_bert.chapter import runner as runner_module
from d2l_bert.data import hub
from d2l_bert.chapter.editions import read_edition
from d2l_bert.chapter.notebooks import calls_settings
from d2l_bert.chapter.data_hooks import DataHooks
from d2l_bert.chapter.runner import Runner
from excerpts import Cuts

FIXTURES = os.path.join(os.path.dirname(__file__), 'fixtures', 'editions')
BOOK = os.path.join(os.path.dirname(__file__), '..', '..', 'shared', 'book')


def fixture(name):
    return os.path.join(FIXTURES, name)


def check(path, **kwargs):
    edition = read_edition(path, **kwargs)
    return editions.check_edition(edition, Runner(hooks=DataHooks(False)))


@pytest.mark.parametrize('name, summary', [
    ('bilingual.md', '3 cells, 3 ran, 1 outputs documented: 1 compared, '
                     '0 shown'),
    ('old-0.17.md', '4 cells, 4 ran, 2 outputs documented: 2 compared, '
                    '0 shown'),
    ('one-line.rst', '5 cells, 5 ran, 2 outputs documented: 2 compared, '
                     '0 shown'),
    ('rendered.rst', '3 cells, 3 ran, 2 outputs documented: 2 compared, '
                     '0 shown'),
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
    assert report.summary_line() == ('2 cells, 2 ran, 1 outputs '
                                     'documented: 1 compared (1 MISMATCH), '
                                     '0 shown')
    assert not report.ok


def _output(text):
    return ('```{.json .output n=1}\n[{"name": "stdout", "output_type": '
            f'"stream", "text": ["{text}\\n"]}}]\n```\n')


def test_summary_tells_compared_shown_and_unproduced_outputs_apart(
        tmp_path):
    # an exact output, a trained number (decimals: shown), and the output
    # of a cell that fails
    path = tmp_path / 'three.md'
    path.write_text(
        ':label:`sec_fixture_summary`\n\n'
        '```{.python .input}\nprint(6)\n```\n' + _output('6') +
        '```{.python .input}\nprint(0.5)\n```\n' + _output('0.25') +
        '```{.python .input}\nprint(no_such_name)\n```\n' + _output('1'))
    report = check(str(path))
    assert [c.match for c in report.cells] == ['match', 'shown',
                                               'not produced']
    assert report.summary_line() == ('3 cells, 2 ran, 3 outputs '
                                     'documented: 1 compared, 1 shown, '
                                     '1 not produced')
    assert not report.ok


def test_findings_are_cells_that_did_not_run():
    report = check(fixture('broken-fence.md'))
    assert [c.status for c in report.cells] == [
        'ran', 'not run', 'ran', 'not run', 'not run']
    assert report.summary_line() == \
        '5 cells, 2 ran, 0 outputs documented: 0 compared, 0 shown'
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
        '12 cells, 12 ran, 5 outputs documented: 5 compared, 0 shown'
    assert report.ok


def test_one_line_rst_runs_without_its_markdown_beside_it(tmp_path):
    path = tmp_path / 'bert.rst'
    shutil.copy(_book('pt', 'bert.rst'), path)
    report = check(str(path))
    assert report.summary_line() == \
        '12 cells, 12 ran, 5 outputs documented: 5 compared, 0 shown'


def test_pretraining_edition_runs_small_on_the_embedded_corpus():
    edition = read_edition(_book('en', 'bert-pretraining.md'))
    report = editions.check_edition(
        edition, Runner(hooks=DataHooks(small=True, steps=1)))
    assert [c.status for c in report.cells] == ['ran'] * 9
    verdicts = [(c.number, c.match) for c in report.cells if c.match]
    assert verdicts == [(6, 'shown'), (8, 'shown'), (9, 'shown')]
    assert report.cells[5].output.startswith('MLM loss ')
    assert 'train_bert steps capped to 1' in report.notes
    # the dataset section's load_data_wiki read the small run's corpus
    assert report.cells[2].status == 'ran'


# --- excerpts of the shared editions -----------------------------------------
#
# Each excerpt runs in a fresh namespace, with the cells of d2l-bert's
# edition it leaves out first.  sec_bert is cheap (a quarter of a second an
# excerpt): its English and Portuguese markdown editions are cut at every
# cell, each cut running to the end, with and without the import cell and
# the label by turns; the one-line rendering, whose cells are the
# Portuguese markdown's, at three cells.  An excerpt that stops early runs
# the same cells up to its last one (`test_editions_place` checks its plan
# against the one to the end, at every cut), so these runs check the
# outputs of every cut.  The data, pretraining and fine-tuning sections
# take seconds a run: one excerpt each, chosen to run the cells whose
# outputs the book documents.

def check_excerpt(cuts, indices, label=False, hooks=None):
    excerpt = cuts.read(indices, label)
    place = editions.locate(excerpt, excerpts.sections())
    runner = Runner(hooks=hooks or DataHooks(small=True))
    return editions.check_edition(excerpt, runner, place=place)


def assert_runs_and_matches(report, cuts, indices, where):
    """Every cell ran, those taken too, and each output the whole edition
    documents for these cells is documented here and matched or shown."""
    assert [c.status for c in report.taken + report.cells] == \
        ['ran'] * (len(report.taken) + len(report.cells)), where
    documented = [cuts.cells[k].output is not None or
                  book_outputs.documented(cuts.label, cuts.cells[k].code)
                  is not None for k in indices]
    assert [c.documented is not None for c in report.cells] == \
        documented, where
    assert all(c.match in ('match', 'shown') for c in report.cells
               if c.documented is not None), where
    assert report.ok, where


@pytest.mark.parametrize('relative, starts', [
    ('en/bert.md', range(12)), ('pt/bert.md', range(12)),
    ('pt/bert.rst', (2, 5, 9))])
def test_sec_bert_excerpts_from_every_cell_run_and_match(relative, starts):
    cuts = Cuts(relative)
    assert len(cuts) == 12
    for start in starts:
        imports = bool((start + (relative == 'pt/bert.md')) % 2)
        indices = cuts.indices(start, len(cuts) - 1, imports)
        report = check_excerpt(cuts, indices, label=start % 3 == 0)
        assert_runs_and_matches(report, cuts, indices,
                                (relative, start, imports))


def test_dataset_excerpt_of_the_last_cells_matches_the_books_shapes():
    cuts = Cuts('en/bert-dataset.md')
    indices = cuts.indices(9, 10)
    report = check_excerpt(cuts, indices)
    assert report.place.lines()[1] == (
        "excerpt of sec_bert-dataset: cells 10-11 of 11; cells 1-9 taken "
        "from d2l-bert's edition")
    assert_runs_and_matches(report, cuts, indices, 'sec_bert-dataset')
    assert [c.match for c in report.cells] == ['match', 'shown']


def test_pretraining_excerpt_from_the_batch_loss_on_runs_and_matches(
        tmp_path, monkeypatch):
    # any temporary directory a cell makes: under this test's
    monkeypatch.setattr(tempfile, 'tempdir', str(tmp_path))
    cuts = Cuts('en/bert-pretraining.md')
    indices = cuts.indices(3, 8)
    report = check_excerpt(cuts, indices, label=True,
                           hooks=DataHooks(small=True, steps=1))
    # d2l-bert's edition is the book's cells, and the fast layer's
    assert report.place.lines() == [
        "excerpt of sec_bert-pretraining: cells 4-10 of 10; cells 1-3 "
        "taken from d2l-bert's edition"]
    assert_runs_and_matches(report, cuts, indices, 'sec_bert-pretraining')
    assert [c.match for c in report.cells] == [None, None, 'shown', None,
                                               'shown', 'shown']


def test_fine_tuning_excerpt_from_the_dataset_on_runs_and_matches(
        tmp_path, monkeypatch):
    # offline, with the stand-ins in a temporary cache; the notebook's
    # cells taken get the stand-in of bert.small the book's cells get
    from d2l_bert.data import hub
    monkeypatch.setenv(presets.DATA_ENV, str(tmp_path))
    monkeypatch.setattr(hub, 'reachable', lambda name, timeout=5.0: False)
    hooks = DataHooks(small=True)
    for name, value in hooks.notebook_environment().items():
        monkeypatch.setenv(name, value)
    cuts = Cuts('en/natural-language-inference-bert.md')
    indices = cuts.indices(4, 8, imports=True)
    report = check_excerpt(cuts, indices, hooks=hooks)
    assert report.place.lines()[1] == (
        'excerpt of sec_natural-language-inference-bert: cells 5-10 of 10; '
        "cells 1-4 taken from d2l-bert's edition")
    # none of them reads the environment: the stand-ins are the hub's
    assert [calls_settings(cell.code) for _, cell in report.place.taken] \
        == [False] * 4
    assert_runs_and_matches(report, cuts, indices, 'sec_nli-bert')
    assert report.cells[-1].output.startswith('loss ')
    assert 'd2l.train_ch13 trained 1 epoch on 5 batches of at most 8 ' \
        'examples' in report.notes


# --- editions written their own way -------------------------------------------

def test_mxnet_2_gluon_edition_runs_every_cell_and_compares_sec_bert():
    report = check(fixture('gluon2.md'))
    assert report.summary_line() == \
        '12 cells, 12 ran, 5 outputs documented: 5 compared, 0 shown'
    assert report.ok
    assert report.notes == [gluon2.NOTE]
    # the edition's BERTEncoder, whose parameter is entered in its block
    assert re.fullmatch(r"\['bertencoder\d+_pos_embedding'\]\n",
                        report.cells[-1].output)


def test_mxnet_2_gluon_edition_fails_as_reported_without_the_hook(
        monkeypatch):
    monkeypatch.setattr(runner_module.gluon2, 'parameters_as_attributes',
                        lambda used: contextlib.nullcontext())
    report = check(fixture('gluon2.md'))
    assert report.cells[3].error.startswith(
        "RuntimeError: Parameter 'pos_embedding' has not been initialized")
    assert report.summary.get('compared') == 0
    assert gluon2.NOTE not in report.notes


@pytest.fixture
def offline_data(tmp_path, monkeypatch):
    """No network, and a data folder of the test's own."""
    monkeypatch.setenv(presets.DATA_ENV, str(tmp_path))
    monkeypatch.setenv(presets.OFFLINE_ENV, '1')
    return tmp_path


OWN_READ_WIKI = ("d2l._read_wiki: the edition's own #@save definition "
                 "(d2l-bert's is not used)")


def _check_small(path):
    return editions.check_edition(read_edition(path),
                                  Runner(hooks=DataHooks(small=True)))


def test_own_read_wiki_edition_runs_on_a_parquet_stand_in(
        offline_data, monkeypatch):
    if edition_data.parquet_engine() is None:
        pytest.skip('pandas has no parquet engine here (pyarrow, '
                    'fastparquet)')
    # were the package's _read_wiki run, this would fail
    monkeypatch.setattr(dataset, '_read_wiki', _never)
    report = _check_small(fixture('own-wiki.md'))
    assert report.summary_line() == \
        '6 cells, 6 ran, 3 outputs documented: 2 compared, 1 shown'
    assert OWN_READ_WIKI in report.notes
    stood_in = [n for n in report.notes if 'WikiText-2 in parquet' in n]
    assert stood_in == [
        'train-00000-of-00001.parquet (WikiText-2 in parquet) stood in for '
        'by the train lines of a corpus of 100 generated articles (small '
        "sizes) in a parquet file's text column (1,408 rows)"]
    written = offline_data / 'stand-ins' / 'wikitext-2-parquet' / 'small'
    assert [p.name for p in written.iterdir()] == [
        'train-00000-of-00001.parquet']
    # the edition's DATA_HUB entry stayed the cells' own
    assert 'wikitext-2-train.parquet' not in hub.DATA_HUB


def test_own_read_wiki_edition_without_a_parquet_engine_says_what_to_install(
        offline_data, monkeypatch):
    monkeypatch.setattr(edition_data, 'parquet_engine', lambda: None)
    monkeypatch.setattr(dataset, '_read_wiki', _never)
    report = _check_small(fixture('own-wiki.md'))
    assert [c.status for c in report.cells] == [
        'ran', 'ran', 'failed', 'ran', 'failed', 'failed']
    assert report.cells[2].error.endswith(
        'its stand-in, WikiText-2 in a parquet file, needs pyarrow or '
        'fastparquet, and neither is installed: pip install fastparquet')
    assert ("WikiText-2's parquet stand-in not made: pandas writes and reads "
            'parquet with pyarrow or fastparquet, and neither is installed '
            '(pip install fastparquet)') in report.notes
    assert OWN_READ_WIKI in report.notes


def _never(*args, **kwargs):
    raise AssertionError("the package's _read_wiki ran for the edition's")


def test_package_function_calls_the_editions_own_definition(offline_data):
    runner = Runner(hooks=DataHooks(small=True))
    runner.run('#@save\ndef _read_wiki(data_dir=None):\n'
               '    return [["the edition", "its own"]] * 2')
    result = runner.run('d2l.load_data_wiki.__globals__["_read_wiki"]()')
    assert result.output == "[['the edition', 'its own'], " \
        "['the edition', 'its own']]\n"
    assert ("d2l.load_data_wiki (d2l_bert's) calls the edition's "
            "_read_wiki, as in the edition's d2l") in runner.hooks.used
    # the package's module is as it was
    assert dataset._read_wiki.__module__ == 'd2l_bert.book.dataset'


def test_tab_lines_naming_several_frameworks_are_mxnets_too(tmp_path):
    edition = read_edition(fixture('tabs.md'))
    assert [c.frameworks for c in edition.cells][6:] == [
        ('mxnet', 'pytorch'), editions.FRAMEWORKS, ('pytorch', 'mxnet'),
        ('mxnet', 'pytorch', 'tensorflow'), ('pytorch', 'tensorflow')]
    report = check(fixture('tabs.md'))
    assert report.summary_line() == \
        '9 cells, 9 ran, 5 outputs documented: 5 compared, 0 shown'
    # the same cells in a notebook, which reads their tab lines too
    import nbformat
    notebook = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell(':label:`sec_bert`')] + [
        nbformat.v4.new_code_cell(c.code) for c in edition.cells])
    path = tmp_path / 'tabs.ipynb'
    path.write_text(nbformat.writes(notebook))
    report = check(str(path))
    assert report.summary_line() == \
        '9 cells, 9 ran, 5 outputs documented: 5 compared, 0 shown'
