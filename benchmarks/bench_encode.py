"""Time encoding (forward only): d2l 1.0.3's `BERTModel` against ours.

::

    python benchmarks/bench_encode.py               # all cores
    python benchmarks/bench_encode.py --threads 1
    python benchmarks/bench_encode.py --profile     # where time goes

The book's small BERT (vocabulary 20256, 128 hidden units, 2 heads, 2
blocks) encodes a batch of 64 sequences of 128 tokens, as `BERTModel`
does without `pred_positions`: the encodings and the NSP scores.  Ours is
the fast twin (`d2l_bert.fast.accelerate(net, kernels=False)`: one graph,
MXNet's fused attention operators; the compiled loops pay off in training,
not here); a third row shows it after
Gluon's ``optimize_for(..., backend='MKLDNN')`` (oneDNN's fused inference
operators; no backward pass).  All start from the same parameters and
their encodings are compared.  They and a float32 GEMM take turns in one
process; medians are reported.  MXNet's idle OpenMP threads keep
libgomp's default spin unless ``GOMP_SPINCOUNT`` is set: the short spin
that ``set_threads()`` can set is for the compiled loops of training, and
it slowed d2l's encoding (many small operators) more than ours.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _batches  # noqa: E402
import _common  # noqa: E402
import _gemm  # noqa: E402
import _machine  # noqa: E402  (before mxnet: sets the thread count)
import _options  # noqa: E402
import _profile  # noqa: E402
import _report  # noqa: E402
import _timing  # noqa: E402


def parse_args(argv=None):
    p = _options.arg_parser(__doc__, repeats=7, batch_size=64)
    p.add_argument('--seq-len', type=int, default=128)
    p.add_argument('--profile', action='store_true',
                   help="print MXNet's operator profile of one call of "
                        'each model instead of timing')
    p.add_argument('--top', type=int, default=15)
    return p.parse_args(argv)


def build(args):
    """Return the two encode functions and the largest output gap."""
    import mxnet as mx
    from mxnet import init, np, npx
    from d2l import mxnet as d2l

    import d2l_bert

    npx.set_np()  # as the book's first cell does

    cfg = dict(_common.BOOK, batch_size=args.batch_size,
               max_len=args.seq_len)
    V = cfg['vocab_size']
    tokens, segments, valid_lens, pred_positions = [
        np.array(a) for a in _batches.book_batch(
            cfg['batch_size'], cfg['max_len'], V, cfg['num_preds'])[:4]]
    model_args = (V, cfg['num_hiddens'], cfg['ffn_num_hiddens'],
                  cfg['num_heads'], cfg['num_blks'], cfg['dropout'])
    mx.random.seed(0)
    ref = d2l.BERTModel(*model_args)
    ref.initialize(init.Xavier())
    # One call with `pred_positions` gives every parameter its shape
    ref(tokens, segments, valid_lens, pred_positions)
    ours = d2l_bert.BERTModel(*model_args)
    ours.initialize(init.Xavier())
    ours(tokens, segments, valid_lens, pred_positions)
    ours_params = ours._collect_params_with_prefix()
    for name, p in ref._collect_params_with_prefix().items():
        ours_params[name].set_data(p.data())
    ours = d2l_bert.fast.accelerate(ours, kernels=False)

    # The same model, its graph rewritten by oneDNN's inference passes
    # (fused operators), which Gluon offers with `optimize_for`
    onednn = d2l_bert.BERTModel(*model_args)
    onednn.initialize(init.Xavier())
    onednn(tokens, segments, valid_lens, pred_positions)
    onednn_params = onednn._collect_params_with_prefix()
    for name, p in ours_params.items():
        onednn_params[name].set_data(p.data())
    onednn = d2l_bert.fast.accelerate(onednn, kernels=False)
    onednn.optimize_for(tokens, segments, valid_lens, backend='MKLDNN',
                        static_alloc=True, static_shape=True)

    def d2l_encode():
        return ref(tokens, segments, valid_lens)[0]

    def ours_encode():
        return ours(tokens, segments, valid_lens)[0]

    def onednn_encode():
        return onednn(tokens, segments, valid_lens)[0]
    gap = max(float(abs(d2l_encode() - f()).max())
              for f in (ours_encode, onednn_encode))
    return d2l_encode, ours_encode, onednn_encode, gap, cfg


def main(argv=None):
    args = parse_args(argv)
    # No compiled loops run here, so libgomp keeps its default spin: the
    # short one `set_threads()` sets slowed d2l's imperative encoding
    threads = _machine.set_threads(args.threads, short_spin=False,
                                   isa=args.isa)
    if args.profile:
        os.environ['MXNET_EXEC_BULK_EXEC_INFERENCE'] = '0'
    print(threads)
    best = _gemm.print_machine(args.threads)
    d2l_encode, ours_encode, onednn_encode, gap, cfg = build(args)
    print(f"largest difference from d2l's encodings: {gap:.2e}")
    if args.profile:
        _profile.profile(d2l_encode, 'd2l 1.0.3 BERTModel encoding',
                         args.top)
        _profile.profile(ours_encode, 'd2l_bert encoding', args.top)
        return 0
    gemm, gemm_flops = _gemm.gemm_rate()
    res = _timing.alternate({'d2l': d2l_encode, 'ours': ours_encode,
                             'onednn': onednn_encode, 'gemm': gemm},
                            repeats=args.repeats)
    flops = _batches.encode_flops(**cfg)
    peak = gemm_flops / min(res['gemm'][1]) / 1e9   # the fastest round
    print(f"\nencoding arithmetic: {flops / 1e9:.1f} GFLOP "
          f"({cfg['batch_size']} x {cfg['max_len']} tokens); float32 GEMM "
          f"peak in this run: {peak:.0f} GFLOP/s (fastest of "
          f"{len(res['gemm'][1])} rounds)")
    print(f"{'':18s}{'ms/batch':>9s}{'seqs/s':>9s}{'GFLOP/s':>9s}"
          f"{'of GEMM':>9s}{'CPU s':>8s}")
    for name, label in (('d2l', 'd2l 1.0.3'), ('ours', 'd2l_bert'),
                        ('onednn', '+ optimize_for')):
        t = res[name][0]
        rate = flops / t / 1e9
        print(f'{label:18s}{t * 1e3:9.0f}{cfg["batch_size"] / t:9.0f}'
              f'{rate:9.1f}{100 * rate / peak:8.0f}%{res[name][2]:8.2f}')
    _report.print_against_best(
        {label: flops / res[name][0] / 1e9 for name, label in (
            ('d2l', 'd2l 1.0.3'), ('ours', 'd2l_bert'),
            ('onednn', '+ optimize_for'))}, best)
    print(f"speed-up of d2l_bert over d2l 1.0.3: "
          f"{res['d2l'][0] / res['ours'][0]:.2f}x (accelerate), "
          f"{res['d2l'][0] / res['onednn'][0]:.2f}x "
          "(optimize_for(..., backend='MKLDNN'))")
    return 0


if __name__ == '__main__':
    sys.exit(main())
