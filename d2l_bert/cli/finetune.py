"""`d2l-bert finetune`: fine-tune a pretrained BERT for natural language
inference, as :numref:`sec_natural-language-inference-bert` does.

With the defaults it is the book's run: `bert.small` and SNLI from the
network, batch size 512, `max_len` 128, learning rate 1e-4, 5 epochs.
Without a network::

    d2l-bert pretrain --lr 0.001 --out my-bert
    d2l-bert finetune --model my-bert --data synthetic

With ``--data synthetic`` the defaults fit the small synthetic corpus:
batch size 64, `max_len` 32, learning rate 1e-3, 3 epochs.  A pretrained
model that encodes every input alike (a collapsed pretraining) gets a
warning before training starts.

The output directory receives `finetuned.params` (the `BERTClassifier`),
`vocab.json`, `config.json` (model sizes, settings and final numbers),
`history.json` and `finetune.png` (loss and accuracies per epoch), each
written whole or not at all.
"""
import os
import sys
import time

DEFAULT_OUT = 'finetuned-bert'

# Defaults of the options left out: the book's run on SNLI (550k pairs,
# hours on a CPU), and one that takes minutes on the synthetic data
BOOK_SETTINGS = dict(epochs=5, batch_size=512, max_len=128, lr=1e-4)
SYNTHETIC_SETTINGS = dict(epochs=3, batch_size=64, max_len=32, lr=1e-3)
# Below this `cls_spread`, the pretrained model encodes every input alike
COLLAPSED_SPREAD = 1e-3


def add_arguments(parser):
    """Add the options of `d2l-bert finetune` to `parser`."""
    parser.add_argument(
        '--model', default='bert.small', metavar='DIR|bert.small|bert.base',
        help="pretrained BERT: a d2l hub name (downloaded, checked by "
             "SHA-1) or a directory with pretrained.params and vocab.json "
             "(as `d2l-bert pretrain --out DIR` writes); default bert.small")
    parser.add_argument(
        '--data', default='snli', metavar='snli|synthetic|PATH',
        help="'snli' downloads SNLI; 'synthetic' writes a small SNLI-format "
             "corpus, no network needed; PATH is a directory with "
             "snli_1.0_train.txt and snli_1.0_test.txt; default snli")
    parser.add_argument(
        '--epochs', type=int, default=None,
        help='number of epochs (default 5, the book; 3 with synthetic data)')
    parser.add_argument(
        '--batch-size', type=int, default=None,
        help='minibatch size (default 512, the book; 64 with synthetic data)')
    parser.add_argument(
        '--max-len', type=int, default=None,
        help='length of each BERT input (default 128, the book; 32 with '
             'synthetic data, whose pairs are at most 25 tokens long)')
    parser.add_argument(
        '--lr', type=float, default=None,
        help="Adam's learning rate (default 1e-4, the book; 1e-3 with "
             'synthetic data)')
    parser.add_argument('--dropout', type=float, default=0.1,
                        help='dropout while fine-tuning (default 0.1)')
    parser.add_argument(
        '--devices', default=None, metavar='cpu|gpu:0,gpu:1|all-gpus',
        help='devices to train on (default: every GPU, else the CPU)')
    parser.add_argument(
        '--num-workers', type=int, default=None,
        help='worker processes that prepare the data (default 4 as the '
             'book, 0 on Windows)')
    parser.add_argument('--seed', type=int, default=0,
                        help='random seed (default 0)')
    parser.add_argument('--out', default=DEFAULT_OUT, metavar='DIR',
                        help=f'output directory (default {DEFAULT_OUT})')
    parser.add_argument('--no-progress', action='store_true',
                        help='no progress bars')


def _fill_defaults(args):
    """Give the options left out their default for `args.data`."""
    settings = (SYNTHETIC_SETTINGS if args.data == 'synthetic'
                else BOOK_SETTINGS)
    for name, value in settings.items():
        if getattr(args, name) is None:
            setattr(args, name, value)


def _check_args(args):
    """Raise ValueError for options out of range."""
    for name in ('epochs', 'batch_size'):
        if getattr(args, name) < 1:
            raise ValueError(f'--{name.replace("_", "-")} must be at least '
                             f'1, got {getattr(args, name)}')
    if args.max_len < 3:
        raise ValueError(f'--max-len must be at least 3 (<cls> and two '
                         f'<sep>), got {args.max_len}')
    if not args.lr > 0:
        raise ValueError(f'--lr must be positive, got {args.lr}')
    if not 0 <= args.dropout < 1:
        raise ValueError(f'--dropout must be in [0, 1), got {args.dropout}')
    if args.num_workers is not None and args.num_workers < 0:
        raise ValueError(
            f'--num-workers must be 0 or more, got {args.num_workers}')


