"""Nothing lost, nothing runaway: a table of command lines an unforgiving
user runs (a second run on a finished model, two runs on one directory,
impossible sizes, full disks, damaged files, Ctrl-C), and today's good
ones, each answered as it should be.

Every command runs as its own process (``python -m d2l_bert``), in a
session of its own and inside limits (`bounded`: address space, CPU
time, and for the full-disk cases the size of a file), so that a
regression that forks or allocates without end fails the test instead
of taking the machine down.  For each row the test checks the exit
status, the last line of standard error (the one error line, no
traceback), that no process of the command's session is left, and that
the files of the directory the row names are byte-identical afterwards.
"""
import contextlib
import fcntl
import hashlib
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
import zipfile

import pytest

from d2l_bert import cli
from d2l_bert.data.snli_synthetic import make_snli_synthetic
from d2l_bert.runs.out_dir import LOCK_FILE
from helpers import TINY_ARGS, write_small_corpus
# (TINY, case and error too: test_cli_runaway_checkpoints and
# test_cli_hostile import them from here)
from runaway_cases import TABLE, TINY, case, error  # noqa: F401

#: Limits of every command of the table: 8 GB of address space (a tiny
#: run maps less than 2, its threads' arenas included), 120 s of CPU, 60
#: s of wall-clock time
ADDRESS_SPACE, CPU_SECONDS, WALL_SECONDS = 8 << 30, 120, 60
#: Seconds a command may take to end once its Ctrl-C (or other signal)
#: came, however long it took to start on a loaded machine
ANSWER_SECONDS = 5

RUNAWAY_CELL = '''# A cell that leaves a process behind

:label:`sec_bert`

```{.python .input}
#@tab mxnet
import subprocess, sys, time
p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)',
                      'd2l-bert-runaway-cell'], start_new_session=True)
while True:
    time.sleep(0.1)
```
'''

SLEEPING_CELL = '''# A cell that sleeps, after one that prints

:label:`sec_bert`

```{.python .input}
#@tab mxnet
print('started')
```

```{.python .input}
#@tab mxnet
import subprocess, sys, time
p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)',
                      'd2l-bert-sleeping-cell'], start_new_session=True)
time.sleep(300)
```
'''


@pytest.fixture(scope='module')
def root(tmp_path_factory):
    """A working directory with a corpus, a synthetic SNLI, a model
    pretrained for 2 steps (M) and fine-tuned for one epoch (F), damaged
    copies, and the files the rows name."""
    root = tmp_path_factory.mktemp('runaway')
    write_small_corpus(root / 'corpus')
    write_small_corpus(root / 'one', num_train=1)
    make_snli_synthetic(str(root / 'nli'), num_train=100, num_dev=10,
                        num_test=20)
    here = os.getcwd()
    os.chdir(root)    # (the rows resume M with ``--corpus corpus``)
    try:
        assert cli.main(['pretrain', '--corpus', 'corpus', '--steps', '2',
                         '--out', 'M'] + TINY_ARGS) == 0
        assert cli.main(['finetune', '--model', 'M', '--data', 'nli',
                         '--epochs', '1', '--batch-size', '16', '--max-len',
                         '16', '--num-workers', '0', '--no-progress',
                         '--out', 'F']) == 0
    finally:
        os.chdir(here)
    _damage(root)
    (root / 'a-file').write_text('x')
    os.symlink(os.path.join('gone', 'M'), root / 'dangling')
    os.symlink(os.path.join('gone', 'v.npy'), root / 'dangling.npy')
    (root / 'texts.lines').write_text('a crane is flying\nhello\n')
    (root / 'binary').write_bytes(b'\x7fELF\0\0\1')
    (root / 'runaway.md').write_text(RUNAWAY_CELL)
    (root / 'sleeping.md').write_text(SLEEPING_CELL)
    (root / 'setsid.sh').write_text(
        f"setsid {sys.executable} -c 'import time; time.sleep(300)' "
        'd2l-bert-setsid-child &\necho started\nsleep 300\n')
    return root


