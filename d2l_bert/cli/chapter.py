"""`d2l-bert chapter`: run the chapter's cells and compare with the book.

The package's own edition of the chapter is its notebooks, one per
section, named like the book's files (``notebooks/bert.ipynb`` for
:numref:`sec_bert`, then ``bert-dataset.ipynb`` and
``bert-pretraining.ipynb`` and ``natural-language-inference-bert.ipynb``
when present).  Their MXNet cells run in the
book's order, in one namespace per notebook, and each output the book
documents is printed beside the book's: ``ok`` when it is the book's
(shapes), ``shown`` for trained numbers and throughput, whose shapes,
where they print any, are still compared (a ``MISMATCH`` otherwise).

Where the notebooks are found (`notebook_dir`): ``$D2L_BERT_NOTEBOOKS``;
else ``d2l_bert/notebooks/`` inside the installed package (a regular
install copies them there, see setup.py); else ``notebooks/`` of the
repository checkout an editable install points to.
"""
import os
import time

from ..chapter.saved_cells import NOTEBOOKS
from ..presets import NOTEBOOKS_ENV, SMALL_ENV, SNLI_PAIRS_ENV
from ._args import RunError, add_devices, examples, resolve_devices

#: Section label -> notebook file name, in the book's order (the first
#: label of each notebook in `saved_cells.NOTEBOOKS`, the one list of them)
SECTIONS = tuple((labels[0], name)
                 for name, (_, labels) in NOTEBOOKS.items())


def notebook_dir():
    """Return the directory holding the package's notebooks.

    Returns
    -------
    str

    Raises
    ------
    FileNotFoundError
        If no candidate directory holds ``bert.ipynb``; the message lists
        the places looked at.
    """
    import d2l_bert
    package = os.path.dirname(os.path.abspath(d2l_bert.__file__))
    candidates = [os.path.join(package, 'notebooks'),
                  os.path.join(os.path.dirname(package), 'notebooks')]
    if os.environ.get(NOTEBOOKS_ENV):
        candidates.insert(0, os.environ[NOTEBOOKS_ENV])
    for folder in candidates:
        if os.path.isfile(os.path.join(folder, SECTIONS[0][1])):
            return folder
    raise FileNotFoundError(
        f'the notebooks are not installed: no {SECTIONS[0][1]} in '
        + ', '.join(candidates) + f'; set {NOTEBOOKS_ENV} to the '
        "repository's notebooks/ directory")


def add_arguments(parser):
    parser.epilog = examples(
        'd2l-bert chapter                     # every section, on the CPU',
        'd2l-bert chapter --small --section sec_bert-dataset',
        "d2l-bert chapter --full              # the book's fine-tuning run",
        'd2l-bert chapter --devices gpu:0')
    add_devices(parser, 'cpu', one=True)
    scale = parser.add_mutually_exclusive_group()
    scale.add_argument('--small', action='store_true',
                       help='small sizes, for a quicker run: the '
                            "cells' sizes replaced as d2l_bert.presets' "
                            'SMALL_CODE lists (2 pretraining steps of 64, '
                            'one fine-tuning epoch in batches of 32), as '
                            'D2L_BERT_SMALL=1')
    scale.add_argument('--full', action='store_true',
                       help="the fine-tuning section at the book's scale: "
                            'five epochs over all 549,367 SNLI pairs, '
                            'hours on a laptop CPU (default: bert.small '
                            'on the first 1,000 pairs of each split; '
                            'offline, untrained stand-ins of bert.small '
                            'and SNLI)')
    parser.add_argument('--section', action='append', default=None,
                        choices=[label for label, _ in SECTIONS],
                        metavar='LABEL',
                        help='run only this section (repeatable): '
                             + ', '.join(label for label, _ in SECTIONS)
                             + ' (default: every section whose notebook '
                             'is present)')


def main(args):
    [ctx] = resolve_devices(args.devices, one='chapter')
    try:
        folder = notebook_dir()
    except FileNotFoundError as e:
        raise RunError(e) from None
    from ..chapter.notebooks import small_sizes
    # read when run: a test asks for fewer pairs
    from ..presets import CHAPTER_SNLI_PAIRS

    print(args.threads)
    # the notebooks read them
    asked = {SMALL_ENV: '1' if args.small else None,
             SNLI_PAIRS_ENV: 'all' if args.full else str(CHAPTER_SNLI_PAIRS)}
    saved = {name: os.environ.get(name) for name in asked}
    os.environ.update({k: v for k, v in asked.items() if v is not None})
    try:
        return _run(folder, ctx, small_sizes(), args.section)
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _run(folder, ctx, small, sections=None):
    from ..chapter import editions
    from ..chapter.data_hooks import DataHooks
    from ..chapter.runner import Runner

    start = time.perf_counter()
    reports = []
    for label, name in SECTIONS:
        if sections and label not in sections:
            continue
        path = os.path.join(folder, name)
        if not os.path.isfile(path):
            continue
        edition = editions.read_edition(path)
        edition.label = label
        for cell in edition.cells:
            cell.label = label
        print(f'{label} ({name}{", small sizes" if small else ""})')
        # at small sizes the runner replaces the cells' sizes
        # (`presets.SMALL_CODE`) and caps train_bert's steps
        runner = Runner(ctx, DataHooks(small=small))
        report = editions.check_edition(edition, runner, _print_line,
                                        edition_outputs=False)
        reports.append(report)
    return _summary(reports, time.perf_counter() - start)


def _print_line(cr):
    if cr.status != 'ran':
        print(f'  cell {cr.number:>2}  {_short(_describe(cr), 32):32}  '
              f'ERROR {cr.error}')
        return
    if cr.documented is None:
        return
    verdict = {'match': 'ok', 'mismatch': 'MISMATCH', 'shown': 'shown'}
    print(f'  cell {cr.number:>2}  {_short(_describe(cr), 32):32}  '
          f'prints {_one_line(cr.output)}  |  book {_one_line(cr.documented)}'
          f'  {verdict[cr.match]}')


def _describe(cr):
    """The cell's final expression, else its first line of code."""
    import ast
    try:
        body = ast.parse(cr.source_code).body
    except (SyntaxError, TypeError):
        body = []
    if body and isinstance(body[-1], ast.Expr):
        return ast.unparse(body[-1].value)
    return cr.first_line


def _short(text, width):
    return text if len(text) <= width else text[:width - 3] + '...'


def _one_line(text, width=72):
    line = ' / '.join(part.strip() for part in text.strip().splitlines())
    return _short(line, width) if line else '(nothing)'


def _summary(reports, seconds):
    cells = [c for r in reports for c in r.cells]
    documented = [c for c in cells if c.documented is not None]
    ok = sum(c.match == 'match' for c in documented)
    shown = sum(c.match == 'shown' for c in documented)
    mismatch = sum(c.match == 'mismatch' and c.status == 'ran'
                   for c in documented)
    errors = sum(c.status != 'ran' for c in cells)
    for report in reports:
        for note in report.notes:
            print(f'note ({report.label}): {note}')
    print(f'chapter: {len(reports)} section(s), {len(cells)} cells, '
          f'{errors} error(s); {len(documented)} documented outputs: '
          f'{ok} ok, {mismatch} MISMATCH, {shown} shown ({seconds:.1f} s)')
    return 1 if mismatch or errors else 0
