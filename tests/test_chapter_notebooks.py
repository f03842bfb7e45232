"""What the notebooks run beyond the book's cells
(`d2l_bert.chapter.notebooks`): the settings they read from the
environment, and the model they fine-tune."""
import json
import os

import mxnet as mx
import pytest

import d2l_bert
from d2l_bert import presets
from d2l_bert.chapter import notebooks
from d2l_bert.data.snli_synthetic import make_snli_synthetic

SMALL = {'D2L_BERT_SMALL': '1'}


def _never(name):
    raise AssertionError(f'looked for {name} on the network')


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """The data cache (``$D2L_BERT_DATA``), in a temporary folder."""
    folder = tmp_path / 'cache'
    monkeypatch.setenv('D2L_BERT_DATA', str(folder))
    return folder


@pytest.mark.parametrize('value, small', [
    (None, False), ('', False), ('0', False), (' 0 ', False), ('1', True),
    ('yes', True)])
def test_small_sizes_read_the_environment_given(value, small):
    environ = {} if value is None else {'D2L_BERT_SMALL': value}
    assert notebooks.small_sizes(environ) is small


@pytest.mark.parametrize('code, calls', [
    ('settings = d2l_bert.chapter.finetuning_settings()', True),
    ('settings = d2l_bert.chapter.model_to_finetune(s)', False),
    ("x = 'finetuning_settings()'", False),
    ('def (', False)])
def test_calls_settings_finds_the_cells_that_read_the_environment(code,
                                                                  calls):
    assert notebooks.calls_settings(code) is calls


def test_the_notebooks_read_the_environment_in_one_cell_each():
    import nbformat
    from d2l_bert.chapter.hosted import is_setup_cell
    from d2l_bert.chapter.saved_cells import NOTEBOOK_DIR
    for name in ('natural-language-inference-bert.ipynb',):
        nb = nbformat.read(os.path.join(NOTEBOOK_DIR, name), as_version=4)
        # the hosted set-up cell reads D2L_BERT_SOURCE: set-up, not the
        # section's settings
        code = [c.source for c in nb.cells if c.cell_type == 'code'
                and not is_setup_cell(c.source)]
        assert sum(map(notebooks.calls_settings, code)) == 1, name
    for name in ('bert-pretraining.ipynb',
                 'natural-language-inference-bert.ipynb'):
        nb = nbformat.read(os.path.join(NOTEBOOK_DIR, name), as_version=4)
        code = [c.source for c in nb.cells if c.cell_type == 'code'
                and not is_setup_cell(c.source)]
        assert not any('os.environ' in c or 'D2L_BERT_' in c
                       for c in code), name


@pytest.mark.parametrize('pairs', ['all', '0'])
def test_finetuning_settings_are_the_books_when_it_can_download(
        cache, capsys, pairs):
    settings = notebooks.finetuning_settings(
        {'D2L_BERT_SNLI_PAIRS': pairs}, reachable=lambda _: True)
    assert (settings.small, settings.pretrained, settings.snli,
            settings.snli_pairs) == (False, 'bert.small', 'snli', 0)
    assert settings.work_dir == str(cache / 'notebook-small')
    assert capsys.readouterr().out == (
        "small=False, pretrained='bert.small', data='snli'\n")
    assert not cache.exists()


def test_finetuning_settings_go_offline_when_nothing_downloads(cache,
                                                               capsys):
    settings = notebooks.finetuning_settings({}, reachable=lambda _: False)
    assert settings.small and settings.pretrained == 'bert.small'
    assert settings.snli == str(cache / 'notebook-small' / 'snli_1.0')
    # the 1,000 labelled pairs the notebook reads (`read 1000 examples`)
    assert len(d2l_bert.read_snli(settings.snli_dir(), True)[2]) == 1000
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith('bert.small or SNLI cannot be downloaded '
                             'here: running the offline version')
    assert out[1] == (f"small=True, pretrained='bert.small', "
                      f"data={settings.snli!r}")


def test_finetuning_settings_take_the_model_and_data_they_are_given(
        cache, tmp_path):
    environ = {'D2L_BERT_PRETRAINED': '/models/mine',
               'D2L_BERT_SNLI': str(tmp_path), 'D2L_BERT_SNLI_PAIRS': 'all'}
    settings = notebooks.finetuning_settings(environ, reachable=_never)
    assert (settings.small, settings.pretrained, settings.snli) == (
        False, '/models/mine', str(tmp_path))
    small = notebooks.finetuning_settings(dict(environ, **SMALL),
                                          reachable=_never)
    # SNLI's files named in the environment stay, even at small sizes
    assert small.small and small.snli == str(tmp_path)


