"""Time one pretraining step: d2l 1.0.3's against d2l_bert's two.

::

    python benchmarks/bench_pretrain_step.py --isa avx2    # all cores
    python benchmarks/bench_pretrain_step.py --threads 1
    python benchmarks/bench_pretrain_step.py --one-process # the old way
    python benchmarks/bench_pretrain_step.py --profile     # where time goes
    python benchmarks/bench_pretrain_step.py --vocab corpus  # 2201 outputs

At the book's settings (batch 512, max_len 64, the small BERT, vocabulary
20256, 10 predictions per sequence, Adam with learning rate 0.01), one
step is: the forward pass and both losses as `_get_batch_loss_bert`
computes them, the backward pass, `trainer.step(1)` and reading the two
losses back.  d2l's step is the book's code on d2l 1.0.3's model.  Ours
are two: the command line's step (``d2l-bert pretrain``:
`d2l_bert.fast.batch_loss`, model and losses in one graph) and the book's
own loop (`_get_batch_loss_bert`, as `train_bert` and the pretraining
notebook run it) on ``d2l_bert.fast.accelerate(net)`` with
``d2l_bert.fast.accelerate(loss)``.  All three models
start from the same parameters, on the same batch: by default the first
batch of WikiText (the embedded corpus: its sentence pairs, lengths,
masks and predictions; the model keeps the book's 20256 outputs, or
with ``--vocab corpus`` the corpus's own 2201, as ``d2l-bert pretrain``
trains it), or ``--batch random``, lengths spread evenly.

Each step and a float32 GEMM of the MLM output layer's shape run in a
process of their own, as a user runs them, taking turns (`in_processes`),
so that a machine shared with other work slows them alike; medians are
reported.  The batch is built once, by a short process of its own, and
each process reads it from a file.  In one process (``--one-process``),
d2l's step runs slower after ours than alone: what slows it is in
docs/performance-history.md, "Pretraining step".
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _batches  # noqa: E402
import _children  # noqa: E402
import _common  # noqa: E402
import _gemm  # noqa: E402
import _options  # noqa: E402
import _profile  # noqa: E402
import _report  # noqa: E402
import _steps  # noqa: E402
import _timing  # noqa: E402


def parse_args(argv=None):
    p = _options.arg_parser(__doc__, repeats=5,
                            batch_size=_common.BOOK['batch_size'])
    _options.add_profile_options(p)
    p.add_argument('--batch', choices=('wikitext', 'random'),
                   default='wikitext',
                   help='the first batch of the embedded WikiText corpus '
                        '(default), or random tokens of spread lengths')
    p.add_argument('--vocab', choices=('book', 'corpus'), default='book',
                   help="the model's outputs: the book's 20256 (default), or "
                        "the embedded corpus's own vocabulary (2201), as "
                        "`d2l-bert pretrain` builds it")
    _options.add_process_options(p)
    # The batch, built once by `write_batch` and read by every process
    p.add_argument('--batch-file', default=None, help=argparse.SUPPRESS)
    p.add_argument('--write-batch', default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.vocab == 'corpus' and args.batch == 'random':
        p.error("--vocab corpus needs --batch wikitext (a random batch "
                "has no corpus)")
    return args


def book_batch(args, cfg):
    """The batch of the run: the first of the embedded WikiText corpus at
    the book's sizes, or `_batches.book_batch`'s random one; and the
    vocabulary size of the model (with ``--vocab corpus`` the corpus's,
    as `d2l-bert pretrain` builds it)."""
    if args.batch_file:
        import numpy as onp
        with onp.load(args.batch_file) as saved:
            return ([saved[f'arr_{i}'] for i in range(7)],
                    int(saved['vocab_size']))
    if args.batch == 'random':
        return _batches.book_batch(cfg['batch_size'], cfg['max_len'],
                                   cfg['vocab_size'], cfg['num_preds']), \
            cfg['vocab_size']
    from d2l_bert.runs.wiki_data import load_pretraining_data
    from d2l_bert.fast import pad_bert_inputs_stacked
    # the book's examples (its padding is the oracle of this one), built
    # in seconds rather than a minute
    data_iter, vocab = load_pretraining_data(
        cfg['batch_size'], cfg['max_len'], corpus='embedded', seed=0,
        pad=pad_bert_inputs_stacked)
    batch = [a.asnumpy() for a in next(iter(data_iter))]
    return batch, (len(vocab) if args.vocab == 'corpus'
                   else cfg['vocab_size'])


def write_batch(args):
    """``--write-batch PATH``: save `book_batch`'s batch and vocabulary
    size there (.npz), for the processes of the run to read: building
    the embedded corpus's examples takes seconds in each of them."""
    import numpy as onp
    cfg = dict(_common.BOOK, batch_size=args.batch_size)
    batch, vocab_size = book_batch(args, cfg)
    onp.savez(args.write_batch, *batch, vocab_size=vocab_size)
    return 0


