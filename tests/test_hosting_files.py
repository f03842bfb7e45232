"""The files that set up the book's environment where a class runs the
notebooks without installing anything: Binder's `.binder/` (repo2docker),
SageMaker Studio Lab's `environment.yml` (conda), and the dev container's
Jupyter settings (`.devcontainer/`).

The files name one Python and one lock file, the same for Binder and
Studio Lab; their pip requirements resolve, in a fresh virtual
environment of that Python (`pip install --dry-run`), to exactly the
lock's pins, the book's MXNet, NumPy and d2l among them, as repo2docker
and conda would install them.  The README's Jupyter command, started as
root with the dev container's environment, serves its port.  Neither
repo2docker, conda nor a container runs here.
"""
import json
import os
import re
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import time
import urllib.error
import urllib.request

import pytest
from pythons import find_python

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BINDER = os.path.join(ROOT, '.binder')
ENVIRONMENT_YML = os.path.join(ROOT, 'environment.yml')
DEVCONTAINER_JSON = os.path.join(ROOT, '.devcontainer', 'devcontainer.json')
JUPYTER = os.path.join(ROOT, '.venv', 'bin', 'jupyter')
PIN = re.compile(r'^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;]+)$')
#: What the book runs on, which every hosted environment must install
BOOK = {'mxnet': '1.9.1', 'numpy': '1.23.5', 'd2l': '1.0.3'}
#: Bounds on the slow steps: making a virtual environment, resolving the
#: lock with pip (about 40 s with pip's cache filled), Jupyter starting
VENV_TIMEOUT = 120
RESOLVE_TIMEOUT = 600
JUPYTER_TIMEOUT = 60


def _normalize(name):
    return re.sub(r'[-_.]+', '-', name).lower()


def _read(path):
    with open(path, encoding='utf-8') as f:
        return f.read()


def _lines(path):
    """The lines of a requirements file or script, without comments."""
    return [line.strip() for line in _read(path).splitlines()
            if line.strip() and not line.strip().startswith('#')]


def lock_pins(path):
    """`name -> version` of a lock file; every line must be a pin."""
    pins = {}
    for line in _lines(path):
        match = PIN.match(line)
        assert match, f'{path}: {line!r} is not name==version'
        pins[_normalize(match.group(1))] = match.group(2)
    return pins


def runtime_python():
    """The Python version `.binder/runtime.txt` asks repo2docker for.

    repo2docker reads the whole file as one `name-version` (a comment
    line would make it invalid), so the file is that one line.
    """
    text = _read(os.path.join(BINDER, 'runtime.txt'))
    match = re.fullmatch(r'python-(3\.\d+)\n?', text)
    assert match, f'.binder/runtime.txt: {text!r} is not python-3.X'
    return match.group(1)


def lock_file(version):
    return os.path.join(ROOT, 'requirements',
                        f'py{version.replace(".", "")}.txt')


def binder_lock():
    """The lock file `.binder/requirements.txt` includes (pip reads `-r`
    relative to the including file)."""
    lines = _lines(os.path.join(BINDER, 'requirements.txt'))
    assert len(lines) == 1 and lines[0].startswith('-r '), (
        f'.binder/requirements.txt should hold one `-r` line, has {lines}')
    return os.path.normpath(os.path.join(BINDER, lines[0][3:].strip()))


def parse_environment_yml(text):
    """The part of YAML that conda's environment files use here, for
    when PyYAML is not installed: top-level `key: value` and `key:`
    followed by a list of `- item`, where an item `- pip:` holds its
    own, more indented, list."""
    config, key, pip, pip_indent = {}, None, None, 0
    for number, line in enumerate(text.splitlines(), 1):
        line = re.sub(r'(^|\s)#.*', '', line).rstrip()
        if not line:
            continue
        indent = len(line) - len(line.lstrip())
        item = line.strip()
        if indent == 0:
            key, _, value = item.partition(':')
            config[key] = value.strip() or []
            pip = None
            continue
        assert item.startswith('- '), f'environment.yml:{number}: {line!r}'
        if pip is not None and indent > pip_indent:
            pip.append(item[2:].strip())
        elif item == '- pip:':
            pip, pip_indent = [], indent
            config[key].append({'pip': pip})
        else:
            pip = None
            config[key].append(item[2:].strip())
    return config


def read_environment_yml():
    try:
        import yaml
    except ImportError:
        return parse_environment_yml(_read(ENVIRONMENT_YML))
    return yaml.safe_load(_read(ENVIRONMENT_YML))


def pip_section(config):
    """The pip requirements of an environment file, in order."""
    sections = [d['pip'] for d in config['dependencies']
                if isinstance(d, dict) and 'pip' in d]
    assert len(sections) == 1, 'environment.yml needs one pip section'
    return sections[0]


def read_devcontainer():
    """`devcontainer.json`, whose comments are whole `//` lines."""
    text = ''.join(line for line in _read(DEVCONTAINER_JSON).splitlines(True)
                   if not line.lstrip().startswith('//'))
    return json.loads(text)


