"""Find an excerpt's place in its section, and the cells it leaves out.

Translators and reviewers often hold part of a section: a pull request
that changes one subsection, a page split over two files, a snippet pasted
in an issue.  Its cells need what the section's earlier cells define (the
imports, `vocab_size`, `encoded_X`, ...).  `locate` matches the MXNet cells
of an edition against d2l-bert's own edition of each section (its
notebooks, read as editions) and returns a `Place`: the section, the cells
of d2l-bert's edition the file holds and, when the file uses names it does
not define, those of d2l-bert's cells before its first one that it leaves
out, which `check.check_edition` runs first (`Place.plan`).

Cells are compared by what they do, not by their position or wording
(`similarity`):

- set-up cells (imports, and calls such as ``npx.set_np()``) match each
  other;
- cells that define functions or classes match as much as the names they
  define have in common;
- other cells as much as the names they assign (and their final
  expression) have in common or, when neither assigns any, as much as their
  words (tokens; strings and comments left out) line up.

Two cells match when they score at least `MATCH`; the file's place is the
in-order matching with the highest total (`_align`).  Without a section
label (or with one that is not a section's, such as ``subsec_mlm``), the
section whose edition the cells match best is chosen, and `Place.why`
says so.
"""
import ast
import builtins
import difflib
import functools
import io
import re
import tokenize
from dataclasses import dataclass, field

from .. import book_outputs

#: Least `similarity` of two cells that match
MATCH = 0.5

#: Names a cell may use without defining them (the runner provides `d2l`)
_PROVIDED = frozenset(dir(builtins)) | {'d2l'}

_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


@dataclass(frozen=True)
class CellShape:
    """What `similarity` compares of a cell, and the names it needs.

    Attributes
    ----------
    setup : bool
        Only imports and calls (``npx.set_np()``), at least one import.
    defines : frozenset of str
        Functions and classes the cell defines.
    names : frozenset of str
        Names it assigns outside function bodies, and its final expression
        (``'call:len'`` for a call, else the normalized expression).
    words : tuple of str
        The code's tokens, comments left out and strings as ``'S'``.
    binds : frozenset of str
        Every name the cell binds, function arguments and locals included.
    uses : frozenset of str
        Every name the cell reads.
    """
    setup: bool
    defines: frozenset
    names: frozenset
    words: tuple
    binds: frozenset = frozenset()
    uses: frozenset = frozenset()

    @classmethod
    @functools.lru_cache(maxsize=1024)
    def of(cls, code):
        """Return the shape of the cell whose source is `code`."""
        words = _words(code)
        try:
            tree = ast.parse(code)
        except SyntaxError:
            return cls(False, frozenset(), frozenset(), words)
        body = tree.body
        imports = [s for s in body if isinstance(s, (ast.Import,
                                                     ast.ImportFrom))]
        calls = [s for s in body if isinstance(s, ast.Expr)
                 and isinstance(s.value, ast.Call)]
        setup = bool(imports) and len(imports) + len(calls) == len(body)
        defines, names = set(), set()
        for statement in body:
            if isinstance(statement, _DEFINITIONS):
                defines.add(statement.name)
            else:
                names |= _assigned(statement)
        if body and isinstance(body[-1], ast.Expr):
            final = _final_name(body[-1].value)
            if final:
                names.add(final)
        binds, uses = _binds_and_uses(tree)
        return cls(setup, frozenset(defines), frozenset(names), words,
                   frozenset(binds), frozenset(uses))


def similarity(a, b):
    """How much two cells' `CellShape` agree, from 0 to 1 (0 if either is
    None: a cell that cannot run).

    Set-up cells match each other only; cells that define functions or
    classes match as much as the names they define have in common
    (Jaccard), and never a cell that defines none; other cells as much as
    the names they assign, or if neither assigns any, as their words.
    """
    if a is None or b is None:
        return 0.0
    if a.setup or b.setup:
        return float(a.setup and b.setup)
    if a.defines or b.defines:
        return _jaccard(a.defines, b.defines)
    if a.names or b.names:
        return _jaccard(a.names, b.names)
    return difflib.SequenceMatcher(None, a.words, b.words,
                                   autojunk=False).ratio()


