"""`d2l-bert pretrain`: the section sec_bert-pretraining from the shell.

::

    d2l-bert pretrain                       # the book's settings, 50 steps
    d2l-bert pretrain --steps 200 --devices cpu:0,cpu:1 --out my-bert
    d2l-bert pretrain --steps 400 --out my-bert --resume

Loads the corpus (the embedded one by default), pretrains the book's
small BERT with `train_bert`, prints the book's two lines and the
masked-token and next-sentence accuracy on the held-out split, then saves
the model in the layout of d2l's ``bert.small`` (``pretrained.params``,
``vocab.json``, plus ``config.json``), the loss curves (``loss.png``) and
a checkpoint (``checkpoint.zip``) that ``--resume`` continues from.
"""
import os
import random
import sys
import time

CHECKPOINT_FILE, PLOT_FILE = 'checkpoint.zip', 'loss.png'


def _positive_int(text):
    import argparse
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(
            f'must be a positive integer, got {text!r}')
    return value


def _rate(text):
    import argparse
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(
            f'must be a number in [0, 1), got {text!r}')
    return value


def add_arguments(parser):
    data = parser.add_argument_group('data')
    data.add_argument(
        '--corpus', default='embedded', metavar='embedded|wikitext-2|PATH',
        help="'embedded' (shipped with d2l-bert, the default), "
             "'wikitext-2' (the book's corpus, if you have it) or a "
             'directory holding wiki.train.tokens and wiki.valid.tokens')
    data.add_argument('--batch-size', type=_positive_int, default=512,
                      metavar='B', help='sentence pairs per step (512)')
    data.add_argument('--max-len', type=_positive_int, default=64,
                      metavar='L', help='tokens per BERT input (64)')
    model = parser.add_argument_group("model (the book's small BERT)")
    model.add_argument('--num-hiddens', type=_positive_int, default=128)
    model.add_argument('--ffn-num-hiddens', type=_positive_int,
                       default=256)
    model.add_argument('--num-heads', type=_positive_int, default=2)
    model.add_argument('--num-blks', type=_positive_int, default=2)
    model.add_argument('--dropout', type=_rate, default=0.2)
    train = parser.add_argument_group('training')
    train.add_argument('--steps', type=_positive_int, default=50,
                       metavar='N', help='steps in total (50)')
    train.add_argument('--lr', type=float, default=0.01,
                       help="Adam's learning rate (0.01)")
    train.add_argument(
        '--devices', default=None, metavar='DEVICES',
        help='cpu, cpu:0,cpu:1, gpu, gpu:0,gpu:1 or all-gpus (default: '
             'all GPUs, or the CPU if there is none, as the book)')
    train.add_argument('--seed', type=int, default=0,
                       help='seed of every random choice (0)')
    train.add_argument('--out', default='bert-pretrained', metavar='DIR',
                       help='where the model, plot and checkpoint go '
                            '(./bert-pretrained)')
    train.add_argument('--resume', action='store_true',
                       help=f'continue from DIR/{CHECKPOINT_FILE} if it '
                            'exists')
    train.add_argument('--checkpoint-every', type=_positive_int,
                       default=10, metavar='K',
                       help='save a checkpoint every K steps (10)')


def _devices(text):
    from ..devices import num_gpus, parse_devices
    import mxnet as mx
    if text is None:
        return ([mx.gpu(i) for i in range(num_gpus())] or [mx.cpu()])
    return parse_devices(text)


def _seed_everything(seed):
    import mxnet as mx
    import numpy as onp
    random.seed(seed)
    onp.random.seed(seed)
    mx.random.seed(seed)


