"""Read the rendered reStructuredText of a section as an edition.

Multi-line rst
    ``.. code:: python`` blocks followed by ``.. parsed-literal::`` outputs;
    the frameworks come from the tab panels of the ``.. raw:: html`` blocks.
One line per block
    A rendering whose line breaks and HTML were lost: a whole section
    stands on a few very long lines.  The tab order is read from the tab
    bar's remains (``mxnetpytorch``), or inferred from the code when an
    excerpt of the page has no tab bar, and applied to each group of code
    blocks; the code's line breaks and indentation are rebuilt by
    `layout.relayout`, or copied from the same cell in a markdown edition
    next to the file (``bert.md`` beside ``bert.rst``) or given with
    ``layout_from`` (see `line_breaks`).
"""
import re
import textwrap

from .cells import FRAMEWORKS, Cell, Edition, _section_label
from .line_breaks import LayoutOracle, rebuild_cell

_DIRECTIVE = re.compile(
    r'\.\. (?P<name>code|code-block|sourcecode|parsed-literal|raw)::'
    r'[ \t]*(?P<arg>[\w+-]*)|\.\. _(?P<label>[\w.:-]+):')
_PANEL = re.compile(r'mdl-tabs__panel[^"]*"\s+id="([a-z]+)-')
_TABBAR = re.compile(r'^(?:(?:' + '|'.join(FRAMEWORKS) + r'))+$')


def parse_rst(text, path='<rst>', layout_from=()):
    """Read a rendered reStructuredText edition, multi-line or one line per
    block (see the module's docstring)."""
    collapsed = bool(re.search(
        r'\.\. code(?:-block)?::[ \t]*[\w+-]+[ \t]+\S', text))
    edition = Edition(path, 'rst (one line per block)' if collapsed
                      else 'rst')
    segments = (_collapsed_segments(text) if collapsed
                else _rst_segments(text))
    labels = [s[1] for s in segments if s[0] == 'label']
    edition.label = _section_label(labels)
    tab_order = _tab_bar_order(segments)
    groups = _cell_groups(segments, edition.label)
    order_note = None
    if collapsed and not tab_order:
        tab_order, order_note = _tab_order_of_groups(groups)
    oracle = LayoutOracle(layout_from) if collapsed else None
    for group in groups:
        _set_frameworks(group, tab_order, collapsed)
        for cell in group:
            if collapsed:
                rebuild_cell(cell, oracle)
            edition.cells.append(cell)
    if collapsed:
        edition.notes.append(
            'one-line rendering: line breaks and indentation of the code '
            'were rebuilt' + (f' (layout from {", ".join(oracle.sources)})'
                              if oracle.sources else ''))
        if order_note:
            edition.notes.append(order_note)
        elif tab_order:
            edition.notes.append(
                f"tab order {', '.join(tab_order)} read from the tab bar")
    return edition


def _tab_bar_order(segments):
    """The frameworks in the order of the page's first tab bar (a line of
    their names, or the links of raw html), or [] without one."""
    for kind, content, _ in segments:
        if kind == 'text' and _TABBAR.match(content.strip()):
            return re.findall('|'.join(FRAMEWORKS), content.strip())
        if kind == 'raw':
            bar = re.findall(r'>(' + '|'.join(FRAMEWORKS) + r')</a>',
                             content)
            if bar:
                return bar
    return []


def _cell_groups(segments, label):
    """The code cells of `segments`, with their outputs and tab panels, in
    groups: the cells between two passages of text (or html dividing tab
    panels) are the same code in several frameworks."""
    groups, group, panel, last = [], [], None, None
    for kind, content, line in segments:
        if kind == 'code':
            if last == 'code' and group:  # tab panels are divided by html
                groups.append(group)
                group = []
            group.append(Cell(content, line=line, label=label))
            group[-1].panel = panel
        elif kind == 'output':
            if group:
                group[-1].output = content
        elif kind == 'raw':
            m = _PANEL.search(content)
            if m:
                panel = m.group(1)
            elif '</div>' in content:
                panel = None
        elif kind == 'text' and content.strip():
            if group:
                groups.append(group)
            group = []
        if kind != 'output':
            last = kind
    if group:
        groups.append(group)
    return groups


