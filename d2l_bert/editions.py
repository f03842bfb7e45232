"""Read a chapter edition in any format the book is published in, and check it.

An *edition* is one section of the book in one language and one release:
the book's markdown source (English or a translation), the rendered
reStructuredText, or one of this package's notebooks.  `read_edition`
turns any of them into the same list of code cells, each with the
frameworks it belongs to and the output the edition documents, if any;
`check_edition` runs the MXNet cells in order with `runner.Runner` and
compares each output with the documented one.

Nothing here reads the prose, so an edition in a language never seen before
is read like the English one.  A file that is not well formed never stops
the reading: a fence that is not closed, an unknown ``#@tab`` or a cell
whose line breaks cannot be rebuilt becomes a finding on that cell.

Formats
-------
markdown
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
rst
    ``.. code:: python`` blocks followed by ``.. parsed-literal::`` outputs;
    the frameworks come from the tab panels of the ``.. raw:: html`` blocks.
rst (one line per block)
    A rendering whose line breaks and HTML were lost: a whole section
    stands on a few very long lines.  The tab order is read from the tab
    bar's remains (``mxnetpytorch``) and applied to each group of code
    blocks; the code's line breaks and indentation are rebuilt by
    `relayout`, or copied from the same cell in a markdown edition next to
    the file (``bert.md`` beside ``bert.rst``) or given with
    ``layout_from``.
notebook
    Code cells of a ``.ipynb`` file (this package's notebooks); all MXNet.
"""
import ast
import io
import json
import os
import re
import textwrap
import tokenize
from dataclasses import dataclass, field

from . import book_outputs

FRAMEWORKS = ('mxnet', 'pytorch', 'tensorflow', 'jax', 'paddle')

#: 0.17 names that d2l 1.0 renamed: (pattern, old name, 1.0 name)
NAMES_0_17 = (
    (r'\bd2l\.EncoderBlock\b', 'd2l.EncoderBlock',
     'd2l.TransformerEncoderBlock'),
    (r'\bnum_layers\b', 'num_layers', 'num_blks'),
    (r'\bd2l\.TransformerEncoder\b', 'd2l.TransformerEncoder',
     'd2l.TransformerEncoder (arguments num_blks, ...)'),
)


@dataclass
class Cell:
    """One code cell of an edition.

    Attributes
    ----------
    code : str
        The cell's source (the ``#@tab`` line included).
    frameworks : tuple of str
        Frameworks the cell belongs to (`FRAMEWORKS`), empty if unknown.
    line : int
        Line of the file where the cell starts (1-based).
    label : str or None
        Label of the section the cell belongs to.
    output : str or None
        The output the edition documents for this cell, if it carries one.
    finding : str or None
        Why the cell cannot run as it stands (a broken fence, an unknown
        tab, line breaks that cannot be rebuilt); None if it can.
    notes : list of str
        How the cell was read, when that is worth saying.
    tagged : bool
        Markdown: the cell has a ``#@tab`` line.
    panel : str or None
        rst: the tab panel the cell sits in, if the file says.
    """
    code: str
    frameworks: tuple = ()
    line: int = 0
    label: str = None
    output: str = None
    finding: str = None
    notes: list = field(default_factory=list)
    tagged: bool = False
    panel: str = None

    @property
    def is_mxnet(self):
        return 'mxnet' in self.frameworks

    @property
    def first_line(self):
        """First line of code that is not a comment or a ``#@`` marker."""
        for line in self.code.splitlines():
            if line.strip() and not line.lstrip().startswith('#'):
                return line.strip()
        return self.code.strip().splitlines()[0] if self.code.strip() else ''


@dataclass
class Edition:
    """A section as read from one file: its cells and how it was read."""
    path: str
    format: str
    label: str = None
    cells: list = field(default_factory=list)
    notes: list = field(default_factory=list)

    def mxnet_cells(self):
        """The cells to run or report: MXNet cells and cells with
        findings, in the file's order."""
        return [c for c in self.cells if c.is_mxnet or c.finding]


