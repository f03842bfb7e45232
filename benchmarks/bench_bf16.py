"""The pretraining step's matrix products in bfloat16 against float32,
through MXNet's oneDNN, on this CPU.

::

    python benchmarks/bench_bf16.py
    python benchmarks/bench_bf16.py --isa avx2   # oneDNN without AVX-512

A measurement, not a change: d2l-bert computes in float32 everywhere.
For each product of the book's step (batch 512 x 64 tokens, 128 hidden
units, FFN 256, 2 blocks, the MLM output layer over a 20256-token
vocabulary) it times `FullyConnected` on float32 arrays and on the same
arrays cast to bfloat16 (``mx.nd.amp_cast``), alternated, and prints each
rate, the speed-up, and how far the bfloat16 result is from the float32
one (largest difference relative to the largest float32 value).  A CPU
with AVX-512 BF16 (``avx512_bf16`` in ``/proc/cpuinfo``) or AMX
(``amx_bf16``) runs bfloat16 products natively; elsewhere with AVX-512
oneDNN converts and is slower than float32; without AVX-512 it has none,
and the benchmark says so in one line.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402
import _gemm  # noqa: E402
import _machine  # noqa: E402  (before mxnet: sets the thread count)
import _options  # noqa: E402
import _timing  # noqa: E402

#: (name, rows, inputs, outputs, times per step) of the forward products
#: of the book's step: B*T = 32768 token rows, B*P = 5120 masked rows
_TOKENS = _common.BOOK['batch_size'] * _common.BOOK['max_len']
_MASKED = _common.BOOK['batch_size'] * _common.BOOK['num_preds']
_H, _F = _common.BOOK['num_hiddens'], _common.BOOK['ffn_num_hiddens']
PRODUCTS = (
    ('attention projections (q, k, v, o)', _TOKENS, _H, _H, 8),
    ('FFN, first layer', _TOKENS, _H, _F, 2),
    ('FFN, second layer', _TOKENS, _F, _H, 2),
    ('MLM hidden layer', _MASKED, _H, _H, 1),
    ('MLM output layer', _MASKED, _H, _common.BOOK['vocab_size'], 1),
)


def parse_args(argv=None):
    p = _options.arg_parser(__doc__, repeats=5, batch_size=512)
    return p.parse_args(argv)


def bf16_flags():
    """The CPU's bfloat16 flags in /proc/cpuinfo, e.g. 'avx512_bf16'."""
    try:
        with open('/proc/cpuinfo') as f:
            flags = next((line.split(':', 1)[1].split() for line in f
                          if line.startswith(('flags', 'Features'))), [])
    except OSError:
        flags = []
    found = [f for f in flags if 'bf16' in f]
    return ', '.join(found) or 'none'


def sides(rows, inputs, outputs):
    """float32 and bfloat16 products X (rows, inputs) W^T, and the
    largest difference of their results relative to the float32 one's
    largest magnitude."""
    import numpy as onp
    from mxnet import nd
    bf16 = onp.dtype([('bfloat16', onp.uint16)])
    X = nd.random.normal(shape=(rows, inputs))
    W = nd.random.normal(shape=(outputs, inputs), scale=inputs ** -0.5)
    b = nd.zeros((outputs,))
    Xb, Wb, bb = (nd.amp_cast(a, dtype=bf16) for a in (X, W, b))

    def f32():
        return nd.FullyConnected(X, W, b, num_hidden=outputs)

    def b16():
        return nd.FullyConnected(Xb, Wb, bb, num_hidden=outputs)
    exact = f32()
    gap = (nd.amp_cast(b16(), dtype='float32') - exact).abs().max()
    return {'float32': f32, 'bfloat16': b16}, float(
        (gap / exact.abs().max()).asscalar())


def bf16_runs():
    """Whether MXNet's oneDNN multiplies bfloat16 arrays on this CPU:
    MXNet 1.9.1's oneDNN has no bfloat16 `FullyConnected` without
    AVX-512 (it raises 'could not create a primitive descriptor')."""
    from mxnet.base import MXNetError
    try:
        sides(2, 4, 4)
    except MXNetError:
        return False
    return True


def main(argv=None):
    args = parse_args(argv)
    print(_machine.set_threads(args.threads, isa=args.isa))
    _gemm.print_machine(args.threads)
    import mxnet as mx
    print(f'MXNet {mx.__version__}; bfloat16 flags of this CPU: '
          f'{bf16_flags()}')
    if not bf16_runs():
        print(f"this CPU has no bfloat16 products in MXNet {mx.__version__}'s"
              f" oneDNN (they need AVX-512): nothing to compare")
        return 0
    print(f"{'product':36s}{'shape':>22s}{'f32 GF/s':>10s}"
          f"{'bf16 GF/s':>10s}{'speed-up':>9s}{'rel. gap':>10s}")
    total = {'float32': 0.0, 'bfloat16': 0.0}
    step_flops = 0.0
    for name, rows, inputs, outputs, count in PRODUCTS:
        rows = max(1, rows * args.batch_size // 512)   # the book's: 512
        fns, gap = sides(rows, inputs, outputs)
        res = _timing.alternate(fns, repeats=args.repeats, progress=False)
        flops = 2.0 * rows * inputs * outputs
        rate = {k: flops / res[k][0] / 1e9 for k in fns}
        for k in fns:
            total[k] += count * res[k][0]
        step_flops += count * flops
        shape = f'{rows}x{inputs} @ {inputs}x{outputs}'
        print(f'{name:36s}{shape:>22s}{rate["float32"]:10.0f}'
              f'{rate["bfloat16"]:10.0f}'
              f'{res["float32"][0] / res["bfloat16"][0]:8.2f}x'
              f'{gap:10.1e}')
    print(f'the forward products of one step ({step_flops / 1e9:.0f} '
          f"GFLOP): float32 {total['float32'] * 1e3:.0f} ms, bfloat16 "
          f"{total['bfloat16'] * 1e3:.0f} ms, "
          f"{total['float32'] / total['bfloat16']:.2f}x")
    print(_machine.machine())
    return 0


if __name__ == '__main__':
    sys.exit(main())
