"""Tests of d2l_bert.book.transformer: parity with d2l 1.0.3 and the 0.17
name."""
import mxnet as mx
import pytest
from d2l import mxnet as d2l
from mxnet import np

from d2l_bert import (AddNorm, EncoderBlock, PositionWiseFFN,
                      TransformerEncoderBlock)

from helpers import assert_close, copy_params


def _pair(ours, ref, *inputs):
    for net in (ours, ref):
        net.initialize(mx.init.Normal(0.3))
        net(*inputs)
    copy_params(ours, ref)
    assert_close(ours(*inputs), ref(*inputs))


def test_position_wise_ffn_equals_d2l():
    X = np.random.normal(size=(2, 3, 4))
    _pair(PositionWiseFFN(8, 4), d2l.PositionWiseFFN(8, 4), X)


def test_add_norm_equals_d2l():
    X, Y = np.random.normal(size=(2, 3, 4)), np.random.normal(size=(2, 3, 4))
    _pair(AddNorm(0.0), d2l.AddNorm(0.0), X, Y)


@pytest.mark.parametrize('valid_lens', [None, [3, 1]])
def test_encoder_block_equals_d2l(valid_lens):
    X = np.random.normal(size=(2, 3, 8))
    lens = None if valid_lens is None else np.array(valid_lens)
    _pair(TransformerEncoderBlock(8, 16, 2, 0.0, True),
          d2l.TransformerEncoderBlock(8, 16, 2, 0.0, True), X, lens)


def test_encoder_block_keeps_the_shape():
    blk = TransformerEncoderBlock(24, 48, 8, 0.5)
    blk.initialize()
    assert blk(np.ones((2, 100, 24)), np.array([3, 2])).shape == (2, 100, 24)


def test_encoder_block_is_the_017_encoder_block():
    assert EncoderBlock is TransformerEncoderBlock
    blk = EncoderBlock(24, 48, 8, 0.5, True)
    blk.initialize()
    assert blk(np.ones((2, 5, 24)), None).shape == (2, 5, 24)
