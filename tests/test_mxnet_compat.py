"""The NumPy names MXNet 1.9.1 reads, given back on NumPy 1.24 and later.

The logic is tested on stand-in `numpy` modules (this suite runs on the
book's NumPy 1.23.5 and on NumPy 2); the hook itself is tested in child
interpreters, the way a user meets it.
"""
import ctypes
import math
import os
import platform
import re
import shutil
import subprocess
import sys
import types

import numpy
import pytest

from d2l_bert import mxnet_compat, threads

REMOVED = ('PZERO', 'NZERO', 'PINF', 'NINF', 'NaN', 'NAN', 'Inf',
           'alltrue', 'sometrue', 'product', 'cumproduct', 'round_',
           'row_stack', 'trapz', 'in1d', 'msort', 'compat', 'bool')


def fake_numpy(version, drop=REMOVED + mxnet_compat.EXPIRED):
    """A stand-in `numpy` of `version` without the names in `drop`, its
    functions taken from the real NumPy."""
    module = types.ModuleType('numpy')
    for name in dir(numpy):
        if name not in drop and not name.startswith('__'):
            try:
                setattr(module, name, getattr(numpy, name))
            except AttributeError:  # an expired name of NumPy 1.23
                pass
    module.__version__ = version
    if not hasattr(module, 'trapezoid'):  # NumPy 2's name
        module.trapezoid = numpy.trapz
    return module


@pytest.fixture
def numpy2(monkeypatch):
    module = fake_numpy('2.5.5')
    module.printoptions_set = []
    module.set_printoptions = lambda **kw: module.printoptions_set.append(kw)
    monkeypatch.setitem(sys.modules, 'numpy', module)
    return module


def test_every_removed_name_comes_back_with_numpy2s_meaning(numpy2):
    added = mxnet_compat.give_back()
    assert added == tuple(sorted(REMOVED + mxnet_compat.EXPIRED))
    assert numpy2.product is numpy2.prod
    assert numpy2.cumproduct is numpy2.cumprod
    assert numpy2.alltrue is numpy2.all
    assert numpy2.sometrue is numpy2.any
    assert numpy2.round_ is numpy2.round
    assert numpy2.row_stack is numpy2.vstack
    assert numpy2.trapz is numpy2.trapezoid
    assert numpy2.bool is numpy2.bool_
    assert numpy2.compat.basestring is str
    assert (numpy2.PZERO, numpy2.PINF, numpy2.NINF) == (0.0, math.inf,
                                                        -math.inf)
    assert math.copysign(1.0, numpy2.NZERO) == -1.0
    assert math.isnan(numpy2.NaN) and math.isnan(numpy2.NAN)
    assert numpy2.printoptions_set == [{'legacy': '1.25'}]


def test_in1d_and_msort_compute_what_numpy_1_23_computed(numpy2):
    mxnet_compat.give_back()
    a = numpy.array([[3, 1], [2, 5]])
    assert numpy2.in1d(a, [1, 5]).tolist() == [False, True, False, True]
    assert numpy2.in1d(a, [1, 5], invert=True).tolist() == [
        True, False, True, False]
    assert numpy2.msort(a).tolist() == [[2, 1], [3, 5]]


def test_financial_functions_raise_an_error_naming_themselves(numpy2):
    mxnet_compat.give_back()
    assert numpy2.npv.__name__ == 'npv'
    with pytest.raises(RuntimeError, match=r'numpy\.npv was removed in '
                       r'NumPy 1\.20 .* numpy-financial package has npv'):
        numpy2.npv(0.1, [1, 2])


def test_names_numpy_still_has_are_left_alone(monkeypatch):
    mine = object()
    module = fake_numpy('1.26.4')
    for name in REMOVED + mxnet_compat.EXPIRED:
        if name not in ('bool', 'npv'):
            setattr(module, name, mine)
    monkeypatch.setitem(sys.modules, 'numpy', module)
    assert mxnet_compat.give_back() == ('bool', 'npv')
    assert module.product is mine


