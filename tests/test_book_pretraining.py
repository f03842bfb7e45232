"""Tests of d2l_bert/book/pretraining.py (sec_bert-pretraining): the book's
`_get_batch_loss_bert` and `train_bert`, and the book's
`get_bert_encoding` as the package gives it (`encode_tokens`).

Small configurations throughout: a few hundred paragraphs of the embedded
corpus, num_hiddens 32, batches of 32 pairs.
"""
import re

import mxnet as mx
import numpy as onp
import pytest
from d2l import mxnet as d2l
from mxnet import gluon, init

from d2l_bert import BERTModel
from d2l_bert.book import pretraining as P
from d2l_bert.runs.model_files import encode_tokens

from helpers import make_run


def shards(batch, devices):
    return [gluon.utils.split_and_load(elem, devices, even_split=False)
            for elem in batch]


# ---------------------------------------------------------------------------
# The loss of a batch
# ---------------------------------------------------------------------------

def test_batch_loss_equals_d2l_1_0_3_on_each_shard(small_corpus):
    train_iter, vocab, net = make_run(small_corpus,
                                      devices=[mx.cpu(0), mx.cpu(1)])
    batch = next(iter(train_iter))
    loss = gluon.loss.SoftmaxCELoss()
    args = shards(batch, [mx.cpu(0), mx.cpu(1)])
    ours = P._get_batch_loss_bert(net, loss, len(vocab), *args)
    theirs = d2l._get_batch_loss_bert(net, loss, len(vocab), *args)
    for our_list, their_list in zip(ours, theirs):
        assert len(our_list) == len(their_list) == 2
        for our, their in zip(our_list, their_list):
            assert our.shape == their.shape == ()
            assert abs(float(our) - float(their)) < 1e-5
    # Not a trivial equality: the MLM loss starts near log(V)
    assert abs(float(ours[0][0]) - onp.log(len(vocab))) < 1.0


# ---------------------------------------------------------------------------
# train_bert
# ---------------------------------------------------------------------------

def test_train_bert_returns_none_as_the_books_does(small_corpus, capsys):
    train_iter, vocab, net = make_run(small_corpus)
    assert P.train_bert(train_iter, net, gluon.loss.SoftmaxCELoss(),
                        len(vocab), [mx.cpu()], 1) is None
    # d2l's Animator shows its figure first (outside a notebook, as text)
    out = capsys.readouterr().out.splitlines()
    assert re.fullmatch(r'.*MLM loss \d+\.\d{3}, NSP loss \d+\.\d{3}',
                        out[-2])
    assert out[-1].endswith('sentence pairs/sec on [cpu(0)]')


def test_train_bert_has_the_books_signature():
    # The book's six arguments: checks and a kvstore live in `runs/`
    import inspect
    assert list(inspect.signature(P.train_bert).parameters) == [
        'train_iter', 'net', 'loss', 'vocab_size', 'devices', 'num_steps']


# ---------------------------------------------------------------------------
# encode_tokens (the book's get_bert_encoding with its globals passed)
# ---------------------------------------------------------------------------

@pytest.fixture(scope='module')
def book_size_net(small_corpus):
    """The book's 128 hidden units, on the tiny vocabulary."""
    _, vocab, _ = make_run(small_corpus)
    net = BERTModel(len(vocab), num_hiddens=128, ffn_num_hiddens=256,
                    num_heads=2, num_blks=2, dropout=0.2)
    net.initialize(init.Xavier())
    return net, vocab


def test_encode_tokens_gives_the_books_shapes(book_size_net):
    net, vocab = book_size_net
    encoded_text = encode_tokens(net, ['a', 'crane', 'is', 'flying'],
                                 vocab=vocab)
    assert encoded_text.shape == (1, 6, 128)
    assert encoded_text[:, 0, :].shape == (1, 128)
    encoded_pair = encode_tokens(
        net, ['a', 'crane', 'driver', 'came'], ['he', 'just', 'left'],
        vocab=vocab, devices=[mx.cpu()])
    assert encoded_pair.shape == (1, 10, 128)
    # The same word in another context gets another vector
    crane_text = encoded_text[0, 2].asnumpy()
    crane_pair = encoded_pair[0, 2].asnumpy()
    assert onp.abs(crane_text - crane_pair).max() > 1e-4


def test_encode_tokens_needs_the_nets_vocabulary(book_size_net):
    net, vocab = book_size_net
    with pytest.raises(TypeError, match='needs vocab='):
        encode_tokens(net, ['a'])
    small = d2l.Vocab(['a', 'b'])
    with pytest.raises(ValueError, match=f'vocab has {len(small)} tokens '
                                         f'but the net embeds {len(vocab)}'):
        encode_tokens(net, ['a'], vocab=small)