def _jaccard(a, b):
    return len(a & b) / len(a | b) if a and b else 0.0


def needed_names(shapes):
    """Names the cells read that none of them binds (nor Python nor the
    runner provides), sorted; `shapes` may hold None for cells that cannot
    run."""
    shapes = [s for s in shapes if s is not None]
    bound = set().union(*(s.binds for s in shapes)) if shapes else set()
    used = set().union(*(s.uses for s in shapes)) if shapes else set()
    return sorted(used - bound - _PROVIDED)


@dataclass
class Place:
    """Where an edition's MXNet cells sit in a section of d2l-bert.

    Attributes
    ----------
    label : str or None
        The section: the file's label, or the one inferred from the code.
    size : int
        MXNet cells of d2l-bert's edition of `label` (0 if it has none).
    positions : list
        For each MXNet cell of the file, in order, the 1-based position of
        the cell of d2l-bert's edition it matches, or None.
    taken : list of (int, Cell)
        Cells of d2l-bert's edition that run first, with their positions:
        when the file needs names it does not define, those before its
        first cell (set-up cells aside) that it does not hold, and the
        set-up cells.
    why : str or None
        How the section was chosen, when the file does not name it.
    found : bool
        Whether the file's place in the section was found.
    closest : str or None
        When not found: the closest section and its score, in words.
    reason : str or None
        When not found: why, in words.
    """
    label: str
    size: int = 0
    positions: list = field(default_factory=list)
    taken: list = field(default_factory=list)
    why: str = None
    found: bool = True
    closest: str = None
    reason: str = None

    @property
    def span(self):
        """Positions of d2l-bert's edition the file covers, from its first
        matched cell to its last, less the cells taken."""
        matched = [p for p in self.positions if p is not None]
        if not matched:
            return []
        taken = {p for p, _ in self.taken}
        return [p for p in range(min(matched), max(matched) + 1)
                if p not in taken]

    @property
    def partial(self):
        """Whether the file starts or stops in the middle of the section."""
        span = self.span
        return bool(self.taken) or (bool(span) and (
            span[0] != 1 or span[-1] != self.size))

    def lines(self):
        """What `check-text` says of the place: nothing for a whole section
        whose file names it, else one or two lines."""
        out = []
        if self.why:
            out.append(f'section {self.label} inferred from the code: '
                       f'{self.why}')
        if not self.found:
            out.append(f'place not found: {self.reason}; closest section: '
                       f"{self.closest}; the cells run as the file has them")
        elif self.partial:
            line = (f'excerpt of {self.label}: {_cells(self.span)} of '
                    f'{self.size}')
            if self.taken:
                line += (f'; {_cells([p for p, _ in self.taken])} taken '
                         "from d2l-bert's edition")
            alone = [i for i, p in enumerate(self.positions, 1) if p is None]
            if alone:
                verb = 'is' if len(alone) == 1 else 'are'
                line += f"; the file's {_cells(alone)} {verb} not in it"
            out.append(line)
        return out

    def plan(self, cells):
        """The order to run the file's `cells` (its MXNet cells, as
        `positions` counts them) and the cells taken.

        Each taken cell runs before the first of the file's cells whose
        place comes after it; a cell of the file that matches nothing runs
        where the next one that matches does.

        Yields
        ------
        (str, int, Cell)
            ``('taken', position, cell)`` or ``('file', number, cell)``,
            `number` counting the file's cells from 1.
        """
        if len(cells) != len(self.positions):
            raise ValueError(f'cells must be the {len(self.positions)} '
                             f'cells the place was found for, got '
                             f'{len(cells)}')
        waiting = list(self.taken)
        places, after = [], float('inf')
        for position in reversed(self.positions):
            after = position if position is not None else after
            places.append(after)
        for number, (cell, place) in enumerate(
                zip(cells, reversed(places)), 1):
            while waiting and waiting[0][0] < place:
                position, taken = waiting.pop(0)
                yield 'taken', position, taken
            yield 'file', number, cell
        for position, taken in waiting:
            yield 'taken', position, taken


