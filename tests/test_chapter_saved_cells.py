"""The notebooks' ``#@save`` cells equal the package
(`d2l_bert.chapter.saved_cells`).

A student edits the definitions in the notebooks; the package holds the
same code, and the numpy-doc docstrings whose summaries the cells hold.
These tests fail when the two differ by a line of code or of a summary,
and when a section's definition is missing from its notebook.
"""
import copy
import os

import pytest

import d2l_bert
from d2l_bert.chapter import saved_cells

nbformat = pytest.importorskip('nbformat')

NAMES = sorted(saved_cells.NOTEBOOKS)


def _read(name):
    return nbformat.read(os.path.join(saved_cells.NOTEBOOK_DIR, name),
                         as_version=4)


def _saved(nb):
    return [cell for cell in nb.cells if saved_cells.is_saved(cell)]


@pytest.mark.parametrize('name', NAMES)
def test_every_saved_cell_equals_the_package(name):
    assert saved_cells.problems(_read(name), name) == []


@pytest.mark.parametrize('name', NAMES)
def test_cells_hold_a_one_line_summary_and_no_method_docstring(name):
    import ast
    module_name, _ = saved_cells.NOTEBOOKS[name]
    module = __import__(module_name, fromlist=['_'])
    for cell in _saved(_read(name)):
        assert 'Parameters\n' not in cell.source
        assert 'Defined in :numref:' not in cell.source
        for node in ast.walk(ast.parse(cell.source)):
            if not isinstance(node, (ast.FunctionDef, ast.ClassDef)) \
                    or node.col_offset:
                continue
            summary = ast.get_docstring(node)
            full = getattr(module, node.name).__doc__
            assert summary is not None, node.name
            assert '\n' not in summary.strip(), f'{node.name}: one line'
            for inner in ast.walk(node):  # the book's methods have none
                if inner is not node and isinstance(inner, ast.FunctionDef):
                    assert ast.get_docstring(inner) is None, inner.name
            assert ' '.join(summary.split()) == ' '.join(
                full.split('\n\n')[0].split()), node.name


# The definitions each section of the book writes out (MXNet edition) that
# the package holds, in its order; the notebooks may write out more (the
# book's `get_bert_encoding`, which reads the notebook's globals, stays a
# plain cell)
BOOK_DEFINITIONS = {
    'bert.ipynb': ['get_tokens_and_segments', 'BERTEncoder', 'MaskLM',
                   'NextSentencePred', 'BERTModel'],
    'bert-dataset.ipynb': [
        '_read_wiki', '_get_next_sentence', '_get_nsp_data_from_paragraph',
        '_replace_mlm_tokens', '_get_mlm_data_from_tokens',
        '_pad_bert_inputs', '_WikiTextDataset', 'load_data_wiki'],
    'bert-pretraining.ipynb': ['_get_batch_loss_bert', 'train_bert'],
    'natural-language-inference-bert.ipynb': [
        'load_pretrained_model', 'SNLIBERTDataset', 'BERTClassifier'],
}


@pytest.mark.parametrize('name', NAMES)
def test_each_notebook_writes_out_the_books_definitions_in_order(name):
    written = [n for cell in _saved(_read(name))
               for n in saved_cells.cell_names(cell.source)]
    assert [n for n in written if n in BOOK_DEFINITIONS[name]] == \
        BOOK_DEFINITIONS[name]
    module_name, labels = saved_cells.NOTEBOOKS[name]
    assert saved_cells.section_names(module_name, labels) == \
        BOOK_DEFINITIONS[name]


def test_a_line_changed_in_a_cell_is_reported_with_a_diff():
    nb = _read('bert.ipynb')
    cell = next(c for c in _saved(nb)
                if saved_cells.cell_names(c.source) == ['BERTEncoder'])
    cell.source = cell.source.replace(
        "self.segment_embedding = nn.Embedding(2, num_hiddens)",
        "self.segment_embedding = nn.Embedding(3, num_hiddens)")
    found = saved_cells.problems(nb, 'bert.ipynb')
    assert len(found) == 1
    assert '-        self.segment_embedding = nn.Embedding(2, num_hiddens)' \
        in found[0]
    assert '+        self.segment_embedding = nn.Embedding(3, num_hiddens)' \
        in found[0]
    assert found[0].startswith('--- d2l_bert.book.bert (BERTEncoder)')


