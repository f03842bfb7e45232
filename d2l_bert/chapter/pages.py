"""The chapter as pages of the docs: each section as its notebook ran.

`write_pages` turns each executed notebook (`execute.execute_cached`)
into a MyST Markdown page of the docs: the notebook's text, its code,
everything the code printed and drew (figures inline, as SVG), and
under each cell whose output the book documents, the book's value
beside ours and the verdict ``d2l-bert chapter`` prints (``ok``,
``shown``, ``MISMATCH``; `book_outputs`).  The page starts with the
notebook's title, its row of badges (open it in Colab, Kaggle, Studio
Lab or Binder) and a line counting the verdicts.
"""
import base64
import html
import os
import re

from . import book_outputs
from .execute import execute_cached, outputs_text

#: What each verdict of `book_outputs.compare` is called on the page,
#: and the CSS class of its box
VERDICTS = {'match': 'ok', 'shown': 'shown', 'mismatch': 'MISMATCH',
            'not produced': 'not produced'}

#: Characters of one output shown on a page; the rest is said to be cut
MAX_OUTPUT_CHARS = 20_000

_HEADING = re.compile(r'^# (.+)$', re.MULTILINE)


def write_pages(out_dir, notebooks, cache_dir, progress=print):
    """Execute (or read from the cache) each notebook and write its page.

    Parameters
    ----------
    out_dir : str
        Where the pages go, ``NAME.md`` for ``NAME.ipynb``; made if
        missing.  Pages of notebooks not in `notebooks` are removed.
    notebooks : list of str
        The notebooks' paths, in the chapter's order.
    cache_dir : str
        The cache of executed notebooks (`execute.execute_cached`).
    progress : callable
        Called with a line for each notebook and cell executed.

    Returns
    -------
    list of str
        Problems to report: errors in cells and mismatches with the
        book, one line each, naming the notebook and the cell.
    """
    os.makedirs(out_dir, exist_ok=True)
    problems, names = [], []
    for path in notebooks:
        nb = execute_cached(path, cache_dir, progress)
        name = os.path.basename(path)[:-len('.ipynb')]
        text, found = notebook_page(nb, os.path.basename(path))
        problems += found
        _write_if_changed(os.path.join(out_dir, f'{name}.md'), text)
        names.append(name)
    for entry in os.listdir(out_dir):
        if entry.endswith('.md') and entry[:-3] not in names + ['index']:
            os.remove(os.path.join(out_dir, entry))
    return problems


def notebook_page(nb, name):
    """The MyST Markdown page of the executed notebook `nb`.

    Returns
    -------
    text : str
    problems : list of str
        A line for each cell that failed or whose output is not the
        book's.
    """
    label = section_label(nb, name)
    cells, problems, counts = [], [], {}
    for number, cell in enumerate(nb.cells, 1):
        if cell.cell_type == 'markdown':
            cells.append(cell.source)
            continue
        if cell.cell_type != 'code':
            continue
        cells.append(_code(cell))
        entry = book_outputs.documented(label, cell.source) if label \
            else None
        verdict = _verdict(entry, cell)
        if verdict is not None:
            counts[verdict] = counts.get(verdict, 0) + 1
            cells.append(_verdict_box(entry, verdict))
        problems += _problems(name, number, cell, verdict)
    return _assemble(cells, counts, nb, name), problems


def _assemble(cells, counts, nb, name):
    """The page: the title first, then the badges and the verdicts'
    count, then the cells in order."""
    title = next((i for i, text in enumerate(cells)
                  if _HEADING.match(text)), None)
    if title is not None:
        cells.insert(0, cells.pop(title))
    seconds = nb.metadata.get('d2l_bert', {}).get('seconds')
    ran = f' in {seconds:.0f} s' if seconds else ''
    summary = ', '.join(f'{counts.get(v, 0)} {VERDICTS[v]}'
                        for v in ('match', 'shown', 'mismatch'))
    cells.insert(2 if title is not None else 0, (
        f'<p class="book-summary">This page is <code>{name}</code> as it '
        f'ran for these docs, from its first cell{ran}, at the sizes it '
        f'opens with and offline (the stand-ins say where they stand in). '
        f'Outputs the book documents: {summary}.</p>'))
    return '\n\n'.join(text.strip('\n') for text in cells) + '\n'


