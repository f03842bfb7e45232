"""Check an edition: run its MXNet cells in order and compare the outputs.

`check_edition` runs the cells with `runner.Runner`, in one namespace, and
compares each output with the one the edition documents or, when it
carries none, with what the book prints (`book_outputs.DOCUMENTED`).  A
cell with a finding (a broken fence, an unknown tab, line breaks that
cannot be rebuilt) is reported as not run.
"""
import re
from dataclasses import dataclass, field

from .. import book_outputs

#: 0.17 names that d2l 1.0 renamed: (pattern, old name, 1.0 name)
NAMES_0_17 = (
    (r'\bd2l\.EncoderBlock\b', 'd2l.EncoderBlock',
     'd2l.TransformerEncoderBlock'),
    (r'\bnum_layers\b', 'num_layers', 'num_blks'),
    (r'\bd2l\.TransformerEncoder\b', 'd2l.TransformerEncoder',
     'd2l.TransformerEncoder (arguments num_blks, ...)'),
)


@dataclass
class CellReport:
    """The check of one cell."""
    label: str
    number: int
    line: int
    first_line: str
    status: str  # 'ran', 'failed' or 'not run'
    error: str = None
    output: str = ''
    documented: str = None
    source: str = None  # 'edition' or 'book table'
    mode: str = None
    match: str = None  # 'match', 'mismatch', 'shown' or None
    notes: list = field(default_factory=list)
    seconds: float = 0.0
    source_code: str = ''

    @property
    def ok(self):
        return self.status == 'ran' and self.match != 'mismatch'


@dataclass
class EditionReport:
    """The check of one edition."""
    path: str
    format: str
    label: str
    cells: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    names_0_17: list = field(default_factory=list)

    @property
    def summary(self):
        return dict(
            cells=len(self.cells),
            ran=sum(c.status == 'ran' for c in self.cells),
            documented=sum(c.documented is not None for c in self.cells),
            matched=sum(c.match == 'match' for c in self.cells),
            shown=sum(c.match == 'shown' for c in self.cells),
            mismatched=sum(c.match == 'mismatch' for c in self.cells),
            failed=sum(c.status != 'ran' for c in self.cells))

    @property
    def ok(self):
        return all(c.ok for c in self.cells)

    def summary_line(self):
        s = self.summary
        return (f"{s['cells']} cells, {s['ran']} ran, {s['documented']} "
                f"outputs documented, {s['matched']} matched")

    def as_dict(self):
        return dict(path=self.path, format=self.format, label=self.label,
                    cells=[vars(c) for c in self.cells], notes=self.notes,
                    names_0_17=self.names_0_17, summary=self.summary,
                    ok=self.ok)


def check_edition(edition, runner, progress=None, edition_outputs=True):
    """Run an edition's MXNet cells in order and compare their outputs.

    Parameters
    ----------
    edition : Edition
    runner : runner.Runner
        Fresh runner: the cells share its namespace.
    progress : callable, optional
        Called with each `CellReport` as soon as it is made.
    edition_outputs : bool
        Compare with the outputs the edition carries (else only with the
        book's table, `book_outputs.DOCUMENTED`).

    Returns
    -------
    EditionReport
    """
    report = EditionReport(edition.path, edition.format, edition.label,
                           notes=list(edition.notes))
    seen_0_17 = []
    for number, cell in enumerate(edition.mxnet_cells(), 1):
        cr = CellReport(cell.label, number, cell.line, cell.first_line,
                        'not run', notes=list(cell.notes),
                        source_code=cell.code)
        if cell.finding:
            cr.error = cell.finding
        else:
            result = runner.run(cell.code)
            cr.status, cr.output = result.status, result.output
            cr.error, cr.seconds = result.error, result.seconds
            if result.figures:
                cr.notes.append(f'{result.figures} figure(s) displayed')
            if result.skipped_lines:
                cr.notes.append('not run: ' + '; '.join(result.skipped_lines))
            _document(cr, cell, edition_outputs)
            for pattern, old, new in NAMES_0_17:
                if re.search(pattern, cell.code) and old not in seen_0_17:
                    seen_0_17.append(old)
                    report.names_0_17.append(f'{old} (1.0: {new})')
        report.cells.append(cr)
        if progress is not None:
            progress(cr)
    for hook in sorted(runner.hooks.used):
        report.notes.append(hook)
    if runner.hooks.small and any(c.match == 'shown'
                                  for c in report.cells):
        report.notes.append('small sizes: outputs of training are shown, '
                            'not compared')
    return report


def _document(cr, cell, edition_outputs=True):
    entry = book_outputs.documented(cell.label, cell.code)
    if edition_outputs and cell.output is not None and \
            book_outputs.clean(cell.output):
        cr.documented, cr.source = cell.output, 'edition'
        cr.mode = entry.mode if entry else book_outputs.guess_mode(
            cell.output)
    elif entry is not None:
        cr.documented, cr.source, cr.mode = entry.prints, 'book table', \
            entry.mode
        if entry.why:
            cr.notes.append(entry.why)
    else:
        return
    if cr.status == 'ran':
        cr.match = book_outputs.compare(cr.documented, cr.output, cr.mode)
    else:
        cr.match = 'mismatch'