def _damage(root):
    """Mbad: M with its parameters cut short; Mmeta: M with a broken
    meta.json in its checkpoint; Mcopy: M with the files a run killed
    while it wrote would leave; Mhalf, Mhalf2: M as a run whose disk
    filled while it saved its model leaves it; Mro, Mnan, Mfine, Fnan,
    Fpre: copies of M and F; Mtype, Msize: M with a config.json whose
    num_hiddens is a word, or another size than the parameters'."""
    for name in ('Mbad', 'Mmeta', 'Mcopy', 'Mro', 'Mnan', 'Mfine',
                 'Mhalf', 'Mhalf2', 'Mtype', 'Msize'):
        shutil.copytree(root / 'M', root / name)
    for name, change in (('Mtype', {'num_hiddens': 'sixteen'}),
                         ('Msize', {'num_hiddens': 64})):
        config = json.loads((root / name / 'config.json').read_text())
        (root / name / 'config.json').write_text(json.dumps(
            dict(config, **change)))
    for name in ('Mhalf', 'Mhalf2'):
        for model_file in ('pretrained.params', 'vocab.json', 'config.json'):
            (root / name / model_file).unlink()
    for name in ('Fnan', 'Fpre'):
        shutil.copytree(root / 'F', root / name)
    params = root / 'Mbad' / 'pretrained.params'
    params.write_bytes(params.read_bytes()[:1000])
    checkpoint = root / 'M' / 'checkpoint.zip'
    with zipfile.ZipFile(checkpoint) as src, \
            zipfile.ZipFile(root / 'Mmeta' / 'checkpoint.zip', 'w') as dst:
        for name in src.namelist():
            dst.writestr(name, b'{"step": 2, "hist' if name == 'meta.json'
                         else src.read(name))
    (root / 'Mcopy' / '.checkpoint.zip.0badc0de.tmp').write_bytes(b'PK')
    (root / 'Mcopy' / LOCK_FILE).write_bytes(b'')   # no one holds it


def snapshot(directory):
    """``{name: sha256}`` of every file in `directory`."""
    return {name: hashlib.sha256((directory / name).read_bytes()).digest()
            for name in sorted(os.listdir(directory))}


def session(sid, marker=None):
    """The pids of the live processes of the session `sid`, and of any
    session with `marker` in their command line."""
    found = []
    for entry in os.listdir('/proc'):
        if not entry.isdigit():
            continue
        try:
            with open(f'/proc/{entry}/stat') as f:
                fields = f.read().rsplit(')', 1)[1].split()
            with open(f'/proc/{entry}/cmdline', 'rb') as f:
                command = f.read().decode(errors='replace')
        except OSError:
            continue
        if fields[0] != 'Z' and (int(fields[3]) == sid or (
                marker and marker in command)):
            found.append(int(entry))
    return found


def bounded(fsize=None, address_space=ADDRESS_SPACE):
    """The `preexec_fn` of a row's process: its limits (and, with
    `fsize`, writes past it fail with EFBIG instead of SIGXFSZ).  Ctrl-C
    reaches it as a terminal's foreground command: a suite started in the
    background (``pytest ... &`` in a script) ignores SIGINT, as a shell
    sets it for background commands, and its children would inherit
    that; so do SIGHUP a suite started under ``nohup`` and SIGTERM."""
    def limit():
        for name in ('SIGINT', 'SIGHUP', 'SIGTERM'):
            signal.signal(getattr(signal, name), signal.SIG_DFL)
        resource.setrlimit(resource.RLIMIT_AS, (address_space,) * 2)
        resource.setrlimit(resource.RLIMIT_CPU, (CPU_SECONDS,) * 2)
        if fsize is not None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize,) * 2)
    return limit


