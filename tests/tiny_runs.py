"""Seeded tiny pretraining runs, shared by the tests of the pretraining
section (`test_pretraining`), of checkpointed training (`test_training`)
and of model directories (`test_model_files`)."""
import random

import mxnet as mx
import numpy as onp
from mxnet import init

from d2l_bert import BERTModel
from d2l_bert.dataset import load_data_wiki

# A BERT small enough for tests: 32 hidden units, 2 heads, 2 blocks
TINY = dict(num_hiddens=32, ffn_num_hiddens=48, num_heads=2, num_blks=2)


def seed_all(seed):
    random.seed(seed)
    onp.random.seed(seed)
    mx.random.seed(seed)


def make_run(corpus_dir, batch_size=32, dropout=0.0, devices=None,
             seed=0):
    """Data, vocabulary and a freshly initialized tiny BERT, all seeded."""
    devices = devices or [mx.cpu()]
    seed_all(seed)
    train_iter, vocab = load_data_wiki(batch_size, 64, corpus=corpus_dir,
                                       seed=seed)
    net = BERTModel(len(vocab), dropout=dropout, **TINY)
    net.initialize(init.Xavier(), ctx=devices)
    return train_iter, vocab, net
