"""`d2l-bert check-text FILE...`: run an edition of a section and check it.

For translators and maintainers: give the section's markdown source, its
rendered reStructuredText or a notebook, in any language, whole or an
excerpt.  The MXNet cells run in order in one namespace, with `d2l`
resolving to this package first and to d2l 1.0.3 for everything else, and
each output is compared with the one the edition documents (or, when it
carries none, with what the book prints).  An excerpt is placed in its
section by matching its cells against d2l-bert's own edition (the
notebooks), whose cells it leaves out run first (`editions.place`).  The
cells run in a child process in a new temporary directory, each within
`--timeout` seconds (`editions.child`).  See docs/check-text.md.
"""
import argparse
import json
import os
import sys

from ..processes import DEFAULT_PROCESSES, default_memory
from ..runs.memory import size_text
from ._args import (UsageError, add_devices, check_devices, examples,
                    existing_file, memory_size, process_count, seconds)

#: Lines of an output shown in the report before it is cut
MAX_LINES = 8

#: What `--help` says of the code the command runs
WARNING = (
    'check-text runs the code of the files it is given, with your rights: '
    'a cell can read, change or delete any file you can.  The cells run in '
    'a child process whose working directory is a new temporary directory, '
    'removed afterwards, so that a cell that writes files, changes '
    "directory or calls sys.exit() leaves your directory and the checker "
    'as they were; that is no sandbox.  Check a file you do not trust '
    "(someone else's pull request) in a container, or in CI.")


#: The suffixes of the editions check-text reads (``.rst.txt`` is
#: Sphinx's copy of a page's source)
SUFFIXES = ('.md', '.rst', '.rst.txt', '.ipynb')


def edition_file(text):
    """``FILE``: an existing regular file with a suffix of `SUFFIXES`,
    of at most `editions.cells.MAX_EDITION_BYTES`."""
    existing_file(text)
    if not text.lower().endswith(SUFFIXES):
        suffix = os.path.splitext(text)[1] or 'no suffix'
        raise argparse.ArgumentTypeError(
            f'{text!r} has {suffix}: check-text reads .md, .rst (or '
            "Sphinx's .rst.txt) and .ipynb editions; rename the file to "
            'say which it is')
    return layout_file(text)


def layout_file(text):
    """``--layout-from MD``: an existing regular file, of at most
    `editions.cells.MAX_EDITION_BYTES`."""
    from ..chapter.editions.cells import file_problem
    existing_file(text)
    problem = file_problem(text, repr(text))
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return text


def add_arguments(parser):
    parser.epilog = examples(
        'd2l-bert check-text bert.md          # a section, in any language',
        'd2l-bert check-text --json excerpt.md bert-dataset.ipynb',
        note=WARNING)
    parser.add_argument('files', nargs='+', metavar='FILE',
                        type=edition_file,
                        help='edition files, whole sections or excerpts: '
                             '.md, .rst or .ipynb')
    parser.add_argument('--json', action='store_true',
                        help='print one JSON document (for scripts)')
    add_devices(parser, 'cpu', one=True)
    parser.add_argument('--book-sizes', action='store_true',
                        help="train for the book's step counts (slow on a "
                             'CPU); by default every train_bert(...) call is '
                             'capped to a few steps and its numbers shown')
    parser.add_argument('--timeout', type=seconds, default=None,
                        metavar='SECONDS',
                        help='stop a cell that runs longer and report it as '
                             'failed; the rest of the file still runs; 0: '
                             'no limit (default: 600; no limit with '
                             '--book-sizes)')
    parser.add_argument('--memory', type=memory_size, default=None,
                        metavar='SIZE',
                        help="memory the cells' processes may use together, "
                             'such as 4G or 1500M; a cell that needs more '
                             'fails, and the next runs in a new process '
                             "(default: half of this machine's, "
                             f'{size_text(default_memory())})')
    parser.add_argument('--processes', type=process_count,
                        default=DEFAULT_PROCESSES, metavar='N',
                        help="processes and threads the cells' processes "
                             'may run at once; a cell that starts more '
                             'fails likewise')
    parser.add_argument('--layout-from', action='append', default=[],
                        metavar='MD', type=layout_file,
                        help='markdown edition whose cells give the line '
                             'breaks of a one-line rendering (repeatable)')
    parser.add_argument('--default-tab', default=None,
                        choices=('mxnet', 'pytorch', 'tensorflow', 'jax',
                                 'paddle'),
                        help='framework of untagged markdown cells '
                             '(default: inferred from the edition)')


def main(args):
    check_devices(args.devices, one='check-text')
    from ..chapter.editions.child import DEFAULT_TIMEOUT

    timeout = args.timeout
    if timeout is None:
        timeout = 0 if args.book_sizes else DEFAULT_TIMEOUT
    sections, missing = package_sections()
    reports, status = [], 0
    for path in args.files:
        try:
            report = _check_file(path, args, sections, timeout)
        except UsageError as e:
            print(f'd2l-bert check-text: error: {e}', file=sys.stderr)
            status = 2
            continue
        if missing:
            report.notes.append(missing)
        reports.append(report)
        if not args.json:
            _print_footer(report)
        if not report.ok:
            status = max(status, 1)
    if args.json:
        json.dump([r.as_dict() for r in reports], sys.stdout, indent=1)
        print()
    return status


