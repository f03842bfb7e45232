"""Read a chapter edition in any format the book is published in, and check it.

An *edition* is one section of the book in one language and one release:
the book's markdown source (English or a translation), the rendered
reStructuredText, or one of this package's notebooks.  `read_edition`
turns any of them into the same list of code cells, each with the
frameworks it belongs to and the output the edition documents, if any;
`check_edition` runs the MXNet cells in order with `runner.Runner` and
compares each output with the documented one.

Nothing here reads the prose, so an edition in a language never seen before
is read like the English one.  A file that is not well formed never stops
the reading: a fence that is not closed, an unknown ``#@tab`` or a cell
whose line breaks cannot be rebuilt becomes a finding on that cell.

Its modules:

cells
    `Cell`, `Edition`, `EditionError`: what every reader makes.
markdown
    The book's markdown sources (`parse_markdown`), with the ``#@tab``
    conventions of the 0.17 and 1.0 editions.
rst
    Rendered reStructuredText, multi-line or one line per block
    (`parse_rst`).
notebook
    Code cells of a ``.ipynb`` file, all MXNet (`parse_notebook`).
layout
    Line breaks and indentation of code collapsed onto one line, rebuilt
    from the code alone (`relayout`).
line_breaks
    A one-line cell's line breaks, copied from the same cell of a
    markdown edition when one is at hand, else rebuilt by `relayout`
    (`rebuild_cell`).
place
    Where an excerpt sits in its section, and the cells of d2l-bert's
    edition it leaves out (`locate`, `Place`).
check
    Running an edition and comparing its outputs (`check_edition`).
child
    Running the cells in a child process, in a new temporary directory,
    each within a time limit (`ChildRunner`).
"""
import os
import re

from .cells import (  # noqa: F401
    FRAMEWORKS, Cell, Edition, EditionError, read_text)
from .check import (  # noqa: F401
    NAMES_0_17, CellReport, EditionReport, check_edition)
from .layout import LayoutError, relayout  # noqa: F401
from .markdown import parse_markdown
from .notebook import parse_notebook
from .place import Place, locate  # noqa: F401
from .rst import parse_rst


def read_edition(path, layout_from=(), default_tab=None):
    """Read an edition file of any supported format.

    Parameters
    ----------
    path : str
        A ``.md``, ``.rst`` or ``.ipynb`` file.
    layout_from : sequence of str, optional
        Markdown editions whose cells give the line breaks of a one-line
        rendering (a ``.md`` of the same name next to `path` is used too).
    default_tab : str, optional
        Framework of untagged markdown cells; by default inferred (see
        `markdown`).

    Returns
    -------
    Edition

    Raises
    ------
    EditionError
        If the file cannot be read as text, is not a regular file, or
        holds more than `cells.MAX_EDITION_BYTES`.
    """
    if default_tab is not None and default_tab not in FRAMEWORKS:
        raise ValueError(f'default_tab must be one of {FRAMEWORKS}, got '
                         f'{default_tab!r}')
    text = read_text(path)
    ext = os.path.splitext(path)[1].lower()
    if ext == '.ipynb':
        return parse_notebook(text, path)
    if ext in ('.rst', '.txt') or _looks_like_rst(text):
        oracles = list(layout_from)
        sibling = os.path.splitext(path)[0] + '.md'
        if os.path.exists(sibling) and sibling not in oracles:
            oracles.append(sibling)
        return parse_rst(text, path, oracles)
    return parse_markdown(text, path, default_tab)


def _looks_like_rst(text):
    return bool(re.search(r'^\.\. code(?:-block)?::', text, re.M)) and \
        '```' not in text
