"""Reading notebooks: every code cell is MXNet, outputs as Jupyter saved
them."""
import json
import warnings

import pytest

from d2l_bert.chapter import editions
from d2l_bert.chapter.editions import read_edition


def test_notebook_cells_are_mxnet_and_label_from_metadata(tmp_path):
    nb = {'cells': [
        {'cell_type': 'markdown', 'metadata': {}, 'source': ['# T']},
        {'cell_type': 'code', 'metadata': {}, 'execution_count': 1,
         'source': ['1 + 1'], 'outputs': [
             {'output_type': 'execute_result', 'execution_count': 1,
              'metadata': {}, 'data': {'text/plain': '2'}}]}],
        'metadata': {'d2l_bert': {'label': 'sec_x'}},
        'nbformat': 4, 'nbformat_minor': 5}
    path = tmp_path / 'x.ipynb'
    path.write_text(json.dumps(nb))
    edition = read_edition(str(path))
    assert edition.label == 'sec_x'
    assert [(c.code, c.output) for c in edition.cells] == [('1 + 1', '2\n')]


def test_notebook_of_version_3_is_read_as_version_4(tmp_path):
    nb = {'nbformat': 3, 'nbformat_minor': 0, 'metadata': {},
          'worksheets': [{'metadata': {}, 'cells': [
              {'cell_type': 'markdown', 'metadata': {},
               'source': [':label:`sec_old`']},
              {'cell_type': 'code', 'language': 'python', 'metadata': {},
               'input': ['x = 2\n', 'x'], 'prompt_number': 1,
               'outputs': [{'output_type': 'pyout', 'prompt_number': 1,
                            'metadata': {}, 'text': ['2']}]}]}]}
    path = tmp_path / 'old.ipynb'
    path.write_text(json.dumps(nb))
    edition = read_edition(str(path))
    assert edition.label == 'sec_old'
    assert [(c.code, c.output, c.line) for c in edition.cells] == [
        ('x = 2\nx', '2\n', 2)]


def _notebook(cells):
    return json.dumps({'cells': cells, 'metadata': {}, 'nbformat': 4,
                       'nbformat_minor': 4})


@pytest.mark.parametrize('text, says', [
    ('{"cells": [', 'is not a notebook: Expecting value: line 1 column 12 '
                    '(char 11)'),
    ('[1, 2]', "is not a notebook: 'list' object has no attribute 'get'"),
    (_notebook([{'cell_type': 'code', 'metadata': {}, 'source': 'x',
                 'execution_count': None, 'outputs': [
                     {'output_type': 'stream', 'text': 'hi'}]}]),
     "is not a valid notebook: 'name' is a required property (at "
     'cells/0/outputs/0)'),
    (_notebook([{'cell_type': 'code', 'source': 'x'}]),
     'is not a notebook: The notebook is invalid and is missing an '
     'expected key: metadata'),
])
def test_malformed_notebook_is_an_edition_error_naming_the_file(
        tmp_path, text, says):
    path = tmp_path / 'bad.ipynb'
    path.write_text(text)
    with pytest.raises(editions.EditionError) as info:
        read_edition(str(path))
    assert str(info.value) == f'{path} {says}'


def test_notebook_without_cell_ids_reads_without_a_warning(tmp_path):
    path = tmp_path / 'x.ipynb'
    path.write_text(json.dumps({
        'cells': [{'cell_type': 'code', 'metadata': {}, 'source': 'x',
                   'execution_count': None, 'outputs': []}],
        'metadata': {}, 'nbformat': 4, 'nbformat_minor': 5}))
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        edition = read_edition(str(path))
    assert [c.code for c in edition.cells] == ['x']
