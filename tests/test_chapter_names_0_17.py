"""The 0.17 releases' keyword names, which the cells of their editions
pass."""
import pytest

from d2l_bert.chapter.data_hooks import DataHooks
from d2l_bert.chapter.runner import Runner


@pytest.fixture
def run():
    """A fresh runner's `run` (each test gets its own namespace)."""
    return Runner(hooks=DataHooks(small=False)).run


def test_num_layers_is_accepted_as_in_the_017_editions(run):
    # The book's classes take `num_blks`; the runner passes the 0.17
    # cells' `num_layers` on
    result = run('encoder = d2l.BERTEncoder(99, 32, 48, 4, num_layers=3, '
                 'dropout=0.1)\n'
                 'net = d2l.BERTModel(99, 32, 48, 4, num_layers=1, '
                 'dropout=0.1)\n'
                 'len(encoder.blks), len(net.encoder.blks)')
    assert result.error is None and result.output == '(3, 1)\n'
    result = run('d2l.BERTEncoder(99, 32, 48, 4, **dict(num_layers=2, '
                 'num_blks=3, dropout=0.1))')
    assert result.error == ('TypeError: num_blks=3 and num_layers=2 '
                            'disagree; pass one of them')


def test_keywords_of_cells_own_classes_are_left_alone(run):
    result = run('class BERTEncoder:\n'
                 '    def __init__(self, num_layers):\n'
                 '        self.n = num_layers\n'
                 'BERTEncoder(num_layers=2).n')
    assert result.output == '2\n'
