"""Tests of d2l_bert/runs/checkpoints.py: checkpoints that resume a run
exactly, hold no code, and are read only as far as the model's sizes
allow; damaged ones are one line naming the file.

Small configurations throughout: the small corpus, num_hiddens 32,
batches of 32 pairs.
"""
import json
import os
import pickle
import random
import re
import struct
import zipfile

import mxnet as mx
import numpy as onp
import pytest
from mxnet import gluon, init

from d2l_bert import BERTModel
from d2l_bert.data.ndarray_bytes import read_ndarrays
from d2l_bert.runs import checkpoints as C
from d2l_bert.runs import pretraining as T
from d2l_bert.runs.checkpoint_meta import ResumeError
from d2l_bert.runs.seeding import seed_everything

from helpers import make_run, run_config, write_version_1


def params_of(net):
    # Structural names (`encoder.blks.0...`), as in a .params file
    return {name: p.data(p.list_ctx()[0]).asnumpy()
            for name, p in net._collect_params_with_prefix().items()}


def initialized(net):
    """`net`'s parameters that are initialized (others wait for their
    shapes, in Gluon's deferred initialization), as NumPy arrays."""
    return {name: p.data(p.list_ctx()[0]).asnumpy()
            for name, p in net._collect_params_with_prefix().items()
            if not p._deferred_init}


def assert_untouched(net, trainer, before):
    """Neither `net`, whose parameters were `before`, nor `trainer` was
    restored from a checkpoint."""
    after = initialized(net)
    assert sorted(after) == sorted(before)
    for name, value in after.items():
        onp.testing.assert_array_equal(value, before[name], err_msg=name)
    assert trainer.optimizer.num_update == 0
    assert all(u.states == {} for u in trainer._updaters)


def assert_same_params(net_a, net_b, atol):
    a, b = params_of(net_a), params_of(net_b)
    assert sorted(a) == sorted(b)
    for name in a:
        onp.testing.assert_allclose(a[name], b[name], rtol=0, atol=atol,
                                    err_msg=name)


def train_with_checkpoint(corpus_dir, num_steps, path, resume=False,
                          config=None, devices=None, dropout=0.2):
    # Dropout on: resuming must also repeat MXNet's random masks
    devices = devices or [mx.cpu()]
    train_iter, vocab, net = make_run(corpus_dir, dropout=dropout,
                                      devices=devices)
    history = T.train_bert_history(
        train_iter, net, gluon.loss.SoftmaxCELoss(), len(vocab), devices,
        num_steps, checkpoint=str(path), checkpoint_every=3, resume=resume,
        config=config, progress=False)
    return history, net


def fresh_model(vocab, devices=None, kvstore=None):
    """Another net and its trainer, other random states."""
    seed_everything(123)
    net = BERTModel(**run_config(vocab))
    net.initialize(init.Xavier(), ctx=devices or [mx.cpu()])
    return net, T._make_trainer(net, 0.01, kvstore)


@pytest.fixture(scope='module')
def saved(small_corpus, tmp_path_factory):
    """A checkpoint of 2 steps, its version-1 twin, and the vocabulary."""
    directory = tmp_path_factory.mktemp('saved')
    train_iter, vocab, net = make_run(small_corpus)
    T.train_bert_history(train_iter, net, gluon.loss.SoftmaxCELoss(),
                         len(vocab), [mx.cpu()], 2,
                         checkpoint=str(directory / 'v2.zip'),
                         progress=False)
    write_version_1(directory / 'v2.zip', directory / 'v1.zip',
                    *fresh_model(vocab))
    return directory, vocab


# ---------------------------------------------------------------------------
# Resuming repeats an uninterrupted run
# ---------------------------------------------------------------------------

@pytest.mark.parametrize('stop, version', [(4, 2), (6, 2), (6, 1)])
def test_resumed_run_ends_where_an_uninterrupted_one_does(
        small_corpus, tmp_path, stop, version):
    # About 5 batches an epoch: stopping at 4 resumes inside the first
    # epoch, at 6 inside the second; the run ends in the third.  A
    # checkpoint of version 1 (Adam's state pickled) resumes the same
    train_iter, vocab, _ = make_run(small_corpus)
    assert 3 <= len(train_iter) <= 6
    full, net_full = train_with_checkpoint(small_corpus, 11,
                                           tmp_path / 'full.zip')
    train_with_checkpoint(small_corpus, stop, tmp_path / 'part.zip')
    if version == 1:
        write_version_1(tmp_path / 'part.zip', tmp_path / 'v1.zip',
                        *fresh_model(vocab))
        os.replace(tmp_path / 'v1.zip', tmp_path / 'part.zip')
    meta = C.read_checkpoint_meta(tmp_path / 'part.zip')
    assert (meta['step'], meta['version']) == (stop, version)
    resumed, net_resumed = train_with_checkpoint(
        small_corpus, 11, tmp_path / 'part.zip', resume=True)
    assert resumed.num_steps == 11
    onp.testing.assert_allclose(full.mlm, resumed.mlm, rtol=0, atol=1e-5)
    onp.testing.assert_allclose(full.nsp, resumed.nsp, rtol=0, atol=1e-5)
    assert_same_params(net_full, net_resumed, atol=1e-5)