def test_finetuning_settings_read_the_first_pairs_asked_for(cache, tmp_path,
                                                            capsys):
    snli = make_snli_synthetic(str(tmp_path), num_train=20, num_dev=2,
                               num_test=20)
    environ = {'D2L_BERT_SNLI': snli, 'D2L_BERT_SNLI_PAIRS': '3'}
    settings = notebooks.finetuning_settings(environ, reachable=_never)
    assert settings.snli == str(cache / 'snli-first-3')
    assert settings.snli_pairs == 3 and not settings.small
    train, test = d2l_bert.read_snli(settings.snli_dir(), True), \
        d2l_bert.read_snli(settings.snli_dir(), False)
    assert [len(split[2]) for split in (train, test)] == [3, 3]
    assert ("D2L_BERT_SNLI_PAIRS=all for the book's run, on all 549,367 "
            "training pairs") in capsys.readouterr().out


def test_finetuning_settings_read_the_chapters_pairs_unless_told(
        cache, tmp_path, monkeypatch):
    monkeypatch.setattr(notebooks, 'CHAPTER_SNLI_PAIRS', 4)
    snli = make_snli_synthetic(str(tmp_path), num_train=20, num_dev=2,
                               num_test=20)
    settings = notebooks.finetuning_settings({'D2L_BERT_SNLI': snli},
                                             reachable=_never)
    assert settings.snli_pairs == 4 and not settings.small
    assert len(d2l_bert.read_snli(settings.snli_dir(), True)[2]) == 4


@pytest.mark.parametrize('value', ['-5', 'many', '1e3'])
def test_finetuning_settings_refuse_pairs_that_are_no_number(value):
    with pytest.raises(ValueError, match=(
            f"D2L_BERT_SNLI_PAIRS must be a whole number of pairs \\(0 or "
            f"all for all of them\\), got '{value}'")):
        notebooks.finetuning_settings({'D2L_BERT_SNLI_PAIRS': value},
                                      reachable=_never)


def test_model_to_finetune_is_bert_small_at_the_books_sizes(cache):
    settings = notebooks.finetuning_settings(
        {'D2L_BERT_SNLI_PAIRS': 'all'}, reachable=lambda _: True)
    assert notebooks.model_to_finetune(settings) == (
        'bert.small', presets.BERT_SMALL)
    assert not cache.exists()


def test_model_to_finetune_reads_a_directorys_sizes(cache, tmp_path):
    config = dict(num_hiddens=16, ffn_num_hiddens=32, num_heads=2,
                  num_blks=1, max_len=40, dropout=0.3, vocab_size=9)
    (tmp_path / 'config.json').write_text(json.dumps(config))
    settings = notebooks.finetuning_settings(
        {'D2L_BERT_PRETRAINED': str(tmp_path), 'D2L_BERT_SNLI': 'x',
         'D2L_BERT_SNLI_PAIRS': 'all'}, reachable=_never)
    # the book fine-tunes with bert.small's dropout, whatever pretrained
    sizes = {k: v for k, v in config.items() if k != 'vocab_size'}
    sizes['dropout'] = presets.BERT_SMALL['dropout']
    assert notebooks.model_to_finetune(settings) == (str(tmp_path), sizes)


def test_small_runs_pretrain_a_tiny_bert_the_book_can_load(cache):
    settings = notebooks.finetuning_settings(SMALL, reachable=_never)
    pretrained, sizes = notebooks.model_to_finetune(settings)
    assert pretrained == os.path.join(settings.work_dir, 'tiny-bert')
    assert sorted(os.listdir(pretrained)) == [
        'config.json', 'pretrained.params', 'vocab.json']
    assert sizes == notebooks.TINY_BERT
    bert, vocab = d2l_bert.load_pretrained_model(pretrained, **sizes,
                                                 devices=[mx.cpu()])
    assert bert.encoder.token_embedding.weight.shape == (
        len(vocab), sizes['num_hiddens'])
    assert bert.encoder.pos_embedding.shape == (1, sizes['max_len'],
                                                sizes['num_hiddens'])
