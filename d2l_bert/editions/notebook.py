"""Read a Jupyter notebook (this package's notebooks) as an edition.

Every code cell of a ``.ipynb`` file is an MXNet cell; what it prints and
the plain text of its results are the output it documents.
"""
import json
import os

from .cells import (_LABEL_MD, Cell, Edition, EditionError, _join,
                    _section_label)


def parse_notebook(text, path='<notebook>'):
    """Read a ``.ipynb`` edition: every code cell is an MXNet cell."""
    edition = Edition(path, 'notebook')
    try:
        nb = json.loads(text)
        cells = nb['cells']
    except (ValueError, KeyError, TypeError) as e:
        raise EditionError(f'{path} is not a notebook: {e}') from e
    labels = []
    meta = nb.get('metadata', {}).get('d2l_bert', {})
    for index, raw in enumerate(cells, 1):
        source = _join(raw.get('source', ''))
        if raw.get('cell_type') == 'markdown':
            labels += _LABEL_MD.findall(source)
        if raw.get('cell_type') != 'code':
            continue
        cell = Cell(source, ('mxnet',), line=index)
        if raw.get('outputs'):
            cell.output = _notebook_output(raw['outputs'])
        edition.cells.append(cell)
    stem = os.path.splitext(os.path.basename(path))[0]
    edition.label = (meta.get('label') or _section_label(labels)
                     or f'sec_{stem}')
    for cell in edition.cells:
        cell.label = edition.label
    return edition


def _notebook_output(outputs):
    texts = []
    for out in outputs:
        if out.get('output_type') == 'stream' and \
                out.get('name') == 'stdout':
            texts.append(_join(out.get('text', '')))
        elif out.get('output_type') in ('execute_result', 'display_data'):
            plain = out.get('data', {}).get('text/plain')
            if plain and not _join(plain).startswith('<Figure'):
                texts.append(_join(plain) + '\n')
    return ''.join(texts)
