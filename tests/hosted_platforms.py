"""The simulated hosted platforms: Colab and Kaggle as a notebook finds
them, for `tests/test_chapter_hosted.py` (the lines of the published
package lists that the chapter imports or that run its kernel, at small
sizes) and `benchmarks/bench_notebooks.py --platform` (the notebooks'
own sizes; with ``--published``, every package of the published list
that can be installed here).

A platform is

- its Python outside any venv (`pythons.system_python`), run as root, as
  Colab and Kaggle run a notebook's pip: there pip warns that it runs as
  root, and tells of a newer pip, unless told not to;
- pip at the platform's version, then the platform's packages at
  theirs: ``tests/fixtures/hosted/NAME.txt``, or ``NAME-published.txt``
  (the platform's own list, with where it comes from);
- a Jupyter kernel that imports NumPy before the first cell, as Colab's
  does, started as the platform's image starts it (`read_start_up`);
- for each notebook, a new runtime's environment (`Platform.runtime_env`):
  a HOME, caches and TMPDIR of its own, and none of this machine's
  ``PIP_*``, ``PYTHON*`` or ``NUMBA_*`` variables.

Making it uses this machine's pip settings (its local indexes): the
platform's image is made before the student opens the notebook.
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys

from d2l_bert import presets
from d2l_bert.chapter import hosted
from d2l_bert.chapter.hosted import _normalize as normalize
from pythons import find_python, system_python

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, 'tests', 'fixtures', 'hosted')
PLATFORMS = ('colab', 'kaggle')
#: The lines of a published list that cannot be installed here, and why:
#: the platform's image has them from elsewhere
NOT_FROM_PYPI = 'not on PyPI (a file of the image, or an address this ' \
    'machine does not reach)'
NEEDS_SYSTEM_LIBRARIES = {
    # built from source against libraries the image installs with apt
    'dbus-python', 'dlib', 'gdal', 'cyipopt', 'pycairo', 'pygobject',
    'rpy2',
    # Ubuntu's own, version 0.0.0
    'python-apt'}
#: The variables of this machine that a new runtime does not have
MACHINE_ONLY = ('PIP_', 'PYTHON', 'VIRTUAL_ENV', 'NUMBA_', 'D2L_BERT_',
                'MPL', 'JUPYTER')


def read_start_up(name):
    """``(kernel arguments, environment)`` the platform starts a kernel
    with: the ``# kernel:`` and ``# environment: KEY=VALUE`` lines of
    ``NAME.txt`` (from the platform's published image)."""
    with open(os.path.join(FIXTURES, f'{name}.txt')) as f:
        lines = f.read().splitlines()
    argv = [line.split(':', 1)[1].strip() for line in lines
            if line.startswith('# kernel:')]
    env = dict(line.split(':', 1)[1].strip().split('=', 1)
               for line in lines if line.startswith('# environment:'))
    return argv, env


def patched_by_debian(python):
    """Whether `python` is a Debian (or Ubuntu) build, whose `site` and
    `sysconfig` are patched: there a kernel of a copy outside a venv
    does not find what pip installed as a platform's does."""
    names = run([python, '-c', 'import sysconfig; '
                 'print(*sysconfig.get_scheme_names())']).split()
    return 'posix_local' in names or 'deb_system' in names


def build_wheel(folder):
    """A wheel of this checkout in `folder`, built from a copy of it (a
    build in place would leave `build/` behind); its path."""
    copy = os.path.join(str(folder), 'source')
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns(
        '.venv', '.git', '__pycache__', 'build', '_build', '*.egg-info',
        '.pytest_cache'))
    run([sys.executable, '-m', 'pip', 'wheel', '-q', '--no-deps', '-w',
         str(folder), copy])
    return glob.glob(os.path.join(str(folder), 'd2l_bert-*.whl'))[0]


class NoPython(Exception):
    """This machine has no interpreter that can stand in for the
    platform's Python."""


def read_platform(name, published=False):
    """``(python version, requirement lines)`` of a platform's file: the
    lines the tests install, or with `published` every line of the
    published list (of all its steps)."""
    version, steps = read_steps(name, published)
    return version, [line for _, lines in steps for line in lines]