def _check_file(path, args, sections, timeout):
    """Read, place and run the edition `path`; return its report.

    Raises
    ------
    UsageError
        The file cannot be read as an edition, or is none of the BERT
        chapter's sections.
    """
    from ..chapter import editions
    from ..chapter.editions.child import ChildRunner
    from ..chapter.notebooks import calls_settings
    from ..runs import interrupts
    try:
        edition = editions.read_edition(path, args.layout_from,
                                        args.default_tab)
    except editions.EditionError as e:
        raise UsageError(e) from None
    place = editions.locate(edition, sections) if sections else None
    _check_section(path, edition, place, sections)
    label = place.label if place is not None and place.label else \
        edition.label
    if not args.json:
        print(f'== {path} ({edition.format}, section '
              f'{label or "without a label"})')
        for line in place.lines() if place is not None else ():
            print(line)
    progress = None if args.json else _print_cell
    # the settings cells of d2l-bert's notebooks read the environment:
    # the child gives them the pretrained model of the book's cells
    notebooks = place is not None and any(
        calls_settings(cell.code) for _, cell in place.taken)
    # SIGTERM and SIGHUP end the cells' processes, as Ctrl-C does
    with interrupts.ended_as_ctrl_c(), \
            ChildRunner(args.devices, small=not args.book_sizes,
                        timeout=timeout, notebooks=notebooks,
                        memory=args.memory,
                        processes=args.processes) as runner:
        return editions.check_edition(edition, runner, progress,
                                      place=place)


def _check_section(path, edition, place, sections):
    """Raise `UsageError` when `edition` has nothing to check: no MXNet
    cell, or cells of no section of the BERT chapter."""
    from ..chapter import book_outputs
    if not edition.mxnet_cells():
        raise UsageError(
            f'{path}: no MXNet code cell, nothing to check: give an '
            'edition of a section of the BERT chapter ('
            + ', '.join(book_outputs.labels()) + ')')
    known = set(sections) | set(book_outputs.labels())
    if place is not None and not place.found and \
            edition.label not in known:
        raise UsageError(
            f'{path}: not a section of the BERT chapter: {place.reason}; '
            f'closest section: {place.closest}')


def package_sections():
    """Read d2l-bert's edition of each section: its notebooks.

    Returns
    -------
    sections : dict of str to Edition
        By section label, in the book's order; empty if the notebooks are
        not installed.
    missing : str or None
        Why `sections` is empty, as a note for the report.
    """
    from ..chapter import editions
    from .chapter import SECTIONS, notebook_dir
    try:
        folder = notebook_dir()
    except FileNotFoundError as e:
        return {}, f"an excerpt's place in its section is not looked for: {e}"
    sections = {}
    for label, name in SECTIONS:
        path = os.path.join(folder, name)
        if os.path.isfile(path):
            sections[label] = editions.read_edition(path)
    return sections, None


def _print_cell(cr):
    if cr.taken:
        if cr.status != 'ran':  # the place line says which cells ran
            print(f"{cr.label} cell {cr.number} of d2l-bert's edition "
                  f'(line {cr.line}): {cr.first_line}')
            print(f'    FAILED: {cr.error}')
        return
    print(f'{cr.label or "-"} cell {cr.number} (line {cr.line}): '
          f'{cr.first_line}')
    if cr.status == 'ran':
        print('    ran')
    elif cr.status == 'failed':
        print(f'    FAILED: {cr.error}')
    else:
        print(f'    NOT RUN: {cr.error}')
    if cr.output.strip():
        _print_block('output:    ', cr.output)
    if cr.documented is not None:
        source = ('from the edition' if cr.source == 'edition'
                  else "from the book's table")
        _print_block('documented:', cr.documented)
        verdict = {'match': 'match', 'mismatch': 'MISMATCH',
                   'shown': 'shown, not compared',
                   'not produced': 'not produced: the cell failed'}[cr.match]
        print(f'    {verdict} ({source}, {cr.mode})')
    for note in cr.notes:
        print(f'    note: {note}')
    sys.stdout.flush()   # each cell as it ends, also into a pipe


def _print_block(title, text):
    lines = text.rstrip('\n').splitlines() or ['']
    if len(lines) > MAX_LINES:
        lines = lines[:MAX_LINES] + [f'... ({len(lines) - MAX_LINES} more '
                                     'lines)']
    print(f'    {title} {lines[0]}')
    for line in lines[1:]:
        print(f'    {" " * len(title)} {line}')


def _print_footer(report):
    for note in report.notes:
        print(f'note: {note}')
    if report.names_0_17:
        print('0.17 names met (information): '
              + ', '.join(report.names_0_17))
    print(report.summary_line())
    print()
