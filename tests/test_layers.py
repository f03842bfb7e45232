"""The layers of the package: the book's sections at the bottom.

The book's section modules import only each other, `checks`,
`presets` (plain constants, importing nothing) and the data they read
(`d2l_bert.data`, which stands in for d2l's data hub), besides MXNet
and d2l; `d2l_bert.data` imports only itself, `checks` and `presets`.
The tools (`chapter`, `runs`, `cli`, `fast`, ...) stand on them, never
the reverse.  Read from each module's syntax tree, imports
inside functions included.
"""
import ast
import os

import pytest

import d2l_bert

PACKAGE = os.path.dirname(d2l_bert.__file__)

#: The book's section modules
BOOK = ('attention', 'transformer', 'bert', 'dataset', 'pretraining',
        'finetuning')
#: What the sections may import of the package
BOOK_MAY_IMPORT = tuple(f'd2l_bert.book.{m}' for m in BOOK) + (
    'd2l_bert.checks', 'd2l_bert.presets', 'd2l_bert.data')
DATA_MODULES = sorted(name[:-3] for name in os.listdir(
    os.path.join(PACKAGE, 'data')) if name.endswith('.py'))


def package_imports(source, module):
    """The `d2l_bert` modules that `source`, the text of `module`
    (``'d2l_bert.book.bert'``, ``'d2l_bert.data.__init__'``), imports, anywhere
    in it."""
    package = module.rsplit('.', 1)[0]
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit('.', node.level - 1)[0] \
                    if node.level > 1 else package
                base = f'{base}.{node.module}' if node.module else base
            else:
                base = node.module
            if node.module is None:  # from . import hub: modules
                found.update(f'{base}.{a.name}' for a in node.names)
            else:
                found.add(base)
    return {name for name in found if name.split('.')[0] == 'd2l_bert'}


def outside(imports, allowed):
    return sorted(name for name in imports if name != 'd2l_bert'
                  and not any(name == a or name.startswith(a + '.')
                              for a in allowed))


def _source(*parts):
    with open(os.path.join(PACKAGE, *parts), encoding='utf-8') as f:
        return f.read()


@pytest.mark.parametrize('module', BOOK)
def test_book_sections_import_only_sections_checks_and_data(module):
    imports = package_imports(_source('book', f'{module}.py'),
                              f'd2l_bert.book.{module}')
    assert outside(imports, BOOK_MAY_IMPORT) == []


def test_the_presets_import_nothing():
    tree = ast.parse(_source('presets.py'))
    assert not [node for node in ast.walk(tree)
                if isinstance(node, (ast.Import, ast.ImportFrom))]


@pytest.mark.parametrize('module', DATA_MODULES)
def test_the_data_package_imports_only_itself_checks_and_presets(module):
    imports = package_imports(_source('data', f'{module}.py'),
                              f'd2l_bert.data.{module}')
    assert outside(imports, ('d2l_bert.data', 'd2l_bert.checks',
                             'd2l_bert.presets')) == []


def test_the_check_reads_every_kind_of_import():
    source = ('from .bert import BERTModel\n'
              'from .runs import model_files\n'
              'from . import hub\n'
              'def f():\n'
              '    from ..cli import main\n'
              '    import d2l_bert.fast\n'
              '    from d2l_bert.chapter.runner import Runner\n')
    imports = package_imports(source, 'd2l_bert.data.model_dir')
    assert imports == {'d2l_bert.data.bert', 'd2l_bert.data.runs',
                       'd2l_bert.data.hub', 'd2l_bert.cli', 'd2l_bert.fast',
                       'd2l_bert.chapter.runner'}
    assert outside(package_imports(source, 'd2l_bert.book.finetuning'),
                   BOOK_MAY_IMPORT) == [
        'd2l_bert.book.hub', 'd2l_bert.book.runs', 'd2l_bert.chapter.runner',
        'd2l_bert.cli', 'd2l_bert.fast']


def module_graph():
    """Each module of the package (``'d2l_bert.fast.blocks'``; a
    package by its name) -> the package modules it imports, anywhere in
    it.  ``from . import accelerate`` of a name that is not a module is
    an import of the package itself."""
    modules = {}
    for folder, _, files in os.walk(PACKAGE):
        for name in files:
            if not name.endswith('.py'):
                continue
            parts = os.path.relpath(os.path.join(folder, name[:-3]),
                                    os.path.dirname(PACKAGE)).split(os.sep)
            if parts[-1] == '__init__':
                parts = parts[:-1]
                parts.append('__init__')
            with open(os.path.join(folder, name), encoding='utf-8') as f:
                modules['.'.join(parts)] = f.read()
    known = {name[:-len('.__init__')] if name.endswith('.__init__')
             else name for name in modules}
    graph = {}
    for module, source in modules.items():
        here = module[:-len('.__init__')] if module.endswith('.__init__') \
            else module
        imports = set()
        for name in package_imports(source, module):
            while name not in known:  # a name imported from a module
                name = name.rsplit('.', 1)[0]
            imports.add(name)
        graph[here] = imports - {here}
    return graph


def circles(graph):
    """The strongly connected groups of more than one module (Tarjan)."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on.add(node)
        for other in sorted(graph.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = set()
            while True:
                member = stack.pop()
                on.discard(member)
                group.add(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def test_no_module_imports_itself_round_a_circle():
    # Imports inside functions count: a lazy import still ties the two
    # modules together
    assert circles(module_graph()) == []


def test_the_circle_check_finds_a_circle_through_a_package():
    graph = {'p': {'p.a'}, 'p.a': {'p.b'}, 'p.b': {'p'}, 'q': {'p'}}
    assert circles(graph) == [['p', 'p.a', 'p.b']]
    assert circles({'p': {'p.a'}, 'p.a': set()}) == []
