"""d2l_bert's training steps, as the benchmarks time them.

- `ours_step`: d2l_bert's pretraining step, as ``d2l-bert pretrain``
  runs it;
- `book_loop_step`: the book's loop on the accelerated model;
- `job_worker`: a worker's side of a ``dist_sync`` job's step.
"""
import os

from _batches import book_batch
from _common import BOOK


def ours_step(net, vocab_size, batch):
    """d2l_bert's pretraining step on one device, as ``d2l-bert pretrain``
    runs it: `d2l_bert.fast.batch_loss` (model and losses in one graph),
    Adam at 0.01.

    Parameters
    ----------
    net : d2l_bert.BERTModel, initialized
    vocab_size : int
    batch : list of the 7 arrays of a pretraining batch

    Returns
    -------
    step : function of no argument; one training step, returning the
        (mlm, nsp) losses
    losses : (mlm, nsp) before training, dropout off
    """
    from mxnet import gluon
    from d2l_bert import fast

    batch_loss = fast.batch_loss(net, gluon.loss.SoftmaxCELoss(),
                                 vocab_size)
    return _step(batch_loss, batch_loss.graph.net, batch)


def book_loop_step(net, vocab_size, batch):
    """One step of the book's own loop (`_get_batch_loss_bert`, as
    `train_bert` calls it, Adam at 0.01) on ``fast.accelerate(net)`` and
    ``fast.accelerate(loss)``: what the pretraining notebook runs.  Same
    parameters and returns as `ours_step`."""
    import functools

    from mxnet import gluon
    from d2l_bert import fast
    from d2l_bert.book.pretraining import _get_batch_loss_bert

    twin = fast.accelerate(net)
    loss = fast.accelerate(gluon.loss.SoftmaxCELoss())
    batch_loss = functools.partial(_get_batch_loss_bert, twin, loss,
                                   vocab_size)
    return _step(batch_loss, twin, batch)


def _step(batch_loss, net, batch):
    from mxnet import autograd, gluon
    trainer = gluon.Trainer(net.collect_params(), 'adam',
                            {'learning_rate': BOOK['lr']})
    shards = [[b] for b in batch]

    def step():
        with autograd.record():
            mlm_ls, nsp_ls, ls = batch_loss(*shards)
        for l in ls:
            l.backward()
        trainer.step(1)
        return float(mlm_ls[0]), float(nsp_ls[0])

    mlm, nsp, _ = batch_loss(*shards)                     # dropout off
    return step, (float(mlm[0]), float(nsp[0]))


def job_worker(batch_size, prepare_kvstore=None):
    """A worker's side of the pretraining step of ``d2l-bert pretrain``
    (or one process's, outside a job), on the book's model and a
    book-shaped batch of `batch_size`: the model, its one-graph loss, the
    trainer, the workers and this worker's shards.

    `prepare_kvstore(kvstore)`, if given, runs on a job's kvstore before
    the trainer gives it its keys.
    """
    import types

    import mxnet as mx
    from mxnet import gluon, init, np, npx

    from d2l_bert import BERTModel, fast
    from d2l_bert.dist.workers import (Workers, create_kvstore,
                                       share_initial_weights, worker_shards)
    from d2l_bert.runs.pretraining import _make_trainer

    npx.set_np()
    kvstore = create_kvstore() if os.environ.get('DMLC_ROLE') else None
    cfg = dict(BOOK, batch_size=batch_size)
    V = cfg['vocab_size']
    batch = [np.array(a) for a in book_batch(
        batch_size, cfg['max_len'], V, cfg['num_preds'])]
    mx.random.seed(0)
    net = BERTModel(V, cfg['num_hiddens'], cfg['ffn_num_hiddens'],
                    cfg['num_heads'], cfg['num_blks'], cfg['dropout'])
    devices = [mx.cpu()]
    net.initialize(init.Xavier(), ctx=devices)
    batch_loss = fast.batch_loss(net, gluon.loss.SoftmaxCELoss(), V)
    if kvstore is not None and prepare_kvstore is not None:
        prepare_kvstore(kvstore)
    trainer = _make_trainer(net, BOOK['lr'], kvstore)
    if kvstore is not None:
        share_initial_weights(trainer)
    workers = Workers(kvstore)
    return types.SimpleNamespace(
        net=net, batch_loss=batch_loss, trainer=trainer, workers=workers,
        devices=devices, batch_size=batch_size,
        shards=worker_shards(batch, devices, workers.rank,
                             workers.num_workers))
