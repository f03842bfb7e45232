"""Tests of d2l_bert/dist/remote.py: what runs around a role on each
machine of a job over ssh (here, on this machine, without ssh: a pipe
stands in for ssh's input)."""
import os
import subprocess
import sys
import time

import pytest

from d2l_bert.dist import remote as R

import processes

#: A role that writes its pid, then sleeps; marked for `processes.stop`
SLEEPER = ('import os, sys, time; print(os.getpid(), flush=True); '
           'time.sleep(60)  # d2l_bert test process')


def watch(command, timeout=30):
    """``python -m d2l_bert.dist.remote run`` of `command`, its input a
    pipe, its output read here."""
    return subprocess.Popen(
        [sys.executable, '-m', 'd2l_bert.dist.remote', 'run', '--name',
         'worker 1 on here', '--timeout', str(timeout), '--'] + command,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True)


def role_pid(proc):
    return int(proc.stdout.readline())


@pytest.mark.parametrize('code, status', [
    ('import sys; sys.exit(3)', 3),
    ('import os, signal; os.kill(os.getpid(), signal.SIGKILL)', 137)])
def test_run_ends_with_the_status_of_its_command(code, status):
    proc = watch([sys.executable, '-c', code])
    try:
        # (its input left open: ending it would stop the command)
        assert proc.wait(30) == status
    finally:
        processes.stop(proc)
    assert proc.stderr.read() == ''


@processes.needs_proc
def test_run_stops_its_command_when_its_input_ends():
    proc = watch([sys.executable, '-c', SLEEPER])
    try:
        pid = role_pid(proc)
        proc.stdin.close()        # the launcher stopped the job
        assert proc.wait(10) == 143
    finally:
        processes.stop(proc)
    assert not processes.alive(pid)
    assert proc.stderr.read() == ''


@processes.needs_proc
def test_run_stops_its_command_when_the_launcher_falls_silent():
    proc = watch([sys.executable, '-c', SLEEPER], timeout=1)
    try:
        pid = role_pid(proc)
        start = time.monotonic()
        assert proc.wait(10) == 143       # no heartbeat: input left open
        assert time.monotonic() - start < 5
    finally:
        processes.stop(proc)
    assert not processes.alive(pid)
    lines = proc.stderr.read().strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith('worker 1 on here on ')
    assert lines[0].endswith(': no word from the launcher for 1 s; '
                             'stopped it')


def test_run_says_in_one_line_when_its_command_cannot_start():
    proc = watch(['no-such-command-here'])
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 127
    assert err == ("worker 1 on here: cannot run 'no-such-command-here': "
                   'No such file or directory\n')


def test_probe_prints_the_cores_this_process_may_use(capsys, tmp_path):
    from d2l_bert.threads import physical_cores
    assert R.probe(str(tmp_path), sys.executable) == 0
    assert capsys.readouterr().out == \
        f'{R.PROBE_MARK}{physical_cores()}\n'


@pytest.mark.parametrize('folder, program, message', [
    ('nowhere', None, 'no folder {tmp}/nowhere'),
    ('', 'no-such-command-here', "no command 'no-such-command-here'")])
def test_probe_says_what_is_missing_in_one_line(capsys, tmp_path, folder,
                                                program, message):
    assert R.probe(os.path.join(str(tmp_path), folder), program) == 3
    out, err = capsys.readouterr()
    assert out == '' and err == message.format(tmp=tmp_path) + '\n'
