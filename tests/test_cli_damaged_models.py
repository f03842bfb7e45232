"""Damaged and lying model folders on the command line: ``encode --model
DIR`` and ``finetune --model DIR`` end each in one line naming the file
and the cause, never in a traceback, and within a bound of memory.

The folders are a d2l model pretrained for one step (D...) and the tiny
Hugging Face BERT of tests/fixtures/tiny_bert (H...), each with one file
damaged, or lying about a size.  Every command runs as its own process,
in a session of its own, under an address-space limit far below what the
lying sizes ask (a regression that trusts one fails with MemoryError or
is killed, instead of taking the machine's memory), and the test checks
the exit status, the last line of standard error, that no traceback and
one error line are printed, that no process of its session is left, and
that the folder's files are byte-identical afterwards.
"""
import hashlib
import json
import os
import re
import resource
import shutil
import signal
import struct
import subprocess
import sys

import mxnet as mx
import pytest

import hf_formats
from d2l_bert import BERTModel, cli
from d2l_bert.data.snli_synthetic import make_snli_synthetic
from helpers import TINY_ARGS, write_small_corpus

#: The limits of every command: 3 GB of address space (encoding with a
#: tiny model maps less than 2), 120 s of CPU, 120 s of wall-clock time;
#: the lying sizes below ask for 30 GB to exabytes
ADDRESS_SPACE, CPU_SECONDS, WALL_SECONDS = 3 << 30, 120, 120

#: A PNG image's first bytes, as a pretrained.params
PNG = b'\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR' + bytes(range(256)) * 4
CORRUPT = ('is corrupt or truncated ({}); download it again or re-run '
           '`d2l-bert pretrain`')
BROKEN = ('cannot be read ({}): the file is truncated or corrupt (an '
          'interrupted download?); download it again')
AGAIN = 'correct it, or re-run `d2l-bert pretrain`'
FINETUNE = ('--data nli --epochs 1 --batch-size 8 --max-len 16 '
            '--num-workers 0 --no-progress --out F')


def encode(model, line):
    return (f'encode --model {model} a crane', 2,
            f'd2l-bert encode: error: {line}')


def finetune(model, line):
    return (f'finetune --model {model} {FINETUNE}', 2,
            f'd2l-bert finetune: error: --model {model}: {line}')


TABLE = [
    # d2l folders without config.json: the sizes come off the shapes
    encode('Dpos', "Dpos/pretrained.params: encoder.pos_embedding has shape "
           "(7, 32); a BERTModel's is (1, max_len, num_hiddens)"),
    encode('Dlist', 'Dlist/pretrained.params holds 45 arrays without names '
           '(saved from a list, as `mx.nd.save(file, [...])` does), not the '
           'named parameters of a model (`net.save_parameters`)'),
    finetune('Dlist', 'Dlist/pretrained.params holds 45 arrays without '
             'names (saved from a list, as `mx.nd.save(file, [...])` does), '
             'not the named parameters of a model (`net.save_parameters`)'),
    # config.json that the parameters or BERTModel cannot take
    encode('Dheads', 'Dheads/config.json: num_heads=5 does not divide '
           'num_hiddens=32 (each head takes num_hiddens / num_heads of '
           f'them); {AGAIN}'),
    finetune('Dheads', 'Dheads/config.json: num_heads=5 does not divide '
             'num_hiddens=32 (each head takes num_hiddens / num_heads of '
             f'them); {AGAIN}'),
    encode('Dlisted', 'Dlisted/config.json must hold a JSON object, got a '
           f'list; {AGAIN}'),
    encode('Dnested', f'Dnested/config.json is not valid JSON (nested too '
           f'deeply); {AGAIN}'),
    encode('Dvocab', "Dvocab/vocab.json lists the token 'the' twice; each "
           'token has one index'),
    # parameters of random bytes, of another model, or lying sizes
    encode('Dpng', 'Dpng/pretrained.params ' + CORRUPT.format(
        'it starts with 0xa1a0a0d474e5089, not 0x112, the mark of a file '
        '`mx.nd.save` writes')),
    finetune('Dpng', 'Dpng/pretrained.params ' + CORRUPT.format(
        'it starts with 0xa1a0a0d474e5089, not 0x112, the mark of a file '
        '`mx.nd.save` writes')),
    encode('Dother', 'Dother/pretrained.params does not fit the sizes of '
           'config.json (num_hiddens=32, ffn_num_hiddens=48, num_heads=2, '
           'num_blks=2, max_len=1000): its encoder.blks.0.ffn.dense1.weight '
           "has shape (40, 32), the model's (48, ?); correct them, or re-run "
           '`d2l-bert pretrain`'),
    finetune('Dother', 'Dother/pretrained.params does not fit BERTModel('
             'vocab_size=108, num_hiddens=32, ffn_num_hiddens=48, '
             'num_heads=2, num_blks=2, max_len=1000): its encoder.blks.0.ffn'
             ".dense1.weight has shape (40, 32), the model's (48, ?); correct "
             'them, or re-run `d2l-bert pretrain`'),
    encode('Dcount', 'Dcount/pretrained.params ' + CORRUPT.format(
        'it declares 35,184,372,088,839 arrays, more than its 228,600 bytes '
        'can hold')),
    encode('Dshape', 'Dshape/pretrained.params ' + CORRUPT.format(
        'array 1 of 45, of shape (1, 250000, 250000) and dtype float32, '
        'needs 250,000,000,000 bytes at offset 72, and the file ends at '
        '228,600')),
    finetune('Dshape', 'Dshape/pretrained.params ' + CORRUPT.format(
        'array 1 of 45, of shape (1, 250000, 250000) and dtype float32, '
        'needs 250,000,000,000 bytes at offset 72, and the file ends at '
        '228,600')),
    # Hugging Face folders
    encode('Hstrides', 'Hstrides/pytorch_model.bin: tensor of size (60000, '
           '90000) has the stride (0, 0): a stride of 0 repeats one value '
           'along a dimension, which the tensors of a state dict never do; '
           'the file is corrupt'),
    encode('Hlegacy', 'Hlegacy/pytorch_model.bin: storage 0 declares '
           '2,305,843,009,213,693,957 values, 9,223,372,036,854,775,828 '
           'bytes, and the file ends 16 bytes further: it is truncated or '
           'corrupt'),
    encode('Hmemo', 'Hmemo/pytorch_model.bin: its pickle stores its object '
           '3 at the memo index 1,500,000,000; a pickle numbers them in '
           'order, the file is corrupt'),
    encode('Hinf', 'Hinf/model.safetensors ' + BROKEN.format(
        "its header gives 'embeddings.LayerNorm.bias' the data_offsets [0, "
        'inf], not two integers 0 <= begin <= end <= 64 (the bytes after '
        'the header)')),
    encode('Hheader', 'Hheader/model.safetensors ' + BROKEN.format(
        'a header of 5,000,000 bytes, in a file of 72')),
    encode('Hvocab', 'Hvocab/config.json: the 11,200,000,004,640 float32 '
           'weights its sizes make take 40.7 TB of memory, and this machine '
           'has {available} available'),
]


