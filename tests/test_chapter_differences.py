"""Each notebook says what differs from the book, and every line of its
code that is not the book's is among what it says."""
import difflib
import io
import keyword
import os
import re
import tokenize

import nbformat
import pytest

from d2l_bert.chapter import differences
from d2l_bert.chapter.saved_cells import NOTEBOOK_DIR, NOTEBOOKS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BOOK = os.path.join(os.path.dirname(ROOT), 'shared', 'book', 'en')
NAMES = sorted(NOTEBOOKS)
#: Names too common to tell which difference a changed line is
COMMON_NAMES = {'np', 'd2l', 'net', 'self', 'loss', 'tokens', 'segments'}


def read(name):
    return nbformat.read(os.path.join(NOTEBOOK_DIR, name), as_version=4)


@pytest.mark.parametrize('name', NAMES)
def test_each_notebook_holds_its_list_of_differences(name):
    nb = read(name)
    assert differences.problems(nb, name) == []
    cells = [c for c in nb.cells if c.source.startswith(
        differences.HEADING)]
    assert len(cells) == 1
    for what, why in differences.COMMON + differences.DIFFERENCES[name]:
        assert ' '.join(what.split()) in ' '.join(cells[0].source.split())


def test_the_list_goes_before_the_first_code_after_the_set_up_and_stays():
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell('badges'),
                nbformat.v4.new_code_cell('set_up()'),
                nbformat.v4.new_markdown_cell('# Title'),
                nbformat.v4.new_code_cell('x = 1')]
    assert differences.write(nb, 'bert.ipynb')
    assert [c.source[:3] for c in nb.cells] == [
        'bad', 'set', '# T', '## ', 'x =']
    assert differences.write(nb, 'bert.ipynb') is None
    assert differences.problems(nb, 'bert.ipynb') == []
    nb.cells[3].source += '\n* one more'
    assert differences.problems(nb, 'bert.ipynb') == [
        'bert.ipynb: its "What differs from the book" cell is not '
        "chapter.differences' (write it: python -m "
        'd2l_bert.chapter.differences --write)']


def code_tokens(source):
    """The tokens of `source`: no comments, docstrings, blank space,
    ``#@`` lines or ``d2l.`` prefixes."""
    source = '\n'.join(line for line in source.splitlines()
                       if not line.lstrip().startswith('#@'))
    found = []
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
            tokenize.DEDENT, tokenize.ENDMARKER}
    for tok in tokenize.generate_tokens(io.StringIO(source + '\n').readline):
        if tok.type in skip or (tok.type == tokenize.STRING
                                and tok.string.startswith(('"""', "'''"))):
            continue
        found.append(tok.string)
    return [t for i, t in enumerate(found)
            if not (t == 'd2l' and found[i + 1:i + 2] == ['.'])
            and not (t == '.' and found[i - 1:i] == ['d2l'])]


def book_code(name):
    with open(os.path.join(BOOK, name.replace('.ipynb', '.md')),
              encoding='utf-8') as f:
        text = f.read()
    blocks = re.findall(r'```\{\.python \.input\}\n(.*?)```', text, re.S)
    return '\n'.join(b for b in blocks if not re.match(r'\s*#@tab', b)
                     or re.match(r'\s*#@tab\s+.*\b(mxnet|all)\b', b))


@pytest.mark.skipif(not os.path.isdir(BOOK), reason='the book\'s sources '
                    'are not at ../shared/book/en')
@pytest.mark.parametrize('name', NAMES)
def test_every_line_that_is_not_the_books_is_a_listed_difference(name):
    nb = read(name)
    ours = code_tokens('\n'.join(c.source for c in nb.cells[2:]
                                 if c.cell_type == 'code'))
    book = code_tokens(book_code(name))
    said = ' '.join(what for what, _ in differences.COMMON
                    + differences.DIFFERENCES[name])
    unsaid = []
    matcher = difflib.SequenceMatcher(None, book, ours, autojunk=False)
    for op, _, _, j1, j2 in matcher.get_opcodes():
        added = ours[j1:j2]
        names = {t for t in added if t.isidentifier()
                 and not keyword.iskeyword(t)} - COMMON_NAMES
        if op in ('insert', 'replace') and names and not any(
                re.search(rf'\b{re.escape(n)}\b', said) for n in names):
            unsaid.append(' '.join(added))
    assert unsaid == []