def run(root, row):
    """Run `row` in `root`; return its status, standard error, the
    seconds it ran (since its signal, for a row with ``interrupt``) and
    the pids of its session left when it ended."""
    argv = [sys.executable, '-m', 'd2l_bert'] + (
        row.argv.split() if isinstance(row.argv, str) else list(row.argv))
    stdin, marker = row.extra.get('stdin'), row.extra.get('marker')
    proc = subprocess.Popen(
        argv, cwd=root, stdin=subprocess.PIPE if stdin else
        subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        start_new_session=True, preexec_fn=bounded(
            row.extra.get('fsize'),
            row.extra.get('address_space', ADDRESS_SPACE)))
    start = time.monotonic()
    try:
        if 'interrupt' in row.extra:
            _interrupt_after(proc, row.extra['interrupt'],
                             row.extra.get('signal', signal.SIGINT))
            start = time.monotonic()
        _, err = proc.communicate(stdin, timeout=WALL_SECONDS)
        seconds = time.monotonic() - start
        deadline = time.monotonic() + 2
        while session(proc.pid, marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        return (proc.returncode, err.decode(), seconds,
                session(proc.pid, marker))
    finally:
        for pid in session(proc.pid, marker) + [proc.pid]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.wait()


def _interrupt_after(proc, text, signum):
    """Ctrl-C (SIGINT to the process group, as a terminal sends it), or
    another signal, one second after `proc` printed a line starting with
    `text`."""
    for line in iter(proc.stdout.readline, b''):
        if line.decode().startswith(text):
            break
    time.sleep(1)
    os.killpg(proc.pid, signum)


def _needs_root(what):
    if os.geteuid() != 0 or shutil.which('mount') is None:
        pytest.skip(f'{what} needs root and mount')


@contextlib.contextmanager
def full_disk(root, name):
    """For the `with` block, ``root/name`` is a 64 KB file system with
    less than 4 KB free (nothing with None)."""
    if name is None:
        yield
        return
    _needs_root('mounting a small tmpfs')
    directory = root / name
    directory.mkdir(exist_ok=True)
    subprocess.run(['mount', '-t', 'tmpfs', '-o', 'size=64k', 'tmpfs',
                    directory], check=True)
    try:
        (directory / 'filler').write_bytes(b'\0' * 60_000)
        yield
    finally:
        subprocess.run(['umount', directory], check=True)


@contextlib.contextmanager
def read_only(directory):
    """Mount `directory` read-only on itself (a bind mount, as root)
    for the `with` block; nothing with None."""
    if directory is None:
        yield
        return
    _needs_root('mounting a directory read-only')
    subprocess.run(['mount', '--bind', directory, directory], check=True)
    try:
        subprocess.run(['mount', '-o', 'remount,ro,bind', directory],
                       check=True)
        yield
    finally:
        subprocess.run(['umount', directory], check=True)


@contextlib.contextmanager
def locked(root, name):
    """Hold the lock of the output directory ``root/name`` for the
    `with` block, as a run in progress does (nothing with None); the
    lock file is gone afterwards."""
    if name is None:
        yield
        return
    path = root / name / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        yield
    finally:
        os.close(fd)
        os.remove(path)


@pytest.mark.skipif(not os.path.isdir('/proc/self'),
                    reason="counts a command's processes in Linux's /proc")
@pytest.mark.parametrize('row', TABLE)
def test_a_command_line_is_answered_in_one_line_and_leaves_nothing(
        root, row):
    answered(root, row)


def answered(root, row):
    """Run the row `row` in `root` and check its answer: the exit status,
    the one last line, no process left, the files of ``row.same`` as
    they were and those of ``gone`` gone."""
    same = root / row.same if row.same else None
    readonly, tmpfs = row.extra.get('readonly'), row.extra.get('tmpfs')
    with read_only(root / readonly if readonly else None), \
            full_disk(root, tmpfs):
        before = snapshot(same) if same else None
        with locked(root, row.extra.get('lock')):
            status, err, seconds, left = run(root, row)
        after = snapshot(same) if same else None
    lines = err.strip().splitlines()
    cpus = len(os.sched_getaffinity(0))
    expected = row.line and row.line.format(cpus=cpus, max=8 * cpus,
                                            root=root)
    assert (status, lines[-1] if expected else None) == (row.status,
                                                        expected), err
    assert 'Traceback' not in err
    assert sum(': error: ' in line for line in lines) == (
        1 if expected and ': error: ' in expected else 0), err
    assert left == [], f'{len(left)} process(es) left: {left}'
    assert seconds < row.extra.get('seconds', ANSWER_SECONDS if
                                   'interrupt' in row.extra else WALL_SECONDS)
    assert after == before
    for pattern in row.extra.get('gone', ()):
        assert list(root.glob(pattern)) == [], pattern
