"""The runaway table's rows for checkpoints: ``d2l-bert pretrain
--resume`` from a checkpoint that would run code, declares sizes it
does not hold, or is damaged, and SIGHUP while one is written.

Each row runs as its own bounded process and is checked as the rows of
tests/test_cli_runaway.py are (`answered`): the exit status, the one
last line of standard error, no process left, the checkpoint's
directory byte-identical afterwards.
"""
import json
import os
import pickle
import random
import signal
import zipfile

import mxnet as mx
import pytest
from mxnet import init

from d2l_bert import cli
from d2l_bert.book.bert import BERTModel
from d2l_bert.data.ndarray_bytes import read_ndarrays
from d2l_bert.runs.pretraining import _make_trainer
from helpers import TINY_ARGS, write_small_corpus, write_version_1
from test_cli_runaway import TINY, answered, case, error

DAMAGED = '; the checkpoint is damaged'


def resume(name, status=2, line=None, **extra):
    """The row that resumes the copy `name` of the model M."""
    return case(f'pretrain --corpus corpus --steps 4 --out {name} --resume '
                f'{TINY}', status, line and error(
                    'pretrain', f'--resume: {name}/checkpoint.zip{line}'),
                same=name, **extra)


TABLE = [
    # a checkpoint of version 1 whose pickle would create a file: refused,
    # the file never made
    resume('Mevil', 2, f': trainer.states holds {os.name}.system, which a '
           'checkpoint never holds; refusing to load it', gone=('ran',)),
    # a whole one of version 1 resumes (and is written anew as version 2)
    case(f'pretrain --corpus corpus --steps 3 --out Mold --resume {TINY}', 0,
         None),
    resume('Mjunk', 2, ": trainer.states is not Adam's state: it holds no "
           "pickle (UnpicklingError: invalid load key, 'm'.)" + DAMAGED),
    # meta.json of impossible values, refused before any work
    resume('Mneg', 2, ": meta.json's step is -3, not an integer, 0 or more"
           + DAMAGED),
    resume('Mepoch', 2, ": meta.json's data.epoch is 123,456,789, more than "
           'the 2 steps done' + DAMAGED),
    resume('Mbatches', 2, ": meta.json's data.num_batches is 77,777,777, "
           'more than the 2 steps done; the checkpoint is damaged, or of '
           'other data'),
    resume('Mhist', 2, ": meta.json's history.mlm is 'low', not a list of "
           'losses' + DAMAGED),
    resume('Mseed', 2, ": meta.json's mx_seed is a list of 1 value, not an "
           'integer from 0 to 2,147,483,647 or null' + DAMAGED),
    resume('Mrng', 2, ": meta.json's rng is 'random', not an object of the "
           'Python and NumPy random states' + DAMAGED),
    # members missing, damaged, of another model, or larger than it
    resume('Mnoparams', 2, ' holds no model.params' + DAMAGED),
    resume('Mnoise', 2, ': model.params does not begin as a file of MXNet '
           'arrays' + DAMAGED),
    resume('Mother', 2, ': model.params holds encoder.pos_embedding of shape '
           '(1, 1000, 16) and dtype float32, and the model has (1, 1000, 32) '
           'and float32; the checkpoint is of another model'),
    resume('Madam', 2, ': adam.params does not begin as a file of MXNet '
           'arrays' + DAMAGED),
    resume('Mbomb', 2, ': model.params is 268,435,456 bytes, more than the '
           "228,600 that the model's parameters take; the checkpoint is of "
           'another model, or damaged'),
    # SIGHUP (a closed terminal) while the checkpoint is written every
    # step: it ends the run once the file is in place, none left half
    case(f'pretrain --corpus corpus --steps 100000 --checkpoint-every 1 '
         f'--out Mhup {TINY}', -signal.SIGHUP, None,
         interrupt='pretraining ', signal=signal.SIGHUP,
         gone=('Mhup/.*.tmp',)),
]


@pytest.fixture(scope='module')
def root(tmp_path_factory):
    """A working directory with a corpus, a model pretrained for 2 steps
    (M) and the damaged copies of its checkpoint that the rows name."""
    root = tmp_path_factory.mktemp('checkpoints')
    write_small_corpus(root / 'corpus')
    here = os.getcwd()
    os.chdir(root)
    try:
        assert cli.main(['pretrain', '--corpus', 'corpus', '--steps', '2',
                         '--out', 'M'] + TINY_ARGS) == 0
    finally:
        os.chdir(here)
    _damage(root)
    return root


