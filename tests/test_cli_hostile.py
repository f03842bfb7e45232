"""The command line's own inputs, as a hostile but fair user gives them:
devices and FIFOs where files are expected, endless or huge inputs,
names and texts that are not UTF-8 or hold newlines, paths longer than
the file system takes, numbers out of range, the output file named as
the input, signals before the first save, full disks over a model, and
a download without a network.

The rows are those of `tests/test_cli_runaway.py` (`case`), run the
same way (`bounded`: each command a process of its own, in a session of
its own, within limits of memory and time), and checked the same way:
the exit status, the exact last line of standard error (or, where it
holds this machine's memory or paths, a regular expression or a
function of the working directory), no process left, the files of the
directory a row names byte-identical afterwards, and the files a row
names gone.  A row's ``env`` adds environment variables.
"""
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest

from d2l_bert import presets
from d2l_bert import cli
from d2l_bert.data.snli_synthetic import make_snli_synthetic
from helpers import TINY_ARGS, write_small_corpus
from test_cli_runaway import (ADDRESS_SPACE, ANSWER_SECONDS, WALL_SECONDS,
                              _interrupt_after, bounded, case, error,
                              session, snapshot)

TINY = ' '.join(TINY_ARGS)
HOSTS = '[USER@]ADDRESS[:SSH_PORT]'
NOT_UTF8_PATH = ('must be a path in UTF-8 (MXNet reads and writes its files '
                 'by UTF-8 names), got the bytes {}; give the directory a '
                 'name of UTF-8 characters')
#: A run long enough to be ended by a signal before it saves anything
LONG_FINETUNE = ('finetune --model M --data nli --epochs 100000 '
                 '--batch-size 8 --max-len 16 --no-progress')
#: A limit on file sizes under which a fine-tuned model's plot (20 KB),
#: vocabulary, history and configuration can be written, and its
#: parameters (200 KB) cannot
PARAMS_TOO_LARGE = 100_000
LABEL = 'n' * 70
DEEP = '/'.join(['deep'] + ['p' * 200] * 21)


def too_long(root):
    """The line for an --out of `DEEP`, whose length depends on `root`."""
    path = os.path.join(str(root), DEEP)
    return error('pretrain', f"argument --out: '{DEEP[:35]}..."
                 f"{DEEP[-19:]}' ({len(DEEP):,} characters) is "
                 f'{len(path):,} bytes long from /, and this file system '
                 f'takes paths of less than '
                 f"{os.pathconf(root, 'PC_PATH_MAX'):,} bytes, 64 of them "
                 'for the files in it; give a shorter path')


def name_too_long(root):
    """The line for an encode --out whose name is 250 bytes."""
    name_max = os.pathconf(root, 'PC_NAME_MAX')
    name = 'y' * 246 + '.npy'
    return error('encode', f"argument --out: the name '{'y' * 35}..."
                 f"{'y' * 15}.npy' (250 characters) has 250 bytes, more "
                 f'than the {name_max - 15} this file system takes '
                 f'({name_max}, less the 15 bytes its temporary copy '
                 'adds); give a shorter name') if len(name) > name_max - 15 \
        else None


def closed_port():
    """A port of 127.0.0.1 nothing listens on (just released)."""
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


#: Far more memory than any test machine has, on a line that says so
NEEDS = (r'\(([\d.]+ [KMGT]B)\) would take some (\d+) times that in memory '
         r'once read and prepared \(([\d.]+ [KMGTP]B)\), and this machine '
         r'has ([\d.]+ [KMGT]B) available; give smaller files')