def _d2l_folders(root):
    """D...: M, the model pretrained for one step, each damaged once."""
    params = mx.npx.load(str(root / 'M' / 'pretrained.params'))
    config = json.loads((root / 'M' / 'config.json').read_text())

    def copy(name, without=()):
        shutil.copytree(root / 'M', root / name)
        for file in without:
            os.remove(root / name / file)
        return root / name

    positions = {'encoder.pos_embedding': mx.np.zeros((7, 32))}   # 2-D
    mx.npx.save(str(copy('Dpos', ['config.json']) / 'pretrained.params'),
                dict(params, **positions))
    mx.npx.save(str(copy('Dlist', ['config.json']) / 'pretrained.params'),
                list(params.values()))
    for name, content in (
            ('Dheads', json.dumps(dict(config, num_heads=5))),
            ('Dlisted', json.dumps(list(config))),
            ('Dnested', '{"num_blks": ' * 4000 + '2' + '}' * 4000)):
        (copy(name) / 'config.json').write_text(content)
    vocab = json.loads((root / 'M' / 'vocab.json').read_text())
    (copy('Dvocab') / 'vocab.json').write_text(json.dumps(vocab + ['the']))
    (copy('Dpng') / 'pretrained.params').write_bytes(PNG)
    other = BERTModel(len(vocab), 32, 40, 2, 2, 0.0, 1000)
    other.initialize()
    other(*_batch())
    other.save_parameters(str(copy('Dother') / 'pretrained.params'))
    data = bytearray((root / 'M' / 'pretrained.params').read_bytes())
    struct.pack_into('<Q', data, 16, (1 << 45) + 7)  # the number of arrays
    (copy('Dcount') / 'pretrained.params').write_bytes(bytes(data))
    data = bytearray((root / 'M' / 'pretrained.params').read_bytes())
    struct.pack_into('<qqq', data, 36, 1, 250000, 250000)  # array 1's shape
    (copy('Dshape') / 'pretrained.params').write_bytes(bytes(data))


def _batch():
    tokens = mx.np.ones((1, 4), dtype='int32')
    return (tokens, mx.np.zeros((1, 4), dtype='int32'), mx.np.array([4.0]),
            mx.np.array([[1, 2]], dtype='int32'))


