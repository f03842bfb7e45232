"""Tests of d2l_bert/processes.py: a command run by a supervisor ends,
with everything it started, when it exits, when `end` is called and when
the process that started it is killed (SIGKILL, at random moments); a
double fork just before the end leaves nothing; the command's memory
and processes are limited (cgroups where this process can make them,
resource limits elsewhere), and a limit reached says which.

The commands are small Python programs that import nothing of MXNet.
Each test marks the environment of what it starts, and looks in /proc
for processes with the mark, which every descendant inherits."""
import os
import random
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from d2l_bert import presets
from d2l_bert import processes as P

from processes import cgroups_left, left_behind, marked, needs_proc, \
    our_cgroups, pids_limit, wait_for

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

pytestmark = needs_proc


def python(code):
    return [sys.executable, '-c', textwrap.dedent(code)]


#: Detaches two processes (one in a session of its own, one by a double
#: fork), then runs the statement formatted in as `then`
DETACHING = '''
import os, signal, subprocess, sys, time
subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'],
                 start_new_session=True)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(300)
    os._exit(0)
{then}
'''

#: Double-forks into a session of its own every 10 ms, without end
SPAWNING = '''
import os, time
while True:
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            time.sleep(300)
        os._exit(0)
    time.sleep(0.01)
'''

#: Takes 64 MB more at a time, each page written, without end
ALLOCATING = '''
chunks = []
while True:
    chunks.append(b'\\1' * (64 << 20))
'''

# A refused fork does not end it (an uncaught BlockingIOError would, and
# the command's own status 1 could then come before the supervisor's kill)
FORK_BOMB = '''
import os
while True:
    try:
        os.fork()
    except OSError:
        pass
'''


@pytest.fixture
def mark():
    """The environment of a test's commands, with a mark of its own."""
    value = f'd2l-bert-test-{os.urandom(6).hex()}'
    env = {**os.environ, presets.TEST_MARK_ENV: value}
    yield value, env
    assert left_behind(value) == []


@pytest.fixture(autouse=True)
def no_cgroup_left():
    before = our_cgroups()
    yield
    assert cgroups_left(before) == set()


def test_what_a_command_started_ends_when_it_exits(mark, tmp_path):
    value, env = mark
    folder = tmp_path / 'work'
    proc = P.Supervised(python(DETACHING.format(
        then='open("made", "w").write("x"); time.sleep(0.5); sys.exit(3)')),
        folder=str(folder), env=env)
    wait_for(lambda: (folder / 'made').exists(), 30, 'the command')
    assert proc.wait(30) == 3
    assert marked(value) == []     # at once: the supervisor has swept
    assert not folder.exists()


@pytest.mark.parametrize('then, status', [
    ('sys.exit(0)', 0),
    ('os.kill(os.getpid(), signal.SIGUSR1)', -signal.SIGUSR1),
    ('os._exit(42)', 42)])
def test_the_supervisor_ends_as_its_command_did(mark, then, status):
    proc = P.Supervised(python(DETACHING.format(then=then)), env=mark[1])
    assert proc.wait(30) == status
    assert (proc.limit, marked(mark[0])) == (None, [])


@pytest.mark.parametrize('run', range(20))
def test_a_command_that_ends_at_once_is_seen_to_end(run):
    # Ended before the supervisor watched it: `true` takes a millisecond
    assert P.Supervised(['true']).wait(10) == 0


def test_a_command_that_cannot_start_raises_as_popen_does(tmp_path):
    with pytest.raises(FileNotFoundError, match='No such file'):
        P.Supervised(['d2l-bert-no-such-program'],
                     folder=str(tmp_path / 'work'))
    assert not (tmp_path / 'work').exists()


