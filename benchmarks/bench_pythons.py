"""The same d2l-bert code on two Pythons: pretraining step and encoding.

::

    python benchmarks/bench_pythons.py --python .venv/bin/python \\
        --python /path/to/py313-clone/.venv/bin/python --isa avx2

Issue 25 asks that moving from Python 3.11 (NumPy 1.23.5, numba 0.58) to
3.13 (NumPy 2.5, numba 0.68) cost at most 10% of speed.  Each interpreter
runs in a child process of its own (its own MXNet, NumPy and numba), both
on this checkout's `d2l_bert` (``PYTHONPATH``), and they take turns: each
round times one pretraining step at the book's settings (batch 512 x 64,
`d2l-bert pretrain`'s step, `_steps.ours_step`) and one MiniLM encoding
(batch 64 x 128, `load_pretrained_bert('minilm')`) in the first child,
then the same in the second.  Medians of the rounds are printed, with the
ratio of each to the first interpreter's.  Each venv needs d2l-bert's
test set-up (the MiniLM checkpoint): ``python3.X run.py setup --test`` in
a clone.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TASKS = ('pretrain', 'minilm')


def worker(isa):
    """The child: build both tasks, then time the one named on each line
    of stdin and answer with a JSON line."""
    sys.path.insert(0, HERE)
    import _batches
    import _common
    import _machine
    import _steps
    import _timing
    _machine.set_threads(isa=isa)            # before mxnet
    from mxnet import init, np, npx
    import bench_minilm
    import d2l_bert
    npx.set_np()
    cfg = _common.BOOK
    batch = [np.array(a) for a in _batches.book_batch(
        cfg['batch_size'], cfg['max_len'], cfg['vocab_size'],
        cfg['num_preds'])]
    net = d2l_bert.BERTModel(cfg['vocab_size'], cfg['num_hiddens'],
                             cfg['ffn_num_hiddens'], cfg['num_heads'],
                             cfg['num_blks'], cfg['dropout'])
    net.initialize(init.Xavier())
    net(*batch[:2], batch[2], batch[3])
    step, _ = _steps.ours_step(net, cfg['vocab_size'], batch)
    bert = d2l_bert.load_pretrained_bert('minilm')
    tokens, segments, lens = [np.array(a) for a in
                              bench_minilm.token_batch(64, 128)]
    tasks = {'pretrain': step,
             'minilm': lambda: bert(tokens, segments, lens)[0].wait_to_read()}
    import mxnet, numpy, numba, platform
    print(json.dumps({'ready': f'Python {platform.python_version()}, '
                      f'NumPy {numpy.__version__}, MXNet '
                      f'{mxnet.__version__}, numba {numba.__version__}'}),
          flush=True)
    for line in sys.stdin:
        seconds, _ = _timing.timed(tasks[line.strip()])
        print(json.dumps({'seconds': seconds}), flush=True)


class Child:
    def __init__(self, python, isa):
        env = dict(os.environ, PYTHONPATH=ROOT)
        self.proc = subprocess.Popen(
            [python, os.path.abspath(__file__), '--worker', '--isa', isa],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
            universal_newlines=True, cwd=ROOT)
        self.info = self.read()['ready']

    def read(self):
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError('a child ended; see its messages above')
        return json.loads(line)

    def time(self, task):
        self.proc.stdin.write(task + '\n')
        self.proc.stdin.flush()
        return self.read()['seconds']

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--python', action='append', default=[],
                   help='an interpreter (give two; the first is the '
                        'reference)')
    p.add_argument('--repeats', type=int, default=7)
    p.add_argument('--isa', choices=('native', 'avx2'), default='native')
    p.add_argument('--worker', action='store_true', help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        return worker(args.isa)
    if len(args.python) < 2:
        p.error('give two interpreters: --python A --python B')
    sys.path.insert(0, HERE)
    import _gemm
    import _machine
    if args.isa == 'avx2':
        _machine.hold_isa('avx2')     # for the GEMMs' process
    _gemm.print_machine()
    load = os.getloadavg()[0]
    children = [Child(python, args.isa) for python in args.python]
    for i, child in enumerate(children):
        print(f'[{i}] {child.info}')
    times = {(i, t): [] for i in range(len(children)) for t in TASKS}
    for r in range(args.repeats + 1):        # the first round warms up
        for i, child in enumerate(children):
            for task in TASKS:
                seconds = child.time(task)
                if r:
                    times[i, task].append(seconds)
                time.sleep(0.2)
        if r:
            print(f'  round {r}/{args.repeats}: ' + ', '.join(
                f'[{i}] {t} {times[i, t][-1] * 1e3:.0f} ms'
                for i in range(len(children)) for t in TASKS), flush=True)
    for child in children:
        child.close()
    print(f'\nmedians of {args.repeats} rounds (load average at the start '
          f'{load:.1f}, isa {args.isa}):')
    print('| task | ' + ' | '.join(c.info.split(',')[0]
                                   for c in children) + ' | ratio |')
    print('|---|' + '---:|' * (len(children) + 1))
    for task in TASKS:
        med = [statistics.median(times[i, task])
               for i in range(len(children))]
        ratio = med[-1] / med[0]
        print(f'| {task} | ' + ' | '.join(f'{m * 1e3:.0f} ms' for m in med)
              + f' | {ratio:.3f} |')
    return 0


if __name__ == '__main__':
    sys.exit(main())
