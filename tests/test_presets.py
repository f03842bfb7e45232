"""The book's settings and named configurations (d2l_bert/presets.py):
the values the book writes, in the argument names its classes take."""
import ast
import inspect
import os
import re

from d2l_bert import BERTModel, presets


def test_book_bert_is_the_small_bert_the_pretraining_section_builds():
    # net = d2l.BERTModel(len(vocab), num_hiddens=128, ffn_num_hiddens=256,
    #                     num_heads=2, num_blks=2, dropout=0.2)
    assert presets.BOOK_BERT == dict(num_hiddens=128, ffn_num_hiddens=256,
                                     num_heads=2, num_blks=2, dropout=0.2,
                                     max_len=1000)
    # `max_len` is the default the book's signature writes
    default = inspect.signature(BERTModel).parameters['max_len'].default
    assert presets.BOOK_BERT['max_len'] == default


def test_hub_models_are_the_sizes_the_nli_section_loads_them_with():
    assert presets.HUB_MODELS == {'bert.small': presets.BERT_SMALL,
                                  'bert.base': presets.BERT_BASE}
    assert presets.BERT_SMALL == dict(num_hiddens=256, ffn_num_hiddens=512,
                                      num_heads=4, num_blks=2, dropout=0.1,
                                      max_len=512)
    assert presets.BERT_BASE == dict(num_hiddens=768, ffn_num_hiddens=3072,
                                     num_heads=12, num_blks=12, dropout=0.1,
                                     max_len=512)


def test_every_model_preset_is_bert_models_keyword_arguments():
    accepted = inspect.signature(BERTModel).parameters
    for config in (presets.BOOK_BERT, presets.BERT_SMALL,
                   presets.BERT_BASE):
        assert set(config) <= set(accepted)


def test_original_bert_is_the_original_classes_keyword_arguments():
    from d2l_bert.hf.original import OriginalBERTEncoder, OriginalBERTModel
    for cls in (OriginalBERTEncoder, OriginalBERTModel):
        parameters = inspect.signature(cls).parameters
        # their defaults: the original BERT's
        assert {name: parameters[name].default
                for name in presets.ORIGINAL_BERT} == presets.ORIGINAL_BERT


def test_training_settings_are_the_books():
    # batch_size, max_len = 512, 64; train_bert(..., 50); Adam at 0.01
    assert presets.PRETRAINING == dict(batch_size=512, max_len=64,
                                       num_steps=50, lr=0.01)
    # batch_size, max_len = 512, 128; lr, num_epochs = 1e-4, 5
    assert presets.FINETUNING == dict(batch_size=512, max_len=128,
                                      num_epochs=5, lr=1e-4)


def test_original_bert_is_public_under_the_package():
    import d2l_bert
    assert d2l_bert.ORIGINAL_BERT is presets.ORIGINAL_BERT
    assert presets.ORIGINAL_BERT == dict(activation='gelu', epsilon=1e-12)


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV_NAME = re.compile(r'D2L_BERT_[A-Z0-9_]+')


def env_names_written(source, commands=True):
    """The ``D2L_BERT_*`` names that `source` writes as code: a string
    that is the whole name, a keyword (``dict(os.environ,
    D2L_BERT_SMALL='1')``) or, with `commands`, an f-string's
    ``D2L_BERT_X=`` part (a command line), with their lines.  A
    docstring or a message that mentions one is not."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and ENV_NAME.fullmatch(node.value):
            found.append((node.value, node.lineno))
        elif isinstance(node, ast.keyword) and node.arg \
                and ENV_NAME.fullmatch(node.arg):
            found.append((node.arg, node.value.lineno))
        elif commands and isinstance(node, ast.JoinedStr):
            for part in node.values:
                if isinstance(part, ast.Constant):
                    found += [(m, node.lineno) for m in re.findall(
                        r'(D2L_BERT_[A-Z0-9_]+)=', part.value)]
    return sorted(found, key=lambda name_line: name_line[1])


def python_files():
    for top in ('d2l_bert', 'benchmarks', 'tests', 'docs'):
        for folder, _, files in os.walk(os.path.join(ROOT, top)):
            yield from (os.path.join(folder, f) for f in files
                        if f.endswith('.py'))
    yield from (os.path.join(ROOT, f) for f in ('run.py', 'setup.py'))


def test_every_environment_variable_is_defined_in_presets_alone():
    names = {value for key, value in vars(presets).items()
             if key.endswith('_ENV')}
    elsewhere = []
    for path in python_files():
        if path in (presets.__file__, __file__) or os.path.samefile(
                path, presets.__file__):
            continue
        with open(path, encoding='utf-8') as f:
            source = f.read()
        # a test's expected message may quote ``D2L_BERT_X=N`` as printed
        test = os.path.basename(path).startswith('test_')
        elsewhere += [f'{os.path.relpath(path, ROOT)}:{line}: {name}'
                      for name, line in env_names_written(source, not test)]
    assert elsewhere == [], 'use the constant of d2l_bert/presets.py'
    with open(presets.__file__, encoding='utf-8') as f:
        defined = [name for name, _ in env_names_written(f.read())]
    assert sorted(defined) == sorted(names)
    assert len(set(defined)) == len(defined)


def test_the_environment_check_sees_each_way_of_writing_a_name():
    source = ("X = 'D2L_BERT_A'\n"
              "env = dict(os.environ, D2L_BERT_B='1')\n"
              "cmd = f'D2L_BERT_C={ssh}'\n"
              "def f():\n"
              "    '''Reads D2L_BERT_D.'''\n"
              "    raise ValueError('set D2L_BERT_E=1 to ...')\n")
    assert env_names_written(source) == [
        ('D2L_BERT_A', 1), ('D2L_BERT_B', 2), ('D2L_BERT_C', 3)]