def _default_devices():
    """Every GPU, else the CPU (`d2l.try_all_gpus`)."""
    import mxnet as mx
    from d2l_bert.devices import num_gpus
    return [mx.gpu(i) for i in range(num_gpus())] or [mx.cpu()]


def run(args):
    """Fine-tune as the options say; return the history dict."""
    import json
    import random

    import mxnet as mx
    import numpy as onp
    from mxnet import gluon

    from d2l_bert import fast
    from d2l_bert import finetuning as ft
    from d2l_bert.data.atomic import atomic_write
    from d2l_bert.devices import parse_devices
    from d2l_bert.runs import finetuning as runs_ft

    _fill_defaults(args)
    _check_args(args)
    devices = (parse_devices(args.devices) if args.devices
               else _default_devices())
    num_workers = (args.num_workers if args.num_workers is not None
                   else 0 if sys.platform.startswith('win') else 4)
    random.seed(args.seed)
    onp.random.seed(args.seed)
    mx.random.seed(args.seed)

    config = runs_ft.load_pretrained_config(args.model)
    if args.max_len > config['max_len']:
        raise ValueError(
            f'--max-len {args.max_len} is longer than the '
            f"{config['max_len']} positions of the pretrained model "
            f'{args.model!r}; use --max-len {config["max_len"]} or less')
    config['dropout'] = args.dropout
    start = time.time()
    bert, vocab = ft.load_pretrained_model(args.model, devices=devices,
                                           **config)
    data_dir = runs_ft.snli_data_dir(args.data)
    train_set = ft.SNLIBERTDataset(ft.read_snli(data_dir, True),
                                   args.max_len, vocab, num_workers)
    test_set = ft.SNLIBERTDataset(ft.read_snli(data_dir, False),
                                  args.max_len, vocab, num_workers)
    train_iter = gluon.data.DataLoader(train_set, args.batch_size,
                                       shuffle=True, num_workers=num_workers)
    test_iter = gluon.data.DataLoader(test_set, args.batch_size,
                                      num_workers=num_workers)
    spread = runs_ft.cls_spread(bert, train_set)
    if spread < COLLAPSED_SPREAD:
        print(f'warning: {args.model} encodes every input alike (spread '
              f'{spread:.1e} of the <cls> encoding across examples): its '
              'pretraining collapsed, and fine-tuning will likely stay '
              'near chance. Short pretraining at the learning rate 0.01 '
              'does this; pretrain with a smaller one (d2l-bert pretrain '
              '--lr 0.001) or use bert.small', file=sys.stderr)
    net = ft.BERTClassifier(bert)
    net.output.initialize(ctx=devices)
    # The fast layer: the same parameters, one graph, compiled loops
    twin = fast.accelerate(net)
    print(f'path: {fast.describe(twin)}')
    trainer = gluon.Trainer(twin.collect_params(), 'adam',
                            {'learning_rate': args.lr})
    loss = gluon.loss.SoftmaxCrossEntropyLoss()
    history = runs_ft.train_ch13_history(twin, train_iter, test_iter, loss,
                                    trainer, args.epochs, devices,
                                    progress=not args.no_progress)
    seconds = time.time() - start

    os.makedirs(args.out, exist_ok=True)
    atomic_write(os.path.join(args.out, 'finetuned.params'),
                 net.save_parameters)
    config = dict(
        config, vocab_size=len(vocab), model=str(args.model),
        data=str(args.data), epochs=args.epochs, batch_size=args.batch_size,
        finetune_max_len=args.max_len, lr=args.lr, seed=args.seed,
        devices=[str(d) for d in devices], seconds=round(seconds, 1),
        test_acc=history['test acc'][-1])
    for name, obj in (('vocab.json', vocab.idx_to_token),
                      ('history.json', history), ('config.json', config)):
        atomic_write(os.path.join(args.out, name), json.dumps(obj, indent=2))
    plot = os.path.join(args.out, 'finetune.png')
    runs_ft.plot_history(history, plot)
    print(f'{seconds:.1f} s in all; saved the fine-tuned model, history and '
          f'{plot}')
    return history


def main(args):
    """Run `d2l-bert finetune`; return the exit code."""
    from d2l_bert.data.hub import DownloadError
    try:
        run(args)
    except (ValueError, FileNotFoundError, DownloadError) as e:
        print(f'd2l-bert finetune: error: {e}', file=sys.stderr)
        return 1
    return 0