def locate(edition, sections):
    """Find where `edition`'s MXNet cells sit in d2l-bert's sections.

    Parameters
    ----------
    edition : Edition
        The file, as `read_edition` gives it.
    sections : dict of str to Edition
        d2l-bert's edition of each section, by label, in the book's order.

    Returns
    -------
    Place or None
        None when the file has no cell that can run.
    """
    cells = edition.mxnet_cells()
    if all(c.finding for c in cells):
        return None
    shapes = [None if c.finding else CellShape.of(c.code) for c in cells]
    scored = {label: _align(shapes, [CellShape.of(c.code)
                                     for c in theirs.cells])
              for label, theirs in sections.items()}
    if edition.label in sections or edition.label in book_outputs.labels():
        return _place(edition.label, shapes, scored, sections)
    # a file's own section label that d2l-bert does not know is believed
    # unless cells other than the set-up cell match another section
    believed = edition.label is not None and edition.label.startswith('sec_')
    ranked = sorted(scored, key=lambda label: _rank(scored[label][0],
                                                    shapes))
    if not ranked or not _matched(scored[ranked[0]][0]) or (
            believed and not _body_matches(scored[ranked[0]][0], shapes)):
        place = _not_found(edition.label, scored, len(cells))
        if edition.label is None:
            place.reason = ('the file has no section label, and no '
                            "section of d2l-bert's holds its cells")
        else:
            place.reason = (f'd2l-bert has no edition of {edition.label}, '
                            'and no other section of its holds these '
                            'cells')
        return place
    best = ranked[0]
    place = _place(best, shapes, scored, sections)
    why = ('the file has no :label: line' if edition.label is None else
           f"the file's label {edition.label} is not a section's")
    why += (f"; {_matched(scored[best][0])} of its {len(cells)} MXNet cells "
            f"match d2l-bert's edition of it")
    if len(ranked) > 1:
        second = ranked[1]
        if _rank(scored[second][0], shapes) == _rank(scored[best][0],
                                                      shapes):
            why += (f", as many as that of {second}: the first in the "
                    "book's order is taken")
        else:
            why += (f' (next: {second}, {_matched(scored[second][0])})')
    place.why = why
    return place


def _place(label, shapes, scored, sections):
    """The `Place` of the file's cells (`shapes`) in section `label`."""
    count = len(shapes)
    if label not in scored:
        place = _not_found(label, scored, count)
        place.reason = f'd2l-bert has no edition of {label}'
        return place
    positions, _ = scored[label]
    matched = [p for p in positions if p is not None]
    if not matched:
        place = _not_found(label, scored, count)
        place.reason = (f"none of the file's {count} MXNet cells matches "
                        f"d2l-bert's edition of {label}")
        return place
    theirs = sections[label].cells
    place = Place(label, len(theirs), positions)
    if not needed_names(shapes):
        return place
    setup = {p for p, c in enumerate(theirs, 1)
             if CellShape.of(c.code).setup}
    body = [p for p in matched if p not in setup]
    first = body[0] if body else max(matched) + 1
    # d2l-bert's set-up cell runs even when the file has its own: the
    # cells taken need what it imports
    place.taken = [(p, theirs[p - 1]) for p in range(1, first)
                   if p not in matched or p in setup]
    return place


def _not_found(label, scored, count):
    """A `Place` not found, that names the section the cells come
    closest to."""
    place = Place(label, positions=[None] * count, found=False)
    if scored:
        best = max(scored, key=lambda lab: (_matched(scored[lab][0]),
                                            scored[lab][1]))
        place.closest = (f'{best} ({_matched(scored[best][0])} of '
                         f'{count} cells match)')
    else:
        place.closest = "none (d2l-bert's editions are not at hand)"
    return place


