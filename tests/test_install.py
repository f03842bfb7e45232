"""docs/install.md's lines that add d2l-bert to an environment with NumPy 2.

The lines are read from the page itself and run in a fresh Python 3.12+
virtual environment where NumPy 2 was installed first, as in a hosted
notebook.  It needs PyPI (pip's cache makes it quick after a first set-up)
and a Python 3.12 or later: this one, or python3.13 on the machine.
"""
import glob
import os
import re
import shutil
import subprocess
import sys

import pytest

from pythons import make_venv

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEADING = '## Adding d2l-bert to an environment that has NumPy 2'


def docs_commands():
    """The console commands of that section of docs/install.md."""
    with open(os.path.join(ROOT, 'docs', 'install.md'),
              encoding='utf-8') as f:
        text = f.read()
    section = text[text.index(HEADING):]
    block = re.search(r'```console\n(.*?)```', section, re.S).group(1)
    block = block.replace('\\\n', ' ')
    return [line[2:].strip() for line in block.splitlines()
            if line.startswith('$ ')]


def numpy2_python():
    """An interpreter of Python 3.12 or later, or None."""
    if sys.version_info >= (3, 12):
        return sys.executable
    for pattern in ('/root/.pyenv/versions/3.13*/bin/python3.13',
                    '/usr/bin/python3.13'):
        found = sorted(glob.glob(pattern))
        if found:
            return found[-1]
    path = shutil.which('python3.13')
    if path and os.sep + 'shims' + os.sep not in path:
        return path
    return None


def locked_numpy():
    """The NumPy 2 version of the Python 3.13 lock file."""
    with open(os.path.join(ROOT, 'requirements', 'py313.txt')) as f:
        return re.search(r'^numpy==(\S+)$', f.read(), re.M).group(1)


def test_the_docs_give_three_lines_that_keep_numpy():
    commands = docs_commands()
    assert len(commands) == 3
    assert commands[0].startswith('pip install --no-deps mxnet==1.9.1 '
                                  'd2l==1.0.3')
    assert '"numpy==$(python -c' in commands[1]
    assert commands[2] == 'python -m d2l_bert.mxnet_compat --install'


CHECK = """
import numpy, mxnet
from d2l import mxnet as d2l
from mxnet import np, npx
import d2l_bert
npx.set_np()
net = d2l_bert.BERTModel(100, 16, 32, 2, 1, 0.1)
net.initialize()
tokens = np.array([[1, 2, 3, 0]])
segments = np.zeros((1, 4))
encoded, mlm, nsp = net(tokens, segments, np.array([3]),
                        np.array([[1, 2]]))
print(numpy.__version__, mxnet.__version__, encoded.shape, mlm.shape,
      nsp.shape)
"""


def test_the_docs_lines_add_d2l_bert_to_a_numpy2_environment(tmp_path):
    python = numpy2_python()
    if python is None:
        pytest.skip('no Python 3.12 or later here to make the environment')
    venv = tmp_path / 'venv'
    make_venv(venv, python)
    pip = [str(venv / 'bin' / 'python'), '-m', 'pip', '-q']
    numpy_version = locked_numpy()
    subprocess.run(pip + ['install', '--no-compile',
                          f'numpy=={numpy_version}'], check=True, timeout=600)
    # pip reads PIP_NO_COMPILE=false as --no-compile: the modules are
    # byte-compiled when imported, not all of them at install
    env = dict(os.environ, PATH=str(venv / 'bin') + os.pathsep
               + os.environ['PATH'], PIP_NO_COMPILE='false')
    env.pop('PYTHONPATH', None)
    for command in docs_commands():
        result = subprocess.run(
            ['bash', '-c', command], cwd=ROOT, env=env, timeout=600,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            universal_newlines=True)
        assert result.returncode == 0, f'{command}\n{result.stdout[-3000:]}'
    result = subprocess.run(
        [str(venv / 'bin' / 'python'), '-c', CHECK], cwd=str(tmp_path),
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        universal_newlines=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split(None, 2)[:2] == [numpy_version, '1.9.1']
    assert result.stdout.split(None, 2)[2].split() == [
        '(1,', '4,', '16)', '(1,', '2,', '100)', '(1,', '2)']
