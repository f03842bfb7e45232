"""Tests of `d2l-bert pretrain` and `d2l-bert encode` (d2l_bert/cli)."""
import json
import os
import re
import shutil
import signal
import time
import zipfile
from types import SimpleNamespace

import mxnet as mx
import numpy as onp
import pytest

from d2l_bert import cli
from d2l_bert import presets
from d2l_bert.cli import pretrain as pretrain_command
from d2l_bert.runs.checkpoints import read_checkpoint_meta
from d2l_bert.runs.out_dir import WATCHER_MARK

import processes
from helpers import JOB_ARGS, TINY_ARGS, assert_same_state, checkpoint_state, \
    checkpoint_step, write_small_corpus

def run(argv, capsys):
    try:
        status = cli.main(argv)
    except SystemExit as e:  # a usage error found by argparse
        status = e.code
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_pretrain_defaults_are_the_books_presets():
    args = cli.build_parser().parse_args(['pretrain'])
    model = ('num_hiddens', 'ffn_num_hiddens', 'num_heads', 'num_blks',
             'dropout')
    assert {name: getattr(args, name) for name in model} == {
        name: presets.BOOK_BERT[name] for name in model}
    assert pretrain_command.MODEL_POSITIONS == presets.BOOK_BERT['max_len']
    assert dict(batch_size=args.batch_size, max_len=args.max_len,
                num_steps=args.steps, lr=args.lr) == presets.PRETRAINING
    assert args.corpus == 'embedded'


def test_pretrain_help_shows_the_presets_as_defaults(capsys):
    with pytest.raises(SystemExit):
        cli.main(['pretrain', '--help'])
    # the option list, after the usage lines
    text = ' '.join(capsys.readouterr().out.split('options:')[1].split())
    for flag, value in (('--num-hiddens H', presets.BOOK_BERT['num_hiddens']),
                        ('--dropout P', presets.BOOK_BERT['dropout']),
                        ('--batch-size B', presets.PRETRAINING['batch_size']),
                        ('--lr LR', presets.PRETRAINING['lr'])):
        after = text[text.index(flag):]
        assert f'(default: {value})' in after[:after.index(' --', 2)]


@pytest.mark.parametrize('devices, message', [
    ('tpu', 'must be cpu, cpu:N, gpu, gpu:N, a comma-separated list of '
            "them (cpu:0,cpu:1) or all-gpus, got 'tpu'"),
    ('cpu:0,cpu:0', "must name each device once, got 'cpu:0,cpu:0'"),
])
def test_pretrain_rejects_bad_device_strings(capsys, tmp_path, devices,
                                             message):
    status, out, err = run(['pretrain', '--devices', devices, '--out',
                            str(tmp_path / 'out')], capsys)
    assert status == 2
    assert err == (f'd2l-bert pretrain: error: argument --devices: '
                   f'{message}\n')
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
    assert err == (
        "d2l-bert pretrain: error: argument --corpus: no such file or "
        "directory: 'wikitext-3'; give --corpus embedded, --corpus "
        'wikitext-2, or a directory holding wiki.train.tokens and '
        'wiki.valid.tokens\n')


@pytest.mark.parametrize('option', ['--steps', '--workers', '--servers'])
def test_pretrain_rejects_non_positive_sizes(capsys, option):
    with pytest.raises(SystemExit) as e:
        cli.main(['pretrain', option, '0'])
    assert e.value.code == 2
    assert capsys.readouterr().err == (
        f"d2l-bert pretrain: error: argument {option}: must be a positive "
        "integer, got '0'\n")


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
    # (more steps than the checkpoint has: else that is said first)
    other = argv[:i + 1] + ['16'] + argv[i + 2:] + ['--resume', '--steps',
                                                    '100']
    status, _, err = run(other, capsys)
    assert status == 2
    assert 'batch_size: checkpoint 32, now 16' in err


