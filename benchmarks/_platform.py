"""A simulated hosted platform for `bench_notebooks.py --platform`: a venv
of the platform's Python holding the packages of
``tests/fixtures/hosted/NAME.txt`` (what `tests/test_chapter_hosted.py`
runs the notebooks on, at small sizes), a Jupyter kernel of it, and a
wheel of this checkout for the notebooks' set-up cell to install.

Each notebook then runs on it as on a new runtime: its set-up cell
installs d2l-bert, MXNet and d2l, and `reset` uninstalls what it added.
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys

from _common import PRESETS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, 'tests', 'fixtures', 'hosted')
PLATFORMS = ('colab', 'kaggle')


def find_python(version):
    """The interpreter of Python `version` the hosted tests use
    (`tests/helpers.find_python`), or None."""
    sys.path.insert(0, os.path.join(ROOT, 'tests'))
    try:
        from helpers import find_python as find
    finally:
        sys.path.pop(0)
    return find(version)


def _run(command, **kwargs):
    done = subprocess.run(command, capture_output=True, text=True,
                          timeout=1800, **kwargs)
    if done.returncode:
        sys.exit(f'bench_notebooks.py: error: {" ".join(command[:4])}...'
                 f' failed: {(done.stderr or done.stdout).strip()[-500:]}')
    return done.stdout


class Platform:
    """The platform `name` (one of `PLATFORMS`) made in `folder`."""

    def __init__(self, name, folder):
        with open(os.path.join(FIXTURES, f'{name}.txt')) as f:
            lines = f.read().splitlines()
        version = next(line.split(':')[1].strip() for line in lines
                       if line.startswith('# python:'))
        python = find_python(version)
        if python is None:
            sys.exit(f'bench_notebooks.py: error: --platform {name}: no '
                     f'Python {version} on this machine')
        self.name, self.folder = name, folder
        venv = os.path.join(folder, 'venv')
        _run([python, '-m', 'venv', venv])
        self.python = os.path.join(venv, 'bin', 'python')
        _run([self.python, '-m', 'pip', 'install', '-q', '--no-compile',
              '--disable-pip-version-check']
             + [line for line in lines if line and not line[0] == '#'])
        self.jupyter = os.path.join(folder, 'jupyter')
        kernel = os.path.join(self.jupyter, 'kernels', name)
        os.makedirs(kernel)
        with open(os.path.join(kernel, 'kernel.json'), 'w') as f:
            # NumPy imported before the first cell, as Colab's kernel
            # does (and tests/test_chapter_hosted.py's)
            json.dump({'argv': [self.python, '-m', 'ipykernel_launcher',
                                '-f', '{connection_file}',
                                '--IPKernelApp.exec_lines=import numpy'],
                       'display_name': name, 'language': 'python'}, f)
        self.installed = self.packages()
        self.wheel = self._wheel()

    def packages(self):
        """``{name: version}`` installed in the platform."""
        out = _run([self.python, '-m', 'pip', 'list', '--format=json',
                    '--disable-pip-version-check'])
        return {re.sub(r'[-_.]+', '-', p['name']).lower(): p['version']
                for p in json.loads(out)}

    def _wheel(self):
        """A wheel of this checkout, built from a copy of it."""
        copy = os.path.join(self.folder, 'source')
        shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns(
            '.venv', '.git', '__pycache__', 'build', '_build', '*.egg-info'))
        _run([sys.executable, '-m', 'pip', 'wheel', '-q', '--no-deps', '-w',
              self.folder, copy])
        return glob.glob(os.path.join(self.folder, 'd2l_bert-*.whl'))[0]

    def env(self):
        """What a notebook's kernel gets beyond a new runtime's."""
        return {PRESETS.SOURCE_ENV: self.wheel, 'JUPYTER_PATH': self.jupyter}

    def reset(self):
        """Uninstall what a notebook added, and the hook files the set-up
        wrote: the platform as it was made."""
        added = sorted(set(self.packages()) - set(self.installed))
        if added:
            _run([self.python, '-m', 'pip', 'uninstall', '-q', '-y']
                 + added)
        site = _run([self.python, '-c', 'import sysconfig; print('
                     'sysconfig.get_paths()["purelib"])']).strip()
        for leftover in ('d2l_bert', 'd2l_bert-mxnet-compat.pth'):
            path = os.path.join(site, leftover)
            if os.path.isdir(path):
                shutil.rmtree(path)
            elif os.path.exists(path):
                os.unlink(path)