def main(args):
    """Run ``d2l-bert pretrain``; return the exit status."""
    def fail(message):
        print(f'd2l-bert pretrain: error: {message}', file=sys.stderr)
        return 2
    try:
        devices = _devices(args.devices)
    except ValueError as e:
        return fail(f'--devices: {e}')
    if args.num_hiddens % args.num_heads:
        return fail(f'--num-heads {args.num_heads} must divide '
                    f'--num-hiddens {args.num_hiddens}')
    out = args.out
    if os.path.exists(out) and not os.path.isdir(out):
        return fail(f'--out {out!r} exists and is not a directory')

    from mxnet import gluon, init, npx

    from .. import fast
    from ..threads import set_threads
    from ..bert import BERTModel
    from ..dataset import load_data_wiki
    from ..model_files import save_pretrained
    from ..training import evaluate_bert, train_bert_history

    # The book's first cell: every block is written for NumPy semantics
    npx.set_np()
    _seed_everything(args.seed)
    print(getattr(args, 'threads', None) or set_threads())
    print(f'loading the {args.corpus} corpus (batch size '
          f'{args.batch_size}, max_len {args.max_len}) ...', flush=True)
    start = time.perf_counter()
    try:
        train_iter, vocab = load_data_wiki(
            args.batch_size, args.max_len, corpus=args.corpus,
            seed=args.seed)
        valid_iter, _ = load_data_wiki(
            args.batch_size, args.max_len, corpus=args.corpus,
            split='valid', vocab=vocab)
    except (ValueError, FileNotFoundError, RuntimeError) as e:
        return fail(f'--corpus: {e}')
    print(f'{len(train_iter._dataset)} training pairs, '
          f'{len(valid_iter._dataset)} held-out pairs, vocabulary of '
          f'{len(vocab)} tokens ({time.perf_counter() - start:.1f} s)')

    config = dict(vocab_size=len(vocab), num_hiddens=args.num_hiddens,
                  ffn_num_hiddens=args.ffn_num_hiddens,
                  num_heads=args.num_heads, num_blks=args.num_blks,
                  dropout=args.dropout, max_len=1000)
    # What a resumed run must share with the run it continues (not the
    # step count: resuming with more steps trains on)
    settings = dict(config, corpus=args.corpus, batch_size=args.batch_size,
                    seq_len=args.max_len, learning_rate=args.lr,
                    seed=args.seed)
    net = BERTModel(len(vocab), args.num_hiddens, args.ffn_num_hiddens,
                    args.num_heads, args.num_blks, args.dropout)
    net.initialize(init.Xavier(), ctx=devices)
    loss = gluon.loss.SoftmaxCELoss()

    os.makedirs(out, exist_ok=True)
    checkpoint = os.path.join(out, CHECKPOINT_FILE)
    if args.resume and not os.path.exists(checkpoint):
        print(f'no checkpoint at {checkpoint}: starting from step 0')
    # The fast layer: the model and both losses as one graph, the book
    # model's parameters trained in place
    batch_loss = fast.batch_loss(net, loss, len(vocab))
    twin = batch_loss.graph.net
    print(f'path: {fast.describe(twin)}, model and losses in one graph '
          '(d2l_bert.fast.batch_loss)')
    print(fast._ops.describe(devices))
    print(f'pretraining {args.steps} steps on {devices} ...', flush=True)
    plot = os.path.join(out, PLOT_FILE)
    try:
        history = train_bert_history(
            train_iter, net, loss, len(vocab), devices, args.steps,
            learning_rate=args.lr, plot=plot, checkpoint=checkpoint,
            checkpoint_every=args.checkpoint_every, resume=args.resume,
            config=settings, batch_loss=batch_loss)
    except ValueError as e:
        return fail(e)

    accuracy = evaluate_bert(twin, valid_iter, len(vocab), devices)
    print(f'held-out MLM accuracy {accuracy.mlm_accuracy:.3f} '
          f'({accuracy.num_masked} masked tokens), NSP accuracy '
          f'{accuracy.nsp_accuracy:.3f} ({accuracy.num_pairs} pairs)')
    pretraining = dict(settings, num_steps=history.num_steps,
                       mlm_loss=history.mlm_loss, nsp_loss=history.nsp_loss,
                       mlm_accuracy=accuracy.mlm_accuracy,
                       nsp_accuracy=accuracy.nsp_accuracy)
    for key in config:
        pretraining.pop(key)
    save_pretrained(net, vocab, out, dict(config, pretraining=pretraining))
    print(f'saved the model to {out}/ (pretrained.params, vocab.json, '
          'config.json)')
    print(f'saved the loss curves to {plot}')
    print(f'checkpoint: {checkpoint} (continue with --resume '
          '--steps MORE)')
    return 0