def _full_disk_at(monkeypatch, name):
    """Make the writing of the files named `name` fail as a full disk
    makes it fail (`atomic_write_all`'s temporary files)."""
    import errno

    from d2l_bert.data import atomic
    write = atomic._write_temporary

    def write_temporary(path, data):
        if os.path.basename(path) == name:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)
        return write(path, data)
    monkeypatch.setattr(atomic, '_write_temporary', write_temporary)


@pytest.mark.parametrize('name', ['vocab.json', 'config.json',
                                  'pretrained.params'])
@pytest.mark.parametrize('before', ['no model', 'a model'])
def test_a_full_disk_at_the_last_save_leaves_no_new_file_and_resume_saves(
        pretrained_dir, tmp_path, monkeypatch, capsys, name, before):
    out, argv = str(tmp_path / 'model'), pretrained_dir[1][:]
    argv[argv.index('--out') + 1] = out
    steps = int(argv[argv.index('--steps') + 1])
    if before == 'a model':
        shutil.copytree(pretrained_dir[0], out)
        steps = read_checkpoint_meta(os.path.join(out, 'checkpoint.zip'))[
            'step']
        argv += ['--resume', '--steps', str(steps + 1)]
    model = {f: open(os.path.join(out, f), 'rb').read() for f in (
        'vocab.json', 'config.json', 'pretrained.params')} \
        if before == 'a model' else {}
    with monkeypatch.context() as m:
        _full_disk_at(m, name)
        status, _, err = run(argv, capsys)
    assert status == 1 and 'No space left on device' in err
    # The old model whole, or no file of a new one
    assert {f: open(os.path.join(out, f), 'rb').read() for f in model} \
        == model
    assert [f for f in os.listdir(out) if f.startswith('.')] == []
    if before == 'no model':
        assert sorted(os.listdir(out)) == ['checkpoint.zip', 'loss.png']
        status, _, err = run(['encode', '--model', out, 'a crane'], capsys)
        assert (status, err.count('\n')) == (2, 1)
        assert (f'--model {out!r}: an incomplete d2l BERT directory, it '
                'holds checkpoint.zip but no pretrained.params') in err
        argv += ['--resume']
    # --resume saves the model of the checkpoint's step, training none
    status, stdout, _ = run(argv, capsys)
    assert status == 0
    assert stdout.count('its model is not written: writing it') == 1
    assert f'saved the model to {out}/' in stdout
    meta = read_checkpoint_meta(os.path.join(out, 'checkpoint.zip'))
    with open(os.path.join(out, 'config.json')) as f:
        assert json.load(f)['pretraining']['num_steps'] == meta['step']


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


# ---------------------------------------------------------------------------
# --workers N: a job on MXNet's parameter server
# ---------------------------------------------------------------------------
#
# The jobs run the real command in real processes (a scheduler, a server
# and two workers on 127.0.0.1), on the tiny BERT, with dropout 0 so that
# the numbers can be compared with one process's, run here.

def pretrain_here(corpus, out, steps, devices, *extra):
    """`d2l-bert pretrain` in this process (the thread count of the tests,
    which the jobs' workers get too); returns the checkpoint's state."""
    assert cli.main(['pretrain', '--corpus', corpus, '--out', str(out),
                     '--steps', str(steps), '--devices', devices]
                    + JOB_ARGS + list(extra)) == 0
    return checkpoint_state(os.path.join(out, 'checkpoint.zip'))


@pytest.fixture(scope='module')
def job_corpus(tmp_path_factory):
    return write_small_corpus(tmp_path_factory.mktemp('job-corpus'))