def build(args, sides=('d2l', 'ours', 'book')):
    """Return the step functions of `sides` (d2l's, the command line's,
    the book loop's), sharing the starting parameters and the batch, their
    losses before training and the settings."""
    import mxnet as mx
    from mxnet import gluon, init, np, npx
    from d2l import mxnet as d2l

    import d2l_bert

    npx.set_np()  # as the book's first cell does

    cfg = dict(_common.BOOK, batch_size=args.batch_size)
    batch, cfg['vocab_size'] = book_batch(args, cfg)
    batch, V = [np.array(a) for a in batch], cfg['vocab_size']
    loss = gluon.loss.SoftmaxCELoss()
    model_args = (V, cfg['num_hiddens'], cfg['ffn_num_hiddens'],
                  cfg['num_heads'], cfg['num_blks'], cfg['dropout'])

    # d2l's model gives every side its starting parameters
    mx.random.seed(0)
    ref = d2l.BERTModel(*model_args)
    ref.initialize(init.Xavier())
    ref(*batch[:2], batch[2], batch[3])       # finish deferred shapes
    steps, losses = {}, {}
    for side in sides:
        if side == 'd2l':
            steps[side], losses[side] = _d2l_step(d2l, ref, loss, V, batch)
            continue
        ours = d2l_bert.BERTModel(*model_args)
        ours.initialize(init.Xavier())
        ours(*batch[:2], batch[2], batch[3])
        # Same starting point: the parameter names are the same
        ours_params = ours._collect_params_with_prefix()
        for name, p in ref._collect_params_with_prefix().items():
            ours_params[name].set_data(p.data())
        make = (_steps.ours_step if side == 'ours'
                else _steps.book_loop_step)
        steps[side], losses[side] = make(ours, V, batch)
    return steps, losses, cfg


def _d2l_step(d2l, ref, loss, V, batch):
    """The book's `train_bert` body on d2l's model, one device; and its
    losses before training, dropout off."""
    from mxnet import autograd, gluon
    ref_trainer = gluon.Trainer(ref.collect_params(), 'adam',
                                {'learning_rate': 0.01})

    def d2l_step():
        with autograd.record():
            mlm_ls, nsp_ls, ls = d2l._get_batch_loss_bert(
                ref, loss, V, *[[b] for b in batch])
        for l in ls:
            l.backward()
        ref_trainer.step(1)
        return float(mlm_ls[0]), float(nsp_ls[0])

    mlm, nsp, _ = d2l._get_batch_loss_bert(ref, loss, V,
                                           *[[b] for b in batch])
    return d2l_step, (float(mlm[0]), float(nsp[0]))


def rows_line(args, cfg):
    """Say what the command line's step leaves out of the book's
    arithmetic, which the GFLOP/s count whole: the padded tokens of its
    encoder and the predictions of weight 0 of its MLM head."""
    import numpy as onp
    from mxnet import np
    from d2l_bert.fast.step import TOKEN_MULTIPLE, packed_tokens
    batch, _ = book_batch(args, cfg)
    B, T = batch[0].shape
    pred_positions = batch[3]                                # (B, P)
    rows = onp.stack([onp.repeat(onp.arange(B), pred_positions.shape[1]),
                      pred_positions.reshape(-1)])           # (2, B*P)
    pack = packed_tokens(np.array(batch[2]), np.array(rows, dtype='int32'),
                         B, T, TOKEN_MULTIPLE)[0].asnumpy()  # (N,)
    # the extra rows repeat token 0: the distinct ones are the valid ones
    packed, tokens = len(pack), len(onp.unique(pack))
    weighted = int((batch[4] != 0).sum())
    return (f"the GFLOP/s count the book's arithmetic; the command line's "
            f'step runs the encoder\'s position-wise layers on {packed} of '
            f'{B * T} token rows ({tokens} valid) and the MLM head on '
            f'{weighted} of {batch[4].size} predictions (those of weight '
            f'1): a share above 100% is work left out, not a GEMM above '
            f'its peak')


