"""Where the package unpickles: the old checkpoints' `trainer.states`
(`runs.checkpoint_pickle`) and ``pytorch_model.bin`` (`hf.torch_pickle`),
each through an unpickler whose `find_class` admits only the types that
file holds; nothing else reads a pickle (`test_runs_checkpoints.py` runs
the pickles that would run code).
"""
import ast
import os

import d2l_bert

PACKAGE = os.path.dirname(os.path.abspath(d2l_bert.__file__))
#: The only modules that may import pickle, each with a restricted
#: `pickle.Unpickler`
UNPICKLERS = {os.path.join('runs', 'checkpoint_pickle.py'),
              os.path.join('hf', 'torch_pickle.py')}
#: Modules that unpickle what they are given (pickle's relatives)
PICKLE_MODULES = {'pickle', '_pickle', 'cPickle', 'dill', 'joblib',
                  'shelve', 'marshal', 'cloudpickle'}
#: Calls that unpickle a file handed to them: MXNet's `Trainer.load_states`
#: and `np.load` with pickles allowed
LOADING_NAMES = {'load_states', 'allow_pickle'}


def sources():
    for folder, _, names in os.walk(PACKAGE):
        for name in names:
            if name.endswith('.py'):
                path = os.path.join(folder, name)
                with open(path, encoding='utf-8') as f:
                    yield os.path.relpath(path, PACKAGE), ast.parse(f.read())


def imported_modules(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (a.name.split('.')[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.module.split('.')[0]


def test_only_the_two_restricted_unpicklers_import_pickle():
    importing = {path for path, tree in sources()
                 if PICKLE_MODULES & set(imported_modules(tree))}
    assert importing == UNPICKLERS


def test_no_module_calls_an_unpickling_loader():
    found = []
    for path, tree in sources():
        for node in ast.walk(tree):
            name = (node.attr if isinstance(node, ast.Attribute) else
                    node.arg if isinstance(node, ast.keyword) else
                    node.id if isinstance(node, ast.Name) else None)
            if name in LOADING_NAMES:
                found.append((path, node.lineno if hasattr(node, 'lineno')
                              else None, name))
            if (isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ('load', 'loads')
                    and isinstance(node.func.value, ast.Name)
                    and node.func.value.id in PICKLE_MODULES | {'np', 'onp',
                                                                'numpy'}):
                found.append((path, node.lineno, ast.unparse(node.func)))
    assert found == []


def test_each_unpickler_decides_every_class():
    for path, tree in sources():
        if path not in UNPICKLERS:
            continue
        classes = [node for node in ast.walk(tree)
                   if isinstance(node, ast.ClassDef) and any(
                       ast.unparse(base) == 'pickle.Unpickler'
                       for base in node.bases)]
        assert len(classes) == 1, path
        methods = {item.name for item in classes[0].body
                   if isinstance(item, ast.FunctionDef)}
        assert 'find_class' in methods, path
