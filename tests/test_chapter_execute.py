"""Executing a notebook for the docs: in a kernel, offline, at its own
sizes, once for given contents."""
import os

import nbformat
import pytest

from d2l_bert import presets
from d2l_bert.chapter import execute

CODE = ('import os\n'
        "print(os.environ.get('D2L_BERT_OFFLINE'), "
        "os.environ.get('D2L_BERT_SMALL'))\n"
        '6 * 7')


def write_notebook(path, code=CODE):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell('# A page'),
                nbformat.v4.new_code_cell(code)]
    nb.metadata['kernelspec'] = {'name': 'python3', 'language': 'python',
                                 'display_name': 'Python 3'}
    nbformat.write(nb, str(path))
    return str(path)


def fake_checkout(root):
    (root / 'd2l_bert').mkdir(parents=True)
    (root / 'd2l_bert' / 'a.py').write_text('x = 1\n')
    (root / 'd2l_bert' / '__pycache__').mkdir()
    return root


def test_the_key_follows_the_notebook_and_every_package_file(tmp_path):
    root = fake_checkout(tmp_path / 'checkout')
    path = write_notebook(tmp_path / 'n.ipynb')
    key = execute.cache_key(path, str(root))
    assert len(key) == 64 and key == execute.cache_key(path, str(root))
    # compiled files change nothing
    (root / 'd2l_bert' / '__pycache__' / 'a.cpython-311.pyc').write_text('')
    assert execute.cache_key(path, str(root)) == key
    (root / 'd2l_bert' / 'a.py').write_text('x = 2\n')
    changed = execute.cache_key(path, str(root))
    assert changed != key
    (root / 'd2l_bert' / 'data.json').write_text('{}')
    assert execute.cache_key(path, str(root)) not in (key, changed)
    write_notebook(path, CODE + '\n')
    assert execute.cache_key(path, str(root)) not in (key, changed)


def test_a_notebook_runs_offline_at_its_own_sizes_then_comes_from_the_cache(
        tmp_path, monkeypatch):
    monkeypatch.setenv(presets.SMALL_ENV, '1')
    path = write_notebook(tmp_path / 'n.ipynb')
    cache = tmp_path / 'cache'
    lines = []
    nb = execute.execute_cached(path, str(cache), lines.append)
    cell = nb.cells[1]
    assert execute.outputs_text(cell) == '1 None\n42\n'
    assert cell.metadata['d2l_bert']['seconds'] >= 0
    assert nb.metadata['d2l_bert']['seconds'] > 0
    assert lines[0].startswith('n.ipynb: executing it in a kernel, offline')
    assert lines[1].startswith('  cell  2 of 2 ')
    key = execute.cache_key(path)
    assert sorted(os.listdir(cache)) == [f'n.{key}.ipynb']

    def no_kernel(*args):
        pytest.fail('executed again with nothing changed')
    monkeypatch.setattr(execute, '_execute', no_kernel)
    again = execute.execute_cached(path, str(cache), lines.append)
    assert execute.outputs_text(again.cells[1]) == '1 None\n42\n'
    assert len(lines) == 2


def test_a_changed_notebook_runs_again_and_replaces_its_old_run(tmp_path):
    path = write_notebook(tmp_path / 'n.ipynb')
    cache = tmp_path / 'cache'
    execute.execute_cached(path, str(cache), lambda line: None)
    write_notebook(path, 'print("changed")')
    nb = execute.execute_cached(path, str(cache), lambda line: None)
    assert execute.outputs_text(nb.cells[1]) == 'changed\n'
    assert sorted(os.listdir(cache)) == [
        f'n.{execute.cache_key(path)}.ipynb']
