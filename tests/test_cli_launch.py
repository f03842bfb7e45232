"""Tests of `d2l-bert launch` (d2l_bert/cli/launch.py): the script of the
docs' "several processes" page, the book's `train_bert` in each worker of
a job, runs under ``--workers 2``; a launch killed with SIGKILL leaves no
process of its job."""
import os
import random
import re
import subprocess
import time

import pytest

from d2l_bert import presets
from d2l_bert import cli

import processes
from helpers import write_small_corpus

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, 'docs', 'train_book_bert.py')


@processes.needs_proc
@processes.needs_parameter_server
def test_the_docs_script_trains_the_book_way_in_two_workers(tmp_path):
    corpus = write_small_corpus(tmp_path / 'corpus')
    launcher = processes.start(processes.d2l_bert(
        'launch', '--workers', 2, processes.sys.executable, SCRIPT,
        '--corpus', corpus, '--batch-size', 32, '--num-hiddens', 32,
        '--ffn-num-hiddens', 48, '--steps', 3), tmp_path, 'launcher')
    children = []
    try:
        processes.wait_for(lambda: len(processes.children(launcher.pid)) == 4
                           or launcher.poll() is not None, 30,
                           'the four processes of the job')
        children = processes.descendants(launcher.pid)
        status = launcher.wait(processes.JOB_TIMEOUT)
    finally:
        processes.stop(launcher, children)
    out = (tmp_path / 'launcher.out').read_text()
    err = (tmp_path / 'launcher.err').read_text()
    assert status == 0, err
    assert 'd2l-bert launch: error' not in err
    assert re.match(r'starting 1 scheduler, 1 server\(s\) and 2 worker\(s\) '
                    r'on 127\.0\.0\.1:\d+, \d+ thread\(s\) per worker\n', out)
    # Worker 0 alone printed: its thread line, and the book's two lines,
    # the losses of its rows (the kvstore ran Adam on the summed gradients)
    assert out.count('CPU threads: ') == 1
    assert 'OMP_NUM_THREADS from the environment' in out
    losses = re.findall(r'^(?:.*\r)?MLM loss (\d+\.\d{3}), NSP loss '
                        r'(\d+\.\d{3})$', out, re.M)
    assert len(losses) == 1
    mlm, nsp = map(float, losses[0])
    # Three steps from ln(108) = 4.68 (a vocabulary of 108 tokens), with a
    # learning rate of 0.01; the NSP loss starts near ln(2) = 0.69
    assert 3.5 < mlm < 4.7 and 0.3 < nsp < 1.5
    assert re.search(r'^\d+\.\d sentence pairs/sec on \[cpu\(0\)\]$', out,
                     re.M)
    assert not any(processes.alive(pid) for pid in children)


FAILING_WORKER = """\
from d2l_bert.dist.workers import create_kvstore
import mxnet as mx
kv = create_kvstore()
kv.init(0, mx.nd.zeros(1))
if kv.rank == 1:
    raise RuntimeError('worker 1 fails')
out = mx.nd.zeros(1)
for _ in range(100):
    kv.pushpull(0, mx.nd.ones(1), out=out)   # waits for worker 1
    out.wait_to_read()
"""


@processes.needs_proc
@processes.needs_parameter_server
def test_a_worker_that_raises_ends_the_job(tmp_path):
    # Its exception ends it at once: at the kvstore's last barrier it would
    # wait for worker 0, which waits for its gradients
    script = tmp_path / 'fails.py'
    script.write_text(FAILING_WORKER)
    launcher = processes.start(processes.d2l_bert(
        'launch', '--workers', 2, processes.sys.executable, script),
        tmp_path, 'launcher')
    try:
        status = launcher.wait(60)
    finally:
        processes.stop(launcher)
    err = (tmp_path / 'launcher.err').read_text()
    assert status == 1
    assert 'RuntimeError: worker 1 fails' in err
    assert re.search(r'^d2l-bert launch: error: worker [01] \(pid \d+\) '
                     r'exited with status 1; stopped the job and its 3 '
                     r'other process\(es\)$', err, re.M)


def test_launch_needs_a_command(capsys):
    assert cli.main(['launch', '--workers', '2']) == 2
    assert capsys.readouterr().err == (
        'd2l-bert launch: error: give the command each worker runs, such as '
        '`python train.py`\n')


EXITS_WITH_3 = """\
import sys
from d2l_bert.dist.workers import create_kvstore
import mxnet as mx
kv = create_kvstore()
kv.init(0, mx.nd.zeros(1))
if kv.rank == 1:
    sys.exit(3)
out = mx.nd.zeros(1)
for _ in range(100):
    kv.pushpull(0, mx.nd.ones(1), out=out)   # waits for worker 1
    out.wait_to_read()
"""


@processes.needs_proc
@processes.needs_parameter_server
def test_a_worker_that_calls_sys_exit_ends_the_job_with_its_status(
        tmp_path):
    # At the kvstore's last barrier it would wait for worker 0, which
    # waits for its gradients
    script = tmp_path / 'exits.py'
    script.write_text(EXITS_WITH_3)
    launcher = processes.start(processes.d2l_bert(
        'launch', '--workers', 2, processes.sys.executable, script),
        tmp_path, 'launcher')
    try:
        status = launcher.wait(60)
    finally:
        processes.stop(launcher)
    err = (tmp_path / 'launcher.err').read_text()
    assert status == 3, err
    assert re.search(r'^d2l-bert launch: error: worker [01] \(pid \d+\) '
                     r'exited with status 3; stopped the job and its 3 '
                     r'other process\(es\)$', err, re.M)


def test_launch_names_a_missing_command_in_one_line(capsys):
    assert cli.main(['launch', '--workers', '2', 'no-such-command']) == 2
    out, err = capsys.readouterr()
    assert out == ''
    assert err == ('d2l-bert launch: error: no-such-command: command not '
                   'found\n')


@processes.needs_proc
@processes.needs_parameter_server
@pytest.mark.parametrize('run', range(3))
def test_a_killed_launch_leaves_no_process_of_its_job(tmp_path, run):
    # SIGKILL at a random moment: while the job starts, or once both
    # workers run beside the processes they detached
    mark = f'd2l-bert-test-{os.urandom(6).hex()}'
    launcher = subprocess.Popen(
        processes.d2l_bert('launch', '--workers', 2, 'sh', '-c',
                           'setsid sleep 300 & echo started; sleep 300'),
        env={**os.environ, presets.TEST_MARK_ENV: mark},
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        start_new_session=True)
    try:
        if run:
            started = 0
            while started < 2:
                line = launcher.stdout.readline()
                assert line, 'launch ended before its workers started'
                started += line == b'started\n'
        time.sleep(random.uniform(0, 3 if run == 0 else 0.5))
    finally:
        launcher.kill()
        launcher.wait()
    assert processes.left_behind(mark, seconds=15) == []
