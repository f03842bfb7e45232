"""Every notebook in notebooks/ runs and prints what the book prints.

Each notebook is executed once per session by a Jupyter kernel of this
interpreter, at small sizes (``D2L_BERT_SMALL=1``); its outputs are then
held to the book's table (`d2l_bert.chapter.book_outputs`): shapes exactly,
trained numbers only shown.
"""
import glob
import json
import os

import pytest

from d2l_bert.chapter import book_outputs, editions
from d2l_bert.presets import SMALL_ENV, SMALL_WIKITEXT

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOTEBOOKS = sorted(glob.glob(os.path.join(ROOT, 'notebooks', '*.ipynb')))
IDS = [os.path.basename(p) for p in NOTEBOOKS]


@pytest.fixture(scope='session')
def kernel_tmp(tmp_path_factory):
    """The temporary directory the notebook kernels are given (TMPDIR)."""
    return tmp_path_factory.mktemp('kernel-tmp')


@pytest.fixture(scope='session')
def executed(kernel_tmp):
    """``executed(path)`` -> the notebook run once, as an nbformat node,
    at small sizes (``D2L_BERT_SMALL=1``) in a kernel whose temporary
    files go to `kernel_tmp`."""
    nbformat = pytest.importorskip('nbformat')
    nbclient = pytest.importorskip('nbclient')
    cache = {}

    def run(path):
        if path not in cache:
            nb = nbformat.read(path, as_version=4)
            client = nbclient.NotebookClient(
                nb, timeout=900, kernel_name='python3', allow_errors=True,
                resources={'metadata': {'path': os.path.dirname(path)}})
            client.execute(env={**os.environ, SMALL_ENV: '1',
                                'TMPDIR': str(kernel_tmp)})
            cache[path] = nb
        return cache[path]
    return run


def test_notebooks_leave_no_temporary_files(executed, kernel_tmp):
    for path in NOTEBOOKS:
        executed(path)
    assert sorted(os.listdir(kernel_tmp)) == []


def _errors(nb):
    return [f"cell {i}: {out['ename']}: {out['evalue']}"
            for i, cell in enumerate(nb.cells, 1)
            if cell.cell_type == 'code'
            for out in cell.get('outputs', [])
            if out.get('output_type') == 'error']


@pytest.mark.parametrize('path', NOTEBOOKS, ids=IDS)
def test_notebook_runs_without_errors(executed, path):
    assert _errors(executed(path)) == []


@pytest.mark.parametrize('name', ['bert-dataset.ipynb',
                                  'bert-pretraining.ipynb'])
def test_small_runs_read_the_small_corpus(executed, name):
    nb = executed(os.path.join(ROOT, 'notebooks', name))
    said = ''.join(out.get('text', '') for cell in nb.cells
                   if cell.cell_type == 'code'
                   for out in cell.get('outputs', [])
                   if out.get('name') == 'stderr')
    articles = SMALL_WIKITEXT['train'][0]
    assert (f'in its place: a corpus of {articles} generated articles '
            '(small sizes)') in said


@pytest.mark.parametrize('path', NOTEBOOKS, ids=IDS)
def test_notebook_prints_the_books_documented_outputs(executed, path):
    import nbformat
    text = nbformat.writes(executed(path))
    edition = editions.parse_notebook(text, path)
    checked, wrong = 0, []
    for cell in edition.cells:
        entry = book_outputs.documented(edition.label, cell.code)
        if entry is None or entry.mode == 'shown':
            continue
        checked += 1
        verdict = book_outputs.compare(entry.prints, cell.output or '',
                                       entry.mode)
        # shapes compared, trained numbers beside them only shown
        if verdict != ('shown' if entry.mode == 'shapes' else 'match'):
            wrong.append(f'book cell {entry.cell}: printed '
                         f'{cell.output!r}, book {entry.prints!r}')
    assert wrong == []
    expected = sum(e.label == edition.label and e.mode != 'shown'
                   for e in book_outputs.DOCUMENTED)
    assert checked == expected


@pytest.mark.parametrize('path', NOTEBOOKS, ids=IDS)
def test_the_hosted_set_up_cell_is_silent_where_d2l_bert_is_installed(
        executed, path):
    from d2l_bert.chapter.hosted import is_setup_cell
    first = next(cell for cell in executed(path).cells
                 if cell.cell_type == 'code')
    assert is_setup_cell(first.source)
    assert first.execution_count and first.outputs == []


def test_sec_bert_notebook_prints_the_five_shapes(executed):
    path = os.path.join(ROOT, 'notebooks', 'bert.ipynb')
    import nbformat
    edition = editions.parse_notebook(nbformat.writes(executed(path)), path)
    shapes = [c.output.strip() for c in edition.cells
              if c.code.rstrip().endswith('.shape')]
    assert shapes == ['(2, 8, 768)', '(2, 3, 10000)', '(6,)', '(2, 2)',
                      '(2,)']


def test_sec_bert_notebook_imports_print_nothing(executed):
    # the threads and kernels are chosen quietly when `mxnet` is imported
    # (`d2l_bert.threads`); `python -m d2l_bert.threads` prints them
    path = os.path.join(ROOT, 'notebooks', 'bert.ipynb')
    imports = [cell for cell in executed(path).cells
               if cell.cell_type == 'code'][1]
    assert imports.source.startswith('from mxnet import')
    assert imports.execution_count and imports.outputs == []


@pytest.mark.parametrize('path', NOTEBOOKS, ids=IDS)
def test_package_names_are_defined_only_in_saved_cells(path):
    # A definition of a package name outside a `#@save` cell would be a
    # second copy that no test compares (`test_chapter_saved_cells.py`
    # compares the `#@save` cells)
    import ast

    from d2l_bert.chapter import saved_cells
    from d2l_bert.chapter.d2l_shim import package_names
    names, _ = package_names()
    with open(path, encoding='utf-8') as f:
        nb = json.load(f)
    defined = set()
    for cell in nb['cells']:
        if cell['cell_type'] != 'code' or saved_cells.is_saved(cell):
            continue
        for node in ast.walk(ast.parse(''.join(cell['source']))):
            if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
                defined.add(node.name)
    assert defined & set(names) == set()


@pytest.mark.parametrize('path', NOTEBOOKS, ids=IDS)
def test_committed_notebook_carries_no_outputs_or_counts(path):
    with open(path, encoding='utf-8') as f:
        nb = json.load(f)
    stored = [i for i, cell in enumerate(nb['cells'], 1)
              if cell['cell_type'] == 'code' and
              (cell.get('outputs') or cell.get('execution_count') is not None)]
    assert stored == [], f'cells with outputs or counts: {stored}'
    assert 'widgets' not in nb.get('metadata', {})