class EditionError(ValueError):
    """The file cannot be read as an edition at all (not found, binary)."""


def read_edition(path, layout_from=(), default_tab=None):
    """Read an edition file of any supported format.

    Parameters
    ----------
    path : str
        A ``.md``, ``.rst`` or ``.ipynb`` file.
    layout_from : sequence of str, optional
        Markdown editions whose cells give the line breaks of a one-line
        rendering (a ``.md`` of the same name next to `path` is used too).
    default_tab : str, optional
        Framework of untagged markdown cells; by default inferred (see the
        module's docstring).

    Returns
    -------
    Edition

    Raises
    ------
    EditionError
        If the file cannot be read as text.
    """
    if default_tab is not None and default_tab not in FRAMEWORKS:
        raise ValueError(f'default_tab must be one of {FRAMEWORKS}, got '
                         f'{default_tab!r}')
    try:
        with open(path, encoding='utf-8') as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise EditionError(f'cannot read {path}: {e}') from e
    ext = os.path.splitext(path)[1].lower()
    if ext == '.ipynb':
        return parse_notebook(text, path)
    if ext in ('.rst', '.txt') or _looks_like_rst(text):
        oracles = list(layout_from)
        sibling = os.path.splitext(path)[0] + '.md'
        if os.path.exists(sibling) and sibling not in oracles:
            oracles.append(sibling)
        return parse_rst(text, path, oracles)
    return parse_markdown(text, path, default_tab)


def _looks_like_rst(text):
    return bool(re.search(r'^\.\. code(?:-block)?::', text, re.M)) and \
        '```' not in text


# --- markdown ----------------------------------------------------------------

_FENCE = re.compile(r'^( {0,3})(`{3,}|~{3,})\s*(.*?)\s*$')
_LABEL_MD = re.compile(r':label:`([^`]+)`')
_TAB = re.compile(r'^\s*#\s*@tab\b(.*)$')


def parse_markdown(text, path='<markdown>', default_tab=None):
    """Read a markdown source edition (see the module's docstring)."""
    edition = Edition(path, 'markdown')
    labels, comment_labels = [], []
    in_comment = False
    fence = None  # (char, length, kind, start line, info, lines)
    lines = text.split('\n')

    def close(end_finding=None):
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

    for number, line in enumerate(lines, 1):
        if fence is not None:
            m = _FENCE.match(line)
            if m and m.group(2)[0] == fence[0] and \
                    len(m.group(2)) >= fence[1] and not m.group(3):
                close()
                fence = None
                continue
            if m and fence[2] == 'input' and '.input' in m.group(3):
                close(f'fence opened at line {fence[3]} is not closed '
                      f'before the next cell (line {number})')
                fence = (m.group(2)[0], len(m.group(2)), 'input', number,
                         m.group(3), [])
                continue
            fence[5].append(line)
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
            info = m.group(3)
            kind = ('input' if '.input' in info else
                    'output' if '.output' in info else 'other')
            fence = (m.group(2)[0], len(m.group(2)), kind, number, info, [])
    if fence is not None:
        if fence[2] == 'input':
            close(f'fence opened at line {fence[3]} is never closed')
        else:
            edition.notes.append(f'a fence opened at line {fence[3]} is '
                                 'never closed')
    edition.label = _section_label(labels or comment_labels)
    _assign_tabs(edition, default_tab)
    for cell in edition.cells:
        cell.label = edition.label
    return edition


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
    return ''.join(text) if isinstance(text, list) else str(text)


def _section_label(labels):
    for label in labels:
        if label.startswith('sec_'):
            return label
    return labels[0] if labels else None


