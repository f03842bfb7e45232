"""Tests of `d2l_bert.threads`: the thread, OpenMP-spin and OpenBLAS
choices, made on dictionaries that stand for the environment and the
loaded modules, so that no test touches this process's `os.environ`."""
import os
import subprocess
import sys

import pytest

from d2l_bert import mxnet_compat, threads

#: `modules` for a process that has not imported mxnet (or scipy) yet
BEFORE = {}
#: ... and for one that has
AFTER = {'mxnet': object()}


# --- Every core --------------------------------------------------------------

def test_all_physical_cores_are_asked_for_before_mxnet():
    env = {}
    message = threads.use_all_cores(environ=env, modules=BEFORE)
    cores = threads.physical_cores()
    assert env == {'OMP_NUM_THREADS': str(cores)}
    assert message.startswith(f'CPU threads: {cores} of {cores} cores')


def test_a_thread_count_from_the_environment_is_kept():
    env = {'OMP_NUM_THREADS': '3'}
    assert 'from the environment' in threads.use_all_cores(
        environ=env, modules=BEFORE)
    assert env == {'OMP_NUM_THREADS': '3'}


def test_an_explicit_thread_count_wins():
    env = {'OMP_NUM_THREADS': '3'}
    threads.use_all_cores(1, environ=env, modules=BEFORE)
    assert env == {'OMP_NUM_THREADS': '1'}


@pytest.mark.parametrize('bad', [0, -2, 1.5, '2', True])
def test_a_thread_count_must_be_a_positive_integer(bad):
    env = {}
    with pytest.raises(ValueError, match='num_threads must be a positive '
                                         f'integer, got {bad!r}'):
        threads.use_all_cores(bad, environ=env, modules=BEFORE)
    assert env == {}


def test_on_macos_the_thread_count_sizes_only_the_compiled_loops():
    # MXNet 1.9.1's macOS wheel links no OpenMP runtime
    assert not threads.mxnet_has_openmp('darwin')
    env = {}
    message = threads.use_all_cores(2, environ=env, modules=BEFORE,
                                    platform='darwin')
    assert env == {'OMP_NUM_THREADS': '2'}
    assert message.startswith('CPU threads: 2 of ')
    assert "for the compiled loops (MXNet's macOS wheel has no OpenMP" \
        in message
    assert 'MXNet alone would use' not in message


def test_too_late_once_mxnet_is_imported():
    env = {}
    message = threads.use_all_cores(environ=env, modules=AFTER)
    assert 'MXNet was imported before the thread count could be set' \
        in message
    assert env == {}


def _halved(monkeypatch, processors, cores):
    """Pretend the machine has `processors` and `cores`."""
    monkeypatch.setattr(threads.os, 'cpu_count', lambda: processors)
    monkeypatch.setattr(threads, 'physical_cores', lambda: cores)


def test_a_late_import_on_half_the_cores_is_pointed_out(monkeypatch):
    _halved(monkeypatch, processors=2, cores=2)
    hint = threads.late_import_hint(environ={}, modules=AFTER,
                                    platform='linux')
    assert hint.startswith("MXNet runs its operators on 1 of this "
                           "machine's 2 cores")
    assert 'up to 2x faster' in hint
    assert 'OMP_NUM_THREADS=2' in hint


@pytest.mark.parametrize('environ, modules, platform, processors', [
    ({}, BEFORE, 'linux', 2),                        # not imported yet
    ({'OMP_NUM_THREADS': '1'}, AFTER, 'linux', 2),   # chosen by the user
    ({}, AFTER, 'darwin', 2),                        # no OpenMP
    ({}, AFTER, 'linux', 4),                         # 2 threads a core
])
def test_no_late_import_hint_where_nothing_is_lost(
        monkeypatch, environ, modules, platform, processors):
    _halved(monkeypatch, processors=processors, cores=2)
    assert threads.late_import_hint(environ=environ, modules=modules,
                                    platform=platform) is None


# --- Idle OpenMP threads -----------------------------------------------------

def test_idle_openmp_threads_spin_shortly_before_mxnet():
    env = {}
    message = threads.shorten_openmp_spin(environ=env, modules=BEFORE,
                                          platform='linux')
    assert env == {'GOMP_SPINCOUNT': '1000'}
    assert message.startswith('OpenMP idle threads: sleep after 1000 spins')


@pytest.mark.parametrize('name, value', [('GOMP_SPINCOUNT', '0'),
                                         ('OMP_WAIT_POLICY', 'ACTIVE')])
def test_openmp_waiting_from_the_environment_is_kept(name, value):
    env = {name: value}
    assert threads.shorten_openmp_spin(
        environ=env, modules=BEFORE, platform='linux') == (
        f'OpenMP idle threads: {name}={value} (from the environment)')
    assert env == {name: value}


def test_no_openmp_spin_is_set_on_macos():
    env = {}
    assert threads.shorten_openmp_spin(
        environ=env, modules=BEFORE, platform='darwin') == (
        "OpenMP idle threads: none (MXNet's macOS wheel is built without "
        'OpenMP)')
    assert env == {}


