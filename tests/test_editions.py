"""Reading editions in every format, and checking them against the book."""
import ast
import json
import os
import shutil

import pytest

from d2l_bert import book_outputs, editions
from d2l_bert.editions import read_edition, relayout
from d2l_bert.runner import DataHooks, Runner

FIXTURES = os.path.join(os.path.dirname(__file__), 'fixtures', 'editions')
BOOK = os.path.join(os.path.dirname(__file__), '..', '..', 'shared', 'book')


def fixture(name):
    return os.path.join(FIXTURES, name)


def check(path, **kwargs):
    edition = read_edition(path, **kwargs)
    return editions.check_edition(edition, Runner(hooks=DataHooks(False)))


# --- reading -----------------------------------------------------------------

def test_code_inside_html_comments_is_not_a_cell():
    edition = read_edition(fixture('bilingual.md'))
    codes = '\n'.join(c.code for c in edition.cells)
    assert 'RuntimeError' not in codes
    assert edition.label == 'sec_bert'


def test_1_0_edition_untagged_cells_are_pytorch():
    edition = read_edition(fixture('bilingual.md'))
    frameworks = [c.frameworks for c in edition.cells]
    assert frameworks == [('mxnet',), ('pytorch',), ('pytorch',),
                          ('mxnet',), editions.FRAMEWORKS]
    assert [c.line for c in edition.mxnet_cells()] == [21, 44, 52]


def test_0_17_edition_untagged_cells_are_mxnet():
    edition = read_edition(fixture('old-0.17.md'))
    assert [c.frameworks for c in edition.cells] == [
        ('mxnet',), ('pytorch',), ('mxnet',), ('mxnet',), ('mxnet',)]
    assert any('0.17-era convention' in n for n in edition.notes)


def test_default_tab_can_be_given():
    edition = read_edition(fixture('old-0.17.md'), default_tab='pytorch')
    assert [c.is_mxnet for c in edition.cells] == [False, False, False,
                                                   False, False]


def test_json_output_fence_is_the_previous_cells_output():
    edition = read_edition(fixture('old-0.17.md'))
    assert edition.cells[3].output == '(3, 5, 16)'


def test_broken_fences_are_findings_on_their_cells():
    edition = read_edition(fixture('broken-fence.md'))
    cells = edition.mxnet_cells()
    assert [c.finding is None for c in cells] == [True, False, True, False,
                                                  False]
    assert cells[1].finding == ('fence opened at line 9 is not closed '
                                'before the next cell (line 15)')
    assert cells[3].finding.startswith('malformed fence info')
    assert cells[4].finding == 'fence opened at line 25 is never closed'


def test_unknown_tab_is_a_finding_and_known_lists_are_read():
    edition = read_edition(fixture('unknown-tab.md'))
    assert [c.frameworks for c in edition.cells] == [
        ('mxnet',), (), ('jax', 'pytorch'), ('mxnet', 'pytorch')]
    assert edition.cells[1].finding.startswith("unknown tab 'mxnett'")


def test_one_line_rst_gets_frameworks_outputs_and_line_breaks():
    edition = read_edition(fixture('one-line.rst'))
    assert edition.format == 'rst (one line per block)'
    assert edition.label == 'sec_fixture_rst'
    mx_cells = edition.mxnet_cells()
    assert len(mx_cells) == 5 and len(edition.cells) == 10
    assert [c.output for c in mx_cells] == [
        None, None, "[('a', 2), ('b', 1)]", None, '(2, 100, 24)']
    for cell in edition.cells:
        ast.parse(cell.code)
    assert 'torch' not in ''.join(c.code for c in mx_cells)


def test_multi_line_rst_reads_tab_panels():
    edition = read_edition(fixture('rendered.rst'))
    assert edition.format == 'rst'
    assert [c.frameworks for c in edition.cells] == [
        ('mxnet',), ('pytorch',), ('mxnet',), ('mxnet',)]
    assert edition.cells[2].output.endswith('(2, 3, 10000)')


def test_notebook_cells_are_mxnet_and_label_from_metadata(tmp_path):
    nb = {'cells': [
        {'cell_type': 'markdown', 'metadata': {}, 'source': ['# T']},
        {'cell_type': 'code', 'metadata': {}, 'execution_count': 1,
         'source': ['1 + 1'], 'outputs': [
             {'output_type': 'execute_result', 'execution_count': 1,
              'metadata': {}, 'data': {'text/plain': '2'}}]}],
        'metadata': {'d2l_bert': {'label': 'sec_x'}},
        'nbformat': 4, 'nbformat_minor': 5}
    path = tmp_path / 'x.ipynb'
    path.write_text(json.dumps(nb))
    edition = read_edition(str(path))
    assert edition.label == 'sec_x'
    assert [(c.code, c.output) for c in edition.cells] == [('1 + 1', '2\n')]


def test_unreadable_file_is_an_edition_error(tmp_path):
    with pytest.raises(editions.EditionError, match='cannot read'):
        read_edition(str(tmp_path / 'missing.md'))
    (tmp_path / 'binary.md').write_bytes(b'\xff\xfe\x00')
    with pytest.raises(editions.EditionError, match='cannot read'):
        read_edition(str(tmp_path / 'binary.md'))


