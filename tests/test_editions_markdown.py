"""Reading the book's markdown sources: fences, tabs, comments, outputs."""
import os

from d2l_bert.chapter import editions
from d2l_bert.chapter.editions import read_edition

FIXTURES = os.path.join(os.path.dirname(__file__), 'fixtures', 'editions')


def fixture(name):
    return os.path.join(FIXTURES, name)


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
