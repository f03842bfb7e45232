"""A cell's figures and IPython displays, counted and not shown."""
import pytest

from d2l_bert.chapter.data_hooks import DataHooks
from d2l_bert.chapter.runner import Runner


@pytest.fixture
def run():
    """A fresh runner's `run` (each test gets its own namespace)."""
    return Runner(hooks=DataHooks(small=False)).run


def test_figures_are_counted_not_printed(run):
    result = run('import matplotlib.pyplot as plt\n'
                 'from IPython import display\n'
                 'fig = plt.figure()\n'
                 'display.display(fig)\n'
                 'display.clear_output(wait=True)\n'
                 'display.display(fig)')
    assert result.status == 'ran'
    assert result.output == ''
    assert result.figures == 1


def test_books_animator_draws_outside_a_notebook(run):
    result = run("animator = d2l.Animator(xlabel='step', xlim=[1, 2], "
                 "legend=['mlm'])\nanimator.add(1, (0.5,))")
    assert (result.status, result.error, result.figures) == ('ran', None, 1)