def test_two_devices_resume_as_they_trained(small_corpus, tmp_path):
    # One process with two devices: Adam's state is in the kvstore's
    # updater, which the checkpoint saves and restores
    devices = [mx.cpu(0), mx.cpu(1)]
    full, net_full = train_with_checkpoint(
        small_corpus, 5, tmp_path / 'full.zip', devices=devices)
    train_with_checkpoint(small_corpus, 3, tmp_path / 'part.zip',
                          devices=devices)
    resumed, net_resumed = train_with_checkpoint(
        small_corpus, 5, tmp_path / 'part.zip', resume=True,
        devices=devices)
    onp.testing.assert_allclose(full.mlm, resumed.mlm, rtol=0, atol=1e-5)
    assert_same_params(net_full, net_resumed, atol=1e-5)


@pytest.mark.parametrize('version', [2, 1])
def test_checkpoint_round_trip_restores_params_trainer_and_rng(saved,
                                                               version):
    directory, vocab = saved
    path = directory / f'v{version}.zip'
    with zipfile.ZipFile(path) as z:
        assert sorted(z.namelist()) == sorted(
            ['meta.json', 'model.params', 'adam.params'] if version == 2
            else ['meta.json', 'model.params', 'trainer.states'])
    other, trainer = fresh_model(vocab)
    meta = C.load_checkpoint(str(path), other, trainer, [mx.cpu()])
    assert meta['step'] == 2 and len(meta['history']['mlm']) == 2
    with zipfile.ZipFile(path) as z:
        expected = read_ndarrays(z.read('model.params'))
    for name, value in params_of(other).items():
        onp.testing.assert_array_equal(value, expected[name], err_msg=name)
    assert trainer.optimizer.num_update == 2
    states = trainer._updaters[0].states
    assert sorted(states) == list(range(len(trainer._params)))
    assert all(v.asnumpy().min() >= 0 for _, v in states.values())
    # Python's random state is the checkpoint's (`fresh_model` seeded it)
    assert list(random.getstate()[1]) == meta['rng']['python'][1]


@pytest.mark.parametrize('version', [2, 1])
def test_a_checkpoint_resumes_on_devices_that_update_themselves(
        saved, small_corpus, version):
    # One device writes the checkpoint; two devices that each take Adam's
    # step themselves (as a worker of a job does) resume it, and keep
    # equal weights: both continue Adam's bias correction at step 3
    directory, vocab = saved
    devices = [mx.cpu(0), mx.cpu(1)]
    other, trainer = fresh_model(vocab, devices, mx.kv.create('device'))
    C.load_checkpoint(str(directory / f'v{version}.zip'), other, trainer,
                      devices)
    train_iter, _, _ = make_run(small_corpus)
    batch = next(iter(train_iter))
    shards = [gluon.utils.split_and_load(e, devices) for e in batch]
    with mx.autograd.record():
        _, _, ls = T._get_batch_loss_bert(
            other, gluon.loss.SoftmaxCELoss(), len(vocab), *shards)
    for l in ls:
        l.backward()
    trainer.step(1)
    counts = trainer.optimizer._all_index_update_counts
    assert counts[0] == counts[1] and set(counts[0].values()) == {3}
    for p in other.collect_params().values():
        onp.testing.assert_array_equal(p.data(devices[0]).asnumpy(),
                                       p.data(devices[1]).asnumpy())


def test_resume_refuses_a_checkpoint_of_other_settings(small_corpus,
                                                       tmp_path):
    path = tmp_path / 'ckpt.zip'
    train_with_checkpoint(small_corpus, 1, path, config={'batch_size': 32})
    with pytest.raises(ValueError, match=r'batch_size: checkpoint 32, '
                                         r'now 64'):
        train_with_checkpoint(small_corpus, 2, path, resume=True,
                              config={'batch_size': 64})


