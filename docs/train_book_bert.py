"""The book's pretraining (sec_bert-pretraining) in each worker of a job
on MXNet's parameter server::

    d2l-bert launch --workers 2 python docs/train_book_bert.py

Every worker runs this file.  Each makes the same data loader (same
corpus, same seed) and trains on its own rows of every batch
(`worker_rows`); the job's kvstore sums the gradients of all workers and
takes Adam's step on its servers.  Worker 0 prints the book's lines.
"""
import argparse
import contextlib
import functools
import os
from unittest import mock

from d2l_bert.presets import BOOK_BERT, PRETRAINING
from d2l_bert.threads import set_threads

# Before mxnet: the worker's share of the cores, which `d2l-bert launch`
# puts in OMP_NUM_THREADS (printed below, by worker 0)
threads = set_threads()

import mxnet as mx  # noqa: E402
from mxnet import gluon, init  # noqa: E402

from d2l_bert import BERTModel, train_bert  # noqa: E402
from d2l_bert.dist.workers import create_kvstore, worker_rows  # noqa
from d2l_bert.runs.wiki_data import load_pretraining_data  # noqa: E402

parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
parser.add_argument('--corpus', default='embedded')
# The book's settings by default
parser.add_argument('--batch-size', type=int,
                    default=PRETRAINING['batch_size'])
parser.add_argument('--num-hiddens', type=int,
                    default=BOOK_BERT['num_hiddens'])
parser.add_argument('--ffn-num-hiddens', type=int,
                    default=BOOK_BERT['ffn_num_hiddens'])
parser.add_argument('--steps', type=int, default=PRETRAINING['num_steps'])
args = parser.parse_args()

# Join the job: wait until all its processes have started, and learn
# this worker's rank
kv = create_kvstore('dist_sync')
# The same seed in every worker: the same batches, the same initial weights
mx.random.seed(0)
train_iter, vocab = load_pretraining_data(
    args.batch_size, PRETRAINING['max_len'], corpus=args.corpus, seed=0)
net = BERTModel(len(vocab), **dict(BOOK_BERT, num_hiddens=args.num_hiddens,
                                   ffn_num_hiddens=args.ffn_num_hiddens))
devices = [mx.cpu()]
net.initialize(init.Xavier(), ctx=devices)
loss = gluon.loss.SoftmaxCELoss()

# Worker 0 prints, the others train quietly
with open(os.devnull, 'w') as devnull, (
        contextlib.redirect_stdout(devnull) if kv.rank
        else contextlib.nullcontext()):
    print(threads)
    # The book's `train_bert` makes its `gluon.Trainer` on the default
    # kvstore; a worker's must be the job's, so for this call the
    # `Trainer` it makes is given `kv`
    with mock.patch.object(gluon, 'Trainer',
                           functools.partial(gluon.Trainer, kvstore=kv)):
        train_bert(worker_rows(train_iter), net, loss, len(vocab), devices,
                   args.steps)
