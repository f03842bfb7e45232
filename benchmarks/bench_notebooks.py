"""Run each notebook as a student opens it: alone, from its first cell, at
the sizes it opens with, with a cold cache; time every cell and sample
the memory of the kernel and its children.

::

    python benchmarks/bench_notebooks.py                    # the 4 sections
    python benchmarks/bench_notebooks.py bert-pretraining.ipynb
    python benchmarks/bench_notebooks.py --against HEAD~3   # in turns
    python benchmarks/bench_notebooks.py --small            # a quick look
    python benchmarks/bench_notebooks.py --platform colab   # simulated
    python benchmarks/bench_notebooks.py --platform kaggle --published

Each run copies the notebook into an empty folder and gives its kernel
(this interpreter's ``python3`` kernel) a fresh HOME, data folder, numba
cache and TMPDIR, and none of this machine's ``PIP_*`` settings, so no
cache carries over from an earlier run: what a new hosted runtime has,
but for the packages, which are this environment's (the first cell then
finds them installed; `tests/test_chapter_hosted.py` times the install
on a simulated platform).  With ``--against REV`` the same notebooks run
on that commit's package too (``git archive``, first on ``PYTHONPATH``),
the two sides taking turns notebook by notebook.

Memory is the sum of the proportional set sizes (``Pss`` of
``/proc/PID/smaps_rollup``, pages shared between processes counted once)
of the kernel and every process under it, sampled every 0.5 s: close to
what a container's memory limit charges; the kernel's own largest
resident size is printed beside it.  For the cell that runs the book's
``train_bert``, the share of this machine's best float32 GEMM is that of
the book's arithmetic (every padded position,
`_batches.pretrain_step_flops`, at the notebook's vocabulary).
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _batches  # noqa: E402
import _common  # noqa: E402
import _gemm  # noqa: E402
import _machine  # noqa: E402
import _platform  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOTEBOOKS = ['bert.ipynb', 'bert-dataset.ipynb', 'bert-pretraining.ipynb',
             'natural-language-inference-bert.ipynb']
#: Appended to a run's copy: what the GEMM share needs from the kernel
PROBE = ("print('bench-notebooks:', len(vocab) if 'vocab' in dir() "
         "else 0)")
#: The book's pretraining call in its notebook: 50 steps
TRAIN_CALL, TRAIN_STEPS = 'train_bert(train_iter, net,', 50


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('notebooks', nargs='*', default=NOTEBOOKS,
                   help='notebooks of notebooks/ (default: the four '
                        'sections of the book)')
    p.add_argument('--against', metavar='REV', default=None,
                   help='also run the package of this commit, in turns')
    p.add_argument('--rounds', type=int, default=1,
                   help='runs of each notebook on each side (1)')
    p.add_argument('--small', action='store_true',
                   help='D2L_BERT_SMALL=1: small sizes, to try the script')
    p.add_argument('--no-gemm', action='store_true',
                   help="skip measuring the machine's best GEMM")
    p.add_argument('--platform', choices=_platform.PLATFORMS, default=None,
                   help='run on a simulated hosted platform (its Python '
                        'and packages; the set-up cell installs d2l-bert '
                        'from a wheel of this checkout, and MXNet and d2l '
                        'from PyPI, in every notebook)')
    p.add_argument('--published', action='store_true',
                   help='with --platform: every package of the '
                        "platform's published list, not only those the "
                        'chapter imports (needs uv; gigabytes)')
    args = p.parse_args(argv)
    if args.published and not args.platform:
        p.error('--published: give --platform too (colab or kaggle)')
    if args.platform and args.against:
        p.error('--platform and --against: give one of them (a platform '
                'runs this checkout only)')
    for name in args.notebooks:
        if not os.path.isfile(os.path.join(ROOT, 'notebooks', name)):
            p.error(f'notebook {name!r}: no such file in notebooks/; '
                    f'one of {", ".join(NOTEBOOKS)}')
    if args.rounds < 1:
        p.error(f'--rounds must be at least 1, got {args.rounds}')
    return args


def checkout_of(rev, folder):
    """The files of commit `rev` in `folder` (nothing of git's changes)."""
    archive = subprocess.run(['git', '-C', ROOT, 'archive', rev],
                             capture_output=True)
    if archive.returncode:
        sys.exit(f'bench_notebooks.py: error: --against {rev}: '
                 f'{archive.stderr.decode().strip()}')
    os.makedirs(folder)
    subprocess.run(['tar', '-x', '-C', folder], input=archive.stdout,
                   check=True)
    return folder


class MemorySampler(threading.Thread):
    """The peak of the summed Pss of `pid`'s descendants (not `pid`),
    and the peak resident size of any one of them, sampled until
    `stop`."""

    # Every 0.5 s, not more often: reading smaps_rollup walks the
    # kernel's page tables under its memory lock, and sampled every 0.1 s
    # the pretraining notebook's `train_bert` ran about a tenth slower
    def __init__(self, pid=None, every=0.5):
        super().__init__(daemon=True)
        self.pid, self.every = pid or os.getpid(), every
        self.peak_pss = self.peak_rss = 0
        #: ``(time.time(), summed Pss)`` of every sample: at most one
        #: every `every` seconds of the notebook's bounded run
        self.samples = []
        self._done = threading.Event()

    def run(self):
        while not self._done.wait(self.every):
            pss = 0
            for pid in descendants(self.pid):
                sizes = _sizes(pid)
                pss += sizes.get('Pss', 0)
                self.peak_rss = max(self.peak_rss, sizes.get('Rss', 0))
            self.peak_pss = max(self.peak_pss, pss)
            self.samples.append((time.time(), pss))

    def peak_between(self, start, end):
        """The highest summed Pss sampled from `start` to `end` (epoch
        seconds; the sample after `end` included), None if none."""
        inside = [pss for when, pss in self.samples
                  if start <= when <= end + self.every]
        return max(inside, default=None)

    def stop(self):
        self._done.set()
        self.join()


def descendants(pid):
    """The processes under `pid`, from /proc's parent links."""
    parents = {}
    for name in os.listdir('/proc'):
        if name.isdigit():
            try:
                with open(f'/proc/{name}/stat') as f:
                    # the field after the parenthesized command
                    parents[int(name)] = int(f.read().rsplit(')', 1)[1]
                                             .split()[1])
            except (OSError, IndexError, ValueError):
                continue
    found, todo = [], [pid]
    while todo:
        here = todo.pop()
        children = [p for p, parent in parents.items() if parent == here]
        found += children
        todo += children
    return found


def _sizes(pid):
    """``{'Rss': bytes, 'Pss': bytes}`` of `pid`; {} once it is gone."""
    try:
        with open(f'/proc/{pid}/smaps_rollup') as f:
            lines = f.read().splitlines()
    except OSError:
        return {}
    sizes = {}
    for line in lines:
        key, _, value = line.partition(':')
        if key in ('Rss', 'Pss'):
            sizes[key] = int(value.split()[0]) * 1024
    return sizes


def cell_times(nb):
    """``(seconds, start, end, first source line)`` of each code cell
    nbclient ran (start and end in epoch seconds, from the timings it
    records in the cells' metadata; None where it recorded none)."""
    from datetime import datetime

    def epoch(text):
        return datetime.fromisoformat(text.replace('Z', '+00:00')) \
            .timestamp() if text else None
    times = []
    for cell in nb.cells:
        if cell.cell_type != 'code':
            continue
        timing = cell.metadata.get('execution', {})
        start = epoch(timing.get('iopub.execute_input'))
        end = epoch(timing.get('shell.execute_reply'))
        seconds = end - start if start and end else None
        first = next((line for line in cell.source.splitlines()
                      if line.strip() and not line.startswith('#')), '')
        times.append((seconds, start, end, first.strip()))
    return times


def kernel_env(folder, package=None, small=False):
    """A new runtime's environment: this one without its ``PIP_*`` and
    ``PYTHON*`` settings, every cache in `folder`, `package` (a
    checkout) first on the path."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(('PIP_', 'PYTHON', 'VIRTUAL_ENV', 'NUMBA_',
                                'D2L_BERT_', 'MPL'))}
    places = {'HOME': 'home', _common.PRESETS.DATA_ENV: 'data',
              'NUMBA_CACHE_DIR': 'numba', 'TMPDIR': 'tmp',
              'XDG_CACHE_HOME': 'home/.cache',
              'MPLCONFIGDIR': 'home/.config/matplotlib'}
    for key, sub in places.items():
        env[key] = os.path.join(folder, sub)
        os.makedirs(env[key], exist_ok=True)
    if package:
        env['PYTHONPATH'] = package
    if small:
        env[_common.PRESETS.SMALL_ENV] = '1'
    return env


def run_notebook(name, package, small, platform=None):
    """Run notebook `name` once, cold (on `platform`, a
    `_platform.Platform`, if given); its cells' times, the whole time,
    the memory peaks, the vocabulary's size and the errors."""
    import nbclient
    import nbformat
    folder = tempfile.mkdtemp(prefix='bench-nb-')
    try:
        work = os.path.join(folder, 'notebooks')
        os.makedirs(work)
        nb = nbformat.read(os.path.join(ROOT, 'notebooks', name),
                           as_version=4)
        nb.cells.append(nbformat.v4.new_code_cell(PROBE))
        client = nbclient.NotebookClient(
            nb, timeout=1800, allow_errors=True,
            kernel_name=platform.name if platform else 'python3',
            resources={'metadata': {'path': work}})
        env = kernel_env(folder, package, small)
        # the kernel's spec is looked up in this process's environment
        spec = {}
        if platform:
            env.update(_platform.env(platform))
            spec = {'JUPYTER_PATH': platform.jupyter}
        sampler = MemorySampler()
        sampler.start()
        start = time.perf_counter()
        try:
            with mock.patch.dict(os.environ, spec):
                client.execute(env=env)
        finally:
            whole = time.perf_counter() - start
            sampler.stop()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        if platform:
            platform.reset()
    outputs = [out for cell in nb.cells if cell.cell_type == 'code'
               for out in cell.outputs]
    errors = [f"{out['ename']}: {out['evalue']}" for out in outputs
              if out.output_type == 'error']
    said = [out.get('text', '') for out in nb.cells[-1].outputs]
    vocab = int(''.join(said).split()[-1]) if said else 0
    cells = [(seconds, first, sampler.peak_between(began, ended)
              if began else None) for seconds, began, ended, first
             in cell_times(nb)[:-1]]
    return dict(cells=cells, whole=whole, vocab=vocab,
                pss=sampler.peak_pss, rss=sampler.peak_rss, errors=errors)


def gemm_share(run, best):
    """The `train_bert` cell's share of `best` GFLOP/s, or None."""
    for seconds, first, _ in run['cells']:
        if first.startswith(TRAIN_CALL) and seconds and run['vocab']:
            flops = TRAIN_STEPS * _batches.pretrain_step_flops(
                vocab_size=run['vocab'])
            return flops / seconds / 1e9 / best
    return None


def report(name, runs, best):
    """Print one notebook's table: a row a cell, a column a side."""
    sides = list(runs)
    print(f'\n{name}')
    print(f'  {"cell":<44}' + ''.join(f'{s[:22]:>22}' for s in sides))
    print(f'  {"":<44}' + f'{"time, peak Pss":>22}' * len(sides))
    firsts = runs[sides[0]][0]['cells']
    for i, (_, first, _) in enumerate(firsts):
        row = []
        for side in sides:
            # the run of median whole time stands for its side
            cells = _median_run(runs[side])['cells']
            seconds, _, peak = cells[i] if i < len(cells) else (None,) * 3
            memory = f'{peak / 2 ** 30:>6.2f} GB' if peak else f'{"-":>9}'
            row.append(f'{seconds:>9.1f} s {memory}'
                       if seconds is not None else f'{"-":>22}')
        print(f'  {first[:44]:<44}' + ''.join(row))
    lines = [('whole, from the first cell',
              lambda r: f"{r['whole']:.1f}s"),
             ('peak Pss, kernel and children',
              lambda r: f"{r['pss'] / 2 ** 30:.2f} GB"),
             ('largest process (Rss)',
              lambda r: f"{r['rss'] / 2 ** 30:.2f} GB")]
    for label, text in lines:
        print(f'  {label:<44}' + ''.join(
            f'{text(_median_run(runs[s])):>22}' for s in sides))
    if best:
        shares = [[gemm_share(r, best) for r in runs[s]] for s in sides]
        if all(None not in s for s in shares):
            print(f'  {"train_bert, share of the best GEMM":<44}'
                  + ''.join(f'{statistics.median(s):>22.0%}' for s in shares))
    for side in sides:
        for r in runs[side]:
            for error in r['errors']:
                print(f'  {side}: error: {error}')


def _median_run(runs):
    return sorted(runs, key=lambda r: r['whole'])[(len(runs) - 1) // 2]


def main(argv=None):
    args = parse_args(argv)
    best = None
    if not args.no_gemm:
        best = _gemm.print_machine()
    else:
        print(_machine.machine(), flush=True)
    with tempfile.TemporaryDirectory(prefix='bench-nb-rev-') as tmp:
        sides = {'ours': ROOT}
        platform = None
        if args.against:
            sides = {args.against: checkout_of(
                args.against, os.path.join(tmp, 'source')), 'ours': ROOT}
        elif args.platform:
            print(f'making the simulated {args.platform}...', flush=True)
            platform = _platform.make(args.platform, tmp, args.published)
            for line, why in sorted(platform.left_out.items()):
                print(f'  left out: {line}: {why}')
            print(f'  {len(platform.installed)} packages', flush=True)
            sides = {args.platform: None}
        runs = {name: {side: [] for side in sides}
                for name in args.notebooks}
        for turn in range(args.rounds):
            for name in args.notebooks:
                order = list(sides)[::-1 if turn % 2 else 1]
                for side in order:
                    run = run_notebook(name, sides[side], args.small,
                                       platform)
                    runs[name][side].append(run)
                    print(f'{name} on {side}: {run["whole"]:.1f} s, '
                          f'{run["pss"] / 2 ** 30:.2f} GB'
                          + (f', {len(run["errors"])} error(s)'
                             if run['errors'] else ''), flush=True)
    for name in args.notebooks:
        report(name, runs[name], best)
    return 1 if any(r['errors'] for n in runs.values() for s in n.values()
                    for r in s) else 0


if __name__ == '__main__':
    sys.exit(main())