def test_resume_refuses_another_learning_rate(saved):
    directory, vocab = saved
    net, _ = fresh_model(vocab)
    trainer = T._make_trainer(net, 0.02)
    for version in (2, 1):
        path = directory / f'v{version}.zip'
        with pytest.raises(ResumeError) as e:
            C.load_checkpoint(str(path), net, trainer, [mx.cpu()])
        assert str(e.value) == (
            f"{path} was written with Adam's learning_rate 0.01, and the "
            'trainer has 0.02; resume with the same settings or start '
            'afresh')


def test_a_failed_save_leaves_the_previous_checkpoint_whole(small_corpus,
                                                            tmp_path,
                                                            monkeypatch):
    path = tmp_path / 'ckpt.zip'
    train_with_checkpoint(small_corpus, 3, path)
    before = path.read_bytes()

    def broken_writestr(self, name, data, *args, **kwargs):
        raise OSError('disk full')
    monkeypatch.setattr(zipfile.ZipFile, 'writestr', broken_writestr)
    with pytest.raises(OSError, match='disk full'):
        train_with_checkpoint(small_corpus, 3, path)
    assert path.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ['ckpt.zip']


def test_read_checkpoint_meta_rejects_other_files(tmp_path):
    path = tmp_path / 'not-a-checkpoint.zip'
    path.write_text('hello')
    with pytest.raises(ResumeError) as e:
        C.read_checkpoint_meta(str(path))
    assert str(e.value) == (f'{path} is not a d2l-bert checkpoint (File is '
                            'not a zip file)')
    for other, what in ((tmp_path, 'is a directory'),
                        ('/dev/zero', 'is not a regular file'),
                        (tmp_path / 'gone.zip', 'does not exist')):
        with pytest.raises(ResumeError) as e:
            C.read_checkpoint_meta(str(other))
        assert str(e.value) == f'{other} {what}, not a d2l-bert checkpoint'


# ---------------------------------------------------------------------------
# No code: the format holds none, and an old pickle runs none
# ---------------------------------------------------------------------------

def test_a_checkpoint_holds_arrays_and_json_only(saved):
    directory, _ = saved
    with zipfile.ZipFile(directory / 'v2.zip') as z:
        meta = json.loads(z.read('meta.json'))
        adam = z.read('adam.params')
        params = z.read('model.params')
    assert meta['version'] == 2
    assert sorted(meta['adam']) == ['hyper', 'num_update', 'update_counts']
    assert meta['adam']['update_counts']['0'][
        'encoder.pos_embedding'] == 2
    # MXNet's file of arrays, not a pickle (whose first byte is 0x80)
    for data in (adam, params):
        assert data[:8] == b'\x12\x01\0\0\0\0\0\0'
    moments = read_ndarrays(adam)
    assert 'encoder.blks.0.ffn.dense1.weight/mean' in moments
    assert len(moments) == 2 * len(read_ndarrays(params))


class Calls:
    """Pickled as a call of `function` with `args`, which unpickling
    makes."""

    def __init__(self, function, *args):
        self.function, self.args = function, args

    def __reduce__(self):
        return self.function, self.args


def with_states(directory, name, states):
    """`directory`'s version-1 checkpoint with another ``trainer.states``,
    written as `name`; its path."""
    path = directory / name
    with zipfile.ZipFile(directory / 'v1.zip') as src, \
            zipfile.ZipFile(path, 'w') as dst:
        for member in src.namelist():
            dst.writestr(member, states if member == 'trainer.states'
                         else src.read(member))
    return path


def marker_calls(marker):
    """Pickles that would create the file `marker`, each with what the
    message says it holds."""
    import subprocess
    touch = f'open({str(marker)!r}, "w").close()'
    adam = mx.optimizer.Adam(learning_rate=0.01)
    adam.lr_scheduler = Calls(os.system, f'touch {marker}')
    return [
        (Calls(os.system, f'touch {marker}'), f'{os.name}.system'),
        (Calls(exec, touch), 'builtins.exec'),
        # pickle names it by its module: `io` before 3.13, `_io` since
        (Calls(open, str(marker), 'w'), f'{open.__module__}.open'),
        (Calls(subprocess.Popen, ['touch', str(marker)]),
         'subprocess.Popen'),
        # hidden in a state MXNet's own pickle would hold
        (({}, adam), f'{os.name}.system'),
    ]


def test_a_pickle_that_would_run_code_is_refused_unrun(saved, tmp_path):
    directory, vocab = saved
    marker = tmp_path / 'ran'
    net, trainer = fresh_model(vocab)
    before = initialized(net)
    for call, name in marker_calls(marker):
        path = with_states(directory, 'evil.zip', pickle.dumps(call))
        with pytest.raises(ResumeError) as e:
            C.load_checkpoint(str(path), net, trainer, [mx.cpu()])
        assert str(e.value) == (
            f'{path}: trainer.states holds {name}, which a checkpoint '
            'never holds; refusing to load it')
        assert not marker.exists()
    assert_untouched(net, trainer, before)