def test_mxnet_gets_numpy_integers_in_lists_of_operator_arguments(
        tmp_path):
    # split_and_load computes its split points with NumPy: on NumPy 2
    # they printed as 'np.int64(2)' before give_back set legacy printing
    code = ('import mxnet as mx, numpy; from mxnet import np, npx, gluon; '
            'npx.set_np(); x = np.arange(10).reshape(5, 2); '
            'parts = gluon.utils.split_and_load(x, [mx.cpu(0), mx.cpu(1)], '
            'even_split=False); print([p.shape[0] for p in parts], '
            'str([numpy.int64(2)]))')
    result = run_child(code, cwd=str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ['[3,', '2]', '[2]']


def test_nothing_changes_on_numpy_1_23(monkeypatch):
    module = fake_numpy('1.23.5')
    monkeypatch.setitem(sys.modules, 'numpy', module)
    before = dict(vars(module))
    assert mxnet_compat.give_back() == ()
    assert vars(module) == before


@pytest.mark.parametrize('version,old', [
    ('1.23.5', True), ('1.16.0', True), ('1.24.0rc1', False),
    ('1.26.4', False), ('2.0.0', False), ('2.5.5', False)])
def test_numpy_is_old(version, old):
    assert mxnet_compat.numpy_is_old(version) is old


def test_the_hook_is_added_once_and_removes_itself(monkeypatch):
    monkeypatch.setattr(sys, 'meta_path', list(sys.meta_path))
    monkeypatch.delitem(sys.modules, 'mxnet', raising=False)
    calls = []
    monkeypatch.setattr(mxnet_compat, 'give_back',
                        lambda: calls.append('give_back'))
    monkeypatch.setattr(mxnet_compat, 'fork_default', lambda: None)
    monkeypatch.setattr(threads, 'set_threads_quietly',
                        lambda: calls.append('threads'))
    mxnet_compat.add_hook()
    mxnet_compat.add_hook()
    hooks = [f for f in sys.meta_path
             if isinstance(f, mxnet_compat.MXNetHook)]
    assert len(hooks) == 1 and sys.meta_path[0] is hooks[0]
    assert hooks[0].find_spec('numpy') is None and calls == []
    assert hooks[0].find_spec('mxnet') is None
    assert calls == ['threads', 'give_back']   # threads before libraries
    assert not any(isinstance(f, mxnet_compat.MXNetHook)
                   for f in sys.meta_path)


@pytest.mark.parametrize('version,platform,chosen,sets', [
    ((3, 14), 'linux', None, True), ((3, 15), 'linux', None, True),
    ((3, 13), 'linux', None, False), ((3, 14), 'darwin', None, False),
    ((3, 14), 'linux', 'spawn', False)])
def test_fork_is_the_default_again_on_linux_from_python_3_14(
        monkeypatch, version, platform, chosen, sets):
    import multiprocessing
    calls = []
    monkeypatch.setattr(multiprocessing, 'get_start_method',
                        lambda allow_none=False: chosen)
    monkeypatch.setattr(multiprocessing, 'set_start_method', calls.append)
    assert mxnet_compat.fork_default(version, platform) is sets
    assert calls == (['fork'] if sets else [])


def test_a_python_without_distutils_is_told_to_install_setuptools(
        monkeypatch):
    monkeypatch.setattr(mxnet_compat.importlib.util, 'find_spec',
                        lambda name: None)
    with pytest.raises(ImportError, match=r'MXNet 1\.9\.1 imports '
                       r'distutils, .*install setuptools'):
        mxnet_compat.check_distutils()


def test_install_writes_the_pth_file_whole(monkeypatch, tmp_path):
    path = tmp_path / mxnet_compat.PTH_NAME
    monkeypatch.setattr(mxnet_compat, 'pth_path', lambda: str(path))
    assert mxnet_compat.install() == str(path)
    assert path.read_text() == mxnet_compat.PTH_LINE
    assert os.listdir(str(tmp_path)) == [mxnet_compat.PTH_NAME]


def run_child(code, *flags, cwd=None):
    return subprocess.run(
        [sys.executable, *flags, '-c', code], cwd=cwd,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        universal_newlines=True, timeout=120)


def test_the_pth_line_is_harmless_where_d2l_bert_is_gone(tmp_path):
    # -S: no site-packages, so no d2l-bert to find
    result = run_child(mxnet_compat.PTH_LINE, '-S', cwd=str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert result.stderr == ''


def test_the_set_up_installed_the_hook_in_this_environment():
    assert os.path.exists(mxnet_compat.pth_path()), (
        'run `python -m d2l_bert.mxnet_compat --install` (run.py does)')
    with open(mxnet_compat.pth_path()) as f:
        assert f.read() == mxnet_compat.PTH_LINE


def test_import_mxnet_first_thing_in_a_fresh_interpreter(tmp_path):
    code = ('import mxnet, numpy; from mxnet import np, npx; '
            'npx.set_np(); x = np.ones((2, 3)); '
            'print(mxnet.__version__, x.sum().item(), '
            'numpy.__version__.split(".")[0])')
    result = run_child(code, cwd=str(tmp_path))
    assert result.returncode == 0, result.stderr
    version, total, numpy_major = result.stdout.split()
    assert (version, float(total)) == ('1.9.1', 6.0)
    assert numpy_major == numpy.__version__.split('.')[0]


# --- the stand-ins for the Arm Performance Libraries ---------------------

def test_a_stand_in_is_an_elf_library_with_its_names_and_no_symbol():
    data = mxnet_compat.elf_stand_in('libamath.so', ('libm.so.6',))
    assert data[:4] == b'\x7fELF'
    assert data[4:6] == b'\x02\x01'      # 64-bit, little-endian
    assert int.from_bytes(data[16:18], 'little') == 3     # ET_DYN
    assert int.from_bytes(data[18:20], 'little') == 183   # EM_AARCH64
    assert b'\0libamath.so\0libm.so.6\0' in data
    assert len(data) < 1024


def test_readelf_reads_the_stand_ins_dynamic_section(tmp_path):
    readelf = shutil.which('readelf')
    if readelf is None:
        pytest.skip('readelf (binutils) is not installed')
    path = tmp_path / 'libarmpl_lp64_mp.so'
    path.write_bytes(mxnet_compat.elf_stand_in(
        'libarmpl_lp64_mp.so', mxnet_compat.ARMPL_LIBRARIES[
            'libarmpl_lp64_mp.so']))
    out = subprocess.run([readelf, '-W', '-h', '-l', '-d', str(path)],
                         capture_output=True, text=True, check=True)
    assert 'AArch64' in out.stdout
    assert 'Library soname: [libarmpl_lp64_mp.so]' in out.stdout
    assert re.findall(r'Shared library: \[(.*?)\]', out.stdout) == [
        'libopenblas.so.0', 'liblapacke.so.3']
    assert re.search(r'GNU_STACK .* RW ', out.stdout)
    assert out.stderr == ''


def test_a_library_naming_a_stand_in_gets_the_functions_of_its_libraries():
    """On this machine's architecture: a library that names one nobody
    has does not load; once a stand-in of that name, over libm, is loaded
    from memory, it does, and finds `cos` in libm through the stand-in
    (what `libmxnet.so` does with the Arm stand-ins)."""
    machine = platform.machine()
    if (not sys.platform.startswith('linux')
            or machine not in mxnet_compat.ELF_MACHINES):
        pytest.skip(f'no stand-in for {sys.platform} on {machine}')
    name = 'libd2l-bert-test-stand-in.so'
    user = mxnet_compat.elf_stand_in('libd2l-bert-test-user.so', (name,),
                                     machine)
    with pytest.raises(OSError, match=name):
        mxnet_compat._load_bytes('user', user)
    stand_in = mxnet_compat._load_bytes(name, mxnet_compat.elf_stand_in(
        name, ('libm.so.6',), machine))
    library = mxnet_compat._load_bytes('user', user)
    assert library._handle != stand_in._handle
    assert ctypes.CDLL(name)._handle == stand_in._handle   # by its name
    cos = library.cos
    cos.restype, cos.argtypes = ctypes.c_double, [ctypes.c_double]
    assert cos(0.0) == 1.0


@pytest.mark.parametrize('system,machine,needed', [
    ('linux', 'x86_64', False), ('darwin', 'arm64', False),
    ('linux', 'aarch64', True)])
def test_stand_ins_are_needed_on_arm64_linux_only(system, machine, needed,
                                                 monkeypatch):
    def no_armpl(name, *args, **kwargs):
        if name in mxnet_compat.ARMPL_LIBRARIES:
            raise OSError(f'{name}: cannot open shared object file')
        return load(name, *args, **kwargs)
    load = ctypes.CDLL
    monkeypatch.setattr(mxnet_compat.ctypes, 'CDLL', no_armpl)
    assert mxnet_compat.needs_arm_stand_ins(machine, system) is needed


def test_no_stand_in_where_the_arm_libraries_are_installed(monkeypatch):
    monkeypatch.setattr(mxnet_compat.ctypes, 'CDLL', lambda name: name)
    assert mxnet_compat.needs_arm_stand_ins('aarch64', 'linux') is False


def test_missing_openblas_on_arm64_is_one_error_naming_the_packages(
        monkeypatch):
    monkeypatch.setattr(mxnet_compat, 'needs_arm_stand_ins', lambda: True)
    monkeypatch.setattr(mxnet_compat, 'missing_arm_libraries',
                        lambda: ['libopenblas.so.0', 'liblapacke.so.3'])
    with pytest.raises(ImportError) as error:
        mxnet_compat.load_arm_stand_ins()
    assert str(error.value) == (
        "MXNet 1.9.1's aarch64 library needs libopenblas.so.0, "
        'liblapacke.so.3 from the system; install them: sudo apt-get '
        'install libopenblas0 liblapacke (Debian, Ubuntu; see '
        'docs/install.md for others)')


def test_check_imports_mxnet_and_says_what_ran():
    """The set-up's check, in a fresh interpreter: on arm64 Linux through
    the stand-ins."""
    out = subprocess.run(
        [sys.executable, '-c', 'import sys; from d2l_bert.mxnet_compat '
         'import main; sys.exit(main(["--check"]))'],
        capture_output=True, text=True, check=True).stdout
    machine = platform.machine()
    stood_in = mxnet_compat.STOOD_IN or mxnet_compat.needs_arm_stand_ins()
    how = (' (the Arm Performance Libraries stood in for by OpenBLAS and '
           'LAPACKE)' if stood_in else '')
    assert out.splitlines()[-1] == f'MXNet 1.9.1 on {machine}{how}: ok'


def test_the_module_refuses_options_it_does_not_know(capsys):
    assert mxnet_compat.main(['--instal']) == 2
    assert mxnet_compat.main(['--check', '--check']) == 2
    assert capsys.readouterr().err.count('usage: python -m') == 2


def test_numpy_products_by_the_identity_are_exact_here():
    assert mxnet_compat.check_numpy_blas() is None


@pytest.mark.parametrize('machine, family', [('aarch64', 'NEOVERSEN1'),
                                             ('x86_64', 'Haswell')])
def test_a_wrong_numpy_product_is_one_warning_naming_the_remedy(
        monkeypatch, machine, family):
    import numpy
    right = numpy.dot
    monkeypatch.setattr(numpy, 'dot', lambda a, b: right(a, b) + 1)
    monkeypatch.setattr(mxnet_compat.platform, 'machine', lambda: machine)
    warning = mxnet_compat.check_numpy_blas()
    assert warning.startswith(f'warning: NumPy {numpy.__version__} '
                              'multiplies float32 and float64 matrices '
                              'wrongly on this CPU')
    assert warning.endswith(f'set OPENBLAS_CORETYPE={family} (export it, or '
                            'put it before each command) to use another '
                            'kernel family')
    assert '\n' not in warning


def test_looking_for_a_name_prints_no_warning_of_numpys():
    # NumPy 1.24 to 1.26 warn on `numpy.bool`; the hook only asks
    import types
    import warnings

    class Warns(types.ModuleType):
        def __getattr__(self, name):
            warnings.warn(f'numpy.{name} will come back', FutureWarning)
            raise AttributeError(name)
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        assert mxnet_compat._missing(Warns('numpy'), 'bool')