def test_end_kills_everything_at_once_and_removes_the_folder(mark,
                                                            tmp_path):
    value, env = mark
    folder = tmp_path / 'work'
    proc = P.Supervised(python(DETACHING.format(then='time.sleep(300)')),
                        folder=str(folder), env=env)
    # the supervisor, the command and the two it detached
    wait_for(lambda: len(marked(value)) == 4, 30, 'the detached processes')
    start = time.monotonic()
    proc.end()
    assert proc.wait(30) == -signal.SIGKILL
    assert time.monotonic() - start < 5
    assert marked(value) == [] and not folder.exists()


def test_sigterm_reaches_the_commands_process_group_once(mark, tmp_path):
    count = tmp_path / 'count'
    proc = P.Supervised(python(f'''
        import os, signal, sys, time
        def count(signum, frame):
            with open({str(count)!r}, 'a') as f:
                f.write('x')
        signal.signal(signal.SIGTERM, count)
        open({str(count)!r}, 'w').close()
        time.sleep(2)
        sys.exit(7)'''), env=mark[1])
    wait_for(count.exists, 30, 'the handler')
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 7
    assert count.read_text() == 'x'


#: A process that starts `SPAWNING` under a supervisor, in the folder
#: ``sys.argv[1]``, then waits
STARTER = f'''
import sys
sys.path.insert(0, {ROOT!r})
from d2l_bert.processes import Supervised
proc = Supervised([sys.executable, '-c', {SPAWNING!r}], folder=sys.argv[1],
                  memory=1 << 30, processes=500)
print('started', flush=True)
proc.wait()
'''


@pytest.mark.parametrize('run', range(10))
def test_a_kill_of_the_starting_process_ends_everything(mark, tmp_path, run):
    # At a random moment: while it starts, while the supervisor starts,
    # or while the command double-forks
    value, env = mark
    folder = tmp_path / 'work'
    starter = subprocess.Popen([sys.executable, '-c', STARTER, str(folder)],
                               env=env, stdout=subprocess.DEVNULL)
    time.sleep(random.uniform(0, 1.5))
    starter.kill()
    starter.wait()
    assert left_behind(value, seconds=10) == []
    assert not folder.exists()


@pytest.mark.parametrize('run', range(40))
def test_a_double_fork_just_before_the_end_leaves_nothing(mark, run):
    # The command double-forks into a session of its own and exits at
    # once, or `end` comes while it double-forks
    value, env = mark
    if run % 2:
        proc = P.Supervised(python(DETACHING.format(then='')), env=env)
    else:
        proc = P.Supervised(python(SPAWNING), env=env)
        time.sleep(random.uniform(0.05, 0.3))
        proc.end()
    proc.wait(30)
    assert marked(value) == []


def memory_cgroup():
    if P.cgroup_place('memory') is None:
        pytest.skip('no memory cgroup of this process to make one below')


def test_a_command_past_its_memory_limit_is_ended_and_says_so(mark):
    memory_cgroup()
    proc = P.Supervised(python(ALLOCATING), memory=P.MIN_MEMORY,
                        env=mark[1])
    if not proc.limits['memory'].startswith('cgroup'):
        proc.end()
        pytest.skip(f"cannot make a memory cgroup here: {proc.limits}")
    assert proc.wait(60) == -signal.SIGKILL
    assert proc.limit == 'memory'


def test_without_cgroups_memory_is_each_processs_rlimit_data(mark):
    proc = P.Supervised(python(ALLOCATING), memory=P.MIN_MEMORY,
                        cgroups=False, env=mark[1], stderr=subprocess.PIPE)
    _, err = proc.communicate(timeout=60)
    assert proc.limits == {'memory': 'RLIMIT_DATA', 'processes': None}
    assert (proc.returncode, proc.limit) == (1, None)
    assert err.decode().splitlines()[-1] == 'MemoryError'


