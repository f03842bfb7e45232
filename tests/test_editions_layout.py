"""Rebuilding the line breaks and indentation of one-line code."""
import ast

import pytest

from d2l_bert.chapter import editions
from d2l_bert.chapter.editions import relayout


def _same(one_line, expected):
    assert ast.dump(ast.parse(relayout(one_line))) == \
        ast.dump(ast.parse(expected))


def test_relayout_keeps_statements_that_use_the_condition_in_the_if():
    _same('def f(a, b=None): out = [a] if b is not None: out += b '
          'n = len(b) return out',
          'def f(a, b=None):\n    out = [a]\n    if b is not None:\n'
          '        out += b\n        n = len(b)\n    return out')


def test_relayout_leaves_else_and_loop_blocks_where_the_data_says():
    _same('def g(X, p=None): if p is not None: y = X[p] else: y = None '
          'z = X + 1 return X, y, z',
          'def g(X, p=None):\n    if p is not None:\n        y = X[p]\n'
          '    else:\n        y = None\n    z = X + 1\n    return X, y, z')
    _same('def h(X, blks): for blk in blks: X = blk(X) return X',
          'def h(X, blks):\n    for blk in blks:\n        X = blk(X)\n'
          '    return X')


def test_relayout_keeps_both_branches_setting_a_name_in_their_branch():
    _same('def k(a): if a: x, y = 1, 2 else: x = 3 y = 4 return x + y',
          'def k(a):\n    if a:\n        x, y = 1, 2\n    else:\n'
          '        x = 3\n        y = 4\n    return x + y')


def test_relayout_ends_comments_where_code_starts():
    code = relayout('# 0 and 1 mark A and B, respectively segments = [0] '
                    '# Shape of `X`: (batch, no. of steps) X = f(1) # Forward '
                    'pass _, y = X')
    assert code.splitlines() == [
        '# 0 and 1 mark A and B, respectively', 'segments = [0]',
        '# Shape of `X`: (batch, no. of steps)', 'X = f(1)',
        '# Forward pass', '_, y = X']


def test_relayout_methods_return_to_the_class_body():
    code = relayout('class A: def __init__(self): self.x = 1 '
                    'def f(self): return self.x a = A()')
    assert code.splitlines()[-1] == 'a = A()'
    assert code.splitlines()[3] == '    def f(self):'


def test_relayout_error_on_code_that_cannot_be_read():
    with pytest.raises(editions.LayoutError, match='cannot read'):
        relayout('x = 1 ? 2')


def test_relayout_decorators_stay_with_their_def():
    code = relayout('class A: def f(self): return 1 @property def g(self): '
                    'return 2 @d2l.add_to_class(A) def h(self): return 3')
    assert code.splitlines()[3:7] == [
        '    @property', '    def g(self):', '        return 2',
        '@d2l.add_to_class(A)']