def _assign_tabs(edition, default_tab):
    tagged_mxnet_alone = False
    for cell in edition.cells:
        first = cell.code.split('\n', 1)[0]
        m = _TAB.match(first)
        if not m:
            continue
        names = [n for n in re.split(r'[\s,]+', m.group(1).strip()) if n]
        unknown = [n for n in names if n not in FRAMEWORKS + ('all',)]
        if unknown or not names:
            cell.finding = cell.finding or (
                f"unknown tab {', '.join(unknown) or '(empty)'!r} in "
                f"{first.strip()!r} (known: {', '.join(FRAMEWORKS)}, all)")
            cell.frameworks = ()
            continue
        cell.frameworks = FRAMEWORKS if 'all' in names else tuple(names)
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


# --- notebooks ---------------------------------------------------------------

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


# --- reStructuredText --------------------------------------------------------

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
    tab_order = []
    for kind, content, _ in segments:
        if kind == 'text' and _TABBAR.match(content.strip()):
            tab_order = re.findall('|'.join(FRAMEWORKS), content.strip())
            break
        if kind == 'raw':
            bar = re.findall(r'>(' + '|'.join(FRAMEWORKS) + r')</a>',
                             content)
            if bar:
                tab_order = bar
                break
    groups, group, panel, last = [], [], None, None
    for kind, content, line in segments:
        if kind == 'code':
            if last == 'code' and group:  # tab panels are divided by html
                groups.append(group)
                group = []
            group.append(Cell(content, line=line, label=edition.label))
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
    oracle = _LayoutOracle(layout_from) if collapsed else None
    for group in groups:
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
            if collapsed:
                _rebuild(cell, oracle)
            edition.cells.append(cell)
    if collapsed:
        edition.notes.append(
            'one-line rendering: line breaks and indentation of the code '
            'were rebuilt' + (f' (layout from {", ".join(oracle.sources)})'
                              if oracle.sources else ''))
        if tab_order:
            edition.notes.append(
                f"tab order {', '.join(tab_order)} read from the tab bar")
    return edition


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


# --- rebuilding the line breaks of one-line code -----------------------------

class LayoutError(ValueError):
    """One-line code whose line breaks cannot be rebuilt."""


_TOKEN = re.compile(r'''
    (?P<ws>\s+)
  | (?P<string>(?:[rRbBuUfF]{0,2})(?:\'\'\'(?:\\.|[^\\])*?\'\'\'
        |"""(?:\\.|[^\\])*?"""|'(?:\\.|[^'\\\n])*'|"(?:\\.|[^"\\\n])*"))
  | (?P<number>0[xXoObB][\da-fA-F_]+|(?:\d[\d_]*\.?[\d_]*|\.\d[\d_]*)
        (?:[eE][+-]?\d+)?[jJ]?)
  | (?P<name>[^\W\d]\w*)
  | (?P<comment>\#)
  | (?P<op>\*\*=|//=|>>=|<<=|\.\.\.|->|:=|==|!=|<=|>=|\*\*|//|<<|>>|\+=
        |-=|\*=|/=|%=|&=|\|=|\^=|@=|[-+*/%@&|^~<>()\[\]{},:.;=])
  | (?P<cont>\\)
''', re.X)

_KEYWORDS = {'False', 'None', 'True', 'and', 'as', 'assert', 'async',
             'await', 'break', 'class', 'continue', 'def', 'del', 'elif',
             'else', 'except', 'finally', 'for', 'from', 'global', 'if',
             'import', 'in', 'is', 'lambda', 'nonlocal', 'not', 'or',
             'pass', 'raise', 'return', 'try', 'while', 'with', 'yield'}
_COMPOUND = {'if', 'elif', 'else', 'for', 'while', 'with', 'def', 'class',
             'try', 'except', 'finally', 'async'}
_STATEMENT = {'return', 'del', 'pass', 'break', 'continue', 'raise',
              'global', 'nonlocal', 'assert', 'def', 'class', 'for',
              'while', 'with', 'try', 'except', 'finally', 'elif', 'async',
              'yield', 'import', 'from', 'await'}
_ATOM_END_KEYWORDS = {'True', 'False', 'None', 'pass', 'break', 'continue'}
_DEAD_END = {'return', 'raise', 'break', 'continue'}


