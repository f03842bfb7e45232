"""The cell runner: one namespace, notebook display, the `d2l` shim."""
import gc
import os
import sys
import weakref

import mxnet as mx
import pytest

import d2l_bert
from d2l_bert.chapter import runner as runner_module
from d2l_bert.chapter.runner import DataHooks, Runner


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
    kept = printed[:runner_module.MAX_OUTPUT_CHARS]
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


def test_d2l_resolves_package_names_before_d2l_1_0_3(run):
    from d2l import mxnet as real_d2l
    r = Runner(hooks=DataHooks(small=False))
    assert r.d2l.BERTModel is d2l_bert.BERTModel
    assert r.d2l.TransformerEncoderBlock is d2l_bert.TransformerEncoderBlock
    assert r.d2l.Timer is real_d2l.Timer
    assert r.d2l.met == {'BERTModel': 'd2l_bert',
                         'TransformerEncoderBlock': 'd2l_bert',
                         'Timer': 'd2l 1.0.3'}


def test_both_naming_generations_resolve(run):
    r = Runner(hooks=DataHooks(small=False))
    assert r.d2l.EncoderBlock is d2l_bert.EncoderBlock
    assert r.d2l.TransformerEncoderBlock is d2l_bert.TransformerEncoderBlock


def test_a_0_17_name_falls_back_to_its_1_0_name(monkeypatch):
    from d2l import mxnet as real_d2l
    monkeypatch.setitem(runner_module.RENAMED_0_17, 'OldTimer', 'Timer')
    r = Runner(hooks=DataHooks(small=False))
    assert r.d2l.OldTimer is real_d2l.Timer
    assert r.d2l.met['OldTimer'] == '0.17 name of Timer'


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


def test_unknown_d2l_name_says_where_it_was_looked_for(run):
    result = run('d2l.no_such_thing')
    assert result.error == (
        "AttributeError: module 'd2l' has no attribute 'no_such_thing' "
        "(neither d2l_bert nor d2l 1.0.3 defines it)")


@pytest.mark.parametrize('line', [
    'from d2l import mxnet as d2l',
    'import d2l.mxnet as d2l',
])
def test_cell_imports_of_d2l_get_the_shim(run, line):
    result = run(f'{line}\nimport d2l_bert\n'
                 'd2l.BERTModel is d2l_bert.BERTModel')
    assert result.output == 'True\n'


def test_bare_import_d2l_answers_through_the_shim(run):
    result = run('import d2l\nimport d2l_bert\n'
                 '(d2l.mxnet.MaskLM is d2l_bert.MaskLM, '
                 'd2l.MaskLM is d2l_bert.MaskLM)')
    assert result.output == '(True, True)\n'


def test_other_imports_are_untouched(run):
    assert run('import json\njson.dumps([1])').output == "'[1]'\n"


def test_ctx_becomes_the_default_context():
    r = Runner(ctx=mx.cpu(1), hooks=DataHooks(small=False))
    r.run('from mxnet import np, npx\nnpx.set_np()')
    assert r.run('np.zeros((2,)).ctx').output == 'cpu(1)\n'


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


@pytest.mark.parametrize('name', sorted(runner_module.SMALL_CODE))
def test_each_small_size_replacement_matches_its_notebook_once(name):
    # A cell that drifts from `SMALL_CODE` fails here, not silently
    import glob

    import nbformat
    from d2l_bert.chapter.saved_cells import NOTEBOOK_DIR

    def code(path):
        nb = nbformat.read(path, as_version=4)
        return '\n'.join(c.source for c in nb.cells if c.cell_type == 'code')
    for book, small in runner_module.SMALL_CODE[name]:
        assert code(os.path.join(NOTEBOOK_DIR, name)).count(book) == 1, book
        assert sum(code(path).count(book) for path in glob.glob(
            os.path.join(NOTEBOOK_DIR, '*.ipynb'))) == 1, book
        assert book != small


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
        input_transformers_post, ast_transformers = [], []
    shell = Shell()
    # what the kernel keeps for its life, given back after the test
    monkeypatch.setitem(hub.STAND_INS, 'wikitext-2',
                        hub.STAND_INS['wikitext-2'])
    monkeypatch.setattr(d2l, 'get_dataloader_workers',
                        d2l.get_dataloader_workers)
    assert runner_module.small_sizes_in_kernel(shell)
    assert runner_module.small_sizes_in_kernel(shell)  # once only
    gc.collect()
    assert hub.STAND_INS['wikitext-2'] is runner_module.small_wikitext
    assert d2l.get_dataloader_workers() == 0
    assert capsys.readouterr().out == ''  # the set-up cell stays silent
    assert len(shell.input_transformers_post) == 1
    transform, = shell.input_transformers_post
    assert transform(['lr, num_epochs = 1e-4, 5\n']) == [
        "print('small sizes: `lr, num_epochs = 1e-4, 5` -> "
        "`lr, num_epochs = 1e-4, 1`', flush=True)\n",
        'lr, num_epochs = 1e-4, 1\n']
    assert transform(['x = 1\n']) == ['x = 1\n']
    assert len(shell.ast_transformers) == 1


def test_small_sizes_follow_the_environment(monkeypatch):
    monkeypatch.setenv('D2L_BERT_SMALL', '1')
    assert DataHooks().small
    monkeypatch.setenv('D2L_BERT_SMALL', '0')
    assert not DataHooks().small