def read_steps(name, published=True):
    """``(python version, [(step, lines), ...])`` of a platform's file.

    A step is how its lines are installed, after the step before:
    ``frozen``, a whole environment as listed (``--no-deps``);
    ``resolved``, with what is installed, as of the file's ``# as of:``
    date; ``reinstalled``, over what is installed, as of that date.  A
    file without a ``# step:`` line is one frozen step.
    """
    path = os.path.join(FIXTURES, f'{name}-published.txt' if published
                        else f'{name}.txt')
    with open(path) as f:
        text = f.read().splitlines()
    version = next(line.split(':')[1].strip() for line in text
                   if line.startswith('# python:'))
    steps = [('frozen', [])]
    for line in text:
        if line.startswith('# step:'):
            steps.append((line.split(':')[1].strip(), []))
        elif line.strip() and not line.startswith('#'):
            steps[-1][1].append(line.strip())
    return version, [step for step in steps if step[1]]


def as_of(name):
    """The ``# as of:`` date of a published list (``'2026-08-12'``), or
    None."""
    path = os.path.join(FIXTURES, f'{name}-published.txt')
    with open(path) as f:
        dates = [line.split(':')[1].strip() for line in f
                 if line.startswith('# as of:')]
    return dates[0] if dates else None


def installable(lines):
    """``(lines, {line: why it is left out})`` of a published list."""
    kept, left = [], {}
    for line in lines:
        name = normalize(re.split(r'[=<>@ ;\[]', line, maxsplit=1)[0])
        if ' @ ' in line or '://' in line:
            left[line] = NOT_FROM_PYPI
        elif name in NEEDS_SYSTEM_LIBRARIES:
            left[line] = 'needs a system library the image installs'
        else:
            kept.append(line)
    return kept, left


def run(command, timeout=1800, **kwargs):
    """Run `command`; its output, or RuntimeError with its end."""
    done = subprocess.run(command, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True,
                          timeout=timeout, **kwargs)
    if done.returncode:
        raise RuntimeError(f'{" ".join(command[:6])}... failed:\n'
                           f'{done.stdout[-3000:]}')
    return done.stdout


