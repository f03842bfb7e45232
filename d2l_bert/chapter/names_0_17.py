"""The names of d2l's 0.17 releases, which the cells of its editions use.

d2l 1.0 renamed some of the chapter's classes and keyword arguments.  The
chapter runner's `d2l` answers a 0.17 name with its 1.0 object
(`RENAMED_0_17`, ``d2l.EncoderBlock`` -> ``TransformerEncoderBlock``),
and a cell's call that passes a 0.17 keyword
(``d2l.BERTModel(..., num_layers=2)``) goes through
`with_0_17_keywords`, which passes ``num_blks=2`` on
(`adapt_0_17_calls` rewrites the cell's syntax tree so).
"""
import ast
import functools

#: Names of the 0.17 releases that d2l 1.0 renamed, old -> new
RENAMED_0_17 = {'EncoderBlock': 'TransformerEncoderBlock'}

#: Keyword arguments of the 0.17 releases that d2l 1.0 renamed, old ->
#: new: a cell's call ``d2l.BERTModel(..., num_layers=2)`` passes
#: ``num_blks=2`` (`with_0_17_keywords`)
KEYWORDS_0_17 = {'num_layers': 'num_blks'}

#: The name, in the cells' namespace, of `with_0_17_keywords`
ADAPTER_0_17 = '__d2l_0_17_keywords__'


def with_0_17_keywords(callee):
    """`callee`, also taking the 0.17 keyword names of `KEYWORDS_0_17`.

    The book's classes take the 1.0 names only (``num_blks``); the 0.17
    editions' cells call them with ``num_layers``, which this adapter
    passes on as ``num_blks``.

    Raises
    ------
    TypeError
        Both names are given, with different values.
    """
    @functools.wraps(callee)
    def call(*args, **kwargs):
        for old, new in KEYWORDS_0_17.items():
            if old not in kwargs:
                continue
            value = kwargs.pop(old)
            if new in kwargs and kwargs[new] != value:
                raise TypeError(f'{new}={kwargs[new]} and {old}={value} '
                                f'disagree; pass one of them')
            kwargs[new] = value
        return callee(*args, **kwargs)
    return call


def adapt_0_17_calls(tree):
    """Return the cell's syntax `tree` with each call of a `d2l` name that
    passes a 0.17 keyword (or ``**`` a dict) made through the adapter:
    ``d2l.X(..., num_layers=n)`` -> ``adapter(d2l.X)(..., num_layers=n)``,
    the adapter being `with_0_17_keywords`, ``ADAPTER_0_17`` in the cells'
    namespace."""
    return ast.fix_missing_locations(_Keywords017().visit(tree))


class _Keywords017(ast.NodeTransformer):
    """The transformer of `adapt_0_17_calls`."""

    def visit_Call(self, node):
        self.generic_visit(node)
        func = node.func
        on_d2l = (isinstance(func, ast.Attribute)
                  and isinstance(func.value, ast.Name)
                  and func.value.id == 'd2l')
        if on_d2l and any(kw.arg is None or kw.arg in KEYWORDS_0_17
                          for kw in node.keywords):
            node.func = ast.Call(func=ast.Name(ADAPTER_0_17, ast.Load()),
                                 args=[func], keywords=[])
        return node
