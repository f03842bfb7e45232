"""Tests of `d2l-bert check-text` (d2l_bert/cli/check_text.py) as a user
meets its limits: files that are no edition's (a link to a device, a
named pipe, a file too large) and limits given badly, refused in one
line; cells that take too much memory or fork without end, each failed
in one line while the rest of the file runs; and check-text killed
(SIGKILL) at random moments, which leaves no process and no folder.

The commands that run cells run as processes of their own, within an
outer limit of processes of the test's own (`processes.pids_limit`) and
limits of address space and CPU time."""
import os
import random
import resource
import signal
import subprocess
import sys
import time

import pytest

from d2l_bert import presets
from d2l_bert import cli
from d2l_bert.chapter.editions.cells import MAX_EDITION_BYTES

from processes import cgroups_left, left_behind, needs_proc, our_cgroups, \
    pids_limit, wait_for

#: What a cell's process may map, and its CPU seconds
ADDRESS_SPACE, CPU_SECONDS = 8 << 30, 600


def run(argv, capsys):
    try:
        status = cli.main(argv)
    except SystemExit as e:
        status = e.code
    return status, capsys.readouterr().err


@pytest.mark.parametrize('value', ['3.5Q', '900M', '4096T', ''])
def test_a_memory_limit_that_is_no_size_or_out_of_range_is_refused(
        capsys, tmp_path, value):
    from d2l_bert.processes import machine_memory
    from d2l_bert.runs.memory import size_text
    status, err = run(['check-text', '--memory', value, 'x.md'], capsys)
    assert (status, err) == (2, (
        'd2l-bert check-text: error: argument --memory: must be a size '
        f'from 1.0 GB to {size_text(machine_memory())} (this machine\'s '
        f"memory), such as 4G or 1500M, got {value!r}\n"))


@pytest.mark.parametrize('value', ['63', '65537', 'many'])
def test_a_process_limit_out_of_range_is_refused(capsys, value):
    status, err = run(['check-text', '--processes', value, 'x.md'], capsys)
    assert (status, err) == (2, (
        'd2l-bert check-text: error: argument --processes: must be an '
        f"integer from 64 to 65536, got {value!r}\n"))


@pytest.fixture
def odd_files(tmp_path, monkeypatch):
    """A link to /dev/zero, a named pipe and a sparse file one byte too
    large, each named like an edition."""
    monkeypatch.chdir(tmp_path)
    os.symlink('/dev/zero', 'zeros.md')
    os.mkfifo('fifo.ipynb')
    with open('huge.rst', 'wb') as f:
        f.truncate(MAX_EDITION_BYTES + 1)
    return tmp_path


@pytest.mark.parametrize('argv, message', [
    (['zeros.md'], "argument FILE: 'zeros.md' (a symbolic link to "
     "/dev/zero) is a character device, not a file"),
    (['fifo.ipynb'], "argument FILE: 'fifo.ipynb' is a named pipe, not a "
     'file'),
    (['--layout-from', 'zeros.md', 'huge.rst'], "argument --layout-from: "
     "'zeros.md' (a symbolic link to /dev/zero) is a character device, not "
     'a file'),
])
def test_what_is_no_regular_file_is_refused_before_any_read(
        odd_files, capsys, argv, message):
    start = time.monotonic()
    status, err = run(['check-text'] + argv, capsys)
    assert (status, err) == (2, (
        f'd2l-bert check-text: error: {message}: give an edition of a '
        'section, a .md, .rst or .ipynb file\n'))
    assert time.monotonic() - start < 5


def test_an_edition_larger_than_the_limit_is_refused(odd_files, capsys):
    status, err = run(['check-text', 'huge.rst'], capsys)
    assert (status, err) == (2, (
        "d2l-bert check-text: error: argument FILE: 'huge.rst' holds "
        '10,485,761 bytes, more than the 10 MB an edition of a section '
        'may hold: give one section\n'))


def bounded(outer):
    """The `preexec_fn` of a check-text process: the outer limit of
    processes `outer`, address space and CPU time."""
    def limit():
        for name in ('SIGINT', 'SIGHUP', 'SIGTERM'):
            signal.signal(getattr(signal, name), signal.SIG_DFL)
        resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE,) * 2)
        resource.setrlimit(resource.RLIMIT_CPU, (CPU_SECONDS,) * 2)
        outer()
    return limit