@pytest.mark.parametrize('text', [
    '```{.python .input}', '<!--', '```{.python .input}\n#@tab\nx',
    '.. code:: python if x: else: .. raw:: html', '```\n```{.json .output}',
    '.. code:: python x = "unterminated', '#@tab mxnet\n```',
])
def test_garbage_never_raises(tmp_path, text):
    for ext in ('.md', '.rst'):
        path = tmp_path / f'garbage{ext}'
        path.write_text(text)
        read_edition(str(path))


# --- rebuilding one-line code ------------------------------------------------

def _same(one_line, expected):
    assert ast.dump(ast.parse(relayout(one_line))) == \
        ast.dump(ast.parse(expected))


def test_relayout_keeps_statements_that_use_the_condition_in_the_if():
    _same('def f(a, b=None): out = [a] if b is not None: out += b '
          'n = len(b) return out',
          'def f(a, b=None):\n    out = [a]\n    if b is not None:\n'
          '        out += b\n        n = len(b)\n    return out')


def test_relayout_leaves_else_and_loop_blocks_where_the_data_says():
    _same('def g(X, p=None): if p is not None: y = X[p] else: y = None '
          'z = X + 1 return X, y, z',
          'def g(X, p=None):\n    if p is not None:\n        y = X[p]\n'
          '    else:\n        y = None\n    z = X + 1\n    return X, y, z')
    _same('def h(X, blks): for blk in blks: X = blk(X) return X',
          'def h(X, blks):\n    for blk in blks:\n        X = blk(X)\n'
          '    return X')


def test_relayout_keeps_both_branches_setting_a_name_in_their_branch():
    _same('def k(a): if a: x, y = 1, 2 else: x = 3 y = 4 return x + y',
          'def k(a):\n    if a:\n        x, y = 1, 2\n    else:\n'
          '        x = 3\n        y = 4\n    return x + y')


def test_relayout_ends_comments_where_code_starts():
    code = relayout('# 0 and 1 mark A and B, respectively segments = [0] '
                    '# Shape of `X`: (batch, no. of steps) X = f(1) # Forward '
                    'pass _, y = X')
    assert code.splitlines() == [
        '# 0 and 1 mark A and B, respectively', 'segments = [0]',
        '# Shape of `X`: (batch, no. of steps)', 'X = f(1)',
        '# Forward pass', '_, y = X']


def test_relayout_methods_return_to_the_class_body():
    code = relayout('class A: def __init__(self): self.x = 1 '
                    'def f(self): return self.x a = A()')
    assert code.splitlines()[-1] == 'a = A()'
    assert code.splitlines()[3] == '    def f(self):'


def test_relayout_error_on_code_that_cannot_be_read():
    with pytest.raises(editions.LayoutError, match='cannot read'):
        relayout('x = 1 ? 2')


# --- checking ----------------------------------------------------------------

def test_documented_outputs_match_by_content_not_position():
    shuffled = 'x = 1\nnsp_l.shape  # the final expression decides'
    entry = book_outputs.documented('sec_bert', shuffled)
    assert (entry.cell, entry.prints) == (11, '(2,)')
    assert book_outputs.documented('sec_other', shuffled) is None


@pytest.mark.parametrize('mode, actual, verdict', [
    ('exact', '(2, 8, 768)\n', 'match'),
    ('exact', '(2, 8, 769)', 'mismatch'),
    ('batch', '(3, 64) (3, 64) (3,) (3, 10) (3, 10) (3, 10) (3,)', 'match'),
    ('batch', '(3, 64) (3, 64) (2,) (3, 10) (3, 10) (3, 10) (3,)',
     'mismatch'),
    ('shapes', '((1, 6, 128), (1, 128), array([0.1, 0.2, 0.3]))', 'match'),
    ('shapes', '((1, 6, 64), (1, 64), array([0.1, 0.2, 0.3]))', 'mismatch'),
    ('shown', 'anything', 'shown'),
])
def test_compare_modes(mode, actual, verdict):
    expected = {
        'exact': '(2, 8, 768)', 'shown': 'x',
        'batch': '(512, 64) (512, 64) (512,) (512, 10) (512, 10) (512, 10) '
                 '(512,)',
        'shapes': '((1, 6, 128), (1, 128), array([-1.27, -0.79, -1.05]))'}
    assert book_outputs.compare(expected[mode], actual, mode) == verdict


def test_compare_drops_storage_manager_lines():
    noisy = ('[21:04:49] src/storage/storage.cc:196: Using Pooled (Naive) '
             'StorageManager for CPU\n(2, 2)')
    assert book_outputs.compare(noisy, '(2, 2)', 'exact') == 'match'


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


def test_relayout_decorators_stay_with_their_def():
    code = relayout('class A: def f(self): return 1 @property def g(self): '
                    'return 2 @d2l.add_to_class(A) def h(self): return 3')
    assert code.splitlines()[3:7] == [
        '    @property', '    def g(self):', '        return 2',
        '@d2l.add_to_class(A)']


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