def test_wikitext_2_is_read_from_the_embedded_corpus(run):
    result = run("d2l.download_extract('wikitext-2', 'wikitext-2')")
    path = eval(result.output)
    assert os.path.isfile(os.path.join(path, 'wiki.train.tokens'))
    assert run('d2l.get_dataloader_workers()').output == '0\n'


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


@pytest.mark.skipif(mx.context.num_gpus() > 0, reason='has a GPU')
def test_try_all_gpus_falls_back_to_the_cpu(run):
    assert run('d2l.try_all_gpus()').output == '[cpu(0)]\n'


def test_books_animator_draws_outside_a_notebook(run):
    result = run("animator = d2l.Animator(xlabel='step', xlim=[1, 2], "
                 "legend=['mlm'])\nanimator.add(1, (0.5,))")
    assert (result.status, result.error, result.figures) == ('ran', None, 1)


def test_train_ch13_at_small_sizes_trains_one_epoch_on_five_small_batches(
        monkeypatch):
    from mxnet import np

    from d2l_bert.chapter.runner import _real_d2l
    calls = []
    monkeypatch.setattr(_real_d2l(), 'train_ch13',
                        lambda *args: calls.append(args))
    hooks = DataHooks(small=True, steps=2)
    train_ch13 = hooks.overrides({})['train_ch13']
    # one batch of 20 examples with two inputs, as SNLI's loader gives
    features = (np.arange(40).reshape(20, 2), np.zeros((20, 3)))
    train_iter = [(features, np.arange(20))]
    test_iter = [(features, np.arange(20))]
    train_ch13('net', train_iter, test_iter, 'loss', 'trainer', 5, 'devices')
    [(net, train, test, loss, trainer, epochs, devices)] = calls
    assert (net, loss, trainer, epochs, devices) == (
        'net', 'loss', 'trainer', 1, 'devices')
    # d2l's loop takes a fifth of the batch count: 5 batches, not 0
    assert len(train) == 5 and len(test) == 1
    batches = list(train)
    assert [b[0][0].shape for b in batches] == [(4, 2)] * 5
    assert [b[1].tolist() for b in batches][:2] == [[0, 1, 2, 3],
                                                    [4, 5, 6, 7]]
    assert 'd2l.train_ch13 trained 1 epoch on 5 batches of at most 8 ' \
        'examples' in hooks.used


def _record_train_ch13(monkeypatch):
    from d2l_bert.chapter.runner import _real_d2l
    calls = []
    monkeypatch.setattr(_real_d2l(), 'train_ch13',
                        lambda *args: calls.append(args))
    return calls


@pytest.mark.parametrize('small, steps', [(False, 2), (True, None)])
def test_train_ch13_passes_five_batches_on_at_book_sizes_and_for_notebooks(
        monkeypatch, small, steps):
    calls = _record_train_ch13(monkeypatch)
    hooks = DataHooks(small=small, steps=steps)
    train_iter = [('X', 'y')] * 5
    hooks.overrides({})['train_ch13']('net', train_iter, 'test', 'loss',
                                      'trainer', 5, 'devices', 'split')
    assert calls == [('net', train_iter, 'test', 'loss', 'trainer', 5,
                      'devices', 'split')]
    assert hooks.used == set()


def test_train_ch13_gets_an_epoch_of_two_batches_in_five(monkeypatch):
    from mxnet import np
    calls = _record_train_ch13(monkeypatch)
    hooks = DataHooks(small=False)
    # 1,000 pairs at the book's batch 512 are 2 batches: d2l's loop takes
    # `num_batches // 5`, 0, modulo
    features = [np.arange(20).reshape(10, 2), np.arange(10)]
    train_iter = [(features, np.arange(10)),
                  ([f[:3] for f in features], np.arange(3))]
    hooks.overrides({})['train_ch13']('net', train_iter, 'test', 'loss',
                                      'trainer', 5, 'devices')
    [(_, recut, test, *_)] = calls
    assert test == 'test' and len(recut) == 5
    batches = list(recut)
    assert [len(y) for _, y in batches] == [2, 3, 2, 3, 3]
    assert np.concatenate([y for _, y in batches]).tolist() == (
        list(range(10)) + [0, 1, 2])
    assert batches[0][0][0].tolist() == [[0, 1], [2, 3]]
    assert any(note.startswith('d2l.train_ch13 got each epoch in 5 '
                               'batches') for note in hooks.used)


@pytest.mark.parametrize('pairs, note', [
    (1000, "fine-tuned on 1,000 SNLI pairs, 5 epoch(s); --full for the "
           "book's 549,367"),
    (549367, 'fine-tuned on 549,367 SNLI pairs, 5 epoch(s)')])
def test_fine_tuning_note_says_what_is_fine_tuned(pairs, note):
    from d2l_bert.chapter.runner import fine_tuning_note

    class Pairs:
        all_token_ids = None

        def __len__(self):
            return pairs

    class Loader:
        _dataset = Pairs()
    assert fine_tuning_note(Loader(), 5) == note


def test_fine_tuning_note_is_none_outside_the_fine_tuning_notebook():
    from d2l_bert.chapter.runner import fine_tuning_note
    assert fine_tuning_note([], 5) is None
    assert fine_tuning_note([(1, 2)] * 3, 5) is None


def test_runner_gives_its_hooks_the_cells_namespace():
    runner_ = Runner()
    runner_.run('PRETRAINED = "bert.small"')
    assert runner_.hooks.namespace['PRETRAINED'] == 'bert.small'


def test_notebooks_get_small_sizes_from_the_environment():
    assert DataHooks(small=True).notebook_environment() == {
        'D2L_BERT_SMALL': '1'}
    assert DataHooks(small=False).notebook_environment() == {}