@dataclass
class _Tok:
    kind: str
    text: str
    start: int
    end: int


def _lex(text, pos=0, stop_at_comment=False):
    """Tokens of `text` from `pos`; stop at an error (or a comment)."""
    tokens = []
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            return tokens, pos
        kind = m.lastgroup
        if kind == 'comment' and stop_at_comment:
            return tokens, pos
        if kind not in ('ws', 'cont'):
            tokens.append(_Tok(kind, m.group(), m.start(), m.end()))
        if kind == 'comment':
            end = _comment_end(text, m.start())
            tokens[-1] = _Tok('comment', text[m.start():end].rstrip(),
                              m.start(), end)
            pos = end
            continue
        pos = m.end()
    return tokens, pos


def _atom_end(tok):
    if tok.kind in ('number', 'string'):
        return True
    if tok.kind == 'name':
        return tok.text not in _KEYWORDS or tok.text in _ATOM_END_KEYWORDS
    return tok.text in (')', ']', '}')


def _starts_statement(tokens, i, current):
    """Does ``tokens[i]`` begin a new statement after `current` (depth 0)?
    """
    prev, tok = current[-1], tokens[i]
    if not _atom_end(prev):
        return False
    if tok.kind in ('number', 'string'):
        return True
    if tok.kind == 'op':
        return tok.text == '@' and _decorator_follows(tokens, i)
    if tok.kind != 'name':
        return False
    word = tok.text
    if word not in _KEYWORDS or word in ('True', 'False', 'None'):
        return True
    if word == 'import':
        return current[0].text != 'from' or \
            any(t.text == 'import' for t in current)
    if word == 'from':
        return current[0].text not in ('raise', 'yield')
    if word == 'else':
        return i + 1 < len(tokens) and tokens[i + 1].text == ':'
    if word == 'if':
        depth = 0
        for t in tokens[i + 1:]:
            if t.text in '([{' and t.kind == 'op':
                depth += 1
            elif t.text in ')]}' and t.kind == 'op':
                depth -= 1
            elif depth == 0 and t.text == ':':
                return True
            elif depth == 0 and t.text == 'else':
                return False
        return False
    return word in _STATEMENT or word == 'lambda'


def _decorator_follows(tokens, i):
    j = i + 1
    while j < len(tokens) and (tokens[j].text == '.' or (
            tokens[j].kind == 'name' and tokens[j].text not in _KEYWORDS)):
        j += 1
    if j < len(tokens) and tokens[j].text == '(':
        depth = 0
        while j < len(tokens):
            depth += {'(': 1, ')': -1}.get(tokens[j].text, 0)
            j += 1
            if depth == 0:
                break
    return j < len(tokens) and tokens[j].text in ('def', 'class', '@')


@dataclass
class _Statement:
    tokens: list
    kind: str  # 'simple', 'header', 'decorator' or 'comment'
    complete: bool = True  # False if cut by the end of the lexed tokens

    @property
    def first(self):
        return self.tokens[0].text


def _split(tokens):
    """Group tokens into logical lines."""
    statements, current, depth, lambdas = [], [], 0, 0

    def flush(kind):
        nonlocal current, lambdas
        if current:
            statements.append(_Statement(current, kind))
        current, lambdas = [], 0

    for i, tok in enumerate(tokens):
        if tok.kind == 'comment':
            flush('simple')
            statements.append(_Statement([tok], 'comment'))
            continue
        if current and depth == 0 and _starts_statement(tokens, i, current):
            flush('decorator' if current[0].text == '@' else 'simple')
        if tok.text == ';' and depth == 0:
            flush('simple')
            continue
        current.append(tok)
        if tok.kind == 'op' and tok.text in '([{':
            depth += 1
        elif tok.kind == 'op' and tok.text in ')]}':
            depth = max(0, depth - 1)
        elif depth == 0 and tok.text == 'lambda':
            lambdas += 1
        elif depth == 0 and tok.text == ':':
            if lambdas:
                lambdas -= 1
            elif current[0].text in _COMPOUND:
                flush('header')
    if current:
        flush('decorator' if current[0].text == '@' else 'simple')
        statements[-1].complete = False
    return statements


