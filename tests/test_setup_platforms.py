"""`run.py`'s platform check: where MXNet has no wheel, and the system
libraries (arm64's OpenBLAS and LAPACKE, GCC's runtime) it installs or
names."""
import sys

import pytest

from test_setup import load_run_py


@pytest.mark.parametrize('platform_name,machine,says', [
    ('win32', 'AMD64', 'Use WSL 2'),
    ('darwin', 'arm64', 'no wheel for Apple Silicon (arm64)'),
    ('darwin', 'arm64', 'docker run -it -p 8888:8888 -v "$PWD":/work '
                        '-w /work python:3.11 python run.py chapter'),
])
def test_run_py_stops_where_mxnet_has_no_wheel(platform_name, machine, says,
                                               monkeypatch, capsys):
    run = load_run_py()
    monkeypatch.setattr(run.sys, 'platform', platform_name)
    monkeypatch.setattr(run.platform, 'machine', lambda: machine)
    with pytest.raises(SystemExit) as exit_info:
        run.check_platform()
    assert exit_info.value.code == 2
    assert says in capsys.readouterr().err


def arm_linux(run, monkeypatch, missing, root, apt):
    """`run` as on arm64 Linux missing the libraries `missing` (a list,
    emptied by a successful `apt_install`); returns the calls made."""
    calls = []
    monkeypatch.setattr(run.sys, 'platform', 'linux')
    monkeypatch.setattr(run.platform, 'machine', lambda: 'aarch64')
    monkeypatch.setattr(run, 'missing_libraries',
                        lambda names: [n for n in names if n in missing])
    monkeypatch.setattr(run, 'is_root', lambda: root)
    monkeypatch.setattr(run, 'which', lambda name: (
        '/usr/bin/apt-get' if apt and name == 'apt-get' else None))

    def apt_install(packages):
        calls.append(packages)
        missing[:] = []
        return True
    monkeypatch.setattr(run, 'apt_install', apt_install)
    return calls


def test_run_py_says_when_apt_get_could_not_install_them(monkeypatch,
                                                         capsys):
    run = load_run_py()
    arm_linux(run, monkeypatch, ['libopenblas.so.0'], True, True)
    monkeypatch.setattr(run, 'apt_install', lambda packages: False)
    with pytest.raises(SystemExit) as exit_info:
        run.check_platform()
    assert exit_info.value.code == 2
    assert ('(missing: libopenblas.so.0); apt-get could not install them '
            '(see its message above); mend that, then run: apt-get install '
            'libopenblas0\n') in capsys.readouterr().err


def test_run_py_installs_openblas_and_lapacke_on_arm64_as_root(
        monkeypatch, capsys):
    run = load_run_py()
    calls = arm_linux(run, monkeypatch, ['libopenblas.so.0',
                                         'liblapacke.so.3'], True, True)
    run.check_platform()   # no SystemExit
    assert calls == [['libopenblas0', 'liblapacke']]


@pytest.mark.parametrize('apt,says', [
    (True, "MXNet 1.9.1's aarch64 wheel needs OpenBLAS, LAPACKE and GCC's "
           'OpenMP runtime from the system (missing: liblapacke.so.3); '
           'install them, then run this command again: sudo apt-get '
           'install liblapacke\n'),
    (False, '(missing: liblapacke.so.3); install your distribution\'s '
            'packages that provide them (OpenBLAS, LAPACKE, libgomp), then '
            'run this command again\n'),
])
def test_run_py_says_in_one_line_what_arm64_lacks_when_not_root(
        apt, says, monkeypatch, capsys):
    run = load_run_py()
    calls = arm_linux(run, monkeypatch, ['liblapacke.so.3'], False, apt)
    with pytest.raises(SystemExit) as exit_info:
        run.check_platform()
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("run.py: MXNet 1.9.1's aarch64 wheel needs ")
    assert err.endswith(says + '(see docs/install.md)\n')
    assert err.count('\n') == 2   # one line, and where to read more
    assert calls == []


def test_run_py_and_the_hook_name_the_same_arm64_libraries():
    from d2l_bert import mxnet_compat
    run = load_run_py()
    assert dict(run.ARM_SYSTEM_LIBRARIES) == \
        mxnet_compat.ARM_SYSTEM_LIBRARIES
    needed = {name for names in mxnet_compat.ARMPL_LIBRARIES.values()
              for name in names}
    assert needed - {'libm.so.6', 'libc.so.6'} < set(
        mxnet_compat.ARM_SYSTEM_LIBRARIES)


def test_run_py_names_the_gcc_runtime_a_minimal_linux_lacks(monkeypatch,
                                                           capsys):
    run = load_run_py()
    monkeypatch.setattr(run.sys, 'platform', 'linux')
    monkeypatch.setattr(run.platform, 'machine', lambda: 'x86_64')
    monkeypatch.setattr(run, 'missing_gcc_runtime',
                        lambda: [run.GCC_RUNTIME[0]])
    with pytest.raises(SystemExit) as exit_info:
        run.check_platform()
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "needs GCC's runtime libraries libgomp.so.1, which" in err
    assert 'sudo apt install libgomp1\n' in err
    assert 'sudo dnf install libgomp\n' in err


def test_this_machine_has_the_system_libraries_mxnet_needs():
    run = load_run_py()
    if not sys.platform.startswith('linux'):
        pytest.skip('the check is for Linux')
    if run.is_arm_linux():
        names = [entry[0] for entry in run.ARM_SYSTEM_LIBRARIES]
        assert run.missing_libraries(names) == []
    else:
        assert run.missing_gcc_runtime() == []


@pytest.mark.parametrize('platform_name,machine', [
    ('linux', 'x86_64'), ('linux', 'aarch64'), ('darwin', 'x86_64')])
def test_run_py_goes_on_where_the_mxnet_wheel_works(platform_name, machine,
                                                    monkeypatch):
    run = load_run_py()
    monkeypatch.setattr(run.sys, 'platform', platform_name)
    monkeypatch.setattr(run.platform, 'machine', lambda: machine)
    monkeypatch.setattr(run, 'missing_libraries', lambda names: [])
    run.check_platform()   # no SystemExit
