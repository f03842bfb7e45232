"""The notebooks' ``#@save`` cells and the package: one source.

Each notebook in ``notebooks/`` writes out, in cells whose first line is
``#@save``, the classes and functions its book section defines, as the
book does, so that a student can edit one and rerun.  Their one source
is the package: a ``#@save`` cell holds the package's source of each
name it defines, in the module's order, the same lines and comments,
with the definition's docstring cut to its summary (its first
paragraph) and its methods' docstrings left out, as in the book: the
numpy-doc docstrings are for the API pages, the cell is the book's::

    python -m d2l_bert.chapter.saved_cells          # check every notebook
    python -m d2l_bert.chapter.saved_cells --write  # rewrite the cells
                                                    # from the package

To write a new definition out in a notebook, add a cell holding
``#@save`` and a stub of the same name (``def load_data_wiki(): pass``),
then run ``--write``.  `tests/test_chapter_saved_cells.py` fails when a
cell and the package differ by a line of code or of a summary, and when
a definition of the section (an object of the section's module whose
docstring names one of the section's labels as the place that defines
it) is not written out.
"""
import ast
import difflib
import importlib
import os
import re
import sys

#: The marker on the first line of a cell that the package also defines
MARKER = '#@save'

#: Each notebook, with its section's module and the book labels of that
#: section
NOTEBOOKS = {
    'bert.ipynb': ('d2l_bert.book.bert', (
        'sec_bert', 'subsec_bert_input_rep', 'subsec_mlm', 'subsec_nsp')),
    'bert-dataset.ipynb': ('d2l_bert.book.dataset', (
        'sec_bert-dataset', 'subsec_prepare_mlm_data')),
    'bert-pretraining.ipynb': ('d2l_bert.book.pretraining', (
        'sec_bert-pretraining',)),
    'natural-language-inference-bert.ipynb': ('d2l_bert.book.finetuning', (
        'sec_natural-language-inference-bert',)),
}

#: The notebooks beyond the book, in our own words, after its sections:
#: they start as every notebook does (`hosted`) and have a page in the
#: docs, but hold no section's cells
BEYOND_BOOK = ('what-bert-learned.ipynb',)

NOTEBOOK_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), 'notebooks')

_DEFINED_IN = re.compile(r'Defined in :numref:`([^`]+)`')


