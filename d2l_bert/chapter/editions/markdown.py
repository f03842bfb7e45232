"""Read the book's markdown source (English or a translation) as an edition.

Code cells are fences marked ``{.python .input}``.  A first line
``#@tab mxnet`` (``pytorch``, ``tensorflow``, ``jax``, ``paddle``, a
comma-separated list of them, or ``all``) says which frameworks the cell
belongs to.  Untagged cells belong to the edition's default framework:
MXNet in 0.17-era editions (where MXNet was the first tab and was never
tagged), PyTorch in 1.0-era editions (the first tab since 1.0, which
tag every MXNet cell ``#@tab mxnet``).  Text inside HTML comments
(translations keep the English original there) is not read, so a fence
inside a comment is not a cell.  ``{.json .output}`` fences, as older
sources saved them, are the outputs of the cell before.
"""
import json
import re

from .cells import FRAMEWORKS, _LABEL_MD, Cell, Edition, _section_label

_FENCE = re.compile(r'^( {0,3})(`{3,}|~{3,})\s*(.*?)\s*$')
_TAB = re.compile(r'^\s*#\s*@tab\b(.*)$')


def parse_markdown(text, path='<markdown>', default_tab=None):
    """Read a markdown source edition (see the module's docstring)."""
    edition = Edition(path, 'markdown')
    labels, comment_labels = [], []
    in_comment = False
    fence = None  # (char, length, kind, start line, info, lines)
    for number, line in enumerate(text.split('\n'), 1):
        if fence is not None:
            fence = _fence_line(edition, fence, line, number)
            continue
        if in_comment:
            end = line.find('-->')
            comment_labels += _LABEL_MD.findall(line if end < 0
                                                else line[:end])
            if end < 0:
                continue
            in_comment = False
            line = line[end + 3:]
        line, in_comment, hidden = _strip_comments(line)
        comment_labels += _LABEL_MD.findall(hidden)
        labels += _LABEL_MD.findall(line)
        m = _FENCE.match(line)
        if m and not in_comment:
            fence = _opened_fence(m, number)
    if fence is not None:
        if fence[2] == 'input':
            _close_fence(edition, fence, f'fence opened at line {fence[3]} '
                         'is never closed')
        else:
            edition.notes.append(f'a fence opened at line {fence[3]} is '
                                 'never closed')
    edition.label = _section_label(labels or comment_labels)
    _assign_tabs(edition, default_tab)
    for cell in edition.cells:
        cell.label = edition.label
    return edition


def _opened_fence(m, number):
    """The fence that `m`, a match of `_FENCE` on line `number`, opens."""
    info = m.group(3)
    kind = ('input' if '.input' in info else
            'output' if '.output' in info else 'other')
    return (m.group(2)[0], len(m.group(2)), kind, number, info, [])


def _fence_line(edition, fence, line, number):
    """Read line `number` inside `fence`; return the fence still open
    after it (None once it closed)."""
    m = _FENCE.match(line)
    if m and m.group(2)[0] == fence[0] and \
            len(m.group(2)) >= fence[1] and not m.group(3):
        _close_fence(edition, fence)
        return None
    if m and fence[2] == 'input' and '.input' in m.group(3):
        _close_fence(edition, fence,
                     f'fence opened at line {fence[3]} is not closed '
                     f'before the next cell (line {number})')
        return (m.group(2)[0], len(m.group(2)), 'input', number,
                m.group(3), [])
    fence[5].append(line)
    return fence


def _close_fence(edition, fence, end_finding=None):
    """Add what `fence` held to `edition`: a cell, or the output of the
    cell before."""
    char, length, kind, start, info, body = fence
    code = '\n'.join(body)
    if kind == 'input':
        cell = Cell(code, line=start, finding=end_finding)
        if not re.fullmatch(r'\{[^{}]*\}', info):
            cell.finding = cell.finding or (
                f'malformed fence info {info!r} (expected '
                '{.python .input})')
        edition.cells.append(cell)
    elif kind == 'output' and edition.cells:
        prev = edition.cells[-1]
        prev.output = _json_output(code)


def _strip_comments(line):
    """Remove ``<!-- ... -->`` parts of a line; say if a comment stays open.
    """
    kept, hidden = [], []
    while True:
        start = line.find('<!--')
        if start < 0:
            kept.append(line)
            return ''.join(kept), False, ''.join(hidden)
        kept.append(line[:start])
        end = line.find('-->', start + 4)
        if end < 0:
            hidden.append(line[start + 4:])
            return ''.join(kept), True, ''.join(hidden)
        hidden.append(line[start + 4:end])
        line = line[end + 3:]


def _json_output(code):
    """Text of a ``{.json .output}`` fence (a list of Jupyter outputs)."""
    try:
        outputs = json.loads(code)
    except ValueError:
        return code
    texts = []
    for out in outputs if isinstance(outputs, list) else []:
        if out.get('output_type') == 'stream':
            texts.append(_join(out.get('text', '')))
        elif 'data' in out:
            texts.append(_join(out['data'].get('text/plain', '')))
    return '\n'.join(t.rstrip('\n') for t in texts)


def _join(text):
    """A Jupyter text field, which may be a list of lines, as one string."""
    return ''.join(text) if isinstance(text, list) else str(text)


def read_tab(code):
    """The frameworks a cell's ``#@tab`` line names, if it has one.

    The line is the cell's first that is not blank.  ``#@tab all`` names
    every framework of `FRAMEWORKS`; a list (``#@tab mxnet, pytorch,
    tensorflow``) names each of its frameworks, so the cell belongs to
    each of them, MXNet's run included.

    Returns
    -------
    names : list of str or None
        The names as written (``['mxnet', 'pytorch']``); None without a
        ``#@tab`` line.
    frameworks : tuple of str
        What the cell belongs to; empty when a name is unknown.
    finding : str or None
        Why the line cannot be read (an unknown or missing name).
    """
    first = next((line for line in code.split('\n') if line.strip()), '')
    m = _TAB.match(first)
    if not m:
        return None, (), None
    names = [n for n in re.split(r'[\s,]+', m.group(1).strip().lower())
             if n]
    unknown = [n for n in names if n not in FRAMEWORKS + ('all',)]
    if unknown or not names:
        return names, (), (
            f"unknown tab {', '.join(unknown) or '(empty)'!r} in "
            f"{first.strip()!r} (known: {', '.join(FRAMEWORKS)}, all)")
    return names, FRAMEWORKS if 'all' in names else tuple(names), None


def _assign_tabs(edition, default_tab):
    tagged_mxnet_alone = False
    for cell in edition.cells:
        names, frameworks, finding = read_tab(cell.code)
        if names is None:
            continue
        if finding:
            cell.finding = cell.finding or finding
            cell.frameworks = ()
            continue
        cell.frameworks = frameworks
        if names == ['mxnet']:
            tagged_mxnet_alone = True
        cell.tagged = True
    if default_tab is None:
        default_tab = 'pytorch' if tagged_mxnet_alone else 'mxnet'
        era = ('1.0-era convention: MXNet cells are tagged `#@tab mxnet`'
               if tagged_mxnet_alone else
               '0.17-era convention: no cell is tagged `#@tab mxnet` alone')
        if any(not c.tagged for c in edition.cells):
            edition.notes.append(
                f'untagged cells belong to {default_tab} ({era})')
    for cell in edition.cells:
        if not cell.tagged and not cell.finding:
            cell.frameworks = (default_tab,)