def _set_frameworks(group, tab_order, collapsed):
    """Give each cell of `group` its framework: its tab panel's, else its
    place in the tab order where the code agrees, else a guess."""
    positional = (collapsed and len(group) == len(tab_order) and
                  all(c.panel is None for c in group))
    for i, cell in enumerate(group):
        guess = _guess_framework(cell.code)
        if cell.panel in FRAMEWORKS:
            cell.frameworks = (cell.panel,)
        elif positional and guess in ('mxnet', tab_order[i]):
            cell.frameworks = (tab_order[i],)
        else:
            cell.frameworks = (guess,)
            if tab_order:
                cell.notes.append('framework guessed from the code')


def _tab_order_of_groups(groups):
    """The tab order of a one-line rendering without its tab bar (an
    excerpt of a page), and a note that says how it was found.

    The order that the groups of code blocks whose frameworks the code
    tells apart agree on most; when none does, the first frameworks of
    `FRAMEWORKS` (MXNet first, as in the 0.17-era editions).
    """
    sizes = [len(g) for g in groups if len(g) > 1]
    if not sizes:
        return [], None
    told = [tuple(_guess_framework(c.code) for c in g) for g in groups
            if len(g) > 1]
    told = [t for t in told if len(set(t)) == len(t)]
    if told:
        order = max(told, key=told.count)
        return list(order), (f"tab order {', '.join(order)} inferred from "
                             'the code (the file has no tab bar)')
    order = FRAMEWORKS[:max(sizes)]
    return list(order), (f"tab order {', '.join(order)} assumed (the file "
                         'has no tab bar, and its code does not tell)')


def _rst_segments(text):
    """(kind, content, line) of a multi-line rst file."""
    lines = text.split('\n')
    segments, i = [], 0
    while i < len(lines):
        line = lines[i]
        m = _DIRECTIVE.match(line.strip())
        indent = len(line) - len(line.lstrip())
        if not m:
            i += 1
            continue
        if m.group('label'):
            segments.append(('label', m.group('label'), i + 1))
            i += 1
            continue
        start = i + 1
        j = i + 1
        body = []
        while j < len(lines):
            nxt = lines[j]
            if nxt.strip() and len(nxt) - len(nxt.lstrip()) <= indent:
                break
            body.append(nxt)
            j += 1
        body = [b for b in body if not re.match(r'^\s*:\w+:', b)] \
            if m.group('name') == 'parsed-literal' else body
        content = textwrap.dedent('\n'.join(body)).strip('\n')
        kind = {'parsed-literal': 'output', 'raw': 'raw'}.get(
            m.group('name'), 'code')
        if kind == 'code' and m.group('arg') not in ('', 'python',
                                                     'python3', 'ipython'):
            kind = 'other'
        segments.append((kind, content, start))
        # text between this block and the next directive is prose
        k = j
        prose = []
        while k < len(lines) and not _DIRECTIVE.match(lines[k].strip()):
            prose.append(lines[k])
            k += 1
        if any(p.strip() for p in prose):
            segments.append(('text', '\n'.join(prose), j + 1))
        i = k
    return segments


def _collapsed_segments(text):
    """(kind, content, line) of a rendering with one line per block."""
    segments = []
    for number, line in enumerate(text.split('\n'), 1):
        matches = list(_DIRECTIVE.finditer(line))
        if not matches:
            segments.append(('text', line, number))
            continue
        if line[:matches[0].start()].strip():
            segments.append(('text', line[:matches[0].start()], number))
        for k, m in enumerate(matches):
            end = matches[k + 1].start() if k + 1 < len(matches) \
                else len(line)
            content = line[m.end():end].strip()
            if m.group('label'):
                segments.append(('label', m.group('label'), number))
                if content:
                    segments.append(('text', content, number))
                continue
            name = m.group('name')
            if name == 'parsed-literal':
                content = re.sub(r'^(:\w+:\s*\S+\s*)+', '', content)
                segments.append(('output', content, number))
            elif name == 'raw':
                segments.append(('raw', content, number))
            elif m.group('arg') in ('', 'python', 'python3', 'ipython'):
                segments.append(('code', content, number))
    return segments


def _guess_framework(code):
    if re.search(r'\btorch\b', code):
        return 'pytorch'
    if re.search(r'\btensorflow\b|\btf\.', code):
        return 'tensorflow'
    if re.search(r'\bjax\b|\bjnp\.|\bflax\b', code):
        return 'jax'
    if re.search(r'\bpaddle\b', code):
        return 'paddle'
    return 'mxnet'
