"""What the notebooks run beyond the book's cells
(`d2l_bert.chapter.notebooks`): small sizes are asked for by the
environment, which no cell reads."""
import os

import pytest

from d2l_bert import presets
from d2l_bert.chapter import notebooks


@pytest.mark.parametrize('value, small', [
    (None, False), ('', False), ('0', False), (' 0 ', False), ('1', True),
    ('yes', True)])
def test_small_sizes_read_the_environment_given(value, small):
    environ = {} if value is None else {presets.SMALL_ENV: value}
    assert notebooks.small_sizes(environ) is small


@pytest.mark.parametrize('code, calls', [
    ('settings = d2l_bert.chapter.finetuning_settings()', True),
    ('settings = d2l_bert.chapter.model_to_finetune(s)', False),
    ("x = 'finetuning_settings()'", False),
    ('def (', False)])
def test_calls_settings_finds_the_cells_that_read_the_environment(code,
                                                                  calls):
    assert notebooks.calls_settings(code) is calls


def test_no_cell_of_the_notebooks_reads_the_environment():
    import nbformat
    from d2l_bert.chapter.hosted import is_setup_cell
    from d2l_bert.chapter.saved_cells import NOTEBOOK_DIR
    for name in ('bert-pretraining.ipynb',
                 'natural-language-inference-bert.ipynb'):
        nb = nbformat.read(os.path.join(NOTEBOOK_DIR, name), as_version=4)
        # the hosted set-up cell reads D2L_BERT_SOURCE: set-up, not the
        # section's
        code = [c.source for c in nb.cells if c.cell_type == 'code'
                and not is_setup_cell(c.source)]
        assert not any(map(notebooks.calls_settings, code)), name
        assert not any('os.environ' in c or 'D2L_BERT_' in c
                       for c in code), name
