"""An edition's own ``#@save`` definitions: the `d2l` its later cells see.

In the book a ``#@save`` line copies the definition after it into the
`d2l` library, so that later cells, and later sections, call it as
``d2l.NAME``.  An edition's ``#@save`` definitions are that edition's
`d2l`: the chapter runner enters them into its `d2l` shim after the cell
that makes them (`saved_names` finds them), and ``d2l.NAME`` answers
them from then on, before d2l-bert's object of the same name.

A function of d2l-bert or d2l that a cell gets from the shim, and that
calls a name the edition redefined, calls the edition's (`rebound`):
in the edition's `d2l` both stand in one module.
"""
import ast
import re
import types

#: A ``#@save`` mark, on its own line or after a statement
_SAVE = re.compile(r'#\s*@save\b')


def saved_names(source):
    """The names bound by the statements that a ``#@save`` marks.

    A mark stands on a line of its own before the statement (the lines
    between the statement before and this one), or at the end of the
    statement's first line.  Definitions (``def``, ``class``) and
    assignments to names are read; other statements bind no name of the
    library (``d2l.DATA_HUB[...] = ...`` changes one in place).

    Parameters
    ----------
    source : str
        A cell's code.

    Returns
    -------
    list of str
        In the cell's order; empty when the code does not parse.
    """
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return []
    lines = source.splitlines()
    names, end = [], 0
    for stmt in body:
        start = getattr(stmt, 'lineno', 1) - 1
        decorators = getattr(stmt, 'decorator_list', ())
        if decorators:
            start = min(d.lineno for d in decorators) - 1
        marked = any(_SAVE.search(line) for line in lines[end:start + 1])
        end = getattr(stmt, 'end_lineno', start + 1)
        if marked:
            names += _bound(stmt)
    return names


def _bound(stmt):
    """The names a statement binds at the top level of a cell."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef,
                         ast.ClassDef)):
        return [stmt.name]
    targets = (stmt.targets if isinstance(stmt, ast.Assign) else
               [stmt.target] if isinstance(stmt, ast.AnnAssign) else [])
    names = []
    for target in targets:
        for node in ast.walk(target):
            if isinstance(node, ast.Name):
                names.append(node.id)
            elif not isinstance(node, (ast.Tuple, ast.List, ast.Starred,
                                       ast.Store)):
                break
    return names


def rebound(function, saves):
    """`function` calling the edition's definitions `saves` in place of
    the names of its own module that they redefine.

    Parameters
    ----------
    function : object
        What the shim found for a name (d2l-bert's or d2l's).
    saves : dict of str to object
        The edition's ``#@save`` definitions.

    Returns
    -------
    function : object
        `function` itself, or a copy whose module names are the edition's
        where it calls them.
    names : list of str
        The edition's names the copy calls (empty: `function` itself).
    """
    if not isinstance(function, types.FunctionType):
        return function, []
    module = function.__globals__
    names = [name for name in function.__code__.co_names
             if name in saves and module.get(name) is not saves[name]]
    if not names:
        return function, []
    scope = dict(module)
    scope.update({name: saves[name] for name in names})
    copy = types.FunctionType(function.__code__, scope, function.__name__,
                              function.__defaults__, function.__closure__)
    copy.__kwdefaults__ = function.__kwdefaults__
    copy.__dict__.update(function.__dict__)
    copy.__doc__, copy.__qualname__ = function.__doc__, function.__qualname__
    copy.__module__ = function.__module__
    return copy, names
