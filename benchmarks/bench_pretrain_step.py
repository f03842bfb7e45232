"""Time one pretraining step: d2l 1.0.3's against d2l_bert's two.

::

    python benchmarks/bench_pretrain_step.py               # all cores
    python benchmarks/bench_pretrain_step.py --threads 1
    python benchmarks/bench_pretrain_step.py --profile     # where time goes

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
start from the same parameters.

The three steps and a float32 GEMM of the MLM output layer's shape take
turns, in one process with the same thread settings, so that a machine
shared with other work slows them alike; medians are reported.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402  (before mxnet: sets the thread count)


def parse_args(argv=None):
    p = _common.arg_parser(__doc__, repeats=5, batch_size=512)
    _common.add_profile_options(p)
    return p.parse_args(argv)


def build(args):
    """Return the two step functions, sharing parameters and the batch."""
    import mxnet as mx
    from mxnet import autograd, gluon, init, np, npx
    from d2l import mxnet as d2l

    import d2l_bert

    npx.set_np()  # as the book's first cell does

    cfg = dict(_common.BOOK, batch_size=args.batch_size)
    V = cfg['vocab_size']
    batch = [np.array(a) for a in _common.book_batch(
        cfg['batch_size'], cfg['max_len'], V, cfg['num_preds'])]
    loss = gluon.loss.SoftmaxCELoss()
    model_args = (V, cfg['num_hiddens'], cfg['ffn_num_hiddens'],
                  cfg['num_heads'], cfg['num_blks'], cfg['dropout'])

    mx.random.seed(0)
    ref = d2l.BERTModel(*model_args)
    ref.initialize(init.Xavier())
    ref(*batch[:2], batch[2], batch[3])       # finish deferred shapes
    nets = []
    for _ in range(2):
        ours = d2l_bert.BERTModel(*model_args)
        ours.initialize(init.Xavier())
        ours(*batch[:2], batch[2], batch[3])
        # Same starting point: the parameter names are the same
        ours_params = ours._collect_params_with_prefix()
        for name, p in ref._collect_params_with_prefix().items():
            ours_params[name].set_data(p.data())
        nets.append(ours)

    def d2l_step():
        # The book's `train_bert` body, one device
        with autograd.record():
            mlm_ls, nsp_ls, ls = d2l._get_batch_loss_bert(
                ref, loss, V, *[[b] for b in batch])
        for l in ls:
            l.backward()
        ref_trainer.step(1)
        return float(mlm_ls[0]), float(nsp_ls[0])
    ref_trainer = gluon.Trainer(ref.collect_params(), 'adam',
                                {'learning_rate': 0.01})
    ours_step, ours_l = _common.ours_step(nets[0], V, batch)
    book_step, book_l = _common.book_loop_step(nets[1], V, batch)

    # The same numbers: both losses with dropout off, before training
    mlm, nsp, _ = d2l._get_batch_loss_bert(ref, loss, V,
                                           *[[b] for b in batch])
    ref_l = float(mlm[0]), float(nsp[0])
    return d2l_step, ours_step, book_step, ref_l, ours_l, book_l, cfg


def main(argv=None):
    args = parse_args(argv)
    _common.start_step_benchmark(args)
    d2l_step, ours_step, book_step, ref_l, ours_l, book_l, cfg = build(args)
    print(f'losses before training, dropout off (mlm, nsp): d2l '
          f'{ref_l[0]:.5f}, {ref_l[1]:.5f}; command line {ours_l[0]:.5f}, '
          f'{ours_l[1]:.5f}; book loop, accelerated {book_l[0]:.5f}, '
          f'{book_l[1]:.5f}')
    if args.profile:
        _common.profile(d2l_step, "d2l 1.0.3 BERTModel step", args.top)
        _common.profile(ours_step, 'd2l_bert command-line step', args.top)
        _common.profile(book_step, "book's loop on the accelerated model",
                        args.top)
        return 0
    gemm, gemm_flops = _common.gemm_rate()
    res = _common.alternate({'d2l': d2l_step, 'ours': ours_step,
                             'book': book_step, 'gemm': gemm},
                            repeats=args.repeats)
    flops = _common.pretrain_step_flops(**cfg)
    peak = _common.print_step_table(
        res, flops, gemm_flops, cfg['batch_size'],
        (('d2l', 'd2l 1.0.3'), ('ours', 'd2l_bert command line'),
         ('book', "book's loop, accelerated")))
    print(f"speed-up over d2l 1.0.3: command line "
          f"{res['d2l'][0] / res['ours'][0]:.2f}x, book's loop on the "
          f"accelerated model and loss {res['d2l'][0] / res['book'][0]:.2f}x")
    _common.print_fastest_step(res, flops, peak)
    return 0


if __name__ == '__main__':
    sys.exit(main())