def _verdict(entry, cell):
    """`book_outputs.compare`'s verdict on `cell`, or None if the book
    documents no output of it."""
    if entry is None:
        return None
    if any(out.get('output_type') == 'error' for out in cell.outputs):
        return 'not produced'
    return book_outputs.compare(entry.prints, outputs_text(cell),
                                entry.mode)


def _problems(name, number, cell, verdict):
    lines = [f'{name}, cell {number}: {out["ename"]}: {out["evalue"]}'
             for out in cell.outputs if out.get('output_type') == 'error']
    if verdict == 'mismatch':
        lines.append(f'{name}, cell {number}: MISMATCH with the book '
                     f'({outputs_text(cell).strip()!r:.120})')
    return lines


def _code(cell):
    """A code cell: its source, then each of its outputs."""
    parts = [f'```python\n{cell.source}\n```']
    for out in cell.outputs:
        parts.append(_output(out))
    return '\n\n'.join(p for p in parts if p)


def _pre(text, kind):
    """Text in a box: a <pre> block, which Markdown leaves whole up to
    its closing tag, blank lines included."""
    if len(text) > MAX_OUTPUT_CHARS:
        cut = len(text) - MAX_OUTPUT_CHARS
        text = (text[:MAX_OUTPUT_CHARS]
                + f'\n[... {cut:,} more characters cut on this page]')
    return (f'<pre class="cell-output {kind}">'
            f'{html.escape(text.rstrip())}</pre>')


def _image(mime, data):
    """A figure as an image of one line (a data URI), which no blank
    line of its own can break and no id of another figure clashes
    with."""
    if mime == 'image/svg+xml':
        data = base64.b64encode(data.encode('utf-8')).decode('ascii')
    else:
        data = data.replace('\n', '')
    return (f'<p class="cell-output figure"><img alt="figure" '
            f'src="data:{mime};base64,{data}"></p>')


def _output(out):
    """One output as HTML: text in a box, a figure inline."""
    kind = out.get('output_type')
    if kind == 'stream':
        return _pre(out.get('text', ''), out.get('name', 'stdout'))
    if kind == 'error':
        return _pre(f'{out["ename"]}: {out["evalue"]}', 'error')
    data = out.get('data', {})
    for mime in ('image/svg+xml', 'image/png'):
        if mime in data:
            return _image(mime, data[mime])
    if 'text/plain' in data:
        return _pre(data['text/plain'], 'result')
    return ''


def _verdict_box(entry, verdict):
    """The book's value, and the verdict, under a documented cell."""
    # One line of HTML: a blank line would end the Markdown's HTML block
    book = html.escape(entry.prints.strip()).replace('\n', '&#10;')
    why = (f'<span class="book-why">{html.escape(entry.why)}</span>'
           if entry.why and verdict == 'shown' else '')
    return (f'<div class="book-check {VERDICTS[verdict].replace(" ", "-")}'
            f'"><span class="book-verdict">{VERDICTS[verdict]}</span> '
            f'<span class="book-said">the book ({entry.label}, cell '
            f'{entry.cell}) prints</span><pre>{book}</pre>{why}</div>')


def _write_if_changed(path, text):
    """Write `path` unless it holds `text` already (Sphinx then keeps
    the page it built)."""
    if os.path.isfile(path):
        with open(path, encoding='utf-8') as f:
            if f.read() == text:
                return
    with open(path, 'w', encoding='utf-8') as f:
        f.write(text)


def section_label(nb, name):
    """The book's label of the section the notebook `nb`, named `name`,
    follows: its metadata's, else `saved_cells.NOTEBOOKS`'s first."""
    from .saved_cells import NOTEBOOKS
    label = nb.metadata.get('d2l_bert', {}).get('label')
    return label or NOTEBOOKS.get(name, (None, (None,)))[1][0]


def chapter_notebooks(folder=None):
    """The chapter's notebooks in the book's order (`saved_cells`'s
    list), then those beyond the book, the ones present in `folder`
    (default: the checkout's ``notebooks/``)."""
    from .saved_cells import BEYOND_BOOK, NOTEBOOK_DIR, NOTEBOOKS
    folder = folder or NOTEBOOK_DIR
    return [os.path.join(folder, name)
            for name in tuple(NOTEBOOKS) + BEYOND_BOOK
            if os.path.isfile(os.path.join(folder, name))]
