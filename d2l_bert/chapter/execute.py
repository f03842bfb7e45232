"""Executing the notebooks in a Jupyter kernel, once for given contents.

The docs show each section with what its notebook printed and drew
(`pages`).  `execute_cached` runs a notebook from its first cell in a
kernel of this interpreter (nbclient), as a student's Jupyter would, at
the sizes it opens with and offline (``D2L_BERT_OFFLINE=1``: every
download gets its stand-in, announced as in a notebook), and keeps the
executed notebook in a cache keyed by what it depends on: the
notebook's bytes, every file of the package, the lock file of this
Python and the interpreter.  A rebuild with nothing changed reads the
cache.  Each cell's time is printed as it ends; Ctrl-C ends the kernel.
"""
import hashlib
import os
import shutil
import sys
import tempfile
import time

from ..presets import DATA_ENV, OFFLINE_ENV, SMALL_ENV, SNLI_PAIRS_ENV

#: Seconds a cell may run before the execution fails
CELL_TIMEOUT = 1800
#: Version of what the cache holds; a change of the format changes it
CACHE_VERSION = 1

PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(PACKAGE)


def cache_key(path, root=ROOT):
    """The SHA-256 of what the executed notebook `path` depends on.

    Parameters
    ----------
    path : str
        The notebook.
    root : str
        The checkout holding ``d2l_bert/`` and ``requirements/``.

    Returns
    -------
    str
        64 hexadecimal digits.
    """
    digest = hashlib.sha256(f'{CACHE_VERSION} {sys.version}'.encode())
    lock = os.path.join(root, 'requirements',
                        'py%d%d.txt' % sys.version_info[:2])
    files = [path] + ([lock] if os.path.isfile(lock) else [])
    for folder, dirs, names in os.walk(os.path.join(root, 'd2l_bert')):
        dirs[:] = sorted(d for d in dirs if d != '__pycache__')
        files += [os.path.join(folder, n) for n in sorted(names)
                  if not n.endswith(('.pyc', '.nbi', '.nbc'))]
    for name in files:
        digest.update(os.path.relpath(name, root).encode() + b'\0')
        with open(name, 'rb') as f:
            digest.update(hashlib.sha256(f.read()).digest())
    return digest.hexdigest()


def execute_cached(path, cache_dir, progress=print):
    """The notebook `path` executed, from the cache or run now.

    Parameters
    ----------
    path : str
        The notebook.
    cache_dir : str
        Holds the executed notebooks (``NAME.KEY.ipynb``), the kernel's
        data folder (``data/``, its ``D2L_BERT_DATA``) and, while one
        runs, its working folder.
    progress : callable
        Called with a line per cell as it ends, and one at the start.

    Returns
    -------
    nbformat.NotebookNode
        With the outputs, and ``metadata.d2l_bert.seconds`` per cell and
        for the whole.
    """
    import nbformat

    name = os.path.basename(path)
    cached = os.path.join(cache_dir, f'{name[:-6]}.{cache_key(path)}.ipynb')
    if os.path.isfile(cached):
        return nbformat.read(cached, as_version=4)
    progress(f'{name}: executing it in a kernel, offline (the docs cache '
             f'the outputs; a rebuild with nothing changed reads them)')
    nb = _execute(path, cache_dir, progress)
    _replace_older(cache_dir, name[:-6])
    fd, tmp = tempfile.mkstemp(dir=cache_dir, suffix='.tmp')
    with os.fdopen(fd, 'w', encoding='utf-8') as f:
        nbformat.write(nb, f)
    os.chmod(tmp, 0o644)    # as a file written without mkstemp
    os.replace(tmp, cached)
    return nb


def _execute(path, cache_dir, progress):
    """Run `path` in a fresh kernel and working folder; return it."""
    import nbclient
    import nbformat

    nb = nbformat.read(path, as_version=4)
    os.makedirs(cache_dir, exist_ok=True)
    work = tempfile.mkdtemp(prefix='work-', dir=cache_dir)
    env = dict(os.environ, TMPDIR=work)
    env.update({OFFLINE_ENV: '1',
                DATA_ENV: os.path.join(cache_dir, 'data')})
    for setting in (SMALL_ENV, SNLI_PAIRS_ENV, 'MPLBACKEND'):
        env.pop(setting, None)    # the sizes and plots a notebook opens with
    start = began = time.perf_counter()

    def cell_start(cell, cell_index, **kwargs):
        nonlocal began
        began = time.perf_counter()

    def cell_done(cell, cell_index, **kwargs):
        took = time.perf_counter() - began
        cell.metadata.setdefault('d2l_bert', {})['seconds'] = round(took, 1)
        progress(f'  cell {cell_index + 1:>2} of {len(nb.cells)}  '
                 f'{took:6.1f} s')
    client = nbclient.NotebookClient(
        nb, timeout=CELL_TIMEOUT, kernel_name='python3', allow_errors=True,
        on_cell_start=cell_start, on_cell_executed=cell_done,
        resources={'metadata': {'path': work}})
    try:
        client.execute(env=env)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    nb.metadata.setdefault('d2l_bert', {})['seconds'] = round(
        time.perf_counter() - start, 1)
    nb.metadata['d2l_bert']['python'] = sys.version.split()[0]
    return nb


def _replace_older(cache_dir, stem):
    """Remove the cached runs of notebook `stem` with another key."""
    for entry in os.listdir(cache_dir):
        parts = entry.split('.')
        if len(parts) == 3 and parts[0] == stem and parts[2] == 'ipynb':
            os.remove(os.path.join(cache_dir, entry))


def outputs_text(cell):
    """What a code cell printed and displayed as text, as the chapter
    runner captures it: its standard output, then its result's repr."""
    parts = []
    for out in cell.get('outputs', []):
        if out.get('output_type') == 'stream' and out.get('name') == 'stdout':
            parts.append(out.get('text', ''))
        elif out.get('output_type') == 'execute_result':
            text = out.get('data', {}).get('text/plain', '')
            parts.append(text if text.endswith('\n') else text + '\n')
    return ''.join(parts)

