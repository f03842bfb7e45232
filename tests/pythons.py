"""The Pythons the tests make: a fresh venv, and a platform's Python
outside any venv; and the interpreters of other versions on this
machine.  Light on purpose (no MXNet), so that the benchmarks' simulated
platforms use it too.
"""
import glob
import os
import shutil
import subprocess
import sys


def make_venv(venv, python=sys.executable):
    """A fresh venv of `python` at `venv` holding pip and nothing else.

    Made without ensurepip (Debian's `python3` without `python3-venv` has
    none) and offline: this environment's pip, pure Python, is copied in
    (`add_pip`).
    """
    subprocess.run([python, '-m', 'venv', '--without-pip', str(venv)],
                   check=True, timeout=300)
    add_pip(os.path.join(str(venv), 'bin', 'python'))


def system_python(folder, python=sys.executable):
    """`python`'s interpreter installed at `folder` as a hosted platform
    has its Python: outside any venv, with a site-packages of its own
    (Colab and Kaggle run a notebook's pip as root there, where pip warns
    that it does).  The interpreter is copied; the standard library is
    linked to `python`'s; pip is added by `add_pip`.  Returns the path of
    the new interpreter.
    """
    base = subprocess.run(
        [python, '-c', 'import sys, sysconfig; print(sys.base_prefix); '
         'print(sysconfig.get_path("stdlib"))'],
        check=True, capture_output=True, text=True, timeout=60)
    prefix, stdlib = base.stdout.split()
    lib = os.path.join(str(folder), os.path.relpath(stdlib, prefix))
    os.makedirs(os.path.join(lib, 'site-packages'))
    for name in os.listdir(stdlib):
        # EXTERNALLY-MANAGED: a distribution's mark (Debian's), which
        # makes pip refuse to install; the platforms' Pythons have none
        if name not in ('site-packages', 'EXTERNALLY-MANAGED'):
            os.symlink(os.path.join(stdlib, name), os.path.join(lib, name))
    os.makedirs(os.path.join(str(folder), 'bin'))
    new = os.path.join(str(folder), 'bin', 'python')
    shutil.copy2(os.path.realpath(python), new)
    add_pip(new)
    return new


def add_pip(python):
    """Copy this environment's pip into `python`'s site-packages, with the
    `pip` commands that run it beside `python` (offline)."""
    import pip
    source = os.path.dirname(os.path.dirname(pip.__file__))
    target = subprocess.run(
        [python, '-c',
         'import sysconfig; print(sysconfig.get_path("purelib"))'],
        check=True, capture_output=True, text=True,
        timeout=60).stdout.strip()
    for name in os.listdir(source):
        if name == 'pip' or (name.startswith('pip-')
                             and name.endswith('.dist-info')):
            shutil.copytree(os.path.join(source, name),
                            os.path.join(target, name),
                            ignore=shutil.ignore_patterns('__pycache__'))
    for name in ('pip', 'pip3'):  # what `pip install` on its PATH runs
        script = os.path.join(os.path.dirname(python), name)
        with open(script, 'w') as f:
            f.write(f'#!{python}\n'
                    'import sys\nfrom pip._internal.cli.main import main\n'
                    'sys.exit(main())\n')
        os.chmod(script, 0o755)


def find_python(version):
    """An interpreter of Python `version` (``'3.13'``) on this machine:
    pyenv's, Debian's, then one on PATH (pyenv's shims need pyenv on
    PATH, so not those); None if there is none."""
    for pattern in (f'/root/.pyenv/versions/{version}.*/bin/python{version}',
                    f'/usr/bin/python{version}',
                    f'/usr/local/bin/python{version}'):
        found = sorted(glob.glob(pattern))
        if found:
            return found[-1]
    path = shutil.which(f'python{version}')
    if path and os.sep + 'shims' + os.sep not in path:
        return path
    return None
