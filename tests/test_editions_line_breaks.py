"""A one-line cell's line breaks: copied from the same cell of a markdown
edition when one is at hand, else rebuilt from the code alone."""
from d2l_bert.chapter.editions.cells import Cell
from d2l_bert.chapter.editions.line_breaks import LayoutOracle, rebuild_cell

MARKDOWN = '''# A section
:label:`sec_bert`

```{.python .input}
#@tab mxnet
encoder = d2l.BERTEncoder(vocab_size, num_hiddens,
                          ffn_num_hiddens, num_heads)
encoder.initialize()
```
'''


def _oracle(tmp_path):
    path = tmp_path / 'bert.md'
    path.write_text(MARKDOWN, encoding='utf-8')
    return LayoutOracle([str(path)])


def test_a_cell_takes_the_line_breaks_of_the_same_markdown_cell(tmp_path):
    oracle = _oracle(tmp_path)
    assert oracle.sources == ['bert.md']
    cell = Cell('encoder = d2l.BERTEncoder(vocab_size, '
                'num_hiddens, ffn_num_hiddens, num_heads) '
                'encoder.initialize()')
    rebuild_cell(cell, oracle)
    assert cell.code == (
        'encoder = d2l.BERTEncoder(vocab_size, num_hiddens,\n'
        '                          ffn_num_hiddens, num_heads)\n'
        'encoder.initialize()\n')
    assert cell.notes == [] and cell.finding is None


def test_a_cell_no_markdown_edition_holds_is_rebuilt_and_says_so(tmp_path):
    cell = Cell('for i in range(2): print(i) x = 1')
    rebuild_cell(cell, _oracle(tmp_path))
    assert cell.code.splitlines() == ['for i in range(2):',
                                      '    print(i)', 'x = 1']
    assert cell.notes == ['line breaks and indentation rebuilt from one '
                          'line']


def test_a_cell_that_cannot_be_rebuilt_is_a_finding():
    cell = Cell('x = 1 ? 2')
    rebuild_cell(cell, None)
    assert cell.finding.startswith('cannot rebuild the line breaks of this '
                                   'cell: ')