def in_workspace(value):
    """A devcontainer.json value with the repository where the container
    has it."""
    return value.replace('${containerWorkspaceFolder}', ROOT)


# --- The files -------------------------------------------------------------

def test_binder_pins_a_python_that_has_a_lock_file():
    version = runtime_python()
    assert os.path.exists(lock_file(version)), (
        f'.binder/runtime.txt asks for Python {version}, which has no '
        'lock file in requirements/')
    assert binder_lock() == lock_file(version)


def test_binder_post_build_installs_d2l_bert_and_the_hook():
    """repo2docker runs `.binder/postBuild` from the repository's root
    after installing `requirements.txt`; it holds the two steps that
    `run.py` takes after the lock file."""
    path = os.path.join(BINDER, 'postBuild')
    assert os.stat(path).st_mode & stat.S_IXUSR, f'{path} is not executable'
    text = _read(path)
    assert text.startswith('#!/bin/bash\n')
    lines = _lines(path)
    assert 'pip install --no-deps -e .' in lines
    assert any(line.startswith('python -m d2l_bert.mxnet_compat --install')
               for line in lines), lines
    staged = subprocess.run(
        ['git', 'ls-files', '--stage', '--', '.binder/postBuild'], cwd=ROOT,
        capture_output=True, text=True, timeout=30).stdout
    if staged:  # a clone gets the mode git recorded
        assert staged.startswith('100755 '), staged


def test_studio_lab_environment_uses_binder_python_and_lock_file():
    config = read_environment_yml()
    version = runtime_python()
    assert config['name'] == 'd2l-bert'
    assert f'python={version}' in config['dependencies']
    assert 'pip' in config['dependencies']
    pip = pip_section(config)
    # conda runs pip in the folder of environment.yml: the repository's
    includes = [os.path.normpath(os.path.join(ROOT, line[3:].strip()))
                for line in pip if line.startswith('-r ')]
    assert includes == [binder_lock()]
    assert '-e .' in pip
    # Studio Lab lists the conda environments that can run a kernel
    assert 'ipykernel' in lock_pins(binder_lock())


def test_the_small_yaml_reader_reads_environment_yml_as_pyyaml():
    """Without PyYAML the tests read environment.yml themselves."""
    yaml = pytest.importorskip('yaml', reason='PyYAML is not installed')
    text = _read(ENVIRONMENT_YML)
    assert parse_environment_yml(text) == yaml.safe_load(text)


def test_the_dev_container_configures_jupyter_and_the_interpreter():
    config = read_devcontainer()
    settings = config['customizations']['vscode']['settings']
    assert in_workspace(settings['python.defaultInterpreterPath']) == (
        os.path.join(ROOT, '.venv', 'bin', 'python'))
    for directory in config['containerEnv']['JUPYTER_CONFIG_PATH'].split(
            os.pathsep):
        assert os.path.exists(os.path.join(
            in_workspace(directory), 'jupyter_server_config.py'))
    assert 8888 in config['forwardPorts']


# --- pip resolves them -----------------------------------------------------

@pytest.fixture(scope='module')
def fresh_venv(tmp_path_factory):
    """A fresh virtual environment of the Python `runtime.txt` names."""
    version = runtime_python()
    python = find_python(version)
    if python is None:
        pytest.skip(f'no Python {version} here (pyenv or PATH) to resolve '
                    'the hosted requirements with')
    venv = tmp_path_factory.mktemp('hosted') / 'venv'
    subprocess.run([python, '-m', 'venv', str(venv)], check=True,
                   timeout=VENV_TIMEOUT)
    return str(venv / 'bin' / 'python')


def copy_of_repository(destination):
    """The repository's files, without what set-ups and runs add, so
    that pip can prepare `-e .` there instead of in the checkout."""
    shutil.copytree(ROOT, destination, ignore=shutil.ignore_patterns(
        '.git', '.venv', 'build', '*.egg-info', '__pycache__',
        '.pytest_cache', '_build', 'runs', '.ipynb_checkpoints'))
    return destination


def resolve(python, args, cwd, report):
    """`name -> (version, is_direct)` pip would install, no matter what
    the environment has."""
    result = subprocess.run(
        [python, '-m', 'pip', 'install', '--dry-run', '--ignore-installed',
         '--quiet', '--report', report] + args,
        cwd=cwd, capture_output=True, text=True, timeout=RESOLVE_TIMEOUT)
    errors = [line for line in result.stderr.splitlines()
              if not line.startswith('WARNING: Location ')]
    assert result.returncode == 0, '\n'.join(errors[-30:])
    with open(report, encoding='utf-8') as f:
        installs = json.load(f)['install']
    return {_normalize(i['metadata']['name']):
            (i['metadata']['version'], i['is_direct']) for i in installs}