def test_a_missing_definition_is_reported():
    nb = _read('bert-pretraining.ipynb')
    nb.cells = [c for c in nb.cells
                if saved_cells.cell_names(c.source) != ['train_bert']
                or not saved_cells.is_saved(c)]
    assert saved_cells.problems(nb, 'bert-pretraining.ipynb') == [
        'bert-pretraining.ipynb: train_bert (defined by the section, in '
        'd2l_bert.book.pretraining) is not written out in a #@save cell']


def test_a_saved_cell_of_a_name_the_package_lacks_is_reported():
    nb = _read('bert.ipynb')
    nb.cells.append(nbformat.v4.new_code_cell(
        '#@save\nclass BERTDecoder:\n    pass'))
    found = saved_cells.problems(nb, 'bert.ipynb')
    assert found == [f'bert.ipynb cell {len(nb.cells)}: #@save cell defines '
                     'BERTDecoder that d2l_bert.book.bert does not define']


def test_write_fills_a_stub_and_restores_an_edited_cell():
    original = _read('bert-dataset.ipynb')
    nb = copy.deepcopy(original)
    cells = _saved(nb)
    assert saved_cells.cell_names(cells[1].source) == ['_get_next_sentence']
    cells[1].source = '#@save\ndef _get_next_sentence(): pass'
    cells[2].source = cells[2].source.replace('max_len', 'maxlen')
    assert len(saved_cells.problems(nb, 'bert-dataset.ipynb')) == 2
    assert saved_cells.write(nb, 'bert-dataset.ipynb') == 2
    assert saved_cells.problems(nb, 'bert-dataset.ipynb') == []
    assert [c.source for c in _saved(nb)] == \
        [c.source for c in _saved(original)]


def test_the_books_layer_imports_nothing_of_the_fast_layer():
    for module in ('attention', 'transformer', 'bert'):
        path = os.path.join(os.path.dirname(d2l_bert.__file__), 'book',
                            f'{module}.py')
        with open(path, encoding='utf-8') as f:
            text = f.read()
        assert 'fast' not in text.replace('fast twin', '').replace(
            'd2l_bert.fast', ''), module
        assert '_kernels' not in text, module


def _run_bert_notebook(edit=None):
    """Run bert.ipynb's cells up to ``encoded_X`` with a fixed seed, the
    `BERTEncoder` cell passed through `edit`; return ``encoded_X``."""
    import mxnet as mx

    from d2l_bert.chapter.runner import Runner
    runner = Runner()
    for cell in _read('bert.ipynb').cells:
        if cell.cell_type != 'code':
            continue
        source = cell.source
        if edit and saved_cells.cell_names(source) == ['BERTEncoder']:
            source = edit(source)
        mx.random.seed(0)  # the same parameters and tokens every run
        result = runner.run(source)
        assert result.status == 'ran', result.traceback
        if 'encoded_X' in runner.namespace:
            return runner.namespace['encoded_X'].asnumpy()
    raise AssertionError('no cell computed encoded_X')


def test_an_edited_definition_is_what_the_later_cells_run():
    # The book's first exercise: GELU instead of ReLU in the encoder (the
    # book's block has no option: the original BERT's block, with the
    # book's LayerNorm epsilon)
    def gelu(source):
        edited = source.replace(
            'TransformerEncoderBlock(\n                num_hiddens, '
            'ffn_num_hiddens, num_heads, dropout, True))',
            "OriginalEncoderBlock(\n                num_hiddens, "
            "ffn_num_hiddens, num_heads, dropout, True, 'gelu', 1e-5))")
        assert edited != source
        return ('from d2l_bert.hf.original import OriginalEncoderBlock\n'
                + edited)
    relu = _run_bert_notebook()
    again = _run_bert_notebook()
    gelu_X = _run_bert_notebook(gelu)
    assert relu.shape == gelu_X.shape == (2, 8, 768)
    assert abs(relu - again).max() == 0  # the same seed, the same numbers
    assert abs(relu - gelu_X).max() > 1e-3