class Platform:
    """The platform `name` (of `PLATFORMS`) made in `folder`; with
    `published`, every installable line of its published list (this
    needs ``uv``: pip takes many minutes for 600 packages)."""

    def __init__(self, name, folder, published=False):
        self.name, self.folder = name, str(folder)
        version, lines = read_platform(name, published)
        python = find_python(version)
        if python is None:
            raise NoPython(f'no Python {version} on this machine for the '
                           f'simulated {name}')
        if patched_by_debian(python):
            raise NoPython(
                f"{python} is Debian's, whose site and sysconfig put "
                f'packages in dist-packages; the simulated {name} needs a '
                "plain CPython build, as the platform's is")
        self.python = system_python(os.path.join(self.folder, 'python'),
                                    python)
        pip = [line for line in lines if normalize(line).startswith('pip=')]
        # --no-compile: a kernel byte-compiles what it imports (the
        # install alone took 60 s, 19 without)
        run([self.python, '-m', 'pip', 'install', '-q', '--no-compile',
             '--disable-pip-version-check', '--root-user-action=ignore']
            + pip)
        self.left_out = {}
        if published:
            self._uv_install(name)
        else:
            run([self.python, '-m', 'pip', 'install', '-q', '--no-compile',
                 '--disable-pip-version-check', '--root-user-action=ignore']
                + [line for line in lines if line not in pip])
        self.jupyter = os.path.join(self.folder, 'jupyter')
        kernel = os.path.join(self.jupyter, 'kernels', name)
        os.makedirs(kernel)
        argv, self.start_env = read_start_up(name)
        with open(os.path.join(kernel, 'kernel.json'), 'w') as f:
            json.dump({'argv': [self.python, '-m', 'ipykernel_launcher',
                                '-f', '{connection_file}',
                                '--IPKernelApp.exec_lines=import numpy']
                       + argv, 'display_name': name,
                       'language': 'python'}, f)
        self.installed = self.packages()
        self.site = run([self.python, '-c', 'import sysconfig; print('
                         'sysconfig.get_paths()["purelib"])']).strip()

    def _uv_install(self, name):
        """Install each step of the published list (`read_steps`) with
        uv, but the lines `installable` leaves out (`left_out`)."""
        uv = shutil.which('uv')
        if uv is None:
            raise RuntimeError('the published package list is installed '
                               'with uv: `pip install uv`, then run again')
        options = {'frozen': ['--no-deps'], 'resolved': [],
                   'reinstalled': ['--reinstall']}
        date = as_of(name)
        for i, (step, lines) in enumerate(read_steps(name)[1]):
            packages, left = installable(
                [line for line in lines if not normalize(line).startswith(
                    'pip=')])
            self.left_out.update(left)
            listed = os.path.join(self.folder, f'step-{i}.txt')
            with open(listed, 'w') as f:
                f.write('\n'.join(packages) + '\n')
            newer = ([] if step == 'frozen' or date is None else
                     ['--exclude-newer', f'{date}T00:00:00Z'])
            run([uv, 'pip', 'install', '--quiet', '--python', self.python,
                 '--break-system-packages', '-r', listed]
                + options[step] + newer, timeout=3600)

    def packages(self):
        """``{name: version}`` installed in the platform."""
        out = run([self.python, '-m', 'pip', 'list', '--format=json',
                   '--disable-pip-version-check'])
        return {normalize(p['name']): p['version'] for p in json.loads(out)}

    def runtime_env(self, root, environ=None):
        """A new runtime's environment for a kernel of this platform:
        `environ` (default ``os.environ``) without this machine's own
        variables (`MACHINE_ONLY`), a HOME, caches and TMPDIR in `root`,
        the platform's kernels on ``JUPYTER_PATH`` and its image's
        variables (`read_start_up`)."""
        environ = os.environ if environ is None else environ
        env = {k: v for k, v in environ.items()
               if not k.startswith(MACHINE_ONLY)}
        places = {'HOME': 'home', 'TMPDIR': 'tmp',
                  'XDG_CACHE_HOME': os.path.join('home', '.cache')}
        for key, sub in places.items():
            env[key] = os.path.join(str(root), sub)
            os.makedirs(env[key], exist_ok=True)
        env['JUPYTER_PATH'] = self.jupyter
        env.update(self.start_env)
        return env

    def reset(self):
        """Uninstall what a notebook added, and the hook file the set-up
        wrote: the platform as it was made."""
        added = sorted(set(self.packages()) - set(self.installed))
        if added:
            run([self.python, '-m', 'pip', 'uninstall', '-q', '-y',
                 '--root-user-action=ignore'] + added)
        for leftover in ('d2l_bert', 'd2l_bert-mxnet-compat.pth'):
            path = os.path.join(self.site, leftover)
            if os.path.isdir(path):
                shutil.rmtree(path)
            elif os.path.exists(path):
                os.unlink(path)


def run_set_up_cell(folder, source, python=None, prefix=(), **env):
    """The set-up cell run as a script by `python` (default: a Python
    outside any venv, where d2l_bert is missing, as a platform has it,
    `system_python`) with `source` as `SOURCE_ENV`, as root when we are
    root, with pip's own settings of this machine removed; `prefix`
    goes before the command (``unshare -n``: no network)."""
    if python is None:
        python = system_python(os.path.join(str(folder), 'python'))
    cell = os.path.join(str(folder), 'cell.py')
    with open(cell, 'w') as f:
        f.write(hosted.setup_cell())
    clean = {k: v for k, v in os.environ.items() if not k.startswith(
        ('PIP_', 'PYTHON', 'VIRTUAL_ENV'))}
    clean.pop(presets.SOURCE_ENV, None)
    if source is not None:
        clean[presets.SOURCE_ENV] = source
    return subprocess.run(
        list(prefix) + [str(python), cell],
        capture_output=True, text=True, timeout=300,
        env=dict(clean, HOME=os.path.join(str(folder), 'home'), **env))