class HugeArray:
    """Pickled as MXNet pickles an array, ``NDArray(None)`` and then its
    raw bytes: those of 10**12 floats, without the floats."""

    def __reduce__(self):
        raw = (struct.pack('<Iii', 0xF993FACA, 0, 2)
               + struct.pack('<2q', 10**6, 10**6)
               + struct.pack('<iii', 1, 0, 0))
        return mx.nd.NDArray, (None,), {'handle': bytearray(raw)}


@pytest.mark.parametrize('states, message', [
    # a bytearray of 10**11 bytes, made from an int
    (pickle.dumps(Calls(bytearray, 10**11)), 'a bytearray made from int'),
    # an array that declares 4 TB and holds none of it
    (pickle.dumps(({0: (HugeArray(), HugeArray())},
                   mx.optimizer.Adam(learning_rate=0.01))),
     'an array that is cut short: an array, of shape (1000000, 1000000), '
     'needs 4,000,000,000,000 bytes, 0 are left'),
    (b'not a pickle at all', "no pickle (UnpicklingError: invalid load "
     "key, 'n'.)"),
    (pickle.dumps({0: 1}), 'no pair of states and Adam optimizer'),
    (pickle.dumps(({99: (1, 2)}, None)), 'no pair of states and Adam '
     'optimizer'),
], ids=['bytearray-1e11', 'array-4TB', 'not-a-pickle', 'a-dict',
        'no-optimizer'])
def test_a_pickle_that_is_not_adams_state_is_one_line(saved, states,
                                                      message):
    directory, vocab = saved
    path = with_states(directory, 'odd.zip', states)
    net, trainer = fresh_model(vocab)
    with pytest.raises(ResumeError) as e:
        C.load_checkpoint(str(path), net, trainer, [mx.cpu()])
    assert str(e.value) == (f"{path}: trainer.states is not Adam's state: "
                            f'it holds {message}; the checkpoint is damaged')


# ---------------------------------------------------------------------------
# Damaged members, and members larger than the model
# ---------------------------------------------------------------------------

def with_member(directory, source, member, data):
    """A copy of the checkpoint `source` of `directory` whose `member`
    holds `data` (None: without `member`); its path.  `data` may be a
    function that writes the member into the zip file itself."""
    path = directory / f'damaged-{member}.zip'
    with zipfile.ZipFile(directory / source) as src, \
            zipfile.ZipFile(path, 'w') as dst:
        for name in src.namelist():
            if name != member:
                dst.writestr(name, src.read(name))
        if callable(data):
            data(dst)
        elif data is not None:
            dst.writestr(member, data)
    return path


def zeros(member, size, compression=zipfile.ZIP_DEFLATED):
    """Writes `member`: `size` zero bytes, compressed to a few hundred
    KB (a zip bomb)."""
    def write(z):
        info = zipfile.ZipInfo(member)
        info.compress_type = compression
        with z.open(info, 'w') as f:
            for _ in range(size >> 20):
                f.write(bytes(1 << 20))
    return write


def other_model(params, directory, num_hiddens):
    """The bytes of the parameters of a model like the one of `params`
    (a ``model.params``), of `num_hiddens` instead of 32."""
    arrays = {name: mx.np.zeros(tuple(num_hiddens if d == 32 else d
                                      for d in a.shape))
              for name, a in read_ndarrays(params).items()}
    path = str(directory / 'other.params')
    mx.npx.save(path, arrays)
    with open(path, 'rb') as f:
        return f.read()


DAMAGED = '; the checkpoint is damaged'
ANOTHER = '; the checkpoint is of another model, or damaged'
NOISE = random.Random(3).randbytes(5000)
LIMIT = re.compile(r"more than the ([\d,]+) that the model's parameters")


