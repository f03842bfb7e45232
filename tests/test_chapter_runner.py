"""The cell runner: one namespace, notebook display, errors as results."""
import gc
import sys
import weakref

import mxnet as mx
import pytest

from d2l_bert.chapter.data_hooks import DataHooks
from d2l_bert.chapter.output import MAX_OUTPUT_CHARS
from d2l_bert.chapter.runner import Runner


@pytest.fixture
def run():
    """A fresh runner's `run` (each test gets its own namespace)."""
    return Runner(hooks=DataHooks(small=False)).run


def test_final_expression_is_shown_with_repr_after_printed_text(run):
    result = run("x = 'two'\nprint('printed')\nx, len(x)")
    assert result.status == 'ran'
    assert result.output == "printed\n('two', 3)\n"


def test_a_long_output_is_cut_and_says_how_much_was_cut(run):
    # 10 MB printed in pieces: the result keeps the first characters
    result = run("for _ in range(1000):\n    print('x' * 9999)\n"
                 "print('the end')")
    printed = ('x' * 9999 + '\n') * 1000 + 'the end\n'
    kept = printed[:MAX_OUTPUT_CHARS]
    assert result.status == 'ran'
    assert result.output == kept + \
        f'... {len(printed) - len(kept):,} more characters cut\n'


def test_cells_share_one_namespace(run):
    run('total = 40')
    assert run('total + 2').output == '42\n'


def test_a_dropped_runner_lets_go_of_what_its_cells_made():
    # The namespace is a module registered in `sys.modules` (pickle finds
    # the cells' classes there) only while its runner lives: the suite once
    # kept every runner's models, 6 GB of them
    runner = Runner(hooks=DataHooks(small=False))
    runner.run('class Made:\n    pass\nmade = Made()')
    name = runner.namespace['__name__']
    made = weakref.ref(runner.namespace['made'])
    assert sys.modules[name].made is made()
    del runner
    gc.collect()
    assert name not in sys.modules
    assert made() is None


def test_semicolon_and_none_display_nothing(run):
    assert run('1 + 1;').output == ''
    assert run('None').output == ''


def test_failed_cell_gives_last_error_line_and_next_cell_runs(run):
    failed = run('values = [1]\nvalues[3]')
    assert failed.status == 'failed'
    assert failed.error == 'IndexError: list index out of range'
    assert 'Traceback' in failed.traceback
    assert run('len(values)').output == '1\n'


def test_sys_exit_is_a_failed_cell_not_the_end_of_the_runner(run):
    result = run('import sys\nsys.exit(3)')
    assert (result.status, result.error) == ('failed', 'SystemExit: 3')
    assert run('1 + 1').output == '2\n'


def test_syntax_error_is_a_failed_cell(run):
    result = run('def f(:\n    pass')
    assert result.status == 'failed'
    assert result.error.startswith('SyntaxError:')


def test_ipython_magics_are_skipped_and_listed(run):
    result = run('%matplotlib inline\n!pip list\n3')
    assert result.output == '3\n'
    assert result.skipped_lines == ['%matplotlib inline', '!pip list']


def test_ctx_becomes_the_default_context():
    r = Runner(ctx=mx.cpu(1), hooks=DataHooks(small=False))
    r.run('from mxnet import np, npx\nnpx.set_np()')
    assert r.run('np.zeros((2,)).ctx').output == 'cpu(1)\n'


def test_runner_gives_its_hooks_the_cells_namespace():
    runner_ = Runner()
    runner_.run('PRETRAINED = "bert.small"')
    assert runner_.hooks.namespace['PRETRAINED'] == 'bert.small'