def _source(text, statement):
    """The statement's text as written, line continuations dropped."""
    parts, prev = [], None
    for tok in statement.tokens:
        if prev is not None:
            gap = text[prev.end:tok.start]
            parts.append(' ' if '\\' in gap else gap)
        parts.append(tok.text)
        prev = tok
    return ''.join(parts)


def _parse_statement(src, statement):
    """ast of one logical line (a header gets a `pass` body)."""
    first = statement.first
    if statement.kind == 'header':
        src = f'{src} pass'
        if first in ('elif', 'else'):
            src = f'if 1: pass\n{src}'
        elif first in ('except', 'finally'):
            src = f'try: pass\n{src}'
    elif statement.kind == 'decorator':
        src = f'{src}\ndef _(): pass'
    tree = ast.parse(src)
    return tree.body[-1]


_STRONG = (ast.Assign, ast.AugAssign, ast.Return, ast.Delete, ast.For,
           ast.While, ast.If, ast.With, ast.Raise, ast.Try, ast.Assert,
           ast.Import, ast.ImportFrom, ast.Global, ast.Nonlocal, ast.Break,
           ast.Continue, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)


def _strong_start(text, pos):
    """Does code plausibly start at `pos` (after a comment's words)?"""
    tokens, stop = _lex(text, pos, stop_at_comment=True)
    if not tokens:
        return False
    statements = _split(tokens)
    first = statements[0]
    last_in_text = len(statements) == 1 and stop >= len(text)
    ended = len(statements) > 1 or stop >= len(text) or text[stop] == '#'
    if not ended:
        return False
    try:
        node = _parse_statement(_source(text, first), first)
    except SyntaxError:
        return False
    if isinstance(node, ast.AnnAssign):
        return node.value is not None
    if isinstance(node, _STRONG):
        return True
    if isinstance(node, ast.Expr):
        if isinstance(node.value, (ast.Call, ast.Yield, ast.Await)):
            return isinstance(node.value, ast.Yield) or \
                _dotted(node.value.func)
        items = (node.value.elts if isinstance(node.value, ast.Tuple)
                 else [node.value])
        return last_in_text and all(
            isinstance(i, (ast.Attribute, ast.Subscript, ast.Call))
            for i in items)
    return False


def _dotted(node):
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name)


def _comment_end(text, start):
    """Where a comment of one-line code ends: before the first word from
    which code plausibly starts, or at the next ``#``."""
    first_word = re.compile(r'#\s*\S*').match(text, start)
    for m in re.finditer(r'\s+(?=\S)', text[first_word.end():]):
        pos = first_word.end() + m.end()
        if text[pos] == '#' or _strong_start(text, pos):
            return pos
    return len(text)


@dataclass
class _Block:
    keyword: str
    level: int
    locals: set  # names whose use keeps a statement in the block
    statements: int = 0
    dead: bool = False
    grows: bool = True  # names first set in the block become local
    chain: set = field(default_factory=set)  # if/elif conditions' names
    earlier: set = field(default_factory=set)  # set in earlier branches
    assigned: set = field(default_factory=set)  # set in this block
    real: int = 0  # statements other than `if ...: continue` guards
    counted: bool = False  # an `if` block counted as real by its parent
    methods: int = 0  # `def`s in a class body
    name: str = None  # a class's name


def _names(node, ctx=None):
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)
            and (ctx is None or isinstance(n.ctx, ctx))}


