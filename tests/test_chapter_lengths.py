"""Each notebook's code is about as long as its section in the book
(`d2l_bert.chapter.lengths`), and is the book's code token for token
(the shared `book_tokens.py`)."""
import os
import re
import subprocess
import sys

import pytest

import excerpts
from d2l_bert.chapter import lengths
from d2l_bert.chapter.editions import parse_markdown, parse_notebook

BOOK_EN = os.path.join(excerpts.BOOK, 'en')


def test_code_lines_count_mxnet_lines_but_blank_and_tab_lines():
    edition = parse_markdown(
        '```{.python .input}\n#@tab mxnet\nx = 1\n\n# a comment\ny = 2\n'
        '```\n\n```{.python .input}\n#@tab pytorch\nz = 3\n```\n\n'
        '```{.python .input}\n#@tab all\nx + y\n```\n')
    assert lengths.code_lines(edition) == 4


def test_code_lines_of_a_notebook_count_every_code_cell():
    notebook = ('{"cells": [{"cell_type": "code", "metadata": {}, '
                '"execution_count": null, "outputs": [], "source": '
                '"#@save\\ndef f():\\n\\n    return 1"}, {"cell_type": '
                '"markdown", "metadata": {}, "source": "text\\ntext"}], '
                '"metadata": {}, "nbformat": 4, "nbformat_minor": 4}')
    assert lengths.code_lines(parse_notebook(notebook)) == 3


def test_length_ratio_is_notebook_lines_per_book_line():
    length = lengths.Length('sec_x', 'x.ipynb', 100, 153)
    assert length.ratio == pytest.approx(1.53)
    assert str(length).endswith('book  100  notebook  153  1.53x')


def _measured():
    if not os.path.isdir(BOOK_EN):
        pytest.skip(f'{BOOK_EN} is not here (the shared book sources are '
                    'only on the project machines)')
    return {x.notebook: x for x in lengths.measure(BOOK_EN)}


@pytest.mark.parametrize('name', lengths.NOTEBOOKS)
def test_notebook_code_is_within_max_ratio_of_the_books(name):
    length = _measured()[name]
    assert length.ratio <= lengths.MAX_RATIO, str(length)


def test_the_book_section_of_each_notebook_has_code():
    for length in _measured().values():
        assert length.book_lines > 50, str(length)


#: The project's measure of the book's code in the notebooks, and its
#: bounds: the book's tokens found in order, and the notebook's own
BOOK_TOKENS = os.path.join(os.path.dirname(excerpts.BOOK), 'tools',
                           'book_tokens.py')
MIN_COVERAGE, MAX_EXTRA = 0.97, 0.10


def test_each_notebook_shows_the_books_tokens_and_few_of_its_own():
    if not os.path.isfile(BOOK_TOKENS):
        pytest.skip(f'{BOOK_TOKENS} is not here (the shared tools are only '
                    'on the project machines)')
    done = subprocess.run(
        [sys.executable, BOOK_TOKENS, BOOK_EN, lengths.NOTEBOOK_DIR,
         str(MIN_COVERAGE), str(MAX_EXTRA)],
        capture_output=True, text=True, timeout=300)
    rows = re.findall(r'^([\w-]+): book \d+ tokens, notebook \d+; coverage '
                      r'([\d.]+), extra ([\d.]+)', done.stdout, re.M)
    assert len(rows) == 4, done.stdout + done.stderr
    for section, coverage, extra in rows:
        assert float(coverage) >= MIN_COVERAGE, (section, done.stdout)
        assert float(extra) <= MAX_EXTRA, (section, done.stdout)
    assert done.returncode == 0, done.stdout