def start(tmp_path, edition, argv, outer):
    """``d2l-bert check-text ARGV FILE`` with `edition` as FILE, its
    temporary folders in ``tmp_path/tmp``, marked; the Popen and the
    mark."""
    mark = f'd2l-bert-test-{os.urandom(6).hex()}'
    path = tmp_path / 'edition.md'
    path.write_text(edition)
    (tmp_path / 'tmp').mkdir()
    env = {**os.environ, 'TMPDIR': str(tmp_path / 'tmp'),
           presets.TEST_MARK_ENV: mark}
    proc = subprocess.Popen(
        [sys.executable, '-m', 'd2l_bert', 'check-text'] + argv + [path],
        cwd=tmp_path, env=env, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        start_new_session=True, preexec_fn=bounded(outer))
    return proc, mark


def cells(*sources):
    return '# Cells\n\n:label:`sec_bert`\n\n' + ''.join(
        f'```{{.python .input}}\n#@tab mxnet\n{source}\n```\n\n'
        for source in sources)


LIMITS = cells(
    'x = 41',
    "chunks = []\nwhile True:\n    chunks.append(b'\\1' * (80 << 20))",
    'import os\nwhile True:\n    os.fork()',
    'x + 1')


@needs_proc
def test_cells_past_the_limits_fail_in_one_line_and_the_rest_runs(
        tmp_path):
    before = our_cgroups()
    with pids_limit(600) as outer:
        proc, mark = start(tmp_path, LIMITS, [
            '--memory', '1.5G', '--processes', '100', '--timeout', '300'],
            outer)
        try:
            out, _ = proc.communicate(timeout=500)
        finally:
            proc.kill()
    assert proc.returncode == 1, out
    lines = out.decode().splitlines()
    assert lines[lines.index('sec_bert cell 2 (line 10): chunks = []') + 1] \
        == ("    FAILED: the cell reached the cells' memory limit, 1.5 GB "
            '(--memory), and its processes were ended; give a larger '
            '--memory to raise it')
    assert lines[lines.index('sec_bert cell 3 (line 17): import os') + 1] \
        == ("    FAILED: the cell reached the cells' limit of 100 "
            'processes and threads (--processes), and its processes were '
            'ended; give a larger --processes to raise it')
    assert lines[lines.index('sec_bert cell 4 (line 24): x + 1') + 1:][:3] \
        == ['    ran', '    output:     42',
            '    note: the cell before reached a limit, and its processes '
            'were ended; this one ran in a new process, after the 1 cells '
            'that ran before were run there again']
    assert left_behind(mark) == []
    assert os.listdir(tmp_path / 'tmp') == []
    assert cgroups_left(before) == set()


SLEEPING = cells(
    'import subprocess, sys, time\n'
    "subprocess.Popen([sys.executable, '-c', 'import time; "
    "time.sleep(300)'], start_new_session=True)\n"
    "subprocess.Popen(['sh', '-c', '(setsid sleep 300 &); sleep 300'])\n"
    "open('../../sleeping', 'w').close()\n"
    'time.sleep(300)')


@needs_proc
@pytest.mark.parametrize('run', range(5))
def test_a_killed_check_leaves_no_process_and_no_folder(tmp_path, run):
    # Killed (SIGKILL) at a random moment: while it starts, or while the
    # cell sleeps beside the processes it detached
    before = our_cgroups()
    with pids_limit(600) as outer:
        proc, mark = start(tmp_path, SLEEPING, ['--timeout', '400'], outer)
        try:
            if run >= 3:
                wait_for(lambda: (tmp_path / 'sleeping').exists(), 400,
                         'the cell')
            time.sleep(random.uniform(0, 6 if run < 3 else 0.5))
        finally:
            proc.kill()
            proc.wait()
        assert left_behind(mark, seconds=15) == []
    assert os.listdir(tmp_path / 'tmp') == []
    assert cgroups_left(before) == set()