@pytest.fixture(scope='module')
def killed_job(tmp_path_factory, job_corpus):
    """Two workers and two servers pretrain on; once the checkpoint of
    step 4 or later is there, one worker is killed (SIGKILL).  Records
    what the launcher did, what listened where while the job ran, and
    what was left."""
    root = tmp_path_factory.mktemp('killed-job')
    out = root / 'out'
    checkpoint = out / 'checkpoint.zip'
    launcher = processes.start(processes.d2l_bert(
        'pretrain', '--workers', 2, '--servers', 2, '--threads',
        os.environ['OMP_NUM_THREADS'], '--corpus', job_corpus, '--steps',
        1000, '--out', out, *JOB_ARGS),
        root, 'launcher')
    children = []
    try:
        processes.wait_for(
            lambda: (checkpoint_step(checkpoint) >= 4
                     or launcher.poll() is not None),
            processes.JOB_TIMEOUT, 'the checkpoint of step 4')
        assert launcher.poll() is None, (root / 'launcher.err').read_text()
        # (not the watcher of the lock on --out)
        children = [pid for pid in processes.descendants(launcher.pid)
                    if WATCHER_MARK not in ' '.join(processes.cmdline(pid))]
        roles = processes.roles(children)
        sockets = processes.listening(children)
        workers = [pid for pid in roles
                   if '--kvstore' in processes.cmdline(pid)]
        victim = workers[-1]
        os.kill(victim, signal.SIGKILL)
        killed_at = time.monotonic()
        status = launcher.wait(processes.JOB_TIMEOUT)
        seconds = time.monotonic() - killed_at
        left = [pid for pid in children if processes.alive(pid)]
    finally:
        processes.stop(launcher, children)
    return SimpleNamespace(
        root=root, out=out, checkpoint=checkpoint, corpus=job_corpus,
        status=status, seconds=seconds, victim=victim, children=children,
        roles=roles, workers=workers, sockets=sockets, left=left,
        err=(root / 'launcher.err').read_text())


@pytest.fixture(scope='module')
def one_process_reference(killed_job, tmp_path_factory):
    """One process with the two workers' devices (cpu:0, cpu:1) and the
    whole batch: the state at the killed job's last checkpoint, and two
    steps later."""
    out = tmp_path_factory.mktemp('reference') / 'out'
    step = read_checkpoint_meta(killed_job.checkpoint)['step']
    devices = 'cpu:0,cpu:1'
    at_checkpoint = pretrain_here(killed_job.corpus, out, step, devices)
    later = pretrain_here(killed_job.corpus, out, step + 2, devices,
                          '--resume')
    return at_checkpoint, later


@processes.needs_proc
@processes.needs_parameter_server
def test_a_killed_worker_ends_the_job_with_one_line_and_no_process_left(
        killed_job):
    # one process a role, each under a supervisor of its own
    assert len(killed_job.roles) == 5 and len(killed_job.workers) == 2
    assert len(killed_job.children) == 10
    assert killed_job.status == 128 + signal.SIGKILL
    found = re.findall(r'^d2l-bert pretrain: error: .*$', killed_job.err,
                       re.M)
    assert len(found) == 1
    assert re.fullmatch(
        rf'd2l-bert pretrain: error: worker [01] \(pid {killed_job.victim}\)'
        r' was killed by SIGKILL; stopped the job and its 4 other '
        r'process\(es\)', found[0])
    # The launcher polls every 0.05 s and gives the others 3 s after
    # SIGTERM before SIGKILL
    assert killed_job.seconds < 10
    assert killed_job.left == []


@processes.needs_proc
@processes.needs_parameter_server
def test_nothing_of_a_job_listens_beyond_the_loopback(killed_job):
    # The scheduler, the servers and the workers listen, on 127.0.0.1 only
    pids = {pid for pid, _, _ in killed_job.sockets}
    assert pids == set(killed_job.roles)
    assert {address for _, address, _ in killed_job.sockets} == \
        {'127.0.0.1'}


@processes.needs_proc
@processes.needs_parameter_server
def test_two_workers_give_the_losses_and_parameters_of_one_process(
        killed_job, one_process_reference):
    """N = 2, batch B/2 each, against one process with batch B split over
    two devices, to the last bit (tolerance 0).  (Two servers, each
    adding the gradients of some of the weights.)

    Why exact: each worker computes the loss and the gradients of the
    shard the one process computes on that device: the same rows, the
    same parameters, the same kernels and thread count.  The two runs
    differ in one operation only, adding the two shards' gradients (on
    the server, or in the one process's kvstore): a sum of two floats is
    rounded the same whichever comes first.  Then both take the same Adam
    step.  (One process with one device and batch B would differ: the
    book's loss is a mean per shard, summed over the shards.)
    """
    meta, params, adam = checkpoint_state(killed_job.checkpoint)
    assert meta['step'] >= 4 and meta['step'] % 2 == 0
    assert_same_state((meta, params, adam), one_process_reference[0])


