"""Reading rendered reStructuredText, multi-line and one line per block."""
import ast
import os

from d2l_bert.chapter import editions
from d2l_bert.chapter.editions import read_edition

FIXTURES = os.path.join(os.path.dirname(__file__), 'fixtures', 'editions')


def fixture(name):
    return os.path.join(FIXTURES, name)


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


def test_one_line_excerpt_without_its_tab_bar_infers_the_tab_order():
    # a page split in two: the second part has no tab bar
    with open(fixture('one-line.rst'), encoding='utf-8') as f:
        text = f.read()
    assert '\nmxnetpytorch\n' in text
    edition = editions.parse_rst(text.replace('\nmxnetpytorch\n', '\n'))
    assert [c.frameworks for c in edition.cells] == \
        [('mxnet',), ('pytorch',)] * 5
    assert edition.notes[-1] == ('tab order mxnet, pytorch inferred from '
                                 'the code (the file has no tab bar)')


def test_tab_order_is_assumed_when_the_code_does_not_tell():
    # the same code in both tabs, no tab bar: MXNet first, as in 0.17
    text = ('.. code:: python def f(x): return x + 1 .. raw:: html\n'
            '.. raw:: html\n'
            '.. code:: python def f(x): return x + 1 .. raw:: html\n')
    edition = editions.parse_rst(text)
    assert [c.frameworks for c in edition.cells] == [('mxnet',),
                                                     ('pytorch',)]
    assert edition.notes[-1] == (
        'tab order mxnet, pytorch assumed (the file has no tab bar, and '
        'its code does not tell)')
