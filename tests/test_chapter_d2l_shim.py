"""The cells' `d2l`: this package's names first, then d2l 1.0.3."""
import pytest

import d2l_bert
from d2l_bert.chapter import names_0_17
from d2l_bert.chapter.data_hooks import DataHooks
from d2l_bert.chapter.runner import Runner


@pytest.fixture
def run():
    """A fresh runner's `run` (each test gets its own namespace)."""
    return Runner(hooks=DataHooks(small=False)).run


def test_d2l_resolves_package_names_before_d2l_1_0_3(run):
    from d2l import mxnet as real_d2l
    r = Runner(hooks=DataHooks(small=False))
    assert r.d2l.BERTModel is d2l_bert.BERTModel
    assert r.d2l.TransformerEncoderBlock is d2l_bert.TransformerEncoderBlock
    assert r.d2l.Timer is real_d2l.Timer
    assert r.d2l.met == {'BERTModel': 'd2l_bert',
                         'TransformerEncoderBlock': 'd2l_bert',
                         'Timer': 'd2l 1.0.3'}


def test_both_naming_generations_resolve(run):
    r = Runner(hooks=DataHooks(small=False))
    assert r.d2l.EncoderBlock is d2l_bert.EncoderBlock
    assert r.d2l.TransformerEncoderBlock is d2l_bert.TransformerEncoderBlock


def test_a_0_17_name_falls_back_to_its_1_0_name(monkeypatch):
    from d2l import mxnet as real_d2l
    monkeypatch.setitem(names_0_17.RENAMED_0_17, 'OldTimer', 'Timer')
    r = Runner(hooks=DataHooks(small=False))
    assert r.d2l.OldTimer is real_d2l.Timer
    assert r.d2l.met['OldTimer'] == '0.17 name of Timer'


def test_unknown_d2l_name_says_where_it_was_looked_for(run):
    result = run('d2l.no_such_thing')
    assert result.error == (
        "AttributeError: module 'd2l' has no attribute 'no_such_thing' "
        "(neither d2l_bert nor d2l 1.0.3 defines it)")


@pytest.mark.parametrize('line', [
    'from d2l import mxnet as d2l',
    'import d2l.mxnet as d2l',
])
def test_cell_imports_of_d2l_get_the_shim(run, line):
    result = run(f'{line}\nimport d2l_bert\n'
                 'd2l.BERTModel is d2l_bert.BERTModel')
    assert result.output == 'True\n'


def test_bare_import_d2l_answers_through_the_shim(run):
    result = run('import d2l\nimport d2l_bert\n'
                 '(d2l.mxnet.MaskLM is d2l_bert.MaskLM, '
                 'd2l.MaskLM is d2l_bert.MaskLM)')
    assert result.output == '(True, True)\n'


def test_other_imports_are_untouched(run):
    assert run('import json\njson.dumps([1])').output == "'[1]'\n"
