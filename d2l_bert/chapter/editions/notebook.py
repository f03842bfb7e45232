"""Read a Jupyter notebook (this package's notebooks) as an edition.

Every code cell of a ``.ipynb`` file is an MXNet cell, except the hosted
set-up cell (`hosted.is_setup_cell`), which installs and is no part of
the section, and a cell whose ``#@tab`` line (a notebook made from the
book's sources) names other frameworks only (`markdown.read_tab`: a
cell of ``#@tab mxnet, pytorch`` or ``#@tab all`` is MXNet's too); what a cell prints and the plain text of its results are
the output it documents.  The file is read by `nbformat`, so a notebook
of any version is read as version 4; a file that is not a valid notebook
is an `EditionError` that names the file and says what is wrong.
"""
import os
import textwrap
import warnings

from ..hosted import is_setup_cell
from .cells import _LABEL_MD, Cell, Edition, EditionError, _section_label
from .markdown import read_tab


def parse_notebook(text, path='<notebook>'):
    """Read a ``.ipynb`` edition: every code cell is an MXNet cell."""
    edition = Edition(path, 'notebook')
    nb = _read_notebook(text, path)
    labels = []
    meta = nb.metadata.get('d2l_bert', {})
    for index, raw in enumerate(nb.cells, 1):
        if raw.cell_type == 'markdown':
            labels += _LABEL_MD.findall(raw.source)
        if raw.cell_type != 'code' or is_setup_cell(raw.source):
            continue
        cell = Cell(raw.source, ('mxnet',), line=index)
        names, frameworks, finding = read_tab(raw.source)
        if names is not None:  # a notebook of the book's sources
            cell.frameworks, cell.finding = frameworks, finding
            cell.tagged = True
        if raw.outputs:
            cell.output = _notebook_output(raw.outputs)
        edition.cells.append(cell)
    stem = os.path.splitext(os.path.basename(path))[0]
    edition.label = (meta.get('label') or _section_label(labels)
                     or f'sec_{stem}')
    for cell in edition.cells:
        cell.label = edition.label
    return edition


def _read_notebook(text, path):
    """The notebook `text` holds, as version 4 and valid against its
    schema; an `EditionError` naming `path` if it is not one."""
    # imported here: it takes a second, which editions in other formats
    # need not wait for
    import nbformat
    from nbformat.warnings import MissingIDFieldWarning

    invalid = {}
    try:
        with warnings.catch_warnings():
            # cells need no ids to be read (nbformat adds them)
            warnings.simplefilter('ignore', MissingIDFieldWarning)
            nb = nbformat.reads(text, as_version=4,
                                capture_validation_error=invalid)
    except (ValueError, KeyError, TypeError, AttributeError,
            nbformat.ValidationError) as e:
        raise EditionError(f'{path} is not a notebook: {_why(e)}') from e
    if 'ValidationError' in invalid:
        error = invalid['ValidationError']
        where = '/'.join(str(p) for p in error.absolute_path)
        raise EditionError(f'{path} is not a valid notebook: {_why(error)}'
                           + (f' (at {where})' if where else ''))
    return nb


def _why(error):
    """What `error` says is wrong, on one short line (the JSON error
    itself when the text is not JSON)."""
    cause = error.__cause__ or error
    lines = str(cause).strip().splitlines() or [type(cause).__name__]
    return textwrap.shorten(lines[0], 120, placeholder=' ...')


def _notebook_output(outputs):
    """What a code cell's outputs show: its stdout and the plain text of
    its results, figures left out."""
    texts = []
    for out in outputs:
        if out.output_type == 'stream' and out.name == 'stdout':
            texts.append(out.text)
        elif out.output_type in ('execute_result', 'display_data'):
            plain = out.data.get('text/plain')
            if plain and not plain.startswith('<Figure'):
                texts.append(plain + '\n')
    return ''.join(texts)