def worker(args):
    """One side in this process, served to the parent: its step, or the
    GEMM (`_children.serve_step`)."""
    def side(args):
        steps, losses, cfg = build(args, (args.worker,))
        return steps[args.worker], dict(losses=losses[args.worker],
                                         cfg=cfg)
    return _children.serve_step(args, side)


def main(argv=None):
    args = parse_args(argv)
    if args.worker:
        return worker(args)
    if args.write_batch:
        return write_batch(args)
    if args.one_process or args.profile or args.batch_file:
        return run(args)
    # One process builds the batch; the sides and `rows_line` read it
    folder = tempfile.mkdtemp(prefix='d2l-bert-batch-')
    try:
        path = os.path.join(folder, 'batch.npz')
        subprocess.run([sys.executable, __file__, '--write-batch', path]
                       + _options.worker_args(args)
                       + ['--vocab', args.vocab], check=True)
        args.batch_file = path
        return run(args)
    finally:
        shutil.rmtree(folder)


def run(args):
    """The benchmark of `main`, its batch built or read."""
    best = _report.start_steps(args)
    print(f'batch: {args.batch}; '
          + ('all in this process' if args.one_process or args.profile
             else 'each step in a process of its own, taking turns'))
    if args.profile:
        steps, losses, cfg = build(args)
        _profile.profile(steps['d2l'], "d2l 1.0.3 BERTModel step", args.top)
        _profile.profile(steps['ours'], 'd2l_bert command-line step',
                         args.top)
        _profile.profile(steps['book'],
                         "book's loop on the accelerated model", args.top)
        return 0
    res, losses, gemm_flops, cfg = _time(args)
    print(f'losses before training, dropout off (mlm, nsp): d2l '
          f"{losses['d2l'][0]:.5f}, {losses['d2l'][1]:.5f}; command line "
          f"{losses['ours'][0]:.5f}, {losses['ours'][1]:.5f}; book loop, "
          f"accelerated {losses['book'][0]:.5f}, {losses['book'][1]:.5f}")
    flops = _batches.pretrain_step_flops(**cfg)
    peak = _report.print_step_table(
        res, flops, gemm_flops, cfg['batch_size'],
        (('d2l', 'd2l 1.0.3'), ('ours', 'd2l_bert command line'),
         ('book', "book's loop, accelerated")), best)
    print(f"speed-up over d2l 1.0.3: command line "
          f"{res['d2l'][0] / res['ours'][0]:.2f}x, book's loop on the "
          f"accelerated model and loss {res['d2l'][0] / res['book'][0]:.2f}x")
    _report.print_fastest_step(res, flops, peak)
    print(rows_line(args, cfg))
    print('load average at the end: '
          + ', '.join(f'{x:.1f}' for x in os.getloadavg()))
    return 0


def _time(args):
    """Time the three steps and the GEMM, in one process or each in its
    own; return `alternate`'s results, the losses before training, the
    GEMM's arithmetic and the settings."""
    sides = ('d2l', 'ours', 'book')
    if args.one_process:
        steps, losses, cfg = build(args, sides)
        gemm, gemm_flops = _gemm.gemm_rate()
        res = _timing.alternate(dict(steps, gemm=gemm),
                                repeats=args.repeats)
        return res, losses, gemm_flops, cfg
    res, infos = _children.in_processes(
        __file__, sides + ('gemm',),
        _options.worker_args(args) + ['--vocab', args.vocab,
                                      '--batch-file', args.batch_file],
        args.repeats, pause=args.pause)
    print('each process: ' + infos['d2l']['threads'].replace(
        '\n', '\n              '))
    losses = {side: infos[side]['losses'] for side in sides}
    return res, losses, infos['gemm']['flops'], infos['d2l']['cfg']


if __name__ == '__main__':
    sys.exit(main())
