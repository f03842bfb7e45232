"""Tests of d2l_bert/checks.py: the checks the book's blocks leave out,
applied from outside (`check_inputs`) or by the callers that build them."""
import pytest

from d2l_bert import MultiHeadAttention
from d2l_bert.checks import check_activation, check_inputs, check_num_heads
from d2l_bert.hf.original import OriginalBERTEncoder

HEADS_MESSAGE = ('num_hiddens must be divisible by num_heads, got '
                 'num_hiddens=10 and num_heads=4')


def test_heads_must_divide_num_hiddens():
    assert check_num_heads(12, 4) == 4
    with pytest.raises(ValueError, match=HEADS_MESSAGE):
        check_num_heads(10, 4)


def test_check_inputs_refuses_an_attention_whose_heads_do_not_divide():
    # the book's block builds, as d2l's does; the check says what is wrong
    attention = MultiHeadAttention(10, 4, 0.0)
    with pytest.raises(ValueError, match=HEADS_MESSAGE):
        check_inputs(attention)


def test_the_original_encoder_checks_its_heads_when_built():
    with pytest.raises(ValueError, match=HEADS_MESSAGE):
        OriginalBERTEncoder(99, 10, 16, 4, 1, 0.0)


def test_unknown_activation_is_refused_by_name():
    assert check_activation('gelu_tanh') == 'gelu_tanh'
    with pytest.raises(ValueError, match="activation must be one of.*"
                                         "got 'tanh'"):
        check_activation('tanh')