def test_a_fork_bomb_is_held_to_its_limit_and_ended(mark):
    # Within an outer limit of this test's own, should the inner one fail
    with pids_limit(400) as outer:
        start = time.monotonic()
        proc = P.Supervised(python(FORK_BOMB), processes=P.MIN_PROCESSES,
                            env=mark[1], preexec_fn=outer,
                            stderr=subprocess.DEVNULL)
        if not (proc.limits['processes'] or '').startswith('cgroup'):
            time.sleep(2)    # held by RLIMIT_NPROC, which nothing watches
            assert len(marked(mark[0])) <= P.MIN_PROCESSES + 2
            proc.end()
        status = proc.wait(60)
        if proc.limits['processes'].startswith('cgroup'):
            assert (status, proc.limit) == (-signal.SIGKILL, 'processes')
            assert time.monotonic() - start < 30
        assert marked(mark[0]) == []


def test_without_cgroups_processes_are_held_by_rlimit_nproc_but_root():
    limits = P.Limits(memory=P.MIN_MEMORY, processes=100, cgroups=False)
    assert limits.how == {
        'memory': 'RLIMIT_DATA',
        'processes': None if os.geteuid() == 0 else 'RLIMIT_NPROC'}
    assert limits.groups == {}


def test_exit_with_parent_ends_a_process_whose_parent_ended(mark):
    # The parent starts it, then ends 1 s later
    child = (f'import sys, time; sys.path.insert(0, {ROOT!r}); '
             'from d2l_bert.processes import exit_with_parent; '
             'exit_with_parent(); time.sleep(300)')
    parent = subprocess.Popen(python(f'''
        import subprocess, sys, time
        subprocess.Popen([sys.executable, '-c', {child!r}])
        time.sleep(1)'''), env=mark[1])
    wait_for(lambda: len(marked(mark[0])) == 2 or parent.poll() is not None,
             30, 'the child')
    assert parent.wait(30) == 0
    assert left_behind(mark[0], seconds=10) == []


# --- where the cgroups are ---------------------------------------------------

V1 = ('35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup '
      'rw,memory\n'
      '39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n'
      '41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n')


def fake_proc(tmp_path, cgroup, mountinfo):
    (tmp_path / 'cgroup').write_text(cgroup)
    (tmp_path / 'mountinfo').write_text(mountinfo)
    return str(tmp_path)


@pytest.mark.parametrize('controller, place', [
    ('memory', (1, '/sys/fs/cgroup/memory/lab/job7')),
    ('pids', (1, '/sys/fs/cgroup/pids')),
    ('cpu', None)])
def test_cgroup_v1_places_are_below_this_processs_own(tmp_path, controller,
                                                      place):
    proc = fake_proc(tmp_path, '8:pids:/\n4:memory:/lab/job7\n0::/\n', V1)
    assert P.cgroup_place(controller, proc) == place


def test_a_container_sees_its_own_cgroup_at_the_mount_point(tmp_path):
    proc = fake_proc(
        tmp_path, '4:memory:/docker/ab12\n',
        '35 31 0:32 /docker/ab12 /sys/fs/cgroup/memory ro - cgroup cgroup '
        'rw,memory\n')
    assert P.cgroup_place('memory', proc) == (1, '/sys/fs/cgroup/memory')
    other = fake_proc(tmp_path, '4:memory:/elsewhere\n', open(
        tmp_path / 'mountinfo').read())
    assert P.cgroup_place('memory', other) is None


def test_cgroup_v2_only_where_its_children_may_take_the_controller(
        tmp_path):
    mount = tmp_path / 'v2'
    (mount / 'lab').mkdir(parents=True)
    (mount / 'lab' / 'cgroup.subtree_control').write_text('memory pids\n')
    proc = fake_proc(tmp_path, '0::/lab\n',
                     f'41 31 0:38 / {mount} rw - cgroup2 cgroup2 rw\n')
    assert P.cgroup_place('pids', proc) == (2, str(mount / 'lab'))
    (mount / 'lab' / 'cgroup.subtree_control').write_text('cpu\n')
    assert P.cgroup_place('pids', proc) is None


def test_the_default_memory_is_half_the_machines():
    total = P.machine_memory()
    assert total > P.MIN_MEMORY
    assert P.default_memory() == max(P.MIN_MEMORY, int(total * 0.5))
