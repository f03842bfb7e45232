"""The old paths of moved modules (`d2l_bert._moved`): each warns once,
with a `DeprecationWarning` that names the new path, and then is the new
module itself; ``python -m OLD`` still runs."""
import importlib
import os
import subprocess
import sys
import warnings

import pytest

import d2l_bert
from d2l_bert._moved import MOVED, SUBMODULES

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def forget(monkeypatch):
    """Forget the old path `old` (and its submodules) so that importing it
    runs its shim again; undone after the test."""
    def forget_path(old):
        for name in [old] + [f'{old}.{s}' for s in SUBMODULES.get(old, ())]:
            monkeypatch.delitem(sys.modules, name, raising=False)
        if old.split('.')[1] in vars(d2l_bert):  # no `hasattr`: it imports
            monkeypatch.delattr(d2l_bert, old.split('.')[1])
    return forget_path


@pytest.mark.parametrize('old', sorted(MOVED))
def test_an_old_path_warns_and_is_the_new_module(old, forget):
    new = importlib.import_module(MOVED[old])
    forget(old)
    with pytest.warns(DeprecationWarning,
                      match=f'{old} moved to {MOVED[old]}'):
        module = importlib.import_module(old)
    assert module is new
    assert getattr(d2l_bert, old.split('.')[1]) is new


def test_the_warning_points_at_the_importing_line(forget):
    forget('d2l_bert.training')
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        import d2l_bert.training  # noqa: F401
    assert [w.filename for w in caught
            if w.category is DeprecationWarning] == [__file__]


def test_a_moved_package_brings_its_modules(forget):
    forget('d2l_bert.editions')
    with pytest.warns(DeprecationWarning):
        from d2l_bert.editions.child import ChildRunner
    from d2l_bert.chapter.editions import child
    assert ChildRunner is child.ChildRunner
    assert sys.modules['d2l_bert.editions.child'] is child


def test_the_public_names_come_from_their_new_modules():
    from d2l_bert.runs import model_files, pretraining
    with warnings.catch_warnings():
        warnings.simplefilter('error', DeprecationWarning)
        assert d2l_bert.evaluate_bert is pretraining.evaluate_bert
        assert d2l_bert.save_pretrained is model_files.save_pretrained


def _run_module(*args):
    env = dict(os.environ, PYTHONPATH=ROOT, PYTHONWARNINGS='default')
    return subprocess.run([sys.executable, '-m', *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


def test_python_m_saved_cells_still_checks_the_notebooks():
    # The README's command line
    run = _run_module('d2l_bert.saved_cells')
    assert run.returncode == 0, run.stderr
    assert 'DeprecationWarning: d2l_bert.saved_cells moved to ' \
        'd2l_bert.chapter.saved_cells' in run.stderr


def test_python_m_corpus_still_writes_the_corpus(tmp_path):
    run = _run_module('d2l_bert.corpus', str(tmp_path))
    assert run.returncode == 0, run.stderr
    assert 'DeprecationWarning: d2l_bert.corpus moved to' in run.stderr
    with open(tmp_path / 'wiki.valid.tokens', encoding='utf-8') as f, open(
            os.path.join(ROOT, 'd2l_bert', 'data', 'embedded',
                         'wiki.valid.tokens'), encoding='utf-8') as g:
        assert f.read() == g.read()
