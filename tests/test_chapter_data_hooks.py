"""The runner's data and training hooks: the `d2l` names answered first."""
import os

import mxnet as mx
import pytest

from d2l_bert.chapter.d2l_shim import real_d2l
from d2l_bert.chapter.data_hooks import DataHooks, fine_tuning_note
from d2l_bert.chapter.runner import Runner
from d2l_bert.presets import SMALL_ENV


@pytest.fixture
def run():
    """A fresh runner's `run` (each test gets its own namespace)."""
    return Runner(hooks=DataHooks(small=False)).run


def test_small_sizes_follow_the_environment(monkeypatch):
    monkeypatch.setenv(SMALL_ENV, '1')
    assert DataHooks().small
    monkeypatch.setenv(SMALL_ENV, '0')
    assert not DataHooks().small


def test_wikitext_2_is_read_from_the_embedded_corpus(run):
    result = run("d2l.download_extract('wikitext-2', 'wikitext-2')")
    path = eval(result.output)
    assert os.path.isfile(os.path.join(path, 'wiki.train.tokens'))
    assert run('d2l.get_dataloader_workers()').output == '0\n'


@pytest.mark.skipif(mx.context.num_gpus() > 0, reason='has a GPU')
def test_try_all_gpus_falls_back_to_the_cpu(run):
    assert run('d2l.try_all_gpus()').output == '[cpu(0)]\n'


def test_train_ch13_at_small_sizes_trains_one_epoch_on_five_small_batches(
        monkeypatch):
    from mxnet import np

    calls = []
    monkeypatch.setattr(real_d2l(), 'train_ch13',
                        lambda *args: calls.append(args))
    hooks = DataHooks(small=True, steps=2)
    train_ch13 = hooks.overrides()['train_ch13']
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
    calls = []
    monkeypatch.setattr(real_d2l(), 'train_ch13',
                        lambda *args: calls.append(args))
    return calls


@pytest.mark.parametrize('small, steps', [(False, 2), (True, None)])
def test_train_ch13_passes_five_batches_on_at_book_sizes_and_for_notebooks(
        monkeypatch, small, steps):
    calls = _record_train_ch13(monkeypatch)
    hooks = DataHooks(small=small, steps=steps)
    train_iter = [('X', 'y')] * 5
    hooks.overrides()['train_ch13']('net', train_iter, 'test', 'loss',
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
    hooks.overrides()['train_ch13']('net', train_iter, 'test', 'loss',
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

    class Pairs:
        all_token_ids = None

        def __len__(self):
            return pairs

    class Loader:
        _dataset = Pairs()
    assert fine_tuning_note(Loader(), 5) == note


def test_fine_tuning_note_is_none_outside_the_fine_tuning_notebook():
    assert fine_tuning_note([], 5) is None
    assert fine_tuning_note([(1, 2)] * 3, 5) is None


def test_notebooks_get_small_sizes_from_the_environment():
    assert DataHooks(small=True).notebook_environment() == {
        SMALL_ENV: '1'}
    assert DataHooks(small=False).notebook_environment() == {}