def relayout(text):
    """Rebuild the line breaks and indentation of code whose blank space
    was collapsed into single spaces.

    Parameters
    ----------
    text : str
        One line of Python, as a rendering that lost its line breaks shows
        it.

    Returns
    -------
    str
        Python source that parses.

    Raises
    ------
    LayoutError
        If no layout found parses.

    Notes
    -----
    Logical lines are split where two atoms meet outside brackets, before
    statement keywords and after a compound statement's colon; a comment
    ends before the first of its words from which code plausibly starts.
    Indentation follows the data: after the first statement of a block, a
    statement stays in an ``if``/``else`` block only if it uses a name of
    the condition or one first set in the block; ``return`` leaves loops
    unless it uses the loop's names; nothing follows ``return``, ``raise``,
    ``break`` or ``continue`` in the same block; ``def`` goes back to the
    class body or the top level.  Where this guesses wrong, give the
    markdown edition of the same section as a layout (see `read_edition`).
    """
    tokens, stop = _lex(text.strip())
    text = text.strip()
    if stop < len(text):
        raise LayoutError(f'cannot read the code at {text[stop:stop + 30]!r}')
    out, stack, assigned = [], [], set()
    pending_decorator = False
    statements = []
    for statement in _split(tokens):
        statements += _resplit(text, statement)
    for statement in statements:
        src = _source(text, statement)
        if statement.kind == 'comment':
            out.append('    ' * len(stack) + src)
            continue
        node = _parse_statement(src, statement)
        first = statement.first
        if pending_decorator:  # the decorated `def` goes with it
            level, chain, earlier = len(stack), set(), set()
        elif first in ('elif', 'else', 'except', 'finally'):
            openers = {'elif': ('if', 'elif'),
                       'else': ('if', 'elif', 'for', 'while', 'try',
                                'except'),
                       'except': ('try', 'except'),
                       'finally': ('try', 'except', 'else')}[first]
            while stack and stack[-1].keyword not in openers:
                stack.pop()
            previous = stack.pop() if stack else _Block('', 0, set())
            chain = previous.chain
            earlier = previous.earlier | previous.assigned
            level = len(stack)
        elif first in ('def', 'class', '@', 'async'):
            # back to the class body, or out of a class the code names
            # (``@d2l.add_to_class(A)`` cannot be inside `A`)
            while stack and stack[-1].statements and (
                    stack[-1].keyword != 'class' or
                    stack[-1].name in _uses(node)):
                stack.pop()
            level, chain, earlier = len(stack), set(), set()
        else:
            while stack and stack[-1].statements and \
                    _leaves(stack[-1], node, first):
                stack.pop()
            level, chain, earlier = len(stack), set(), set()
        out.append('    ' * level + src)
        pending_decorator = statement.kind == 'decorator'
        if pending_decorator:
            continue
        if stack:
            top = stack[-1]
            top.statements += 1
            top.methods += first in ('def', 'async')
            if first in _DEAD_END:
                top.dead = True
            if not (statement.kind == 'header' and first == 'if'):
                top.real += 1
            if top.keyword == 'if' and not top.counted and len(stack) > 1 \
                    and first not in ('break', 'continue'):
                stack[-2].real += 1  # not a guard: counts in its block
                top.counted = True
        stores = _names(node, ast.Store) | _arguments(node)
        if statement.kind == 'header':
            stores = _header_stores(node)
        new = stores - assigned
        for block in stack:
            block.assigned |= stores
            if block.grows:
                block.locals |= new - block.earlier
        assigned |= stores
        if statement.kind == 'header':
            stack.append(_header_block(first, level, node, chain, earlier))
    source = '\n'.join(out) + '\n'
    try:
        ast.parse(source)
    except SyntaxError as e:
        raise LayoutError(f'rebuilt code does not parse: {e.msg} '
                          f'(line {e.lineno})') from None
    return source


