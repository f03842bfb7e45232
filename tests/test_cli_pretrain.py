"""Tests of `d2l-bert pretrain` and `d2l-bert encode` (d2l_bert/cli)."""
import json
import os
import re

import mxnet as mx
import pytest

from d2l_bert import cli
from d2l_bert import pretraining as P
from d2l_bert.training import read_checkpoint_meta

from conftest import write_small_corpus

TINY_ARGS = ['--batch-size', '32', '--num-hiddens', '32',
             '--ffn-num-hiddens', '48', '--num-heads', '2']


def run(argv, capsys):
    status = cli.main(argv)
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_pretrain_defaults_are_the_books_settings():
    args = cli.build_parser().parse_args(['pretrain'])
    assert (args.batch_size, args.max_len, args.steps) == (512, 64, 50)
    assert (args.num_hiddens, args.ffn_num_hiddens, args.num_heads,
            args.num_blks, args.dropout) == (128, 256, 2, 2, 0.2)
    assert args.lr == 0.01 and args.corpus == 'embedded'
    # The same values as the section module's named presets
    assert dict(num_hiddens=args.num_hiddens,
                ffn_num_hiddens=args.ffn_num_hiddens,
                num_heads=args.num_heads, num_blks=args.num_blks,
                dropout=args.dropout) == P.BOOK_BERT_CONFIG
    assert (args.batch_size, args.max_len, args.steps, args.lr) == (
        P.BOOK_BATCH_SIZE, P.BOOK_MAX_LEN, P.BOOK_NUM_STEPS,
        P.BOOK_LEARNING_RATE)


@pytest.mark.parametrize('devices, message', [
    ('tpu', "device must be cpu, cpu:N, gpu or gpu:N, got 'tpu'"),
    ('cpu:0,cpu:0', 'lists a device twice'),
])
def test_pretrain_rejects_bad_device_strings(capsys, tmp_path, devices,
                                             message):
    status, out, err = run(['pretrain', '--devices', devices, '--out',
                            str(tmp_path / 'out')], capsys)
    assert status == 2
    assert err.startswith('d2l-bert pretrain: error: --devices: ')
    assert message in err and len(err.strip().splitlines()) == 1
    assert not os.path.exists(tmp_path / 'out')


@pytest.mark.skipif(mx.context.num_gpus() > 0,
                    reason='this machine has a GPU')
def test_pretrain_says_when_a_gpu_is_missing(capsys, tmp_path):
    status, _, err = run(['pretrain', '--devices', 'gpu:0', '--out',
                          str(tmp_path)], capsys)
    assert status == 2
    assert "device 'gpu:0' is not available" in err


def test_pretrain_rejects_an_unknown_corpus(capsys, tmp_path):
    status, _, err = run(['pretrain', '--corpus', 'wikitext-3', '--out',
                          str(tmp_path)], capsys)
    assert status == 2
    assert "--corpus: unknown corpus='wikitext-3'" in err