def _hf_folders(root):
    """H...: the tiny Hugging Face BERT, each with one lying file."""
    def copy(name, weights=True, **config):
        folder = root / name
        folder.mkdir()
        shutil.copy(os.path.join(hf_formats.TINY_DIR, 'vocab.txt'), folder)
        if weights:
            shutil.copy(os.path.join(hf_formats.TINY_DIR,
                                     'model.safetensors'), folder)
        (folder / 'config.json').write_text(json.dumps(dict(
            hf_formats.read_config(), **config)))
        return folder

    with pytest.MonkeyPatch.context() as monkeypatch:
        hf_formats.write_torch_zip(
            str(copy('Hstrides', False) / 'pytorch_model.bin'),
            {'w': (range(5), 0, (60000, 90000), (0, 0))}, monkeypatch)
        hf_formats.write_torch_legacy(
            str(copy('Hlegacy', False) / 'pytorch_model.bin'),
            {'w': (range(4), 0, (2, 2), (2, 1))}, monkeypatch,
            numels=[(1 << 61) + 5])
    # A list memoized at index 1.5e9: the unpickler would grow its memo
    # to 3e9 entries, 24 GB
    (copy('Hmemo', False) / 'pytorch_model.bin').write_bytes(
        b'\x80\x02]q\x00r' + (1_500_000_000).to_bytes(4, 'little') + b'.')
    header = {'embeddings.LayerNorm.bias': {
        'dtype': 'F32', 'shape': [16], 'data_offsets': [0, 1e500]}}
    text = json.dumps(header).encode()
    (copy('Hinf', False) / 'model.safetensors').write_bytes(
        len(text).to_bytes(8, 'little') + text + bytes(64))
    (copy('Hheader', False) / 'model.safetensors').write_bytes(
        (5_000_000).to_bytes(8, 'little') + bytes(64))
    copy('Hvocab', vocab_size=7 * 10 ** 11)


@pytest.fixture(scope='module')
def root(tmp_path_factory):
    """A working directory with a synthetic SNLI and the damaged
    folders of `TABLE`."""
    root = tmp_path_factory.mktemp('damaged')
    write_small_corpus(root / 'corpus')
    make_snli_synthetic(str(root / 'nli'), num_train=40, num_dev=8,
                        num_test=8)
    here = os.getcwd()
    os.chdir(root)
    try:
        assert cli.main(['pretrain', '--corpus', 'corpus', '--steps', '1',
                         '--out', 'M'] + TINY_ARGS) == 0
    finally:
        os.chdir(here)
    _d2l_folders(root)
    _hf_folders(root)
    return root


def bounded():
    """The `preexec_fn` of a command: its limits, and default signals."""
    for name in ('SIGINT', 'SIGHUP', 'SIGTERM'):
        signal.signal(getattr(signal, name), signal.SIG_DFL)
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE,) * 2)
    resource.setrlimit(resource.RLIMIT_CPU, (CPU_SECONDS,) * 2)


def session(sid):
    """The live processes of the session `sid`."""
    found = []
    for entry in os.listdir('/proc'):
        if not entry.isdigit():
            continue
        try:
            with open(f'/proc/{entry}/stat') as f:
                fields = f.read().rsplit(')', 1)[1].split()
        except OSError:
            continue
        if fields[0] != 'Z' and int(fields[3]) == sid:
            found.append(int(entry))
    return found


def snapshot(folder):
    return {path.relative_to(folder): hashlib.sha256(
        path.read_bytes()).digest() for path in sorted(folder.rglob('*'))
        if path.is_file()}


@pytest.mark.skipif(not os.path.isdir('/proc/self'),
                    reason="counts a command's processes in Linux's /proc")
@pytest.mark.parametrize('argv, status, line', TABLE,
                         ids=[argv.split(' --data')[0] for argv, _, _ in
                              TABLE])
def test_a_damaged_model_folder_is_one_line_naming_the_file(root, argv,
                                                            status, line):
    folder = root / argv.split()[2]
    before = snapshot(folder)
    proc = subprocess.Popen(
        [sys.executable, '-m', 'd2l_bert'] + argv.split(), cwd=root,
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, start_new_session=True, preexec_fn=bounded)
    try:
        _, err = proc.communicate(timeout=WALL_SECONDS)
        left = session(proc.pid)
    finally:
        for pid in session(proc.pid) + [proc.pid]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.wait()
    err = err.decode()
    lines = err.strip().splitlines()
    # (what the machine has available, at most the address space, varies)
    pattern = re.escape(line).replace(re.escape('{available}'),
                                      r'[\d.]+ [KMG]B')
    assert proc.returncode == status, err
    assert lines and re.fullmatch(pattern, lines[-1]), err
    assert 'Traceback' not in err
    assert sum(': error: ' in text for text in lines) == 1, err
    assert left == []
    assert snapshot(folder) == before
    assert not (root / 'F').exists()
