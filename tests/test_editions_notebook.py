"""Reading notebooks: every code cell is MXNet, outputs as Jupyter saved
them."""
import json

from d2l_bert.editions import read_edition


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