def test_too_late_for_openmp_spin_once_mxnet_is_imported():
    env = {}
    assert 'MXNet was imported before it could be shortened' in \
        threads.shorten_openmp_spin(environ=env, modules=AFTER,
                                    platform='linux')
    assert env == {}


# --- OpenBLAS's kernels ------------------------------------------------------

@pytest.fixture
def cpuinfo(tmp_path, monkeypatch):
    """``cpuinfo(avx512)`` -> the path of a cpuinfo file with or without
    the AVX-512 flags, read as on an x86-64 machine."""
    monkeypatch.setattr(threads.platform, 'machine', lambda: 'x86_64')

    def write(has_avx512):
        flags = 'fpu sse avx2 fma' + (
            ' avx512f avx512dq avx512bw avx512vl' if has_avx512 else '')
        path = tmp_path / f'cpuinfo-{has_avx512}'
        path.write_text(f'processor\t: 0\nflags\t\t: {flags}\n\n')
        return str(path)
    return write


@pytest.mark.parametrize('has_avx512', [True, False])
def test_avx512_kernels_are_asked_for_only_on_an_avx512_cpu(cpuinfo,
                                                            has_avx512):
    env = {}
    message = threads.use_avx512_blas(environ=env, modules=BEFORE,
                                      cpuinfo=cpuinfo(has_avx512))
    if has_avx512:
        assert env == {'OPENBLAS_CORETYPE': 'SkylakeX'}
        assert message.startswith('OpenBLAS kernels: SkylakeX (AVX-512')
    else:
        assert env == {}
        assert message == ("OpenBLAS kernels: OpenBLAS's own choice (no "
                           "AVX-512 here)")


def test_openblas_kernels_from_the_environment_are_kept(cpuinfo):
    env = {'OPENBLAS_CORETYPE': 'Haswell'}
    assert threads.use_avx512_blas(
        environ=env, modules=BEFORE, cpuinfo=cpuinfo(True)) == (
        'OpenBLAS kernels: Haswell (OPENBLAS_CORETYPE from the environment)')
    assert env == {'OPENBLAS_CORETYPE': 'Haswell'}


@pytest.mark.parametrize('loaded', ['mxnet', 'scipy.linalg'])
def test_too_late_for_openblas_kernels_once_it_is_loaded(cpuinfo, loaded):
    env = {}
    message = threads.use_avx512_blas(environ=env, modules={loaded: 1},
                                      cpuinfo=cpuinfo(True))
    assert 'it was loaded before the AVX-512 ones could be asked for' \
        in message
    assert env == {}


@pytest.mark.parametrize('flags, expected', [
    ('fpu sse avx2 avx512f avx512dq avx512bw avx512vl avx512cd', True),
    ('fpu sse avx2 avx512f avx512cd', False),        # no BW, DQ, VL
    ('fpu sse avx2 fma', False)])
def test_avx512_reads_the_cpus_flags(tmp_path, flags, expected):
    path = tmp_path / 'cpuinfo'
    path.write_text(f'processor\t: 0\nflags\t\t: {flags}\n\n')
    assert threads.avx512(str(path), 'x86_64') is expected
    assert threads.avx512(str(tmp_path / 'missing'), 'x86_64') is False
    assert threads.avx512(str(path), 'aarch64') is False   # emulated




@pytest.mark.skipif(not hasattr(os, 'sched_getaffinity'),
                    reason='os.sched_getaffinity is Linux-only')
def test_physical_cores_counts_within_the_affinity_mask():
    cores = threads.physical_cores()
    assert 1 <= cores <= len(os.sched_getaffinity(0))


# --- The one call ------------------------------------------------------------

def test_set_threads_makes_the_three_choices_in_the_mapping_it_is_given(
        cpuinfo, monkeypatch):
    monkeypatch.setattr(threads, 'avx512', lambda path: True)
    env = {}
    lines = threads.set_threads(2, environ=env, modules=BEFORE).split('\n')
    assert [line.split(':')[0] for line in lines] == [
        'CPU threads', 'OpenMP idle threads', 'OpenBLAS kernels']
    expected = {'OMP_NUM_THREADS': '2', 'OPENBLAS_CORETYPE': 'SkylakeX'}
    if threads.mxnet_has_openmp():
        expected['GOMP_SPINCOUNT'] = '1000'
    assert env == expected


def test_set_threads_without_short_spin_leaves_libgomps_default():
    env = {}
    lines = threads.set_threads(1, short_spin=False, environ=env,
                                modules=BEFORE)
    assert 'GOMP_SPINCOUNT' not in env
    assert env['OMP_NUM_THREADS'] == '1'
    if threads.mxnet_has_openmp():
        assert "OpenMP idle threads: libgomp's default spin" in lines


