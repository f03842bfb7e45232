"""Excerpts of the shared editions, made by the tests from the whole files.

An excerpt is what a translator or reviewer holds: the text of a section
cut at cell boundaries, with or without the section's label line and the
section's first (import) cell.  `Cuts` reads an edition in ``../shared/book``
and gives the text of any run of its MXNet cells, in the file's own format.
"""
import functools
import os
import re

import pytest

from d2l_bert.cli.check_text import package_sections
from d2l_bert.chapter.editions import parse_markdown, parse_rst, read_edition

BOOK = os.path.normpath(os.path.join(os.path.dirname(__file__), '..', '..',
                                     'shared', 'book'))

#: The editions cut, relative to `BOOK`: the four sections of the chapter
#: in English and the Portuguese editions of sec_bert
EDITIONS = ('en/bert.md', 'en/bert-dataset.md', 'en/bert-pretraining.md',
            'en/natural-language-inference-bert.md', 'pt/bert.md',
            'pt/bert.rst')

_CODE = re.compile(r'\.\. code(?:-block)?::[ \t]*(?:python3?|ipython)?[ \t]')


@functools.lru_cache(maxsize=None)
def sections():
    """d2l-bert's edition of each section, by label (read once)."""
    found, missing = package_sections()
    assert missing is None, missing
    return found


def book(relative):
    """The path of a shared edition; skip the test where it is absent."""
    path = os.path.join(BOOK, relative)
    if not os.path.exists(path):
        pytest.skip(f'{path} is not here (the shared book sources are only '
                    'on the project machines)')
    return path


class Cuts:
    """The MXNet cells of an edition as blocks of its text.

    Block `k` runs from the start of MXNet cell `k` (its fence, or its
    ``.. code::`` directive) to the start of the next one, so it holds
    the cell, its output and the prose and other frameworks' cells after
    it.
    """

    def __init__(self, relative):
        self.path = book(relative)
        self.rst = relative.endswith('.rst')
        with open(self.path, encoding='utf-8') as f:
            text = f.read()
        self.edition = read_edition(self.path)
        self.label = self.edition.label
        self.cells = self.edition.mxnet_cells()
        if self.rst:
            starts = [m.start() for m in _CODE.finditer(text)]
            assert len(starts) == len(self.edition.cells)
            starts = [s for s, c in zip(starts, self.edition.cells)
                      if c.is_mxnet]
            self.label_text = f'.. _{self.label}:\n\n'
        else:
            lines = text.split('\n')
            offsets = [sum(len(x) + 1 for x in lines[:c.line - 1])
                       for c in self.cells]
            starts = offsets
            self.label_text = f':label:`{self.label}`\n\n'
        ends = starts[1:] + [len(text)]
        self.blocks = [text[a:b] for a, b in zip(starts, ends)]

    def __len__(self):
        return len(self.blocks)

    def indices(self, start, stop, imports=False):
        """The cells of an excerpt: cells `start` to `stop` (0-based, both
        included), the import cell (0) added or dropped."""
        indices = list(range(start, stop + 1))
        if imports and start > 0:
            indices = [0] + indices
        if not imports and start == 0:
            indices = indices[1:]
        return indices

    def text(self, indices, label=False):
        """The text of the excerpt holding the cells `indices`, with the
        section's label line first if `label`."""
        body = ''.join(b if b.endswith('\n') else b + '\n'
                       for b in (self.blocks[k] for k in indices))
        return (self.label_text if label else '') + body

    def read(self, indices, label=False):
        """The excerpt as an `Edition`."""
        text = self.text(indices, label)
        if self.rst:
            return parse_rst(text, 'excerpt.rst')
        return parse_markdown(text, 'excerpt.md')

    def write(self, directory, indices, label=False):
        """Write the excerpt into `directory`; return its path."""
        name = 'excerpt.rst' if self.rst else 'excerpt.md'
        path = os.path.join(str(directory), name)
        with open(path, 'w', encoding='utf-8') as f:
            f.write(self.text(indices, label))
        return path