def _matched(positions):
    return sum(p is not None for p in positions)


def _rank(positions, shapes):
    """Sort key of a section: most matched cells (set-up cells aside)
    first, then most matched cells."""
    return -_body_matches(positions, shapes), -_matched(positions)


def _body_matches(positions, shapes):
    """Matched cells of the file that are not set-up cells."""
    return sum(p is not None and not s.setup
               for p, s in zip(positions, shapes) if s is not None)


def _align(ours, theirs):
    """The in-order matching of cells `ours` to `theirs` with the highest
    total similarity.

    Returns
    -------
    positions : list
        For each cell of `ours`, the 1-based position of its match in
        `theirs`, or None.
    total : float
        The matching's total similarity.
    """
    n, m = len(ours), len(theirs)
    score = [[similarity(a, b) for b in theirs] for a in ours]
    # best[i][j]: the best total of ours[i:] matched into theirs[j:]
    best = [[0.0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            options = [best[i + 1][j], best[i][j + 1]]
            if score[i][j] >= MATCH:
                options.append(score[i][j] + best[i + 1][j + 1])
            best[i][j] = max(options)
    positions, i, j = [], 0, 0
    while i < n:
        if j < m and score[i][j] >= MATCH and \
                best[i][j] == score[i][j] + best[i + 1][j + 1]:
            positions.append(j + 1)
            i, j = i + 1, j + 1
        elif j < m and best[i][j] == best[i][j + 1]:
            j += 1
        else:
            positions.append(None)
            i += 1
    return positions, best[0][0]


def _assigned(statement):
    """Names a top-level statement assigns (not inside the bodies of the
    functions and classes it defines, nor in comprehensions)."""
    names, todo = set(), [statement]
    while todo:
        node = todo.pop()
        if isinstance(node, _DEFINITIONS):
            names.add(node.name)
            continue
        if isinstance(node, (ast.Lambda, ast.comprehension)):
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        todo.extend(ast.iter_child_nodes(node))
    return names


def _binds_and_uses(tree):
    """Every name `tree` binds anywhere (definitions, assignments,
    imports, arguments, ``except ... as``) and every name it reads."""
    binds, uses = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (uses if isinstance(node.ctx, ast.Load) else binds).add(node.id)
        elif isinstance(node, _DEFINITIONS):
            binds.add(node.name)
        elif isinstance(node, ast.arg):
            binds.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            binds |= {(a.asname or a.name).split('.')[0]
                      for a in node.names}
        elif isinstance(node, ast.ExceptHandler) and node.name:
            binds.add(node.name)
    return binds, uses


def _final_name(value):
    """What a cell's final expression computes, as a name to compare;
    None for ``print(...)``, whose output is no part of the cell's
    identity."""
    if isinstance(value, ast.Call):
        func = _dotted(value.func)
        if func == 'print':
            return None
        return f'call:{func}' if func else None
    return 'expr:' + book_outputs.normalize(ast.unparse(value))


def _dotted(node):
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return '.'.join([node.id] + parts[::-1])


def _words(code):
    try:
        return tuple('S' if t.type == tokenize.STRING else t.string
                     for t in tokenize.generate_tokens(
                         io.StringIO(code).readline)
                     if t.type not in book_outputs._SKIP)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return tuple(re.findall(r'\w+|[^\w\s]', re.sub(r'#.*', '', code)))


def _cells(numbers):
    """``[1, 2, 3, 7]`` -> ``'cells 1-3 and 7'``, ``[4]`` -> ``'cell 4'``.
    """
    runs = []
    for n in sorted(numbers):
        if runs and n == runs[-1][1] + 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    parts = [f'{a}-{b}' if b > a else f'{a}' for a, b in runs]
    if len(numbers) == 1:
        return f'cell {parts[0]}'
    return 'cells ' + (parts[0] if len(parts) == 1 else
                       ', '.join(parts[:-1]) + ' and ' + parts[-1])
