"""An edition's ``#@save`` definitions: which names they bind, and the
package's functions that call them."""
from d2l_bert.chapter.own_definitions import rebound, saved_names


def test_saved_names_are_those_after_a_save_mark_or_on_its_line():
    source = '\n'.join([
        '#@tab mxnet',
        '#@save',
        "d2l.DATA_HUB['x'] = ('url', 'sha1')",
        '',
        'not_saved = 1',
        '#@save',
        '@staticmethod',
        'def helper(a=None):',
        '    return a',
        'class Kept:  #@save',
        '    pass',
        '# @save',
        'size, (width, height) = 1, (2, 3)',
        'after = 4'])
    assert saved_names(source) == ['helper', 'Kept', 'size', 'width',
                                   'height']


def test_a_cell_that_does_not_parse_saves_nothing():
    assert saved_names('#@save\ndef broken(:\n') == []


def _reads():
    return _source() + 1   # noqa: F821  (a module name of the test)


def test_rebound_calls_the_editions_definition_where_it_redefines_one():
    original = _reads.__globals__.get('_source')
    copy, names = rebound(_reads, {'_source': lambda: 41, 'other': 0})
    assert names == ['_source'] and copy() == 42
    assert copy.__name__ == '_reads' and copy is not _reads
    assert _reads.__globals__.get('_source') is original  # module as it was
    same, none = rebound(_reads, {'other': 0})
    assert same is _reads and none == []
    assert rebound(len, {'_source': 0}) == (len, [])