def _top_level(tree):
    """Yield ``(name, node)`` for each name a module or cell defines at
    its top level: functions, classes, plain assignments and entries of a
    table (``DATA_HUB['wikitext-2'] = ...``, named as written)."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef,
                             ast.ClassDef)):
            yield node.name, node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = (node.targets if isinstance(node, ast.Assign)
                       else [node.target])
            for target in targets:
                if isinstance(target, ast.Name):
                    yield target.id, node
                elif (isinstance(target, ast.Subscript)
                      and isinstance(target.value, ast.Name)):
                    yield ast.unparse(target), node


def _statement_source(lines, node):
    """The source of `node`: its decorators, the comment lines right
    above it, and its body (to the end of `lines`, which end with it)."""
    first = min([node.lineno] + [d.lineno for d in
                                 getattr(node, 'decorator_list', [])]) - 1
    while first > 0 and lines[first - 1].lstrip().startswith('#'):
        first -= 1
    return ''.join(lines[first:]).rstrip() + '\n'


def _docstring(node):
    """The docstring expression of a function or class `node`, or None."""
    first = node.body[0] if node.body else None
    if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str)):
        return first
    return None


def _inner_docstrings(node):
    """Yield the docstrings of the functions and classes inside `node`
    whose body holds more than the docstring."""
    for inner in ast.walk(node):
        if inner is not node and isinstance(inner, (
                ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            doc = _docstring(inner)
            if doc is not None and len(inner.body) > 1:
                yield doc


def _summary_lines(lines):
    """The lines of a docstring cut to its summary, its first paragraph;
    `lines` as written in the module, the last one closing the string."""
    for end, line in enumerate(lines):
        if not line.strip():
            break
    else:
        return lines  # one paragraph: the docstring is its summary
    last = lines[end - 1].rstrip('\n')
    quote = lines[0].lstrip().lstrip('rRuU')[:3]
    if len(last) + len(quote) <= 79:
        return lines[:end - 1] + [last + quote + '\n']
    indent = lines[0][:len(lines[0]) - len(lines[0].lstrip())]
    return lines[:end] + [indent + quote + '\n']


def _cell_source(lines, node):
    """The source of `node` as a ``#@save`` cell holds it: the module's
    lines with its docstring cut to its summary and the docstrings of
    its methods left out (the book's cells have none)."""
    lines = list(lines[:node.end_lineno])
    for doc in sorted(_inner_docstrings(node), key=lambda d: -d.lineno):
        del lines[doc.lineno - 1:doc.end_lineno]
    doc = (_docstring(node) if isinstance(node, (
        ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else None)
    if doc is not None:
        start, end = doc.lineno - 1, doc.end_lineno
        lines[start:end] = _summary_lines(lines[start:end])
    return lines


def module_definitions(module_name):
    """Return ``{name: source}`` for the top-level definitions of a
    module of the package, in the module's order, each as a ``#@save``
    cell writes it (its docstring cut to its summary, no method's)."""
    module = importlib.import_module(module_name)
    with open(module.__file__, encoding='utf-8') as f:
        text = f.read()
    lines = text.splitlines(keepends=True)
    return {name: _statement_source(_cell_source(lines, node), node)
            for name, node in _top_level(ast.parse(text))}


def section_names(module_name, labels):
    """The names a section defines: the module's objects whose docstring
    gives one of `labels` as the place that defines it (the line the
    docstrings of the book's objects carry)."""
    module = importlib.import_module(module_name)
    with open(module.__file__, encoding='utf-8') as f:
        tree = ast.parse(f.read())
    names = []
    for name, node in _top_level(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            continue
        found = _DEFINED_IN.search(ast.get_docstring(node) or '')
        if found and found.group(1) in labels:
            names.append(name)
    return names


def is_saved(cell):
    """Whether a notebook cell is a ``#@save`` code cell."""
    return (cell['cell_type'] == 'code'
            and _source(cell).lstrip().startswith(MARKER))


def _source(cell):
    source = cell['source']
    return source if isinstance(source, str) else ''.join(source)


def cell_names(code):
    """The names a cell's code defines at its top level, in order."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    return list(dict.fromkeys(name for name, _ in _top_level(tree)))


def _is_assignment(source):
    return isinstance(ast.parse(source).body[0], (ast.Assign, ast.AnnAssign))


def expected_cell(names, definitions):
    """The text of a ``#@save`` cell that defines `names`: the marker,
    then each definition's package source, two blank lines apart as in a
    module (none between two assignments; a statement that defines
    several names appears once)."""
    parts = list(dict.fromkeys(definitions[name] for name in names))
    text = parts[0]
    for previous, part in zip(parts, parts[1:]):
        both = _is_assignment(previous) and _is_assignment(part)
        text += part if both else '\n\n' + part
    return MARKER + '\n' + text.rstrip('\n')


def problems(nb, notebook_name):
    """Check the ``#@save`` cells of a notebook against the package.

    Parameters
    ----------
    nb : dict-like
        The notebook (``nbformat`` node or the parsed JSON).
    notebook_name : str
        Its file name, a key of `NOTEBOOKS`.

    Returns
    -------
    list of str
        One entry per problem: a name the module does not define, a cell
        that differs from the package (with a unified diff), a definition
        of the section that no cell writes out.  Empty when all is well.
    """
    module_name, labels = NOTEBOOKS[notebook_name]
    definitions = module_definitions(module_name)
    found, written = [], set()
    for index, cell in enumerate(nb['cells'], 1):
        if not is_saved(cell):
            continue
        code = _source(cell)
        names = cell_names(code)
        unknown = [name for name in names if name not in definitions]
        if not names or unknown:
            found.append(
                f'{notebook_name} cell {index}: #@save cell defines '
                f'{", ".join(unknown) or "nothing"} that {module_name} '
                'does not define')
            continue
        written.update(names)
        expected = expected_cell(names, definitions)
        if code.rstrip('\n') != expected:
            diff = difflib.unified_diff(
                expected.splitlines(), code.rstrip('\n').splitlines(),
                f'{module_name} ({", ".join(names)})',
                f'{notebook_name} cell {index}', lineterm='')
            found.append('\n'.join(diff))
    for name in section_names(module_name, labels):
        if name not in written:
            found.append(f'{notebook_name}: {name} (defined by the '
                         'section, in ' + module_name + ') is not written '
                         'out in a #@save cell')
    return found


def write(nb, notebook_name):
    """Rewrite the ``#@save`` cells of `nb` in place from the package;
    return the number of cells changed."""
    module_name, _ = NOTEBOOKS[notebook_name]
    definitions = module_definitions(module_name)
    changed = 0
    for cell in nb['cells']:
        if not is_saved(cell):
            continue
        names = [name for name in cell_names(_source(cell))
                 if name in definitions]
        if not names:
            continue
        expected = expected_cell(names, definitions)
        if _source(cell).rstrip('\n') != expected:
            cell['source'] = expected
            changed += 1
    return changed


def check_or_write(argv, command, write, problems, names=None):
    """The ``main`` of a notebook writer: check every notebook, or with
    ``--write`` rewrite it first; exit status 1 when a check finds a
    problem, 2 on a wrong argument.

    Parameters
    ----------
    argv : list of str
        The arguments: none or ``['--write']``.
    command : str
        The module, for the usage line (``'d2l_bert.chapter.hosted'``).
    write : callable
        ``write(nb, name) -> str or None``: rewrites the notebook `nb`
        in place; what to print of it, or None when nothing changed.
    problems : callable
        ``problems(nb, name) -> list of str``, one line each.
    names : sequence of str, optional
        The notebooks; default the book's sections' (`NOTEBOOKS`).
    """
    import warnings

    import nbformat
    # Our notebooks are nbformat 4.4, whose cells have no ids
    warnings.filterwarnings('ignore', category=nbformat.warnings.
                            MissingIDFieldWarning)
    if argv not in ([], ['--write']):
        print(f'usage: python -m {command} [--write]', file=sys.stderr)
        return 2
    status = 0
    for name in NOTEBOOKS if names is None else names:
        path = os.path.join(NOTEBOOK_DIR, name)
        nb = nbformat.read(path, as_version=4)
        said = write(nb, name) if argv else None
        if said is not None:
            nbformat.write(nb, path)
            print(f'{name}: {said}')
        for problem in problems(nb, name):
            print(problem)
            status = 1
    return status


def main(argv=None):
    """Check (or with ``--write`` rewrite) every notebook's ``#@save``
    cells; exit status 1 when a check finds a problem."""
    def rewrite(nb, name):
        changed = write(nb, name)
        return f'{changed} #@save cell(s) rewritten' if changed else None
    return check_or_write(sys.argv[1:] if argv is None else argv,
                          'd2l_bert.chapter.saved_cells', rewrite, problems)


if __name__ == '__main__':
    sys.exit(main())
