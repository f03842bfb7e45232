"""Time `d2l-bert pretrain` as a user runs it, against the machine's best
float32 GEMM.

::

    python benchmarks/bench_pretrain_run.py                # embedded corpus
    python benchmarks/bench_pretrain_run.py --steps 60 --repeats 5
    python benchmarks/bench_pretrain_run.py --isa avx2

Each round runs ``d2l-bert pretrain --steps N`` in a process of its own
(the embedded corpus shipped with d2l-bert, its vocabulary of 2201
tokens, the book's model and batch, a fresh output directory) and reads
the sentence pairs per second the command prints, then measures the GEMM
rates (`_gemm.best_gemm`) in another process: a machine shared with
other work slows both alike.  The rate becomes GFLOP/s with the book's
arithmetic of a step at the corpus's vocabulary
(`_batches.pretrain_step_flops`), and a share of the best GEMM of the same
round and of the fastest GEMM of the run.  `bench_pretrain_step.py`
times the same step alone, at the book's vocabulary (20256) or at the
corpus's (``--vocab corpus``), against d2l 1.0.3's.
"""
import os
import re
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _batches  # noqa: E402
import _common  # noqa: E402
import _gemm  # noqa: E402
import _machine  # noqa: E402
import _options  # noqa: E402

#: The embedded corpus's vocabulary, as `d2l-bert pretrain` builds it;
#: the command prints its size, which is checked against this
CORPUS_VOCAB = 2201


def parse_args(argv=None):
    p = _options.arg_parser(__doc__, repeats=3,
                            batch_size=_common.BOOK['batch_size'])
    p.add_argument('--steps', type=int, default=30,
                   help='steps of each run (30)')
    return p.parse_args(argv)


def run_pretrain(args, out_dir):
    """Run the command once; return its sentence pairs per second and the
    vocabulary size it printed."""
    command = [sys.executable, '-m', 'd2l_bert', 'pretrain', '--steps',
               str(args.steps), '--batch-size', str(args.batch_size),
               '--out', out_dir]
    if args.threads is not None:
        command += ['--threads', str(args.threads)]
    done = subprocess.run(command, capture_output=True, text=True,
                          timeout=3600)
    if done.returncode != 0:
        raise RuntimeError(f'{" ".join(command)} failed:\n{done.stderr}')
    rate = re.search(r'([\d.]+) sentence pairs/sec', done.stdout)
    vocab = re.search(r'vocabulary of (\d+) tokens', done.stdout)
    if rate is None or vocab is None:
        raise RuntimeError(f'no rate or vocabulary in:\n{done.stdout}')
    return float(rate.group(1)), int(vocab.group(1))


def main(argv=None):
    args = parse_args(argv)
    print(_machine.hold_isa(args.isa))
    print(_machine.machine(), flush=True)
    flops = _batches.pretrain_step_flops(
        **dict(_common.BOOK, batch_size=args.batch_size,
               vocab_size=CORPUS_VOCAB))
    print(f'd2l-bert pretrain --steps {args.steps}, batch {args.batch_size}'
          f', embedded corpus; step arithmetic {flops / 1e9:.1f} GFLOP')
    rows = []
    with tempfile.TemporaryDirectory(prefix='d2l-bert-bench-') as tmp:
        for k in range(args.repeats):
            pairs, vocab = run_pretrain(args, os.path.join(tmp, str(k)))
            if vocab != CORPUS_VOCAB:
                raise RuntimeError(f'the corpus has {vocab} tokens, not '
                                   f'{CORPUS_VOCAB}: update CORPUS_VOCAB')
            best, line = _gemm.best_gemm(args.threads)
            rate = pairs / args.batch_size * flops / 1e9
            rows.append((pairs, rate, best))
            print(f'  round {k + 1}/{args.repeats}: {pairs:.1f} pairs/s, '
                  f'{rate:.1f} GFLOP/s, {100 * rate / best:.0f}% of the '
                  f'best GEMM; {line}', flush=True)
    pairs, rate, _ = (statistics.median(c) for c in zip(*rows))
    peak = max(best for *_, best in rows)
    print(f'median: {pairs:.1f} sentence pairs/s, {rate:.1f} GFLOP/s; '
          f'{100 * statistics.median(r / b for _, r, b in rows):.0f}% of '
          f"the same round's best GEMM, {100 * rate / peak:.0f}% of the "
          f"run's fastest ({peak:.0f} GFLOP/s)")
    print('load average at the end: '
          + ', '.join(f'{x:.1f}' for x in os.getloadavg()))
    return 0


if __name__ == '__main__':
    sys.exit(main())
