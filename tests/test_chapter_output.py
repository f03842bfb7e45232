"""A cell's captured output: the first characters kept, the rest
counted."""
from d2l_bert.chapter.output import MAX_OUTPUT_CHARS, CappedOutput


def test_output_within_the_limit_is_kept_whole():
    out = CappedOutput()
    print('x' * 10, file=out)
    assert out.getvalue() == 'x' * 10 + '\n'
    assert out.limit == MAX_OUTPUT_CHARS


def test_output_past_the_limit_is_counted_and_said_to_be_cut():
    out = CappedOutput(limit=5)
    out.write('abc')
    out.write('defg')
    out.write('hij')
    assert out.parts == ['abc', 'de']
    assert out.getvalue() == 'abcde\n... 5 more characters cut\n'
