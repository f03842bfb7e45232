"""Tests of `d2l-bert pretrain`'s job options: what it refuses before
anything starts, what a worker gets, and the bounded read of a saved
model's step."""
import json
import os
import socket

import pytest

from d2l_bert import cli
from d2l_bert.cli import pretrain as pretrain_command
from d2l_bert.dist.roles import free_port

import processes
from test_cli_pretrain import run


# ---------------------------------------------------------------------------
# --workers N: what is refused before anything starts
# ---------------------------------------------------------------------------

def refused(argv, capsys, tmp_path):
    """Run ``d2l-bert pretrain ARGV`` here; return its one error line, after
    checking that it started nothing and wrote nothing."""
    before = set(processes.children(os.getpid()))
    out = tmp_path / 'out'
    status, stdout, err = run(['pretrain', '--out', str(out)] + argv, capsys)
    assert status == 2 and stdout == ''
    assert set(processes.children(os.getpid())) == before
    assert not out.exists()
    lines = err.strip().splitlines()
    assert len(lines) == 1
    return lines[0]


def test_pretrain_refuses_a_port_in_use(capsys, tmp_path):
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        s.listen()
        port = s.getsockname()[1]
        line = refused(['--workers', '2', '--port', str(port)], capsys,
                       tmp_path)
    assert line == (f'd2l-bert pretrain: error: --port {port} is in use on '
                    '127.0.0.1: choose another port, or leave --port out to '
                    'take a free one')


def test_pretrain_refuses_an_unreachable_host(capsys, tmp_path):
    port = free_port()               # nothing listens there
    hosts = tmp_path / 'hosts.txt'
    hosts.write_text(f'127.0.0.1:{port}\n')
    line = refused(['--hosts', str(hosts)], capsys, tmp_path)
    assert line == (f'd2l-bert pretrain: error: --hosts {hosts} line 1: '
                    f'cannot reach 127.0.0.1 on port {port} (ssh): '
                    'Connection refused')


def test_pretrain_refuses_more_shards_than_pairs_in_a_batch(capsys,
                                                            tmp_path):
    line = refused(['--workers', '3', '--devices', 'cpu:0,cpu:1',
                    '--batch-size', '5'], capsys, tmp_path)
    assert line == (
        'd2l-bert pretrain: error: --batch-size 5 is less than one sentence '
        'pair for each of the 6 shards of a batch (3 workers x 2 device(s)):'
        ' use --batch-size 6 or more, or fewer workers')


@pytest.mark.parametrize('argv, message', [
    (['--servers', '2'], '--servers makes sense with --workers N or '
                         '--hosts FILE only'),
    pytest.param(['--kvstore', 'dist_sync'],
                 "--kvstore: kvstore 'dist_sync' needs a worker of a job "
                 'started by', marks=processes.needs_parameter_server),
])
def test_pretrain_refuses_job_options_without_a_job(capsys, tmp_path,
                                                    monkeypatch, argv,
                                                    message):
    monkeypatch.delenv('DMLC_ROLE', raising=False)
    line = refused(argv, capsys, tmp_path)
    assert line.startswith(f'd2l-bert pretrain: error: {message}')


def test_a_worker_gets_every_pretraining_option(tmp_path):
    parser = cli.build_parser()
    argv = ['pretrain', '--corpus', 'wikitext-2', '--batch-size', '8',
            '--max-len', '32', '--num-hiddens', '16', '--ffn-num-hiddens', '8',
            '--num-heads', '4', '--num-blks', '1', '--dropout', '0',
            '--steps', '7', '--lr', '0.5', '--devices', 'cpu:0,cpu:1',
            '--seed', '0', '--out', 'o', '--resume', '--checkpoint-every',
            '3', '--workers', '2']
    args = parser.parse_args(argv)
    worker = pretrain_command._worker_argv(args, 5)
    assert worker[1:4] == ['-m', 'd2l_bert', 'pretrain']
    assert worker[-4:] == ['--kvstore', 'dist_sync', '--threads', '5']
    again = parser.parse_args(worker[3:])
    for name in pretrain_command.FORWARDED:
        assert getattr(again, name) == getattr(args, name), name
    assert (again.workers, again.kvstore, again.num_threads) == (
        None, 'dist_sync', 5)
    # Every option of the command is forwarded or makes the job
    options = {a.dest for a in parser._subparsers._group_actions[0]
               .choices['pretrain']._actions if a.dest != 'help'}
    assert options == set(pretrain_command.FORWARDED) | set(
        pretrain_command.JOB_OPTIONS)


@pytest.mark.parametrize('config', ['zero', 'fifo', 'huge', 'step'])
def test_the_step_of_a_saved_model_is_read_bounded(tmp_path, config):
    (tmp_path / pretrain_command.MODEL_FILE).write_bytes(b'')
    path = tmp_path / 'config.json'
    if config == 'zero':
        os.symlink('/dev/zero', path)
    elif config == 'fifo':
        os.mkfifo(path)  # opened for reading, it would wait for a writer
    elif config == 'huge':
        path.write_text(' ' * (2 << 20) + '{}')
    else:
        path.write_text(json.dumps({'pretraining': {'num_steps': 7}}))
    assert pretrain_command._model_step(str(tmp_path)) == (
        7 if config == 'step' else None)
