"""Time one pretraining step: PyTorch's Hugging Face BERT against d2l_bert.

The reference for d2l_bert's training step is PyTorch with Hugging
Face's `BertForPreTraining` at the same configuration, with the
prediction head on the 10 gathered positions as the book does.  This
script measures that reference on this machine, taking turns with
d2l_bert's step, so that the ratio compares the two under the same load.

How to run
----------
torch and transformers are not dependencies of the project: install them
in a separate virtual environment and point the script at its Python::

    python -m venv /tmp/hfref
    /tmp/hfref/bin/pip install torch==2.13.0 \\
        --index-url https://download.pytorch.org/whl/cpu
    /tmp/hfref/bin/pip install transformers==5.23.0
    python benchmarks/bench_torch.py --torch-python /tmp/hfref/bin/python
    python benchmarks/bench_torch.py --torch-python ... --threads 1

Without ``--torch-python`` the current interpreter is used if it can
import both; otherwise the script says how to install them and exits
with status 2.

What is timed
-------------
The book's pretraining settings (`_common.BOOK`: batch 512, max_len 64,
num_hiddens 128, ffn_num_hiddens 256, 2 heads, 2 blocks, vocabulary
20256, 10 predictions per sequence, dropout 0.2) and Adam with learning
rate 0.01, on the same random batch (`_batches.book_batch`).

- d2l_bert: what `d2l_bert.book.pretraining.train_bert` runs for one step
  (forward, both losses, backward, `trainer.step(1)`, reading the two
  losses back), as in ``bench_pretrain_step.py``.
- PyTorch: `transformers.BertForPreTraining` (train mode, dropout 0.2 on
  hidden states and attention), but with the MLM head applied only to the
  gathered `pred_positions` (B*P rows, not B*T): ``model.bert`` encodes,
  the hidden states at `pred_positions` go through
  ``model.cls.predictions``, the pooled output through
  ``model.cls.seq_relationship``; the MLM cross-entropy is weighted by
  `mlm_weights` and divided by their sum plus 1e-8, the NSP one averaged,
  as the book's `_get_batch_loss_bert`; then backward, `torch.optim.Adam`
  (lr 0.01) and reading the two losses back.  `torch.set_num_threads` gets
  our thread count.

The Hugging Face model is not quite the book's: it adds a LayerNorm after
the embeddings, uses GELU (the book: ReLU in the FFN), ties the MLM
decoder to the token embedding and initializes differently.  The matrix
products are the same (the book also has a tanh layer before NSP and a
hidden layer in its MLM head), so both steps are credited with
`_batches.pretrain_step_flops`.

How the two take turns
----------------------
The PyTorch step runs in a child process (the ``--torch-python``
interpreter, this file with ``--worker``), driven through a pipe: each
round runs our step here, then asks the child for one step and waits for
its own timing (wall and CPU seconds, measured inside the child), then a
float32 GEMM of the MLM output layer's shape in each framework.  One
process would be fragile: MXNet and torch each bring a ``libgomp.so.1``;
loaded together, the first one loaded serves both (importing mxnet first
left torch on MXNet's OpenMP runtime with 1 thread instead of 2), and the
project's environment cannot import torch anyway.  While one side works
the other blocks on the pipe; a short pause (``--pause``) between turns
lets threads that a side leaves spinning go to sleep before the other
starts.  Medians of the rounds are reported.
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
import _report  # noqa: E402
import _steps  # noqa: E402
import _timing  # noqa: E402

def parse_args(argv=None):
    p = _options.arg_parser(__doc__, repeats=5,
                            batch_size=_common.BOOK['batch_size'],
                            threads_help='threads for both (default: every '
                                         'core)')
    p.add_argument('--torch-python', default=None,
                   help='a Python that can import torch and transformers '
                        '(default: this one, if it can)')
    p.add_argument('--warmup', type=int, default=1,
                   help='untimed steps of each before timing (1)')
    p.add_argument('--pause', type=float, default=0.2,
                   help='seconds of idle between turns (0.2)')
    p.add_argument('--worker', action='store_true', help=argparse.SUPPRESS)
    return p.parse_args(argv)


# ---------------------------------------------------------------------
# The child: PyTorch and transformers, no MXNet
# ---------------------------------------------------------------------

def _torch_step_function(cfg, batch, num_threads):
    """Build the Hugging Face model and return ``(fns, info)``: `fns` the
    ``step`` and ``gemm`` commands of `_children.serve_torch`."""
    import torch
    import transformers
    from torch.nn import functional as F
    torch.set_num_threads(num_threads)
    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=cfg['vocab_size'], hidden_size=cfg['num_hiddens'],
        num_hidden_layers=cfg['num_blks'],
        num_attention_heads=cfg['num_heads'],
        intermediate_size=cfg['ffn_num_hiddens'],
        hidden_dropout_prob=cfg['dropout'],
        attention_probs_dropout_prob=cfg['dropout'],
        max_position_embeddings=1000)              # the book's max_len
    model = transformers.BertForPreTraining(config)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    (tokens_X, segments_X, valid_lens_x, pred_positions_X, mlm_weights_X,
     mlm_Y, nsp_y) = [torch.tensor(a) for a in batch]
    tokens_X, segments_X = tokens_X.long(), segments_X.long()
    B, T = tokens_X.shape
    P = pred_positions_X.shape[1]
    attention_mask = (torch.arange(T)[None, :]
                      < valid_lens_x[:, None]).long()       # (B, T)
    batch_idx = torch.arange(B).repeat_interleave(P)        # (B*P,)
    pred_positions = pred_positions_X.long().reshape(-1)    # (B*P,)
    mlm_Y, nsp_y = mlm_Y.long().reshape(-1), nsp_y.long()
    mlm_weights = mlm_weights_X.reshape(-1)                 # (B*P,)

    def losses():
        out = model.bert(input_ids=tokens_X, token_type_ids=segments_X,
                         attention_mask=attention_mask)
        masked_X = out.last_hidden_state[batch_idx, pred_positions]
        mlm_Y_hat = model.cls.predictions(masked_X)         # (B*P, V)
        nsp_Y_hat = model.cls.seq_relationship(out.pooler_output)  # (B, 2)
        mlm_l = F.cross_entropy(mlm_Y_hat, mlm_Y, reduction='none')
        mlm_l = (mlm_l * mlm_weights).sum() / (mlm_weights.sum() + 1e-8)
        nsp_l = F.cross_entropy(nsp_Y_hat, nsp_y)
        return mlm_l, nsp_l

    def step():
        optimizer.zero_grad(set_to_none=True)
        mlm_l, nsp_l = losses()
        (mlm_l + nsp_l).backward()
        optimizer.step()
        return mlm_l.item(), nsp_l.item()

    # the MLM output layer's product at the book's settings, (B*P, H) @
    # (H, V): 5120 x 128 times 128 x 20256
    rows = _common.BOOK['batch_size'] * _common.BOOK['num_preds']
    inner, cols = _common.BOOK['num_hiddens'], _common.BOOK['vocab_size']
    X = torch.empty(rows, inner).uniform_(-1, 1)
    W = torch.empty(cols, inner).uniform_(-1, 1)
    Y = torch.empty(rows, cols)

    def gemm():
        torch.matmul(X, W.t(), out=Y)

    model.eval()
    with torch.no_grad():
        before = [float(v) for v in losses()]
    model.train()
    # Plain `str`: `torch.__version__` would need torch to unpickle
    info = dict(torch=str(torch.__version__),
                transformers=str(transformers.__version__),
                threads=torch.get_num_threads(),
                python=sys.version.split()[0], losses=before)
    return dict(step=step, gemm=gemm), info


def worker():
    """Serve the parent (`_children.serve_torch`): ``('setup', cfg, batch,
    num_threads)``, ``('step',)``, ``('gemm',)``, ``('quit',)``; timings
    are ``(wall seconds, CPU seconds of this process)``."""
    return _children.serve_torch(_torch_step_function)


# ---------------------------------------------------------------------
# The parent: d2l_bert, and the child through a pipe
# ---------------------------------------------------------------------

def install_hint(python):
    return (f'torch and transformers cannot be imported by {python}.\n'
            'They are not dependencies of d2l-bert; install them in a '
            'separate virtual environment:\n'
            '    python -m venv /tmp/hfref\n'
            '    /tmp/hfref/bin/pip install torch==2.13.0 --index-url '
            'https://download.pytorch.org/whl/cpu\n'
            '    /tmp/hfref/bin/pip install transformers==5.23.0\n'
            'then run this script with --torch-python '
            '/tmp/hfref/bin/python')


def build_ours(cfg, batch):
    """Return d2l_bert's step and its losses before training."""
    from mxnet import init, np, npx

    import d2l_bert

    npx.set_np()  # as the book's first cell does

    V = cfg['vocab_size']
    net = d2l_bert.BERTModel(V, cfg['num_hiddens'], cfg['ffn_num_hiddens'],
                             cfg['num_heads'], cfg['num_blks'],
                             cfg['dropout'])
    net.initialize(init.Xavier())
    return _steps.ours_step(net, V, [np.array(a) for a in batch])


