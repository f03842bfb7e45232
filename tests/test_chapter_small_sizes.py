"""Small sizes: one rewriting of the cells, in the runner and in a kernel."""
import ast
import gc
import glob
import os

import pytest

from d2l_bert import presets
from d2l_bert.chapter import small_sizes
from d2l_bert.chapter.data_hooks import DataHooks
from d2l_bert.chapter.runner import Runner


_TRAIN_BERT = ('def train_bert(train_iter, net, loss, vocab_size, devices, '
               'num_steps):\n    return num_steps')


def test_train_bert_steps_are_capped_at_small_sizes():
    r = Runner(hooks=DataHooks(small=True, steps=3))
    r.run(_TRAIN_BERT)
    assert r.run('train_bert(1, 2, 3, 4, 5, 50)').output == '3\n'
    assert r.run('train_bert(1, 2, 3, 4, 5, num_steps=50)').output == '3\n'
    assert r.run('train_bert(1, 2, 3, 4, 5, 1)').output == '1\n'
    assert 'train_bert steps capped to 3' in r.hooks.used


def test_train_bert_steps_are_kept_at_book_sizes():
    r = Runner(hooks=DataHooks(small=False))
    r.run(_TRAIN_BERT)
    assert r.run('train_bert(1, 2, 3, 4, 5, 50)').output == '50\n'
    assert not r.hooks.used


def _code_cells(path):
    import nbformat
    nb = nbformat.read(path, as_version=4)
    return [c.source for c in nb.cells if c.cell_type == 'code']


def _notebooks():
    from d2l_bert.chapter.saved_cells import NOTEBOOK_DIR
    return sorted(glob.glob(os.path.join(NOTEBOOK_DIR, '*.ipynb')))


def _found(code, book):
    """How many statements or expressions of `code` are `book`."""
    body = ast.parse(book).body[0]
    wanted = ast.dump(body.value if isinstance(body, ast.Expr) else body)
    return sum(ast.dump(node) == wanted for node in ast.walk(ast.parse(code)))


@pytest.mark.parametrize('name', sorted(presets.SMALL_CODE))
def test_each_small_size_replacement_matches_its_notebook_once(name):
    # A cell that drifts from `SMALL_CODE` fails here, not silently: as
    # the cell writes it, and node for node, as `SmallSizes` finds it
    for book, small in presets.SMALL_CODE[name]:
        for found in (str.count, _found):
            counts = {os.path.basename(path): sum(
                found(code, book) for code in _code_cells(path))
                for path in _notebooks()}
            assert counts[name] == 1, book
            assert sum(counts.values()) == 1, book
        assert book != small


def test_in_the_notebooks_the_tree_is_rewritten_as_the_tables_text():
    # `SmallSizes` replaces, in each notebook cell, what replacing the
    # table's text would: the same tree
    pairs = [pair for pairs in presets.SMALL_CODE.values() for pair in pairs]
    for path in _notebooks():
        for code in _code_cells(path):
            text = code
            for book, small in pairs:
                text = text.replace(book, small)
            tree = small_sizes.SmallSizes(steps=None).visit(ast.parse(code))
            assert ast.dump(tree) == ast.dump(ast.parse(text)), code


def test_the_books_code_is_replaced_then_the_steps_are_capped():
    sizes = small_sizes.SmallSizes(steps=2)
    tree = sizes.visit(ast.parse(
        'x = 1\ntrain_bert(train_iter, net, loss, len(vocab), devices, 50)'))
    assert ast.unparse(tree) == (
        'x = 1\ntrain_bert(train_iter, net, loss, len(vocab), devices, '
        'min(2, 2))')
    assert sizes.capped and sizes.replaced == [
        'small sizes: `train_bert(train_iter, net, loss, len(vocab), '
        'devices, 50)` -> `train_bert(train_iter, net, loss, len(vocab), '
        'devices, 2)`']
    # the small code stands where the book's stood
    assert {node.lineno for node in ast.walk(tree.body[1])
            if hasattr(node, 'lineno')} == {2}


def test_small_code_is_one_statement_or_expression():
    with pytest.raises(ValueError, match='one statement or expression'):
        small_sizes.SmallSizes(table={'x.ipynb': [('a = 1; b = 2', 'a = 0')]})


def test_small_sizes_replace_the_books_sizes_and_say_so():
    r = Runner(hooks=DataHooks(small=True))
    assert r.run('lr, num_epochs = 1e-4, 5\nnum_epochs').output == '1\n'
    assert ('small sizes: `lr, num_epochs = 1e-4, 5` -> '
            '`lr, num_epochs = 1e-4, 1`') in r.hooks.used
    r = Runner(hooks=DataHooks(small=False))
    assert r.run('lr, num_epochs = 1e-4, 5\nnum_epochs').output == '5\n'


def test_small_sizes_in_a_kernel_transform_its_cells(capsys, monkeypatch):
    from d2l import mxnet as d2l
    from d2l_bert.data import hub

    class Shell:
        ast_transformers = []
    shell = Shell()
    # what the kernel keeps for its life, given back after the test
    monkeypatch.setitem(hub.STAND_INS, 'wikitext-2',
                        hub.STAND_INS['wikitext-2'])
    workers = d2l.get_dataloader_workers
    assert small_sizes.small_sizes_in_kernel(shell)
    assert small_sizes.small_sizes_in_kernel(shell)  # once only
    gc.collect()
    assert hub.STAND_INS['wikitext-2'] is small_sizes.small_wikitext
    # the loaders' workers are `hosted.in_kernel`'s, at every size
    assert d2l.get_dataloader_workers is workers
    assert capsys.readouterr().out == ''  # the set-up cell stays silent
    transform, = shell.ast_transformers

    def cell(code):
        return ast.unparse(transform.visit(ast.parse(code)))
    # the cell says what was replaced in it, first
    assert cell('lr, num_epochs = 1e-4, 5\n') == (
        "print('small sizes: `lr, num_epochs = 1e-4, 5` -> "
        "`lr, num_epochs = 1e-4, 1`', flush=True)\n"
        'lr, num_epochs = (0.0001, 1)')
    assert cell('x = 1\n') == 'x = 1'
    assert cell('train_bert(a, b, c, d, e, num_steps=50)') == (
        'train_bert(a, b, c, d, e, num_steps=min(50, 2))')
