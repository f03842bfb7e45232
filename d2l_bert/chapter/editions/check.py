"""Check an edition: run its MXNet cells in order and compare the outputs.

`check_edition` runs the cells with a runner (`runner.Runner`, or
`child.ChildRunner` for files of other people), in one namespace, and
compares each output with the one the edition documents or, when it
carries none, with what the book prints (`book_outputs.DOCUMENTED`).  A
cell with a finding (a broken fence, an unknown tab, line breaks that
cannot be rebuilt) is reported as not run.  Given the file's
`place.Place`, the cells of d2l-bert's edition that an excerpt leaves out
run first, each in its place (`Place.plan`), and the outputs are looked
up under the place's section label.
"""
import re
from dataclasses import dataclass, field

from .. import book_outputs

#: 0.17 names that d2l 1.0 renamed, as (pattern, old name, 1.0 name)
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
    # 'match', 'mismatch', 'shown', 'not produced' (the cell failed) or None
    match: str = None
    notes: list = field(default_factory=list)
    seconds: float = 0.0
    source_code: str = ''
    # a cell of d2l-bert's edition that an excerpt leaves out; `number` is
    # its position there
    taken: bool = False

    @property
    def ok(self):
        return self.status == 'ran' and self.match != 'mismatch'


@dataclass
class EditionReport:
    """The check of one edition.

    `cells` are the file's cells; `taken` the cells of d2l-bert's edition
    that ran with them (see `place`), which the summary does not count.
    """
    path: str
    format: str
    label: str
    cells: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    names_0_17: list = field(default_factory=list)
    place: object = None  # `place.Place` or None
    taken: list = field(default_factory=list)

    @property
    def summary(self):
        cells = self.cells
        return dict(
            cells=len(cells),
            ran=sum(c.status == 'ran' for c in cells),
            documented=sum(c.documented is not None for c in cells),
            compared=sum(c.match in ('match', 'mismatch') for c in cells),
            matched=sum(c.match == 'match' for c in cells),
            mismatched=sum(c.match == 'mismatch' for c in cells),
            shown=sum(c.match == 'shown' for c in cells),
            not_produced=sum(c.match == 'not produced' for c in cells),
            failed=sum(c.status != 'ran' for c in cells),
            taken=len(self.taken),
            taken_failed=sum(c.status != 'ran' for c in self.taken))

    @property
    def ok(self):
        return all(c.ok for c in self.cells) and \
            all(c.status == 'ran' for c in self.taken)

    def summary_line(self):
        """``12 cells, 12 ran, 5 outputs documented: 5 compared, 0 shown``.

        Compared outputs matched unless a MISMATCH count follows them;
        shown ones (trained numbers, throughput) are only printed beside
        ours; an output is not produced when its cell failed.
        """
        s = self.summary
        compared = f"{s['compared']} compared"
        if s['mismatched']:
            compared += f" ({s['mismatched']} MISMATCH)"
        line = (f"{s['cells']} cells, {s['ran']} ran, {s['documented']} "
                f"outputs documented: {compared}, {s['shown']} shown")
        if s['not_produced']:
            line += f", {s['not_produced']} not produced"
        return line

    def as_dict(self):
        place = None
        if self.place is not None:
            place = dict(label=self.place.label, found=self.place.found,
                         size=self.place.size,
                         positions=self.place.positions,
                         taken=[p for p, _ in self.place.taken],
                         lines=self.place.lines())
        return dict(path=self.path, format=self.format, label=self.label,
                    cells=[vars(c) for c in self.cells], notes=self.notes,
                    names_0_17=self.names_0_17, summary=self.summary,
                    ok=self.ok, place=place,
                    taken=[vars(c) for c in self.taken])


def check_edition(edition, runner, progress=None, edition_outputs=True,
                  place=None):
    """Run an edition's MXNet cells in order and compare their outputs.

    Parameters
    ----------
    edition : Edition
        The parsed file.
    runner : runner.Runner or child.ChildRunner
        Fresh runner: the cells share its namespace.
    progress : callable, optional
        Called with each `CellReport` as soon as it is made (those of the
        cells taken from d2l-bert's edition too, marked ``taken``).
    edition_outputs : bool
        Compare with the outputs the edition carries (else only with the
        book's table, `book_outputs.DOCUMENTED`).
    place : place.Place, optional
        Where the file's cells sit in their section (`place.locate`): the
        cells of d2l-bert's edition it leaves out run first, and outputs
        are looked up under its label.

    Returns
    -------
    EditionReport
    """
    label = edition.label
    if place is not None and place.label:
        label = place.label
    report = EditionReport(edition.path, edition.format, label,
                           notes=list(edition.notes), place=place)
    cells = edition.mxnet_cells()
    steps = (place.plan(cells) if place is not None else
             (('file', n, c) for n, c in enumerate(cells, 1)))
    seen_0_17 = []
    for kind, number, cell in steps:
        cr = CellReport(label, number, cell.line, cell.first_line,
                        'not run', notes=list(cell.notes),
                        source_code=cell.code, taken=kind == 'taken')
        if cell.finding:
            cr.error = cell.finding
        else:
            _run(cr, runner, cell.code)
        if not cr.taken and not cell.finding:
            _document(cr, cell, label, edition_outputs)
            for pattern, old, new in NAMES_0_17:
                if re.search(pattern, cell.code) and old not in seen_0_17:
                    seen_0_17.append(old)
                    report.names_0_17.append(f'{old} (1.0: {new})')
        (report.taken if cr.taken else report.cells).append(cr)
        if progress is not None:
            progress(cr)
    for hook in sorted(runner.hooks.used):
        report.notes.append(hook)
    if runner.hooks.small and any(c.match == 'shown'
                                  for c in report.cells):
        report.notes.append('small sizes: outputs of training are shown, '
                            'not compared')
    return report


def _run(cr, runner, code):
    """Run one cell and put what it gave in its report `cr`."""
    result = runner.run(code)
    cr.status, cr.output = result.status, result.output
    cr.error, cr.seconds = result.error, result.seconds
    cr.notes.extend(result.notes)
    if result.figures:
        cr.notes.append(f'{result.figures} figure(s) displayed')
    if result.skipped_lines:
        cr.notes.append('not run: ' + '; '.join(result.skipped_lines))


def _document(cr, cell, label, edition_outputs=True):
    entry = book_outputs.documented(label, cell.code)
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
        cr.match = 'not produced'
