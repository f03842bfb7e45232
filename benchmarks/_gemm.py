"""The machine's best float32 matrix multiply, which a benchmark's
arithmetic is compared with.

- `gemm_shape`: the MLM output layer's at the book's settings (or
  ``D2L_BERT_BENCH_GEMM_ROWS``'s rows);
- `gemm_rate`: one GEMM through oneDNN, as Gluon's `Dense` runs it;
- `gemm_rates`, `best_gemm`: every library's rate (oneDNN's, MXNet's
  `np.dot`, NumPy's, SciPy's), measured in a process of its own (this
  file run with ``--gemm-rates``), and the best;
- `print_machine`: the CPU and that best, printed first.
"""
import argparse
import json
import os
import subprocess
import sys

from _common import BOOK, PRESETS
from _machine import machine, set_threads
from _timing import timed


def gemm_shape():
    """``(M, K, N)`` of every GEMM timed here, (M, K) @ (K, N): the MLM
    output layer's at the book's settings (`BOOK`), 5120 rows (512
    sequences of 10 predictions) of 128 times 128 x 20256, or the rows
    ``D2L_BERT_BENCH_GEMM_ROWS`` gives (the test suite runs the scripts
    at 512, to check their logic rather than the machine)."""
    name = PRESETS.BENCH_GEMM_ROWS_ENV
    rows = os.environ.get(name, str(BOOK['batch_size'] * BOOK['num_preds']))
    if not rows.isdigit() or int(rows) < 1:
        raise SystemExit(f'{name} must be a positive number of rows, got '
                         f'{rows!r}')
    return int(rows), BOOK['num_hiddens'], BOOK['vocab_size']


def gemm_rate():
    """Return a function that runs one float32 GEMM and its FLOP count.

    The shapes are `gemm_shape()`'s, the MLM output layer's, through
    `npx.fully_connected` (oneDNN), the kernel Gluon's `Dense` uses.  The
    output array is reused, so no time goes to allocation.
    """
    import mxnet as mx
    from mxnet import np
    M, K, N = gemm_shape()
    X = np.random.uniform(-1, 1, size=(M, K))
    W = np.random.uniform(-1, 1, size=(N, K))
    out = np.zeros((M, N))

    def run():
        mx.nd.FullyConnected(X.as_nd_ndarray(), W.as_nd_ndarray(),
                             no_bias=True, num_hidden=N,
                             out=out.as_nd_ndarray())
        out.wait_to_read()
    return run, 2 * M * K * N


def gemm_rates(repeats=3):
    """GFLOP/s of a float32 GEMM of `gemm_shape()` by each library of this
    process, the fastest of `repeats` after one untimed call, each
    writing into an output it reuses.

    Run after `set_threads` (MXNet imported afterwards): the libraries'
    threads are then those the benchmarks run with.

    Returns
    -------
    dict of str -> float
        "oneDNN FullyConnected" (`gemm_rate`, what Gluon's `Dense`
        runs), "MXNet np.dot", "NumPy matmul" and "SciPy sgemm" (when
        SciPy imports).
    """
    import numpy as onp
    from mxnet import np
    M, K, N = gemm_shape()
    X = onp.random.uniform(-1, 1, (M, K)).astype('float32')
    W = onp.random.uniform(-1, 1, (K, N)).astype('float32')
    fc, _ = gemm_rate()
    X_mx, W_mx, out_mx = np.array(X), np.array(W), np.zeros((M, N))
    out = onp.empty((M, N), 'float32')
    runs = {'oneDNN FullyConnected': fc,
            'MXNet np.dot': lambda: np.dot(X_mx, W_mx,
                                           out=out_mx).wait_to_read(),
            'NumPy matmul': lambda: onp.matmul(X, W, out=out)}
    try:
        from scipy.linalg.blas import sgemm
        X_f, W_f = onp.asfortranarray(X), onp.asfortranarray(W)
        out_f = onp.empty((M, N), 'float32', order='F')
        runs['SciPy sgemm'] = lambda: sgemm(1.0, X_f, W_f, c=out_f,
                                             overwrite_c=True)
    except ImportError:
        pass
    rates = {}
    for name, run in runs.items():
        run()
        best = min(timed(run)[0] for _ in range(repeats))
        rates[name] = 2 * M * K * N / best / 1e9
    return rates


def best_gemm(threads=None):
    """The machine's best float32 GEMM rate: `gemm_rates` measured in a
    process of its own (after `set_threads(threads)`, with the
    instruction set this process's environment holds).

    Returns
    -------
    best : float
        The highest of the libraries' rates, GFLOP/s.
    line : str
        Every library's rate and the best, to print.
    """
    command = [sys.executable, os.path.abspath(__file__), '--gemm-rates']
    if threads is not None:
        command += ['--threads', str(threads)]
    done = subprocess.run(command, capture_output=True, text=True,
                          timeout=600)
    if done.returncode != 0:
        raise RuntimeError('measuring the GEMMs failed:\n' + done.stderr)
    rates = json.loads(done.stdout.strip().splitlines()[-1])
    name = max(rates, key=rates.get)
    M, K, N = gemm_shape()
    return rates[name], (
        f'float32 GEMM {M}x{K} @ {K}x{N}, fastest of 3: ' +
        ', '.join(f'{n} {r:.0f}' for n, r in rates.items()) +
        f' GFLOP/s; best {rates[name]:.0f} ({name})')


def print_machine(threads=None):
    """Print the CPU model (`cpu_model`), the cores and the load
    (`machine`), and the machine's best float32 GEMM (`best_gemm`), at
    the start of a benchmark; return that best rate in GFLOP/s, the rate
    a benchmark's arithmetic is compared with."""
    print(machine(), flush=True)
    best, line = best_gemm(threads)
    print(line, flush=True)
    return best


if __name__ == '__main__':
    # `best_gemm`'s process: the libraries' GEMM rates, as JSON
    p = argparse.ArgumentParser()
    p.add_argument('--gemm-rates', action='store_true')
    p.add_argument('--threads', type=int, default=None)
    options = p.parse_args()
    # the instruction set is the environment's, inherited
    print(set_threads(options.threads), file=sys.stderr)
    print(json.dumps(gemm_rates()))
