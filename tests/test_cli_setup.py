"""A command run where pip installed d2l-bert alone, without MXNet or d2l:
it adds them as a notebook's set-up cell does, or ends in one line."""
import importlib.util
import os
import socket
import subprocess
import sys

import pytest

from d2l_bert.chapter import hosted
from d2l_bert.cli import _setup
from d2l_bert.cli._args import RunError
from pythons import make_venv

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def without_mxnet(monkeypatch):
    """This process as one where `mxnet` and `d2l` do not import: pip
    calls are recorded (and make them import), nothing is installed."""
    calls, real = [], importlib.util.find_spec
    absent = {'mxnet', 'd2l'}
    monkeypatch.setattr(importlib.util, 'find_spec', lambda name, *a: (
        None if name in absent else real(name, *a)))

    def pip(args):
        calls.append(args)
        absent.clear()
    monkeypatch.setattr(hosted, '_pip', pip)
    monkeypatch.setattr(hosted, 'prepare_mxnet', lambda: False)
    return calls


def test_what_is_missing_is_added_without_its_dependencies(without_mxnet,
                                                           capsys):
    assert _setup.missing() == ['mxnet==1.9.1', 'd2l==1.0.3']
    _setup.ensure_mxnet('d2l-bert pretrain')
    assert without_mxnet == [['--no-deps', 'mxnet==1.9.1', 'd2l==1.0.3']]
    first, second = capsys.readouterr().err.splitlines()
    assert first == (
        f'd2l-bert pretrain: this Python ({sys.executable}) lacks what the '
        'chapter runs on; adding mxnet==1.9.1, d2l==1.0.3, changing no '
        'installed package...')
    assert second.startswith('d2l-bert pretrain: added mxnet==1.9.1, '
                             'd2l==1.0.3 in ') and second.endswith(' s')


def test_nothing_is_added_where_everything_imports(monkeypatch, capsys):
    monkeypatch.setattr(hosted, '_pip', lambda args: pytest.fail(args))
    _setup.ensure_mxnet('d2l-bert encode')
    assert capsys.readouterr() == ('', '')


def test_a_pip_that_fails_is_one_line_saying_what_to_run(without_mxnet,
                                                         monkeypatch):
    def fails(args):
        raise RuntimeError('pip could not install ...:\nERROR: No matching '
                           'distribution found for mxnet==1.9.1\n')
    monkeypatch.setattr(hosted, '_pip', fails)
    with pytest.raises(RunError) as e:
        _setup.ensure_mxnet('d2l-bert chapter')
    assert str(e.value) == (
        'could not add mxnet==1.9.1, d2l==1.0.3: ERROR: No matching '
        'distribution found for mxnet==1.9.1; ' + _setup.BY_HAND)


def test_an_installed_package_that_would_change_is_named(without_mxnet,
                                                         monkeypatch):
    seen = iter([{'numpy': '2.1.0'}, {'numpy': '1.26.4'}])
    monkeypatch.setattr(hosted, 'versions', lambda: next(seen))
    with pytest.raises(RunError, match='^adding mxnet==1.9.1, d2l==1.0.3 '
                       'changed installed packages: numpy 2.1.0 -> 1.26.4$'):
        _setup.ensure_mxnet('d2l-bert pretrain')


def test_offline_in_a_fresh_python_the_command_is_one_line(tmp_path):
    # A venv with nothing but pip, and pip's index a closed port: the
    # command says what it tried and what to run, and makes no --out
    make_venv(tmp_path / 'venv')
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        closed = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(('PIP_', 'PYTHON', 'VIRTUAL_ENV'))}
    env.update(PYTHONPATH=ROOT, PIP_INDEX_URL=f'http://127.0.0.1:{closed}/',
               PIP_RETRIES='0', PIP_CONFIG_FILE=os.devnull)
    done = subprocess.run(
        [str(tmp_path / 'venv' / 'bin' / 'python'), '-m', 'd2l_bert',
         'pretrain', '--steps', '1', '--out', 'x'],
        cwd=str(tmp_path), capture_output=True, text=True, timeout=300,
        env=env)
    assert (done.returncode, done.stdout) == (1, '')
    adding, error = done.stderr.splitlines()
    assert adding.endswith('changing no installed package...')
    assert error.startswith('d2l-bert pretrain: error: could not add '
                            'mxnet==1.9.1, d2l==1.0.3, numpy')
    assert error.endswith(_setup.BY_HAND)
    assert not (tmp_path / 'x').exists()