def _resplit(text, statement):
    """A logical line that does not parse, split where an atom is followed
    by a bracket (``x = y (a, b) = f()``) into lines that do."""
    try:
        if statement.kind != 'comment':
            _parse_statement(_source(text, statement), statement)
        return [statement]
    except SyntaxError as e:
        error = e
    tokens, depth = statement.tokens, 0
    for k, tok in enumerate(tokens):
        if depth == 0 and k and tok.text in ('(', '[') and \
                _atom_end(tokens[k - 1]):
            left = _Statement(tokens[:k], 'simple')
            right = _Statement(tokens[k:], statement.kind)
            try:
                _parse_statement(_source(text, left), left)
                return [left] + _resplit(text, right)
            except (SyntaxError, LayoutError):
                pass
        if tok.kind == 'op' and tok.text in '([{':
            depth += 1
        elif tok.kind == 'op' and tok.text in ')]}':
            depth -= 1
    raise LayoutError(f'{_source(text, statement)!r} does not parse: '
                      f'{error.msg}')


def _arguments(node):
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        args = node.args
        every = args.posonlyargs + args.args + args.kwonlyargs
        every += [a for a in (args.vararg, args.kwarg) if a]
        return {a.arg for a in every}
    return set()


def _header_stores(node):
    if isinstance(node, (ast.For, ast.AsyncFor)):
        return _names(node.target)
    if isinstance(node, ast.With):
        return set().union(*[_names(i.optional_vars) for i in node.items
                             if i.optional_vars] or [set()])
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return _arguments(node) | {node.name}
    if isinstance(node, ast.ClassDef):
        return {node.name}
    if isinstance(node, ast.Try):
        return {h.name for h in node.handlers if h.name}
    return set()


def _header_locals(node):
    if isinstance(node, (ast.For, ast.AsyncFor)):
        return _names(node.target)
    if isinstance(node, (ast.If, ast.While)):
        return _names(node.test)
    if isinstance(node, ast.Try):  # `else`, `except` and `finally` headers
        return {h.name for h in node.handlers if h.name}
    return _header_stores(node)


def _uses(node):
    """Names `node` uses, leaving out those bound in its comprehensions.
    """
    bound = set()
    for n in ast.walk(node):
        if isinstance(n, ast.comprehension):
            bound |= _names(n.target)
    return _names(node) - bound


def _header_block(first, level, node, chain, earlier):
    """The block a compound statement's header opens."""
    if first in ('if', 'elif'):
        chain = chain | _names(node.test)
    block = _Block(first, level, set(), chain=chain, earlier=earlier)
    if first in ('if', 'elif', 'else'):
        block.locals = set(chain)
    elif first == 'with':
        block.locals, block.grows = _header_stores(node), False
    else:
        block.locals = _header_locals(node)
    block.locals -= {'self'}
    if isinstance(node, ast.ClassDef):
        block.name = node.name
    return block


def _leaves(block, node, first):
    """Does the statement `node` come after `block` rather than in it?"""
    if block.dead:
        return True
    if block.keyword == 'class':
        return block.methods > 0  # statements after methods: class done
    if block.keyword in ('def', 'async'):
        return False
    uses = _uses(node)
    if block.keyword in ('if', 'elif', 'else'):
        if first in ('break', 'continue'):
            return False
        if _names(node, ast.Store) & block.earlier:
            return False  # the other branch sets the same name
        return not (uses & block.locals)
    if first == 'return':
        return not (uses & block.locals)
    if block.keyword == 'with':
        return not (uses & block.locals)
    if isinstance(node, ast.Assign) and block.keyword in ('for', 'while'):
        # a loop that so far only skips (`if ...: continue`) goes on
        return block.real > 0 and not (uses & block.locals)
    return False


def _signature(code_tokens):
    """Token texts with string contents and comments left out."""
    return [('S' if t.kind == 'string' else t.text) for t in code_tokens
            if t.kind != 'comment']


class _LayoutOracle:
    """MXNet cells of markdown editions, looked up by their tokens."""

    def __init__(self, paths):
        self.sources, self.cells = [], {}
        for path in paths:
            try:
                with open(path, encoding='utf-8') as f:
                    edition = parse_markdown(f.read(), path)
            except (OSError, UnicodeDecodeError):
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
        tokens, stop = _lex(text)
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


def _rebuild(cell, oracle):
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


# --- checking ----------------------------------------------------------------

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