def _damage(root):
    """The copies of M that the rows resume, each damaged its way."""
    with zipfile.ZipFile(root / 'M' / 'checkpoint.zip') as z:
        members = {name: z.read(name) for name in z.namelist()}
    meta = json.loads(members['meta.json'])
    for name, key, value in (('Mneg', ('step',), -3),
                             ('Mepoch', ('data', 'epoch'), 123456789),
                             ('Mbatches', ('data', 'num_batches'), 77777777),
                             ('Mhist', ('history', 'mlm'), 'low'),
                             ('Mseed', ('mx_seed',), [1]),
                             ('Mrng', ('rng',), 'random')):
        changed = json.loads(members['meta.json'])
        inner = changed
        for k in key[:-1]:
            inner = inner[k]
        inner[key[-1]] = value
        _write(root, name, dict(members, **{'meta.json': json.dumps(
            changed)}))
    noise = random.Random(11).randbytes(4000)
    _write(root, 'Mnoparams', {k: v for k, v in members.items()
                               if k != 'model.params'})
    _write(root, 'Mnoise', dict(members, **{'model.params': noise}))
    _write(root, 'Madam', dict(members, **{'adam.params': noise}))
    _write(root, 'Mother', dict(members, **{
        'model.params': _other_model(root, members['model.params'])}))
    _write(root, 'Mbomb', members, bomb='model.params')
    # version 1: the pickle MXNet writes, and one that runs a command
    (root / 'Mold').mkdir()
    write_version_1(root / 'M' / 'checkpoint.zip',
                    root / 'Mold' / 'checkpoint.zip',
                    *_model(meta['config']))
    with zipfile.ZipFile(root / 'Mold' / 'checkpoint.zip') as z:
        old = {name: z.read(name) for name in z.namelist()}
    _write(root, 'Mevil', dict(old, **{'trainer.states': pickle.dumps(
        _Runs(f'touch {root / "ran"}'))}))
    _write(root, 'Mjunk', dict(old, **{'trainer.states': noise}))


class _Runs:
    """Unpickled, runs `command` in a shell."""

    def __init__(self, command):
        self.command = command

    def __reduce__(self):
        return os.system, (self.command,)


def _model(config):
    """A net of `config`'s sizes, and its trainer."""
    net = BERTModel(config['vocab_size'], config['num_hiddens'],
                    config['ffn_num_hiddens'], config['num_heads'],
                    config['num_blks'], config['dropout'])
    net.initialize(init.Xavier())
    return net, _make_trainer(net, config['learning_rate'])


def _other_model(root, params):
    """The parameters of a model like the one of `params` (a
    ``model.params``), of 16 hidden units instead of 32."""
    arrays = {name: mx.np.zeros(tuple(16 if d == 32 else d for d in a.shape))
              for name, a in read_ndarrays(params).items()}
    path = str(root / 'other.params')
    mx.npx.save(path, arrays)
    with open(path, 'rb') as f:
        data = f.read()
    os.remove(path)
    return data


def _write(root, name, members, bomb=None):
    """``root/name``: a copy of M with a checkpoint of `members`, and
    `bomb` a member of 256 MB of zeros, deflated to some 250 KB."""
    directory = root / name
    directory.mkdir()
    for model_file in ('pretrained.params', 'vocab.json', 'config.json'):
        (directory / model_file).write_bytes(
            (root / 'M' / model_file).read_bytes())
    with zipfile.ZipFile(directory / 'checkpoint.zip', 'w') as z:
        for member, data in members.items():
            if member != bomb:
                z.writestr(member, data)
        if bomb:
            info = zipfile.ZipInfo(bomb)
            info.compress_type = zipfile.ZIP_DEFLATED
            with z.open(info, 'w') as f:
                for _ in range(256):
                    f.write(bytes(1 << 20))


@pytest.mark.skipif(not os.path.isdir('/proc/self'),
                    reason="counts a command's processes in Linux's /proc")
@pytest.mark.parametrize('row', TABLE)
def test_resuming_a_checkpoint_is_answered_in_one_line(root, row):
    answered(root, row)
    if row.status == 0:   # written anew, holding no pickle
        with zipfile.ZipFile(root / 'Mold' / 'checkpoint.zip') as z:
            assert 'trainer.states' not in z.namelist()
            assert json.loads(z.read('meta.json'))['version'] == 2