TABLE = [
    # A file to read where a device, a FIFO or a huge file is given
    case('launch --hosts /dev/urandom true', 2, error(
        'launch', "argument --hosts: '/dev/urandom' is a character device, "
        'not a regular file')),
    case('launch --hosts hosts.fifo true', 2, error(
        'launch', "argument --hosts: 'hosts.fifo' is a FIFO (a named "
        'pipe), not a regular file'), seconds=20),
    case('launch --hosts huge.hosts true', 2, error(
        'launch', '--hosts huge.hosts: more than 1,048,576 bytes, the most '
        f'a hosts file may hold; write one {HOSTS} a line')),
    # (today's good one)
    case('launch --hosts empty.hosts true', 2, error(
        'launch', f'--hosts empty.hosts lists no machine: write one {HOSTS} '
        'a line')),
    case('encode --model M --file /dev/urandom --out w.npy', 2, error(
        'encode', "argument --file: '/dev/urandom' is a character device, "
        "not a file of texts; give a text file, one text a line, or '-' "
        'for standard input')),
    # Standard input without end, as far as the command can tell
    case('encode --model M --file - --out w.npy', 2, error(
        'encode', '--file -: more than 1,000,000 lines, the most encode '
        'reads at once; split it into files of fewer lines'),
        stdin=b'ab\n' * 1_000_001, gone=('w.npy',)),
    case('encode --model M --file - --out w.npy', 2, error(
        'encode', '--file -: line 2 holds more than the 1,000,000 '
        'characters a text may have (a model reads its first few hundred '
        'tokens only); split it into lines, one text a line'),
        stdin=b'ok\n' + b'q' * 1_500_000, gone=('w.npy',)),
    # Machines that DNS or ssh cannot take
    case('launch --hosts label.hosts true', 2, error(
        'launch', f"--hosts label.hosts line 2: '{LABEL}.lab' is not a host "
        'name or an IPv4 address: a label of 70 characters, more than the '
        '63 DNS takes')),
    case('launch --hosts user.hosts true', 2, error(
        'launch', "--hosts user.hosts line 1: '-oProxyCommand=touch' is not "
        "a user name (letters, digits and '.', '_', '-', '@', '$', not "
        "starting with '-'), in '-oProxyCommand=touch@127.0.0.1'")),
    case(['launch', '--hosts', 'two\nlines.hosts', 'true'], 2, error(
        'launch', "--hosts two\\nlines.hosts line 1: '10.0.0.256' is not a "
        'host name or an IPv4 address: its numbers are not those of an '
        'IPv4 address (four numbers from 0 to 255, such as 10.0.0.2)')),
    # --timeout: the range the launcher takes, said where it is refused
    case('launch --hosts label.hosts --timeout inf true', 2, error(
        'launch', 'argument --timeout: must be a number of seconds from 3 '
        'to 3600 (how long a machine of --hosts may be silent), got '
        "'inf'")),
    case('launch --hosts label.hosts --timeout 2.5 true', 2, error(
        'launch', 'argument --timeout: must be a number of seconds from 3 '
        'to 3600 (how long a machine of --hosts may be silent), got '
        "'2.5'")),
    case('pretrain --workers 1 --timeout 60', 2, error(
        'pretrain', '--timeout goes with --hosts FILE: how long a machine '
        'may be silent (a job on this machine has no such limit)'),
        gone=('bert-pretrained',)),
    case('encode --model M --devices cpu:4096 crane', 2, error(
        'encode', 'argument --devices: must number each device from 0 to '
        "255, got 'cpu:4096'"), seconds=10),
    # Texts and model paths that are not UTF-8
    case(['encode', '--model', 'M', os.fsdecode(b'na\xefve')], 2, error(
        'encode', "argument TEXT: must be UTF-8 text, got the bytes "
        "b'na\\xefve', which are not UTF-8; give the text in UTF-8")),
    case(['encode', '--model', os.fsdecode(b'M\xfe'), 'crane'], 2, error(
        'encode', 'argument --model: ' + NOT_UTF8_PATH.format(
            "b'M\\xfe'"))),
    case(['finetune', '--model', os.fsdecode(b'M\xfe'), '--data', 'nli',
          '--out', 'Fu'], 2, error(
        'finetune', 'argument --model: ' + NOT_UTF8_PATH.format(
            "b'M\\xfe'")), gone=('Fu',)),
    # The file of vectors named as the file of texts, by any name
    case('encode --model M --file E/words.npy --out E/words.npy '
         '--overwrite', 2, error(
             'encode', '--out E/words.npy is the file --file E/words.npy '
             'reads: its texts would be replaced by their vectors, even with '
             '--overwrite; give another --out'), same='E'),
    case('encode --model M --file E/words.npy --out E/alias.npy '
         '--overwrite', 2, error(
             'encode', '--out E/alias.npy is the file --file E/words.npy '
             'reads: its texts would be replaced by their vectors, even with '
             '--overwrite; give another --out'), same='E'),
    case('encode --model M --file E/link.npy --out E/words.npy', 2, error(
        'encode', '--out E/words.npy is the file --file E/link.npy reads: '
        'its texts would be replaced by their vectors, even with '
        '--overwrite; give another --out'), same='E'),
    # Paths the file system cannot hold: refused, nothing made
    case(['pretrain', '--out', DEEP], 2, too_long, gone=('deep',)),
    case(['encode', '--model', 'M', '--file', 'E/words.npy', '--out',
          'y' * 246 + '.npy'], 2, name_too_long),
    # SIGTERM and SIGHUP before the first save: no folder left
    case(f'{LONG_FINETUNE} --num-workers 0 --out runs/Fterm',
         -signal.SIGTERM, None, interrupt='path: ', signal=signal.SIGTERM,
         gone=('runs',)),
    case(f'{LONG_FINETUNE} --num-workers 2 --out runs2/Fhup',
         -signal.SIGHUP, None, interrupt='path: ', signal=signal.SIGHUP,
         gone=('runs2',)),
    # A model that cannot be written whole replaces nothing
    # (two epochs: another plot than F's one)
    case('finetune --model M --data nli --epochs 2 --batch-size 16 '
         '--max-len 16 --num-workers 0 --no-progress --out Fkeep '
         '--overwrite', 1, error('finetune', 'Fkeep/finetuned.params: File '
                                 'too large'), same='Fkeep',
         fsize=PARAMS_TOO_LARGE),
    case('finetune --model M --data nli --epochs 1 --batch-size 16 '
         '--max-len 16 --num-workers 0 --no-progress --out Mkeep '
         '--overwrite', 1, error('finetune', 'Mkeep/finetuned.params: File '
                                 'too large'), same='Mkeep',
         fsize=PARAMS_TOO_LARGE),
    # Files larger than the memory, by their sizes alone
    case(f'pretrain --corpus sparse --steps 1 --out Mz {TINY}', 2,
         re.compile(re.escape(error(
             'pretrain', "--corpus sparse: corpus file "
             "'sparse/wiki.train.tokens' ")) + NEEDS),
         gone=('Mz',)),
    case('finetune --model M --data bignli --out Fbig', 2, re.compile(
        re.escape(error('finetune', '--data bignli: the SNLI files of '
                        'bignli ')) + NEEDS), gone=('Fbig',)),
    # WikiText-2 without a network: the data folder, nothing made
    case(f'pretrain --corpus wikitext-2 --steps 1 --out Mw {TINY}', 1,
         re.compile(re.escape(error(
             'pretrain', "WikiText-2: could not download 'wikitext-2-v1.zip'"
             ' from any of its 2 mirrors: ')) + r'.*' + re.escape(
             "unzip wikitext-2-v1.zip into '") + r'[^\']*/cache/d2l' +
             re.escape("' (the data folder, $D2L_BERT_DATA)") + r'.*'),
         env={presets.DATA_ENV: 'cache/d2l',
              'https_proxy': 'http://127.0.0.1:{port}',
              'HTTPS_PROXY': 'http://127.0.0.1:{port}'},
         gone=('Mw', 'cache', '../data')),
]


