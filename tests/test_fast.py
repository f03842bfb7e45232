"""Tests of the thread, OpenMP-spin and OpenBLAS choices (`d2l_bert._threads`).

The fast layer's tests are in test_fast_blocks.py.
"""
import os
import sys

import pytest

from d2l_bert import _threads


# --- Every core --------------------------------------------------------------

@pytest.fixture
def before_mxnet(monkeypatch):
    """Pretend MXNet is not imported yet, and OMP_NUM_THREADS unset.

    The functions under test write to `os.environ`; `monkeypatch.delenv`
    of an absent variable records nothing to undo, so the environment is
    restored here: a leaked OPENBLAS_CORETYPE=SkylakeX once crashed every
    later notebook kernel on a CPU without AVX-512.
    """
    saved = dict(os.environ)
    monkeypatch.delitem(sys.modules, 'mxnet')
    monkeypatch.delenv('OMP_NUM_THREADS', raising=False)
    yield monkeypatch
    os.environ.clear()
    os.environ.update(saved)


def test_all_physical_cores_are_asked_for_before_mxnet(before_mxnet):
    message = _threads.use_all_cores()
    cores = _threads.physical_cores()
    assert os.environ['OMP_NUM_THREADS'] == str(cores)
    assert message.startswith(f'CPU threads: {cores} of {cores} cores')


def test_a_thread_count_from_the_environment_is_kept(before_mxnet):
    before_mxnet.setenv('OMP_NUM_THREADS', '3')
    assert 'from the environment' in _threads.use_all_cores()
    assert os.environ['OMP_NUM_THREADS'] == '3'


def test_an_explicit_thread_count_wins(before_mxnet):
    _threads.use_all_cores(1)
    assert os.environ['OMP_NUM_THREADS'] == '1'
    with pytest.raises(ValueError, match='num_threads must be a positive '
                                         'integer, got 0'):
        _threads.use_all_cores(0)


def test_on_macos_the_thread_count_sizes_only_the_compiled_loops(
        before_mxnet):
    # MXNet 1.9.1's macOS wheel links no OpenMP runtime
    before_mxnet.setattr(sys, 'platform', 'darwin')
    assert not _threads.mxnet_has_openmp()
    message = _threads.use_all_cores(2)
    assert os.environ['OMP_NUM_THREADS'] == '2'
    assert message.startswith('CPU threads: 2 of ')
    assert "for the compiled loops (MXNet's macOS wheel has no OpenMP" \
        in message
    assert 'MXNet alone would use' not in message


def test_too_late_once_mxnet_is_imported():
    assert 'MXNet was imported before' in _threads.use_all_cores()


@pytest.fixture
def before_openmp(before_mxnet):
    """`before_mxnet`, and neither GOMP_SPINCOUNT nor OMP_WAIT_POLICY
    set."""
    before_mxnet.delenv('GOMP_SPINCOUNT', raising=False)
    before_mxnet.delenv('OMP_WAIT_POLICY', raising=False)
    return before_mxnet


def test_idle_openmp_threads_spin_shortly_before_mxnet(before_openmp):
    message = _threads.shorten_openmp_spin()
    assert os.environ['GOMP_SPINCOUNT'] == '1000'
    assert message.startswith('OpenMP idle threads: sleep after 1000 spins')


@pytest.mark.parametrize('name, value', [('GOMP_SPINCOUNT', '0'),
                                         ('OMP_WAIT_POLICY', 'ACTIVE')])
def test_openmp_waiting_from_the_environment_is_kept(before_openmp, name,
                                                     value):
    before_openmp.setenv(name, value)
    assert _threads.shorten_openmp_spin() == (
        f'OpenMP idle threads: {name}={value} (from the environment)')
    assert os.environ[name] == value
    if name == 'OMP_WAIT_POLICY':
        assert 'GOMP_SPINCOUNT' not in os.environ


def test_no_openmp_spin_is_set_on_macos(before_openmp):
    before_openmp.setattr(sys, 'platform', 'darwin')
    assert _threads.shorten_openmp_spin() == (
        "OpenMP idle threads: none (MXNet's macOS wheel is built without "
        'OpenMP)')
    assert 'GOMP_SPINCOUNT' not in os.environ


def test_too_late_for_openmp_spin_once_mxnet_is_imported(monkeypatch):
    monkeypatch.delenv('GOMP_SPINCOUNT', raising=False)
    monkeypatch.delenv('OMP_WAIT_POLICY', raising=False)
    assert "MXNet was imported before d2l_bert could shorten it" in \
        _threads.shorten_openmp_spin()
    assert 'GOMP_SPINCOUNT' not in os.environ


@pytest.fixture
def before_openblas(before_mxnet):
    """`before_mxnet`, and SciPy's linalg not imported yet either, and
    OPENBLAS_CORETYPE unset."""
    before_mxnet.delitem(sys.modules, 'scipy.linalg', raising=False)
    before_mxnet.delenv('OPENBLAS_CORETYPE', raising=False)
    return before_mxnet


@pytest.mark.parametrize('has_avx512', [True, False])
def test_avx512_kernels_are_asked_for_only_on_an_avx512_cpu(
        before_openblas, has_avx512):
    before_openblas.setattr(_threads, 'avx512', lambda: has_avx512)
    message = _threads.use_avx512_blas()
    if has_avx512:
        assert os.environ['OPENBLAS_CORETYPE'] == 'SkylakeX'
        assert message.startswith('OpenBLAS kernels: SkylakeX (AVX-512')
    else:
        assert 'OPENBLAS_CORETYPE' not in os.environ
        assert message == ("OpenBLAS kernels: OpenBLAS's own choice (no "
                           "AVX-512 here)")


def test_openblas_kernels_from_the_environment_are_kept(before_openblas):
    before_openblas.setattr(_threads, 'avx512', lambda: True)
    before_openblas.setenv('OPENBLAS_CORETYPE', 'Haswell')
    assert _threads.use_avx512_blas() == (
        'OpenBLAS kernels: Haswell (OPENBLAS_CORETYPE from the environment)')
    assert os.environ['OPENBLAS_CORETYPE'] == 'Haswell'


def test_too_late_for_openblas_kernels_once_mxnet_is_imported(monkeypatch):
    monkeypatch.setattr(_threads, 'avx512', lambda: True)
    monkeypatch.delenv('OPENBLAS_CORETYPE', raising=False)
    assert 'it was loaded before d2l_bert could ask for the AVX-512' in \
        _threads.use_avx512_blas()
    assert 'OPENBLAS_CORETYPE' not in os.environ


@pytest.mark.parametrize('flags, expected', [
    ('fpu sse avx2 avx512f avx512dq avx512bw avx512vl avx512cd', True),
    ('fpu sse avx2 avx512f avx512cd', False),        # no BW, DQ, VL
    ('fpu sse avx2 fma', False)])
def test_avx512_reads_the_cpus_flags(tmp_path, flags, expected):
    cpuinfo = tmp_path / 'cpuinfo'
    cpuinfo.write_text(f'processor\t: 0\nflags\t\t: {flags}\n\n')
    assert _threads.avx512(str(cpuinfo)) is expected
    assert _threads.avx512(str(tmp_path / 'missing')) is False


def test_physical_cores_counts_within_the_affinity_mask():
    cores = _threads.physical_cores()
    assert 1 <= cores <= len(os.sched_getaffinity(0))