def damaged_members(directory, sizes):
    """(checkpoint, member, its new bytes, the message after the path)
    of damaged copies of `directory`'s checkpoints; `sizes`: the real
    members' sizes."""
    with zipfile.ZipFile(directory / 'v2.zip') as z:
        params = z.read('model.params')
    smaller, larger = (other_model(params, directory, n) for n in (16, 64))
    return [
        ('v2.zip', 'model.params', None,
         ' holds no model.params' + DAMAGED),
        ('v2.zip', 'adam.params', None, ' holds no adam.params' + DAMAGED),
        ('v1.zip', 'trainer.states', None,
         ' holds no trainer.states' + DAMAGED),
        ('v2.zip', 'meta.json', None,
         ' is not a d2l-bert checkpoint (it holds no meta.json)'),
        ('v2.zip', 'model.params', NOISE,
         ': model.params does not begin as a file of MXNet arrays'
         + DAMAGED),
        ('v2.zip', 'adam.params', NOISE,
         ': adam.params does not begin as a file of MXNet arrays'
         + DAMAGED),
        ('v1.zip', 'trainer.states', NOISE[:80],
         ": trainer.states is not Adam's state: it holds no pickle "
         "(UnpicklingError: invalid load key, '\\xfd'.)" + DAMAGED),
        ('v2.zip', 'model.params', smaller,
         ': model.params holds encoder.pos_embedding of shape (1, 64, 16) '
         'and dtype float32, and the model has (1, 64, 32) and float32; '
         'the checkpoint is of another model'),
        ('v2.zip', 'model.params', larger,
         f': model.params is {len(larger):,} '
         "bytes, more than the {limit} that the "
         "model's parameters take" + ANOTHER),
        ('v2.zip', 'meta.json', b'{"step": 2, "mlm": [',
         ': meta.json is not valid JSON (Expecting value: line 1 column 21 '
         '(char 20))' + DAMAGED),
        ('v2.zip', 'meta.json', b'[' * 100_000,
         ': meta.json is not valid JSON (nested too deeply)' + DAMAGED),
        # zip bombs: refused before a byte is inflated
        ('v2.zip', 'model.params', zeros('model.params', 64 << 20),
         f": model.params is 67,108,864 bytes, more than the "
         "{limit} that the model's parameters take"
         + ANOTHER),
        ('v2.zip', 'adam.params', zeros('adam.params', 64 << 20),
         f": adam.params is 67,108,864 bytes, more than the "
         f"{sizes['adam.params']:,} that Adam's moments of the model take"
         + ANOTHER),
        ('v2.zip', 'meta.json', zeros('meta.json', 65 << 20),
         ': meta.json is 68,157,440 bytes, more than the 67,108,864 that a '
         'meta.json may take' + DAMAGED),
        ('v2.zip', 'adam.params', zeros('adam.params', 1 << 20,
                                        zipfile.ZIP_BZIP2),
         ': adam.params is encrypted or compressed in a way d2l-bert never '
         'writes' + DAMAGED),
    ]


def test_a_damaged_checkpoint_is_one_line_and_restores_nothing(saved):
    directory, vocab = saved
    with zipfile.ZipFile(directory / 'v2.zip') as z:
        sizes = {i.filename: i.file_size for i in z.infolist()}
    net, trainer = fresh_model(vocab)
    before = initialized(net)
    cases = damaged_members(directory, sizes)
    for source, member, data, message in cases:
        path = with_member(directory, source, member, data)
        with pytest.raises(ResumeError) as e:
            C.load_checkpoint(str(path), net, trainer, [mx.cpu()])
        if '{limit}' in message:
            # the net's deferred shapes are bounded by its largest size
            limit = LIMIT.search(str(e.value))[1]
            assert sizes['model.params'] <= int(limit.replace(',', '')) \
                < 3 * sizes['model.params']
            message = message.format(limit=limit)
        assert str(e.value) == f'{path}{message}'
        os.remove(path)
    assert_untouched(net, trainer, before)


def test_a_member_that_inflates_past_its_declared_size_is_cut(saved,
                                                              tmp_path):
    # The central directory says 1,000 bytes; the data inflates to 64 MB:
    # zipfile stops at the declared size, and the CRC fails
    directory, vocab = saved
    path = with_member(directory, 'v2.zip', 'adam.params',
                       zeros('adam.params', 64 << 20))
    data = bytearray(path.read_bytes())
    for signature, at in ((b'PK\3\4', 22), (b'PK\1\2', 24)):
        start = data.rfind(signature)
        while start >= 0:
            name_at = start + (30 if signature == b'PK\3\4' else 46)
            if data[name_at:name_at + 11] == b'adam.params':
                struct.pack_into('<I', data, start + at, 1000)
            start = data.rfind(signature, 0, start)
    (tmp_path / 'bomb.zip').write_bytes(bytes(data))
    net, trainer = fresh_model(vocab)
    with pytest.raises(ResumeError) as e:
        C.load_checkpoint(str(tmp_path / 'bomb.zip'), net, trainer,
                          [mx.cpu()])
    assert str(e.value) == (f"{tmp_path / 'bomb.zip'}: adam.params cannot "
                            "be read (Bad CRC-32 for file 'adam.params'); "
                            'the checkpoint is damaged')
