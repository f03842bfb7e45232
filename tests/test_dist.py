"""Tests of d2l_bert/dist/__init__.py and of the old module paths
`d2l_bert.distributed` and `d2l_bert.data_parallel`, which moved into
`d2l_bert.dist` and keep working for a release with a warning."""
import importlib
import sys

import pytest


@pytest.mark.parametrize('old, new', [
    ('d2l_bert.distributed', 'd2l_bert.dist.launcher'),
    ('d2l_bert.data_parallel', 'd2l_bert.dist.workers')])
def test_old_path_warns_and_is_the_new_module(old, new, monkeypatch):
    monkeypatch.delitem(sys.modules, old, raising=False)
    with pytest.warns(DeprecationWarning, match=new):
        module = importlib.import_module(old)
    assert module is importlib.import_module(new)
    # `from d2l_bert import distributed` gives the same module
    package, _, name = old.rpartition('.')
    assert getattr(importlib.import_module(package), name) is module
    monkeypatch.delattr(importlib.import_module(package), name)


def test_importing_the_package_imports_no_module_of_it():
    code = ('import sys, d2l_bert.dist; '
            "print(sorted(m for m in sys.modules "
            "if m.startswith('d2l_bert.dist.')))")
    import subprocess
    out = subprocess.run([sys.executable, '-c', code], capture_output=True,
                         text=True, check=True).stdout
    assert out.strip() == '[]'
