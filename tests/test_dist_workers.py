"""Tests of d2l_bert/dist/workers.py in one process: which rows a worker
takes, and the one-worker case of `Workers`.  Real jobs of several
workers are in test_cli_pretrain.py and test_cli_launch.py."""
from types import SimpleNamespace

import mxnet as mx
import numpy as onp
import pytest
from mxnet import gluon, np

from d2l_bert.dist import workers as DP

from processes import needs_parameter_server


def batch_of(num_rows):
    """The seven arrays of a batch, row `i` holding the value `i`."""
    rows = onp.arange(num_rows)
    return [np.array(rows.reshape(-1, 1) * onp.ones((1, width)),
                     dtype=dtype)
            for width, dtype in ((4, 'int32'), (4, 'int32'), (1, 'float32'),
                                 (2, 'int32'), (2, 'float32'), (2, 'int32'),
                                 (1, 'float32'))]


@pytest.mark.parametrize('num_rows', [8, 7, 5])
def test_worker_shards_are_what_one_process_with_all_devices_gets(num_rows):
    batch = batch_of(num_rows)
    # 2 workers of 2 devices, against one process of 4
    everything = [gluon.utils.split_and_load(
        elem, [mx.cpu(i) for i in range(4)], even_split=False)
        for elem in batch]
    for rank in (0, 1):
        devices = [mx.cpu(0), mx.cpu(1)]
        mine = DP.worker_shards(batch, devices, rank, 2)
        for elem, expected in zip(mine, everything):
            assert len(elem) == 2
            for d, shard in enumerate(elem):
                assert shard.context == devices[d]
                onp.testing.assert_array_equal(
                    shard.asnumpy(), expected[2 * rank + d].asnumpy())


def test_worker_shards_of_one_worker_are_split_and_load():
    batch, devices = batch_of(5), [mx.cpu(0), mx.cpu(1)]
    for mine, book in zip(DP.worker_shards(batch, devices),
                          [gluon.utils.split_and_load(e, devices,
                                                      even_split=False)
                           for e in batch]):
        assert [s.shape for s in mine] == [s.shape for s in book]


def test_worker_rows_give_each_worker_its_rows_of_every_batch():
    batches = [batch_of(6), batch_of(5)]
    seen = []
    for rank in (0, 1):
        kvstore = SimpleNamespace(rank=rank, num_workers=2)
        rows = DP.worker_rows(batches, kvstore)
        assert len(rows) == 2
        # Walked again from the start, as a DataLoader is
        for _ in range(2):
            firsts = [batch[0][:, 0].asnumpy().tolist() for batch in rows]
        seen.append(firsts)
    assert seen == [[[0, 1, 2], [0, 1, 2]], [[3, 4, 5], [3, 4]]]


def test_one_process_alone_is_worker_0_of_1():
    workers = DP.Workers()
    assert (workers.rank, workers.num_workers, workers.leader) == (0, 1, True)
    assert workers.all_gather([1.5, 2.0]) == [[1.5, 2.0]]
    workers.check_same('step', 3)     # nothing to compare with


@needs_parameter_server
def test_create_kvstore_outside_a_job_says_how_to_start_one(monkeypatch):
    monkeypatch.delenv('DMLC_ROLE', raising=False)
    with pytest.raises(ValueError) as e:
        DP.create_kvstore('dist_sync')
    assert str(e.value) == (
        "kvstore 'dist_sync' needs a worker of a job started by `d2l-bert "
        "pretrain --workers N` or `d2l-bert launch`, but DMLC_ROLE is None")
    with pytest.raises(ValueError, match="kvstore must be 'dist_sync'"):
        DP.create_kvstore('device')


def test_the_gather_keys_hash_to_a_server_without_overflow():
    # MXNet places key k on server k * 9973 % num_servers, in a 32-bit int;
    # 1 << 24 overflowed, and a job of two servers crashed
    for width in range(1, 65):
        assert (DP.GATHER_KEY + width) * 9973 < 2**31
