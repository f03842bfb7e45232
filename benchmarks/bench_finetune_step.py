"""Time one fine-tuning step: d2l 1.0.3's `BERTClassifier` against
d2l_bert's accelerated one.

::

    python benchmarks/bench_finetune_step.py --isa avx2     # all cores
    python benchmarks/bench_finetune_step.py --one-process  # the old way
    python benchmarks/bench_finetune_step.py --profile      # where time goes

At the NLI section's settings (sec_natural-language-inference-bert:
`bert.small`'s sizes, 256 hidden units, 512 in the feed-forward layer, 4
heads, 2 blocks, its 60005-token vocabulary; batch 512 of `max_len` 128;
Adam at 1e-4; `gluon.loss.SoftmaxCrossEntropyLoss()`, per example),
one step is d2l's `train_batch_ch13` with `split_batch_multi_inputs`, as
`train_ch13` runs it: the forward pass and the loss, the backward pass,
`trainer.step` and reading the loss and accuracy back.  d2l's step runs
the section's `BERTClassifier` on d2l 1.0.3's `BERTModel`; ours runs
``d2l_bert.fast.accelerate(BERTClassifier(bert))`` (what ``d2l-bert
finetune`` trains) on d2l_bert's.  Both start from the same parameters
(random: the arithmetic does not depend on them) on the same batch: 512
synthetic pairs in SNLI's format (`d2l_bert.data.snli_synthetic`, 18 to 27
tokens, about the lengths of SNLI's pairs) packed by the book's
`SNLIBERTDataset`, or ``--batch random``.

The two steps and a float32 GEMM of the MLM output layer's shape (the
GEMM rate of `bench_pretrain_step.py`) each run in a process of their
own, as a user runs them, taking turns with the same thread settings
(`_children.in_processes`; ``--one-process``: alternating in this process);
medians are reported.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _batches  # noqa: E402
import _children  # noqa: E402
import _common  # noqa: E402
import _gemm  # noqa: E402
import _options  # noqa: E402
import _profile  # noqa: E402
import _report  # noqa: E402
import _timing  # noqa: E402


def parse_args(argv=None):
    p = _options.arg_parser(__doc__, repeats=5,
                            batch_size=_common.FINETUNE['batch_size'])
    _options.add_profile_options(p)
    p.add_argument('--batch', choices=('snli', 'random'), default='snli',
                   help="pairs in SNLI's format packed by the book's "
                        '`SNLIBERTDataset` (default: the synthetic corpus '
                        'of d2l_bert.data.snli_synthetic, 18 to 27 tokens, '
                        "about SNLI's lengths), or random tokens of lengths "
                        'spread from 12 to 128')
    _options.add_process_options(p)
    return p.parse_args(argv)


def worker(args):
    """One side in this process, served to the parent: its step, or the
    GEMM (`_children.serve_step`)."""
    def side(args):
        d2l_step, ours_step, losses, cfg = build(args)
        step, loss = ((d2l_step, losses[0]) if args.worker == 'd2l'
                      else (ours_step, losses[1]))
        return step, dict(loss=loss, cfg=cfg)
    return _children.serve_step(args, side)


def finetune_batch(args, cfg):
    """The batch of the run, as numpy arrays ``(tokens, segments,
    valid_lens, labels)``: synthetic SNLI pairs packed by the book's
    `SNLIBERTDataset` (their ids below the model's vocabulary size), or
    `_batches.finetune_batch`'s random one."""
    if args.batch == 'random':
        return _batches.finetune_batch(cfg['batch_size'], cfg['max_len'],
                                       cfg['vocab_size'], cfg['num_classes'])
    import tempfile

    from d2l import mxnet as d2l

    from d2l_bert.book.finetuning import SNLIBERTDataset, read_snli
    from d2l_bert.data.snli_synthetic import make_snli_synthetic
    with tempfile.TemporaryDirectory() as tmp:
        data = read_snli(make_snli_synthetic(
            tmp, num_train=cfg['batch_size'], num_dev=1, num_test=1), True)
    words = [w for text in data[0] + data[1] for w in text.lower().split()]
    vocab = d2l.Vocab(words, reserved_tokens=['<pad>', '<mask>', '<cls>',
                                              '<sep>'])
    dataset = SNLIBERTDataset(data, cfg['max_len'], vocab)
    return (dataset.all_token_ids.asnumpy(), dataset.all_segments.asnumpy(),
            dataset.valid_lens.asnumpy().astype('float32'),
            dataset.labels.asnumpy().astype('float32'))


def build(args):
    """Return d2l's and our step functions, sharing parameters and the
    batch, the losses of both before training and the settings."""
    import mxnet as mx
    from mxnet import autograd, gluon, init, np, npx
    from mxnet.gluon import nn
    from d2l import mxnet as d2l

    import d2l_bert
    from d2l_bert import fast
    from d2l_bert.book.finetuning import BERTClassifier

    npx.set_np()  # as the book's first cell does

    class D2LBERTClassifier(nn.Block):
        """The section's `BERTClassifier`, as the book writes it."""
        def __init__(self, bert):
            super(D2LBERTClassifier, self).__init__()
            self.encoder = bert.encoder
            self.hidden = bert.hidden
            self.output = nn.Dense(3)

        def forward(self, inputs):
            tokens_X, segments_X, valid_lens_x = inputs
            encoded_X = self.encoder(tokens_X, segments_X, valid_lens_x)
            return self.output(self.hidden(encoded_X[:, 0, :]))

    cfg = dict(_common.FINETUNE, batch_size=args.batch_size)
    tokens, segments, valid_lens, y = [np.array(a) for a in
                                       finetune_batch(args, cfg)]
    features = [tokens, segments, valid_lens]
    model_args = (cfg['vocab_size'], cfg['num_hiddens'],
                  cfg['ffn_num_hiddens'], cfg['num_heads'], cfg['num_blks'],
                  cfg['dropout'])
    devices = [mx.cpu()]

    mx.random.seed(0)
    ref_bert = d2l.BERTModel(*model_args, max_len=cfg['pretrained_max_len'])
    ref_bert.initialize(init.Xavier())
    ref = D2LBERTClassifier(ref_bert)
    ref.output.initialize(init.Xavier())
    ref(features)                               # finish deferred shapes
    bert = d2l_bert.BERTModel(*model_args, max_len=cfg['pretrained_max_len'])
    bert.initialize(init.Xavier())
    classifier = BERTClassifier(bert)
    classifier.output.initialize(init.Xavier())
    classifier(features)
    # Same starting point: the parameter names are the same
    ours_params = classifier._collect_params_with_prefix()
    ref_params = ref._collect_params_with_prefix()
    if sorted(ours_params) != sorted(ref_params):
        raise RuntimeError('the two classifiers name their parameters '
                           'differently')
    for name, p in ref_params.items():
        ours_params[name].set_data(p.data())
    ours = fast.accelerate(classifier)

    # The section's loss: per-example values (no `reduction` argument in
    # MXNet 1.9, whose losses never average over the batch)
    loss = gluon.loss.SoftmaxCrossEntropyLoss()

    def step_of(net):
        trainer = gluon.Trainer(net.collect_params(), 'adam',
                                {'learning_rate': cfg['lr']})

        def step():
            # `train_ch13`'s body for one batch, as the section runs it
            return d2l.train_batch_ch13(net, features, y, loss, trainer,
                                        devices,
                                        d2l.split_batch_multi_inputs)
        return step

    # The same numbers: the loss with dropout off, before training
    with autograd.predict_mode():
        losses = [float(loss(net(features), y).mean()) for net in (ref, ours)]
    return step_of(ref), step_of(ours), losses, cfg


def main(argv=None):
    args = parse_args(argv)
    if args.worker:
        return worker(args)
    best = _report.start_steps(args)
    if not (args.one_process or args.profile):
        print('each step in a process of its own, taking turns')
    if args.profile:
        d2l_step, ours_step, losses, cfg = build(args)
        _profile.profile(d2l_step, "d2l 1.0.3 BERTClassifier step",
                         args.top)
        _profile.profile(ours_step,
                         'd2l_bert accelerated BERTClassifier step', args.top)
        return 0
    res, losses, gemm_flops, cfg = _time(args)
    print(f'loss before training, dropout off: d2l {losses[0]:.6f}; '
          f'accelerated {losses[1]:.6f}')
    flops = _batches.finetune_step_flops(**cfg)
    peak = _report.print_step_table(
        res, flops, gemm_flops, cfg['batch_size'],
        (('d2l', 'd2l 1.0.3'), ('ours', 'd2l_bert accelerated')), best)
    print(f"speed-up over d2l 1.0.3: {res['d2l'][0] / res['ours'][0]:.2f}x")
    _report.print_fastest_step(res, flops, peak)
    print(rows_line(args, cfg))
    print('load average at the end: '
          + ', '.join(f'{x:.1f}' for x in os.getloadavg()))
    return 0


def rows_line(args, cfg):
    """Say what the accelerated classifier leaves out of the book's
    arithmetic, which the GFLOP/s count whole: its encoder runs on the
    valid tokens only (`FastBERTClassifier`)."""
    from mxnet import np
    from d2l_bert.fast.step import packed_tokens
    valid_lens = finetune_batch(args, cfg)[2]                # (B,)
    B, T = cfg['batch_size'], cfg['max_len']
    no_rows = np.zeros((2, 0), dtype='int32')                # (2, 0)
    tokens = packed_tokens(np.array(valid_lens), no_rows, B, T,
                           1)[0].shape[0]                    # N
    return (f"the GFLOP/s count the book's arithmetic; the accelerated "
            f'classifier encodes the {tokens} valid tokens of the '
            f'{B * T} ({100 * tokens / (B * T):.0f}%): a share above '
            f'100% is work left out, not a GEMM above its peak')


def _time(args):
    """Time both steps and the GEMM, in one process or each in its own;
    return `alternate`'s results, the losses before training, the GEMM's
    arithmetic and the settings."""
    if args.one_process:
        d2l_step, ours_step, losses, cfg = build(args)
        gemm, gemm_flops = _gemm.gemm_rate()
        res = _timing.alternate({'d2l': d2l_step, 'ours': ours_step,
                                 'gemm': gemm}, repeats=args.repeats)
        return res, losses, gemm_flops, cfg
    res, infos = _children.in_processes(
        __file__, ('d2l', 'ours', 'gemm'), _options.worker_args(args),
        args.repeats, pause=args.pause)
    print('each process: ' + infos['d2l']['threads'].replace(
        '\n', '\n              '))
    losses = [infos['d2l']['loss'], infos['ours']['loss']]
    return res, losses, infos['gemm']['flops'], infos['d2l']['cfg']


if __name__ == '__main__':
    sys.exit(main())