def test_pretrain_rejects_non_positive_sizes(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(['pretrain', '--steps', '0'])
    assert e.value.code == 2
    assert "--steps: must be a positive integer, got '0'" in \
        capsys.readouterr().err


def test_encode_names_a_missing_model_directory(capsys, tmp_path):
    missing = str(tmp_path / 'nowhere')
    status, _, err = run(['encode', '--model', missing, 'a crane'], capsys)
    assert status == 2
    assert err.startswith(
        f"d2l-bert encode: error: --model {missing!r}: no such directory; "
        'give a directory that holds pretrained.params and vocab.json, '
        'such as the --out directory of `d2l-bert pretrain`')
    assert len(err.strip().splitlines()) == 1


def test_encode_rejects_a_directory_without_parameters(capsys, tmp_path):
    status, _, err = run(['encode', '--model', str(tmp_path), 'a'], capsys)
    assert status == 2
    assert 'no pretrained.params in it' in err


@pytest.fixture(scope='module')
def pretrained_dir(tmp_path_factory):
    """`d2l-bert pretrain` for 3 tiny steps on a small corpus."""
    root = tmp_path_factory.mktemp('cli')
    corpus_dir = write_small_corpus(root / 'corpus')
    out = str(root / 'model')
    argv = (['pretrain', '--corpus', corpus_dir, '--steps', '3',
             '--out', out, '--checkpoint-every', '2'] + TINY_ARGS)
    status = cli.main(argv)
    assert status == 0
    return out, argv


def test_pretrain_saves_model_plot_and_checkpoint(pretrained_dir):
    out, _ = pretrained_dir
    assert sorted(os.listdir(out)) == ['checkpoint.zip', 'config.json',
                                       'loss.png', 'pretrained.params',
                                       'vocab.json']
    with open(os.path.join(out, 'config.json')) as f:
        config = json.load(f)
    with open(os.path.join(out, 'vocab.json')) as f:
        vocab = json.load(f)
    assert config['vocab_size'] == len(vocab)
    assert config['num_hiddens'] == 32 and config['max_len'] == 1000
    assert config['pretraining']['num_steps'] == 3
    assert config['pretraining']['batch_size'] == 32
    assert 0.0 <= config['pretraining']['nsp_accuracy'] <= 1.0
    assert read_checkpoint_meta(os.path.join(out, 'checkpoint.zip'))[
        'step'] == 3


def test_pretrain_prints_the_books_lines_and_held_out_accuracy(
        pretrained_dir, capsys):
    out, argv = pretrained_dir
    # Resuming a finished run with more steps trains on from step 3
    status, stdout, _ = run(argv[:4] + ['5'] + argv[5:] + ['--resume'],
                            capsys)
    assert status == 0
    from d2l_bert.fast import _ops
    state = 'on (numba ' if _ops.available() else 'off (numba is missing'
    assert ('compiled attention, AddNorm, LayerNorm and MLM-loss loops: '
            f'{state}') in stdout
    assert re.search(r'^MLM loss \d+\.\d{3}, NSP loss \d+\.\d{3}$', stdout,
                     re.M)
    assert re.search(r'^\d+\.\d sentence pairs/sec on \[cpu\(0\)\]$',
                     stdout, re.M)
    assert re.search(r'^held-out MLM accuracy 0\.\d{3} \(\d+ masked '
                     r'tokens\), NSP accuracy 0\.\d{3} \(\d+ pairs\)$',
                     stdout, re.M)
    assert f'saved the model to {out}/' in stdout
    meta = read_checkpoint_meta(os.path.join(out, 'checkpoint.zip'))
    assert meta['step'] == 5 and len(meta['history']['mlm']) == 5


def test_resume_with_other_settings_is_refused(pretrained_dir, capsys):
    out, argv = pretrained_dir
    i = argv.index('--batch-size')
    other = argv[:i + 1] + ['16'] + argv[i + 2:] + ['--resume']
    status, _, err = run(other, capsys)
    assert status == 2
    assert 'batch_size: checkpoint 32, now 16' in err


def test_encode_prints_tokens_shapes_and_first_values(pretrained_dir,
                                                      capsys):
    out, _ = pretrained_dir
    status, stdout, _ = run(['encode', '--model', out, 'a crane is flying',
                             'he just left'], capsys)
    assert status == 0
    lines = stdout.splitlines()
    assert lines[0].startswith('tokens: <cls> a ')
    assert len(lines[0].split()) == 1 + 10
    assert lines[1] == 'encoded shape: (10, 32), pooled shape: (32,)'
    assert re.fullmatch(r'\s+0 <cls>\s+\[-?\d\.\d{4}, -?\d\.\d{4}, '
                        r'-?\d\.\d{4}, \.\.\.\]', lines[2])


def test_encode_json_holds_every_vector(pretrained_dir, capsys):
    out, _ = pretrained_dir
    status, stdout, _ = run(['encode', '--model', out, '--json',
                             'a crane is flying'], capsys)
    assert status == 0
    result = json.loads(stdout)
    assert sorted(result) == ['encoded', 'pooled', 'tokens']
    assert len(result['tokens']) == 6
    assert [len(row) for row in result['encoded']] == [32] * 6
    assert len(result['pooled']) == 32


def test_encode_compare_gives_a_symmetric_similarity_matrix(
        pretrained_dir, capsys):
    out, _ = pretrained_dir
    texts = ['the river is long', 'a long river', 'the river']
    status, stdout, _ = run(['encode', '--model', out, '--json',
                             '--compare', 'River'] + texts, capsys)
    assert status == 0
    sims = json.loads(stdout)['similarity']
    assert len(sims) == 3
    for i in range(3):
        assert sims[i][i] == pytest.approx(1.0, abs=1e-6)
        for j in range(3):
            assert sims[i][j] == pytest.approx(sims[j][i], abs=1e-6)
            assert -1.0 - 1e-6 <= sims[i][j] <= 1.0 + 1e-6
    status, stdout, _ = run(['encode', '--model', out, '--compare',
                             'river'] + texts, capsys)
    assert stdout.splitlines()[0] == ("cosine similarity of the vectors "
                                      "of 'river':")


def test_encode_compare_names_a_text_without_the_word(pretrained_dir,
                                                      capsys):
    out, _ = pretrained_dir
    status, _, err = run(['encode', '--model', out, '--compare', 'crane',
                          'a crane', 'a bird'], capsys)
    assert status == 2
    assert "--compare 'crane': not among the tokens of 'a" in err


def test_encode_takes_at_most_two_texts_without_compare(pretrained_dir,
                                                        capsys):
    out, _ = pretrained_dir
    status, _, err = run(['encode', '--model', out, 'a', 'b', 'c'], capsys)
    assert status == 2
    assert 'give TEXT and at most one TEXT_B, got 3 texts' in err