@processes.needs_proc
@processes.needs_parameter_server
def test_a_checkpoint_of_the_killed_job_resumes_in_one_process(
        killed_job, one_process_reference, tmp_path):
    # The last checkpoint is whole, and is one process's checkpoint
    with zipfile.ZipFile(killed_job.checkpoint) as z:
        assert z.testzip() is None
    out = tmp_path / 'resumed'
    shutil.copytree(killed_job.out, out)
    step = read_checkpoint_meta(out / 'checkpoint.zip')['step']
    resumed = pretrain_here(killed_job.corpus, out, step + 2, 'cpu:0,cpu:1',
                            '--resume')
    assert_same_state(resumed, one_process_reference[1])


@processes.needs_proc
@processes.needs_parameter_server
def test_two_workers_of_two_devices_continue_a_one_process_checkpoint(
        job_corpus, tmp_path):
    """A checkpoint of one process with 4 devices, continued for 4 steps
    by 2 workers of 2 devices each (with the threads they get by
    default), against the one process continued.

    Not to the last bit: the 4 gradients are summed in another order
    (the workers add 2 and 2, the one process 1 + (2 + 3) + 4), which
    rounds differently.  The losses agree to 1e-5 (float32 rounding over
    a few steps); 99.9% of the weights to 1e-4.  Adam's step is at most
    about `lr`, whatever the gradient, and where the gradient is zero up
    to rounding (the attention's key biases: a bias added to every key
    shifts every score of a query alike, which the softmax ignores), it
    turns the rounding into such steps: every weight agrees to 2 lr a
    step.
    """
    devices = 'cpu:0,cpu:1,cpu:2,cpu:3'
    reference, job = tmp_path / 'reference', tmp_path / 'job'
    pretrain_here(job_corpus, reference, 2, devices)
    os.makedirs(job)
    shutil.copy(reference / 'checkpoint.zip', job / 'checkpoint.zip')
    meta_r, params_r, _ = pretrain_here(job_corpus, reference, 6, devices,
                                        '--resume')
    launcher = processes.start(processes.d2l_bert(
        'pretrain', '--workers', 2, '--devices', 'cpu:0,cpu:1', '--corpus',
        job_corpus, '--steps', 6, '--out', job, '--resume', *JOB_ARGS),
        tmp_path, 'launcher')
    try:
        status = launcher.wait(processes.JOB_TIMEOUT)
    finally:
        processes.stop(launcher)
    out = (tmp_path / 'launcher.out').read_text()
    assert status == 0, (tmp_path / 'launcher.err').read_text()
    assert 'pretraining 6 steps on 2 workers x [cpu(0), cpu(1)] ...' in out
    assert re.search(r'^\d+\.\d sentence pairs/sec on 2 workers x '
                     r'\[cpu\(0\), cpu\(1\)\]$', out, re.M)
    # Worker 0 alone printed and wrote
    assert out.count('MLM loss ') == 1
    assert sorted(os.listdir(job)) == ['checkpoint.zip', 'config.json',
                                       'loss.png', 'pretrained.params',
                                       'vocab.json']
    meta, params, _ = checkpoint_state(job / 'checkpoint.zip')
    assert meta['step'] == 6
    history, expected = meta['history'], meta_r['history']
    assert history['mlm'][:2] == expected['mlm'][:2]
    onp.testing.assert_allclose(history['mlm'], expected['mlm'], rtol=1e-5)
    onp.testing.assert_allclose(history['nsp'], expected['nsp'], rtol=1e-5)
    diffs = onp.concatenate([onp.abs(params[k] - params_r[k]).ravel()
                             for k in params])
    assert onp.quantile(diffs, 0.999) < 1e-4
    assert diffs.max() <= 2 * presets.PRETRAINING['lr'] * 4
