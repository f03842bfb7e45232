"""`d2l-bert finetune` (d2l_bert/cli/finetune.py): a tiny run that saves
its files, one-line errors, and the warnings of a run that would end near
chance."""
import json
import os
import re

import mxnet as mx
import pytest

from d2l_bert import cli, presets
from d2l_bert.book import finetuning as ft
from d2l_bert.cli import finetune
from d2l_bert.data.snli_synthetic import make_snli_synthetic
from d2l_bert.runs import finetuning as runs_ft
from helpers import write_small_corpus


@pytest.fixture(scope='module')
def snli_dir(tmp_path_factory):
    return make_snli_synthetic(str(tmp_path_factory.mktemp('snli')),
                               num_train=1500, num_dev=10, num_test=300)


@pytest.fixture(scope='module')
def pretrained_dir(tmp_path_factory):
    """A tiny BERT pretrained for one step by `d2l-bert pretrain`."""
    root = tmp_path_factory.mktemp('pretrained')
    corpus = write_small_corpus(root / 'corpus')
    assert cli.main(['pretrain', '--corpus', corpus, '--steps', '1',
                     '--out', str(root / 'tiny'), '--batch-size', '16',
                     '--num-hiddens', '32', '--ffn-num-hiddens', '64',
                     '--max-len', '32']) == 0
    return str(root / 'tiny')


def run(*argv):
    """Run ``d2l-bert finetune ARGV`` here; the exit status."""
    try:
        return cli.main(['finetune', *argv])
    except SystemExit as e:  # a usage error found by argparse
        return e.code


def test_fine_tunes_and_saves_model_history_and_plot(
        tmp_path, pretrained_dir, snli_dir, capsys):
    out = tmp_path / 'out'
    assert run('--model', pretrained_dir, '--data', snli_dir, '--epochs',
               '1', '--batch-size', '100', '--max-len', '28', '--lr',
               '1e-3', '--devices', 'cpu:0,cpu:1', '--num-workers', '0',
               '--out', str(out), '--no-progress') == 0
    assert sorted(os.listdir(out)) == [
        'config.json', 'finetune.png', 'finetuned.params', 'history.json',
        'vocab.json']
    with open(out / 'config.json') as f:
        config = json.load(f)
    assert config['num_hiddens'] == 32 and config['finetune_max_len'] == 28
    assert config['devices'] == ['cpu(0)', 'cpu(1)']
    assert (config['model'], config['epochs'], config['batch_size'],
            config['lr'], config['seed']) == (pretrained_dir, 1, 100,
                                              1e-3, 0)
    with open(out / 'history.json') as f:
        assert json.load(f)['test acc'] == [config['test_acc']]
    printed, err = capsys.readouterr()
    assert 'read 1500 examples' in printed
    assert re.search(r'test acc [\d.]+\n[\d.]+ examples/sec', printed)
    assert 'warning' not in err
    # the saved classifier loads back
    bert, _ = ft.load_pretrained_model(
        pretrained_dir, devices=mx.cpu(),
        **runs_ft.load_pretrained_config(pretrained_dir))
    net = ft.BERTClassifier(bert)
    net.load_parameters(str(out / 'finetuned.params'))


@pytest.mark.parametrize('argv, message', [
    (['--max-len', '1024'], '--max-len 1024 is longer than the 1000 '
                            'positions'),
    (['--epochs', '0'], "argument --epochs: must be a positive integer, "
                        "got '0'"),
    (['--devices', 'gpu:7'], "--devices gpu:7: device 'gpu:7' is not "
                             'available'),
])
def test_errors_are_one_line_and_exit_2(pretrained_dir, snli_dir, tmp_path,
                                        capsys, argv, message):
    assert run('--model', pretrained_dir, '--data', snli_dir, '--out',
               str(tmp_path / 'out'), *argv) == 2
    err = capsys.readouterr().err
    assert err.startswith('d2l-bert finetune: error: ')
    assert message in err and len(err.splitlines()) == 1
    assert not os.path.exists(tmp_path / 'out')


def test_finetune_defaults_are_the_books_presets():
    args = cli.build_parser().parse_args(['finetune'])
    settings = finetune.settings_of(args)
    assert dict(batch_size=settings['batch_size'],
                max_len=settings['max_len'], num_epochs=settings['epochs'],
                lr=settings['lr']) == presets.FINETUNING
    assert args.dropout == presets.BERT_SMALL['dropout']
    assert settings['model'] == 'bert.small'


def test_options_left_out_take_the_defaults_of_the_data():
    parser = cli.build_parser()
    book = finetune.settings_of(parser.parse_args(['finetune']))
    synthetic = finetune.settings_of(parser.parse_args(
        ['finetune', '--data', 'synthetic', '--epochs', '7']))
    assert {k: book[k] for k in finetune.BOOK_SETTINGS} == \
        finetune.BOOK_SETTINGS
    assert {k: synthetic[k] for k in finetune.SYNTHETIC_SETTINGS} == dict(
        finetune.SYNTHETIC_SETTINGS, epochs=7)


def test_warns_of_a_batch_larger_than_the_data_and_of_pairs_cut_short():
    train = (['a b c d e', 'a b'], ['f g h i j k', 'c'], [0, 1])
    assert finetune.data_warnings(dict(batch_size=2, max_len=14),
                                  train) == []
    assert finetune.data_warnings(dict(batch_size=3, max_len=8), train) == [
        '--batch-size 3 exceeds the 2 training examples: each epoch is one '
        'step; use --batch-size 1 or so for ten steps an epoch']
    assert finetune.data_warnings(dict(batch_size=2, max_len=5), train) == [
        '--max-len 5 cuts 2 of the 2 training pairs short (the longest '
        'needs 14 tokens): use --max-len 14 to keep every pair whole']