def main(argv=None):
    args = parse_args(argv)
    if args.worker:
        return worker()
    python = _children.find_torch_python(args.torch_python)
    if python is None:
        print(install_hint(sys.executable), file=sys.stderr)
        return 2
    print(_machine.set_threads(args.threads, isa=args.isa))
    num_threads = int(os.environ.get('OMP_NUM_THREADS', '1'))
    best = _gemm.print_machine(args.threads)
    cfg = dict(_common.BOOK, batch_size=args.batch_size)
    batch = _batches.book_batch(cfg['batch_size'], cfg['max_len'],
                                cfg['vocab_size'], cfg['num_preds'])

    try:
        child = _children.TorchChild(python, __file__)
    except OSError as e:
        print(f'cannot run --torch-python {python}: {e}', file=sys.stderr)
        return 2
    try:
        try:
            info = child.ask('setup', cfg, [a.tolist() for a in batch],
                             num_threads)[1]
        except RuntimeError as e:
            if 'No module named' in str(e):
                print(install_hint(python), file=sys.stderr)
                return 2
            raise
        return run(args, cfg, batch, child, info, num_threads, best)
    finally:
        child.close()


def run(args, cfg, batch, child, info, num_threads, best):
    print(f"PyTorch {info['torch']}, transformers {info['transformers']}, "
          f"{info['threads']} threads (Python {info['python']}, child "
          f'process); d2l_bert: {num_threads} threads')
    ours_step, ours_l = build_ours(cfg, batch)
    gemm, gemm_flops = _gemm.gemm_rate()
    t_l = info['losses']
    print(f'losses before training, dropout off (mlm, nsp): torch '
          f'{t_l[0]:.5f}, {t_l[1]:.5f}; ours {ours_l[0]:.5f}, '
          f'{ours_l[1]:.5f}')

    def torch_turn(command):
        return lambda: child.ask(command)[1:3]          # (wall s, CPU s)
    turns = {'ours': lambda: _timing.timed(ours_step),
             'torch': torch_turn('step'),
             'gemm': lambda: _timing.timed(gemm),
             'torch gemm': torch_turn('gemm')}
    times, wall, cpu = _timing.take_turns(turns, args.repeats, args.warmup,
                                          args.pause)

    flops = _batches.pretrain_step_flops(**cfg)
    # Peaks from the fastest GEMM round of each, as bench_pretrain_step.py
    fastest = {n: min(w for w, _ in t) for n, t in times.items()}
    wall['gemm'], wall['torch gemm'] = fastest['gemm'], fastest['torch gemm']
    peak = gemm_flops / wall['gemm'] / 1e9
    torch_peak = gemm_flops / wall['torch gemm'] / 1e9
    print(f"\nstep arithmetic: {flops / 1e9:.0f} GFLOP; float32 GEMM "
          f"5120x128 @ 128x20256 in this run: MXNet {peak:.0f} GFLOP/s "
          f"({wall['gemm'] * 1e3:.0f} ms), torch {torch_peak:.0f} GFLOP/s "
          f"({wall['torch gemm'] * 1e3:.0f} ms); shares below are of "
          f'MXNet\'s, as in bench_pretrain_step.py')
    print(f"{'':22s}{'ms/step':>9s}{'pairs/s':>9s}{'GFLOP/s':>9s}"
          f"{'of GEMM':>9s}{'CPU s':>8s}")
    for name, label in (('torch', 'HF BERT (PyTorch)'),
                        ('ours', 'd2l_bert (MXNet)')):
        t = wall[name]
        rate = flops / t / 1e9
        print(f'{label:22s}{t * 1e3:9.0f}{cfg["batch_size"] / t:9.0f}'
              f'{rate:9.1f}{100 * rate / peak:8.0f}%{cpu[name]:8.2f}')
    _report.print_against_best(
        {label: flops / wall[name] / 1e9 for name, label in (
            ('torch', 'HF BERT (PyTorch)'), ('ours', 'd2l_bert (MXNet)'))},
        best)
    print(f"ratio torch/ours: {wall['torch'] / wall['ours']:.2f} in wall "
          f"time, {cpu['torch'] / cpu['ours']:.2f} in CPU seconds (above "
          f'1: d2l_bert is faster)')
    return 0


if __name__ == '__main__':
    sys.exit(main())
