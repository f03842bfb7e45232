"""Rebuild the line breaks of code that a rendering collapsed onto one line.

A one-line rendering (see `rst`) shows each cell's code on one line, its
line breaks and indentation turned into single spaces.  `relayout` gives
such code its lines back from the code alone: it reads the tokens
(`lex`), splits them into statements where a new one must begin, and
indents each by the blocks it opens and closes.  When a markdown edition
of the section is at hand, its same cell's line breaks are copied
instead (`line_breaks`).
"""
import ast
import re
from dataclasses import dataclass, field


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


def lex(text, pos=0, stop_at_comment=False):
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
    tokens, stop = lex(text, pos, stop_at_comment=True)
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
    text, statements = _statements(text)
    out, stack, assigned = [], [], set()
    pending_decorator = False
    for statement in statements:
        src = _source(text, statement)
        if statement.kind == 'comment':
            out.append('    ' * len(stack) + src)
            continue
        node = _parse_statement(src, statement)
        level, chain, earlier = _place(stack, statement.first, node,
                                       pending_decorator)
        out.append('    ' * level + src)
        pending_decorator = statement.kind == 'decorator'
        if pending_decorator:
            continue
        _count_in_block(stack, statement.first, statement.kind)
        _track_names(stack, assigned, statement.kind, node)
        if statement.kind == 'header':
            stack.append(_header_block(statement.first, level, node, chain,
                                       earlier))
    return _parsing('\n'.join(out) + '\n')


def _parsing(source):
    """Return `source` if it parses, else raise `LayoutError`."""
    try:
        ast.parse(source)
    except SyntaxError as e:
        raise LayoutError(f'rebuilt code does not parse: {e.msg} '
                          f'(line {e.lineno})') from None
    return source


def _statements(text):
    """Return `text` stripped and its logical lines (`_Statement` objects)."""
    tokens, stop = lex(text.strip())
    text = text.strip()
    if stop < len(text):
        raise LayoutError(f'cannot read the code at {text[stop:stop + 30]!r}')
    statements = []
    for statement in _split(tokens):
        statements += _resplit(text, statement)
    return text, statements


#: The headers a clause (``elif``, ``else`` ...) may continue
_OPENERS = {'elif': ('if', 'elif'),
            'else': ('if', 'elif', 'for', 'while', 'try', 'except'),
            'except': ('try', 'except'),
            'finally': ('try', 'except', 'else')}


def _place(stack, first, node, after_decorator):
    """Pop off `stack` the blocks that `node`, a statement starting with
    `first`, leaves.  Return its indentation level, and for a clause
    (``elif``, ``else`` ...) the chain of names and the names set earlier
    of the block it continues (else empty sets)."""
    if after_decorator:  # the decorated `def` goes with it
        return len(stack), set(), set()
    if first in _OPENERS:
        while stack and stack[-1].keyword not in _OPENERS[first]:
            stack.pop()
        previous = stack.pop() if stack else _Block('', 0, set())
        return (len(stack), previous.chain,
                previous.earlier | previous.assigned)
    if first in ('def', 'class', '@', 'async'):
        # back to the class body, or out of a class the code names
        # (``@d2l.add_to_class(A)`` cannot be inside `A`)
        while stack and stack[-1].statements and (
                stack[-1].keyword != 'class' or
                stack[-1].name in _uses(node)):
            stack.pop()
    else:
        while stack and stack[-1].statements and \
                _leaves(stack[-1], node, first):
            stack.pop()
    return len(stack), set(), set()


def _count_in_block(stack, first, kind):
    """Count a statement starting with `first` in the innermost block."""
    if not stack:
        return
    top = stack[-1]
    top.statements += 1
    top.methods += first in ('def', 'async')
    if first in _DEAD_END:
        top.dead = True
    if not (kind == 'header' and first == 'if'):
        top.real += 1
    if top.keyword == 'if' and not top.counted and len(stack) > 1 \
            and first not in ('break', 'continue'):
        stack[-2].real += 1  # not a guard: counts in its block
        top.counted = True


def _track_names(stack, assigned, kind, node):
    """Add the names `node` sets to `assigned` and to the blocks of
    `stack`; a block that grows also learns its new locals."""
    if kind == 'header':
        stores = _header_stores(node)
    else:
        stores = _names(node, ast.Store) | _arguments(node)
    new = stores - assigned
    for block in stack:
        block.assigned |= stores
        if block.grows:
            block.locals |= new - block.earlier
    assigned |= stores


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