@pytest.fixture(scope='module')
def root(tmp_path_factory):
    """A working directory with a corpus, a synthetic SNLI, a model
    pretrained for 2 steps (M) and fine-tuned for one epoch (F), copies,
    and the files the rows name."""
    root = tmp_path_factory.mktemp('hostile') / 'work'
    root.mkdir()
    write_small_corpus(root / 'corpus')
    make_snli_synthetic(str(root / 'nli'), num_train=100, num_dev=10,
                        num_test=20)
    here = os.getcwd()
    os.chdir(root)
    try:
        assert cli.main(['pretrain', '--corpus', 'corpus', '--steps', '2',
                         '--out', 'M'] + TINY_ARGS) == 0
        assert cli.main(['finetune', '--model', 'M', '--data', 'nli',
                         '--epochs', '1', '--batch-size', '16', '--max-len',
                         '16', '--num-workers', '0', '--no-progress',
                         '--out', 'F']) == 0
    finally:
        os.chdir(here)
    _files(root)
    return root


def _files(root):
    """The hosts files, texts, copies and large files the rows name."""
    os.mkfifo(root / 'hosts.fifo')
    (root / 'huge.hosts').write_bytes(b'#' * (1 << 20) + b'\n10.0.0.1\n')
    (root / 'empty.hosts').write_bytes(b'')
    (root / 'label.hosts').write_text(f'10.0.0.1\n{LABEL}.lab\n')
    (root / 'user.hosts').write_text('-oProxyCommand=touch@127.0.0.1\n')
    (root / 'two\nlines.hosts').write_text('10.0.0.256\n')
    (root / 'E').mkdir()
    (root / 'E' / 'words.npy').write_text('a crane\nis flying\n')
    os.link(root / 'E' / 'words.npy', root / 'E' / 'alias.npy')
    os.symlink('words.npy', root / 'E' / 'link.npy')
    shutil.copytree(root / 'M', root / os.fsdecode(b'M\xfe'))
    shutil.copytree(root / 'F', root / 'Fkeep')
    shutil.copytree(root / 'M', root / 'Mkeep')
    (root / 'sparse').mkdir()
    shutil.copy(root / 'corpus' / 'wiki.valid.tokens', root / 'sparse')
    (root / 'bignli').mkdir()
    for path in (root / 'sparse' / 'wiki.train.tokens',
                 root / 'bignli' / 'snli_1.0_train.txt',
                 root / 'bignli' / 'snli_1.0_test.txt'):
        with open(path, 'wb') as f:
            f.truncate(1 << 36)         # 64 GB, sparse: nothing written


