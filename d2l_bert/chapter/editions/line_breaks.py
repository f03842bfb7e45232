"""Give the cells of a one-line rendering their line breaks back.

A one-line rendering (see `rst`) shows each cell's code on one line, its
line breaks and indentation turned into single spaces.  `rebuild_cell`
gives such a cell its lines back: copied from the same cell of a
markdown edition of the section (`LayoutOracle`, matched by the code's
tokens) when one is at hand, else rebuilt from the code alone by
`layout.relayout`.
"""
import io
import os
import re
import tokenize

from .cells import EditionError, read_text
from .layout import LayoutError, lex, relayout
from .markdown import parse_markdown


def _signature(code_tokens):
    """Token texts with string contents and comments left out."""
    return [('S' if t.kind == 'string' else t.text) for t in code_tokens
            if t.kind != 'comment']


class LayoutOracle:
    """MXNet cells of markdown editions, looked up by their tokens."""

    def __init__(self, paths):
        self.sources, self.cells = [], {}
        for path in paths:
            try:
                edition = parse_markdown(read_text(path), path)
            except EditionError:
                continue
            self.sources.append(os.path.basename(path))
            for cell in edition.cells:
                if cell.finding:
                    continue
                key = self._key(cell.code)
                if key:
                    self.cells.setdefault(key, cell.code)

    @staticmethod
    def _key(code):
        try:
            toks = list(tokenize.generate_tokens(io.StringIO(code).readline))
        except (tokenize.TokenError, IndentationError, SyntaxError):
            return None
        return tuple('S' if t.type == tokenize.STRING else t.string
                     for t in toks if t.type in (tokenize.NAME, tokenize.OP,
                                                 tokenize.NUMBER,
                                                 tokenize.STRING))

    def layout(self, text):
        """`text` laid out like the matching cell, or None."""
        tokens, stop = lex(text)
        if stop < len(text):
            return None
        code_tokens = [t for t in tokens if t.kind != 'comment']
        key = tuple(_signature(code_tokens))
        model = self.cells.get(key)
        if model is None:
            return None
        toks = [t for t in tokenize.generate_tokens(
            io.StringIO(model).readline) if t.type in (
                tokenize.NAME, tokenize.OP, tokenize.NUMBER, tokenize.STRING)]
        model_lines = model.split('\n')
        rows = {}
        for ours, theirs in zip(code_tokens, toks):
            rows.setdefault(theirs.start[0], []).append(ours)
        out = []
        for row in sorted(rows):
            indent = re.match(r'\s*', model_lines[row - 1]).group()
            out.append(indent + text[rows[row][0].start:rows[row][-1].end])
        return '\n'.join(out) + '\n'


def rebuild_cell(cell, oracle):
    """Give a one-line cell its line breaks, or a finding."""
    one_line = cell.code
    laid = oracle.layout(one_line) if oracle is not None else None
    if laid is not None:
        cell.code = laid
        return
    try:
        cell.code = relayout(one_line)
        if re.search(r'\b(if|for|while|with|try|def|class)\b.*:',
                     cell.code):
            cell.notes.append('line breaks and indentation rebuilt from '
                              'one line')
    except LayoutError as e:
        cell.finding = f'cannot rebuild the line breaks of this cell: {e}'