def _python(code, env=None):
    """Run `code` in a new interpreter; return its stdout."""
    done = subprocess.run([sys.executable, '-c', code], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


#: What the choices read: without them, a process chooses for itself
CHOSEN_BY_USER = threads.VARIABLES + ('OMP_WAIT_POLICY',)


def _clean_environ(**variables):
    """`os.environ` without the variables of the choices, plus `variables`:
    the environment of a user who set none of them (or only those)."""
    env = {name: value for name, value in os.environ.items()
           if name not in CHOSEN_BY_USER}
    env.update(variables)
    return env


def test_importing_d2l_bert_sets_no_environment_variable_and_loads_no_mxnet():
    out = _python(
        'import os, sys\n'
        'before = dict(os.environ)\n'
        'import d2l_bert, d2l_bert.threads\n'
        'print("mxnet" in sys.modules, dict(os.environ) == before)\n',
        env=_clean_environ())
    assert out.split() == ['False', 'True']


needs_hook = pytest.mark.skipif(
    not os.path.exists(mxnet_compat.pth_path()),
    reason='the d2l_bert.mxnet_compat hook is not installed here (run.py '
           'installs it)')

#: Imports `mxnet` first thing, then prints the choices it finds
IMPORT_MXNET = ('import os, sys\n'
                'import mxnet\n'
                'from d2l_bert import threads\n'
                'print({name: os.environ.get(name) '
                'for name in threads.VARIABLES})\n'
                'print(threads.report())\n')


def _expected(**variables):
    """The choices and lines of `set_threads()` before `mxnet`, for an
    environment that sets only `variables` of the choices."""
    env = dict(variables)
    lines = threads.set_threads(environ=env, modules=BEFORE)
    return {name: env.get(name) for name in threads.VARIABLES}, lines


@needs_hook
def test_importing_mxnet_in_the_venv_makes_the_choices_quietly():
    out = _python(IMPORT_MXNET, env=_clean_environ())
    chosen, lines = _expected()
    assert chosen['OMP_NUM_THREADS'] == str(threads.physical_cores())
    assert out == f'{chosen}\n{lines}\n'     # nothing else printed


@needs_hook
def test_importing_mxnet_keeps_the_users_own_thread_count():
    out = _python(IMPORT_MXNET, env=_clean_environ(OMP_NUM_THREADS='1'))
    chosen, lines = _expected(OMP_NUM_THREADS='1')
    assert chosen['OMP_NUM_THREADS'] == '1'
    assert out == f'{chosen}\n{lines}\n'
    assert 'CPU threads: 1 (OMP_NUM_THREADS from the environment' in out


def test_the_module_prints_the_three_choices_on_request():
    done = subprocess.run([sys.executable, '-m', 'd2l_bert.threads'],
                          env=_clean_environ(), capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == _expected()[1] + '\n'
    assert [line.split(':')[0] for line in done.stdout.splitlines()] == [
        'CPU threads', 'OpenMP idle threads', 'OpenBLAS kernels']
    assert threads.main(['--what']) == 2


@pytest.fixture
def own_environ(monkeypatch):
    """This process's `os.environ` without the variables of the choices,
    and `set_threads` without memory of earlier calls; restored after."""
    saved = {name: os.environ.get(name) for name in CHOSEN_BY_USER}
    monkeypatch.setattr(threads, '_wrote', {})
    monkeypatch.setattr(threads, '_chosen', None)
    monkeypatch.setattr(threads, 'avx512', lambda cpuinfo=None: False)
    for name in CHOSEN_BY_USER:
        os.environ.pop(name, None)
    yield os.environ
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def test_set_threads_again_decides_anew_and_keeps_what_others_set(
        own_environ):
    first = threads.set_threads(2, modules=BEFORE)
    assert threads.set_threads(2, modules=BEFORE) == first
    assert own_environ['OMP_NUM_THREADS'] == '2'
    threads.set_threads(1, short_spin=False, modules=BEFORE)
    assert own_environ['OMP_NUM_THREADS'] == '1'
    assert 'GOMP_SPINCOUNT' not in own_environ    # the first call's, gone
    own_environ['OMP_NUM_THREADS'] = '3'          # someone else's
    assert threads.set_threads(modules=BEFORE).startswith(
        'CPU threads: 3 (OMP_NUM_THREADS from the environment')
    assert own_environ['OMP_NUM_THREADS'] == '3'


def test_once_mxnet_is_loaded_set_threads_says_what_was_chosen_before(
        own_environ):
    chosen = threads.set_threads(2, modules=BEFORE)
    assert threads.report() == chosen
    assert threads.set_threads(1, modules=AFTER) == chosen
    assert own_environ['OMP_NUM_THREADS'] == '2'


def test_the_quiet_call_leaves_an_explicit_calls_choices(own_environ,
                                                         capsys):
    threads.set_threads(1, short_spin=False, modules=BEFORE)
    threads.set_threads_quietly()
    assert own_environ['OMP_NUM_THREADS'] == '1'
    assert 'GOMP_SPINCOUNT' not in own_environ
    assert capsys.readouterr().out == ''