def run(root, row):
    """Run `row` in `root` (`test_cli_runaway.run`, with the variables
    of ``env``); return its status, standard error, the seconds it ran
    (since its signal, for a row with ``interrupt``) and the pids of its
    session left when it ended."""
    argv = [sys.executable, '-m', 'd2l_bert'] + (
        row.argv.split() if isinstance(row.argv, str) else list(row.argv))
    stdin = row.extra.get('stdin')
    port = closed_port()
    env = dict(os.environ, **{name: value.format(port=port) for name, value
                              in row.extra.get('env', {}).items()})
    proc = subprocess.Popen(
        argv, cwd=root, env=env, stdin=subprocess.PIPE if stdin else
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
        while session(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        return proc.returncode, err.decode(), seconds, session(proc.pid)
    finally:
        for pid in session(proc.pid) + [proc.pid]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.wait()


@pytest.mark.skipif(not os.path.isdir('/proc/self'),
                    reason="counts a command's processes in Linux's /proc")
@pytest.mark.parametrize('row', TABLE)
def test_a_hostile_input_is_answered_in_one_line_and_leaves_nothing(
        root, row):
    same = root / row.same if row.same else None
    expected = row.line(root) if callable(row.line) else row.line
    if expected is None and callable(row.line):
        pytest.skip('a name of 250 bytes fits this file system')
    before = snapshot(same) if same else None
    status, err, seconds, left = run(root, row)
    after = snapshot(same) if same else None
    lines = err.strip().splitlines()
    last = lines[-1] if lines and expected is not None else None
    if isinstance(expected, re.Pattern):
        assert (status, bool(expected.fullmatch(last or ''))) == (
            row.status, True), err
    else:
        assert (status, last) == (row.status, expected), err
    assert 'Traceback' not in err
    assert sum(': error: ' in line for line in lines) == (
        0 if expected is None else 1), err
    assert left == [], f'{len(left)} process(es) left: {left}'
    assert seconds < row.extra.get('seconds', ANSWER_SECONDS if
                                   'interrupt' in row.extra else WALL_SECONDS)
    assert after == before
    # (a run ended by a signal is cleaned up after by its lock's watcher)
    deadline = time.monotonic() + 5
    for name in row.extra.get('gone', ()):
        while os.path.lexists(root / name) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not os.path.lexists(root / name), name
