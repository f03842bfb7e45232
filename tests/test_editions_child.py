"""Cells run in a child process, in a new temporary directory: a cell that
writes files, changes directory, calls ``sys.exit``, ends its process,
hangs, takes more memory than its limit or forks cannot touch the
caller's files or end the checker, and what the cells start ends with
the runner."""
import os
import time

import pytest

from d2l_bert import presets
from d2l_bert.chapter.editions.child import ChildRunner
from d2l_bert.processes import MIN_MEMORY

from processes import left_behind, marked, needs_proc, wait_for


@pytest.fixture
def caller(tmp_path, monkeypatch):
    """The caller's working directory, empty."""
    folder = tmp_path / 'caller'
    folder.mkdir()
    monkeypatch.chdir(folder)
    return folder


def test_cells_run_in_a_new_directory_that_is_removed_afterwards(caller):
    with ChildRunner() as runner:
        made = runner.run("import os\nopen('made.txt', 'w').write('x')\n"
                          "os.getcwd(), os.environ['TMPDIR']")
        directory = runner.directory   # the child's, made with it
        assert made.output == f'{(directory, directory)!r}\n'
        # a cell that leaves the directory cannot write into the caller's
        # through it, and the next cell finds its file where it was made
        runner.run("os.chdir('..')\nopen('moved.txt', 'w').write('y')")
        assert runner.run(f"open(os.path.join({directory!r}, 'made.txt'))"
                          ".read()").output == "'x'\n"
        left = runner.run("os.path.dirname(os.getcwd()) != os.getcwd()")
        assert left.output == 'True\n'
        moved = os.path.join(os.path.dirname(directory), 'moved.txt')
        os.remove(moved)  # in the system's temporary directory
    assert os.listdir(caller) == []
    assert not os.path.exists(directory)


@pytest.fixture(scope='module')
def runner():
    """One child for the tests that leave it running."""
    with ChildRunner() as runner:
        yield runner


def test_sys_exit_is_a_failed_cell_and_the_next_cells_run(runner):
    runner.run('x = 41')
    ended = runner.run('import sys\nsys.exit(3)')
    assert (ended.status, ended.error) == ('failed', 'SystemExit: 3')
    assert runner.run('x + 1').output == '42\n'


def test_the_child_makes_the_parents_thread_choices(runner):
    names = ('OMP_NUM_THREADS', 'GOMP_SPINCOUNT', 'OPENBLAS_CORETYPE')
    seen = runner.run(f'import os\n[os.environ.get(n) for n in {names}], '
                      "os.environ['D2L_BERT_SMALL']")
    assert seen.output == \
        f"({[os.environ.get(n) for n in names]!r}, '1')\n"


def test_processes_a_cell_starts_end_with_the_runner(caller):
    with ChildRunner() as runner:
        started = runner.run("import subprocess\n"
                             "subprocess.Popen(['sleep', '60']).pid")
        pid = int(started.output)
        child = runner._process.pid
    assert _gone(pid) and _gone(child)


def _gone(pid, seconds=10):
    """Whether process `pid` ends (or is left for its parent to reap)
    within `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with open(f'/proc/{pid}/stat') as f:
                if f.read().rsplit(')', 1)[1].split()[0] == 'Z':
                    return True
        except FileNotFoundError:
            return True
        except OSError:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return True
        time.sleep(0.05)
    return False


def test_cells_that_hang_or_end_their_process_fail_and_the_rest_runs(
        caller):
    with ChildRunner(timeout=1, grace=0.5) as runner:
        runner.run('x = 41')
        start = time.perf_counter()
        hung = runner.run('while True:\n    pass')
        assert hung.error == ('TimeoutError: the cell ran for more than 1 s '
                              '(--timeout)')
        assert time.perf_counter() - start < 5
        assert runner.run('x + 1').output == '42\n'
        # a cell that ends its process: the next runs in a new one, after
        # the cells before it (not the one stopped) ran there again
        ended = runner.run('import os\nos._exit(4)')
        assert ended.error == 'the cell ended its process (exit status 4)'
        after = runner.run('x + 2')
        assert after.output == '43\n'
        assert after.notes == [
            'the cell before ended its process; this one ran in a new '
            'process, after the 2 cells that ran before were run there '
            'again']
        # a cell that does not let the timeout stop it: its process ends
        deaf = runner.run('import signal, time\n'
                          'signal.signal(signal.SIGALRM, signal.SIG_IGN)\n'
                          'time.sleep(60)')
        assert deaf.error == (
            'TimeoutError: the cell ran for more than 1 s (--timeout) and '
            'did not stop; its process was ended')
        assert runner.run('x + 3').output == '44\n'


def test_a_cells_own_timeout_error_is_run_again_in_a_new_process(caller):
    # Only the timeout's alarm makes a cell one not to run again: a cell
    # whose own code raises TimeoutError (a socket's, say) ran
    with ChildRunner(timeout=30) as runner:
        mine = runner.run("x = 41\nraise TimeoutError('a slow server')")
        assert mine.error == 'TimeoutError: a slow server'
        runner.run('import os\nos._exit(4)')
        assert runner.run('x + 1').output == '42\n'


@pytest.mark.parametrize('timeout', [-1, float('nan'), 1e10])
def test_a_timeout_below_zero_or_above_a_week_is_refused(timeout):
    with pytest.raises(ValueError, match=r'timeout must be a number of '
                       r'seconds from 0 to 604800 \(a week; 0 for no '
                       r'limit\), got '):
        ChildRunner(timeout=timeout)


def test_a_cell_past_the_memory_limit_fails_with_one_line_and_the_rest_runs(
        caller):
    with ChildRunner(memory=MIN_MEMORY * 3 // 2) as runner:
        runner.run('x = 41')
        grown = runner.run('chunks = []\nwhile True:\n'
                           "    chunks.append(b'\\1' * (48 << 20))")
        assert grown.error == (
            "the cell reached the cells' memory limit, 1.5 GB (--memory), "
            'and its processes were ended; give a larger --memory to raise '
            'it')
        after = runner.run('x + 1')
    assert after.output == '42\n'
    assert after.notes == [
        'the cell before reached a limit, and its processes were ended; '
        'this one ran in a new process, after the 1 cells that ran before '
        'were run there again']


def test_a_copy_of_the_cells_process_that_a_cell_forks_never_replies(
        caller):
    # Its reply would be taken for the next cell's
    with ChildRunner() as runner:
        forked = runner.run("import os\n'copy' if os.fork() == 0 else "
                            "'cells'")
        assert forked.output == "'cells'\n"
        assert runner.run('6 * 7').output == '42\n'


@needs_proc
def test_processes_a_cell_keeps_detaching_end_with_the_runner(caller):
    # A thread of the cell's double-forks into sessions of their own
    # every few milliseconds, until the runner closes
    mark = f'd2l-bert-test-{os.urandom(6).hex()}'
    with ChildRunner(environ={**os.environ,
                               presets.TEST_MARK_ENV: mark}) as runner:
        runner.run('import subprocess, threading, time\n'
                   'def detach():\n'
                   '    while True:\n'
                   "        subprocess.Popen(['sh', '-c', "
                   "'(setsid sleep 300 &)'])\n"
                   '        time.sleep(0.005)\n'
                   'threading.Thread(target=detach, daemon=True).start()')
        wait_for(lambda: len(marked(mark)) > 20, 60, 'detached processes')
    assert marked(mark) == []
    assert left_behind(mark) == []