@pytest.mark.parametrize('host', ['binder', 'studio-lab'])
def test_hosted_requirements_resolve_to_the_book_lock(host, fresh_venv,
                                                      tmp_path):
    """Binder: `pip install -r .binder/requirements.txt` from the
    repository's root, as repo2docker runs it.  Studio Lab: the pip
    section of environment.yml from its folder, as conda runs it (a
    copy, so that preparing `-e .` writes nothing in the checkout)."""
    if host == 'binder':
        cwd, args = ROOT, ['-r', os.path.join('.binder', 'requirements.txt')]
    else:
        cwd = copy_of_repository(str(tmp_path / 'repository'))
        args = [word for line in pip_section(read_environment_yml())
                for word in shlex.split(line)]
    resolved = resolve(fresh_venv, args, cwd, str(tmp_path / 'report.json'))
    if host == 'studio-lab':
        assert resolved.pop('d2l-bert') == ('0.1.0', True)
    for name, version in BOOK.items():
        assert resolved[name][0] == version, (name, resolved[name])
    assert {name: version for name, (version, _) in resolved.items()} == (
        lock_pins(binder_lock()))


# --- Jupyter in the dev container ------------------------------------------

def readme_jupyter_command():
    """The README's command that opens a notebook, as a list of words."""
    match = re.search(r'^\$ (\.venv/bin/jupyter notebook [^\n]+)$',
                      _read(os.path.join(ROOT, 'README.md')), re.M)
    assert match, "README.md has no `$ .venv/bin/jupyter notebook` line"
    return shlex.split(match.group(1))


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def jupyter_env(tmp_path, container_env):
    """This process's environment with `container_env`, and Jupyter's
    user folders in `tmp_path`: a fresh container's empty ones, and
    nothing written in this machine's."""
    env = dict(os.environ, **container_env)
    for name in ('CONFIG', 'RUNTIME', 'DATA'):
        folder = tmp_path / name.lower()
        folder.mkdir()
        env[f'JUPYTER_{name}_DIR'] = str(folder)
    return env


def files_jupyter_might_write():
    """The dev container's folder, and the folders Jupyter makes beside
    notebooks (checkpoints, the language server's copies)."""
    found = set()
    for folder, _, files in os.walk(os.path.join(ROOT, '.devcontainer')):
        found.update(os.path.join(folder, name) for name in files)
    for folder in (ROOT, os.path.join(ROOT, 'notebooks')):
        for name in ('.ipynb_checkpoints', '.virtual_documents'):
            if os.path.exists(os.path.join(folder, name)):
                found.add(os.path.join(folder, name))
    return found


def wait_for_api(process, port, log):
    """Poll `/api` until it answers 200; fail if Jupyter ends first."""
    deadline = time.monotonic() + JUPYTER_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f'Jupyter ended with {process.returncode}:\n'
                        + log.read_text()[-3000:])
        try:
            with urllib.request.urlopen(f'http://127.0.0.1:{port}/api',
                                        timeout=5) as response:
                if response.status == 200:
                    return json.loads(response.read())
        except (urllib.error.URLError, ConnectionError, OSError):
            pass
        time.sleep(0.5)
    pytest.fail(f'Jupyter did not answer on port {port} within '
                f'{JUPYTER_TIMEOUT} s:\n' + log.read_text()[-3000:])


def stop(process):
    """SIGTERM, as Ctrl-C's twin; then nothing of its group may be left."""
    process.terminate()
    try:
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
            pytest.fail('Jupyter did not end on SIGTERM')
    with pytest.raises(ProcessLookupError):
        os.killpg(process.pid, 0)  # no process of its group runs


needs_jupyter = pytest.mark.skipif(
    not os.path.exists(JUPYTER),
    reason='no .venv/bin/jupyter: run `python3 run.py setup` first')
needs_root = pytest.mark.skipif(
    not hasattr(os, 'geteuid') or os.geteuid() != 0,
    reason='Jupyter refuses to run only as root, as in the dev container')


@needs_jupyter
def test_the_readme_jupyter_command_serves_in_the_dev_container(tmp_path):
    """The dev container runs as root; with its `containerEnv` the
    README's command, unchanged but for a free port, serves `/api`."""
    config = read_devcontainer()
    container_env = {name: in_workspace(value)
                     for name, value in config['containerEnv'].items()}
    port = free_port()
    before = files_jupyter_might_write()
    log = tmp_path / 'jupyter.log'
    with open(log, 'w') as out:
        process = subprocess.Popen(
            readme_jupyter_command() + [f'--port={port}'], cwd=ROOT,
            env=jupyter_env(tmp_path, container_env), stdout=out,
            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True)
    try:
        api = wait_for_api(process, port, log)
    finally:
        stop(process)
    assert 'version' in api
    assert files_jupyter_might_write() == before


@needs_jupyter
@needs_root
def test_without_the_dev_container_settings_jupyter_refuses_root(tmp_path):
    """What the settings are for: as root, the same command alone stops."""
    env = jupyter_env(tmp_path, {})
    env.pop('JUPYTER_CONFIG_PATH', None)
    result = subprocess.run(
        readme_jupyter_command() + [f'--port={free_port()}'], cwd=ROOT,
        env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL,
        timeout=JUPYTER_TIMEOUT, start_new_session=True)
    assert result.returncode != 0
    assert 'Running as root is not recommended' in result.stderr
