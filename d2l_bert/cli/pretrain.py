"""`d2l-bert pretrain`: the section sec_bert-pretraining from the shell.

::

    d2l-bert pretrain                       # the book's settings, 50 steps
    d2l-bert pretrain --steps 200 --devices cpu:0,cpu:1 --out my-bert
    d2l-bert pretrain --steps 400 --out my-bert --resume
    d2l-bert pretrain --workers 2 --steps 20    # 2 processes, one model
    d2l-bert pretrain --hosts hosts.txt         # one worker per machine

Loads the corpus (the embedded one by default), pretrains the book's
small BERT with `train_bert`, prints the book's two lines and the
masked-token and next-sentence accuracy on the held-out split, then saves
the model in the layout of d2l's ``bert.small`` (``pretrained.params``,
``vocab.json``, plus ``config.json``), the loss curves (``loss.png``) and
a checkpoint (``checkpoint.zip``) that ``--resume`` continues from.

With ``--workers N`` (or ``--hosts FILE``) this process only launches a
job on MXNet's parameter server (`d2l_bert.dist.launcher`): a scheduler,
the servers, and N workers, each running this command again with
``--kvstore dist_sync`` and its share of the threads (``--threads``).
Each worker trains on its rows of every batch (`d2l_bert.dist.workers`);
worker 0 prints, shows the progress bar and writes the files, which are
those one process would write (a checkpoint of either resumes in the
other).
"""
import argparse
import contextlib
import os
import random
import sys
import time

CHECKPOINT_FILE, PLOT_FILE = 'checkpoint.zip', 'loss.png'


def _positive_int(text):
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(
            f'must be a positive integer, got {text!r}')
    return value


def _rate(text):
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
    train.add_argument('--threads', type=_positive_int, default=None,
                       metavar='K', dest='num_threads',
                       help='CPU threads of each process (default: every '
                            'core; with --workers N, cores // N)')
    from .launch import add_job_arguments
    job = parser.add_argument_group(
        "several processes (MXNet's parameter server, the dist_sync "
        'kvstore)')
    add_job_arguments(job, 'train in N worker processes, each on its '
                           'share of every batch, with the numbers of one '
                           'process that has all their devices (default '
                           'with --hosts: one per machine)')
    # Set by the launcher in each worker's command, not by hand
    job.add_argument('--kvstore', default=None, help=argparse.SUPPRESS)


#: The options a worker gets as they are; the others make the job
FORWARDED = ('corpus', 'batch_size', 'max_len', 'num_hiddens',
             'ffn_num_hiddens', 'num_heads', 'num_blks', 'dropout', 'steps',
             'lr', 'devices', 'seed', 'out', 'resume', 'checkpoint_every')
JOB_OPTIONS = ('workers', 'servers', 'hosts', 'port', 'num_threads',
               'kvstore', 'timeout')


def _worker_argv(args, num_threads):
    """A worker's command: this one, without the job's options, plus
    ``--kvstore dist_sync`` and its thread count."""
    argv = [sys.executable, '-m', 'd2l_bert', 'pretrain']
    for name in FORWARDED:
        value = getattr(args, name)
        option = '--' + name.replace('_', '-')
        # (`is`, not `in (None, False)`: 0 and 0.0 equal False)
        if value is True:
            argv.append(option)
        elif value is not None and value is not False:
            argv += [option, str(value)]
    return argv + ['--kvstore', 'dist_sync', '--threads', str(num_threads)]


def _num_devices(text):
    """How many devices `--devices` names, without importing `mxnet`
    (the workers check the names): 1 for the default and 'all-gpus'."""
    if text is None or text.strip().lower() == 'all-gpus':
        return 1
    return max(1, len([p for p in text.split(',') if p.strip()]))


def _fail(message):
    print(f'd2l-bert pretrain: error: {message}', file=sys.stderr)
    return 2


def _check(args):
    """The checks that need no `mxnet`: an error message, or None."""
    if args.num_hiddens % args.num_heads:
        return (f'--num-heads {args.num_heads} must divide --num-hiddens '
                f'{args.num_hiddens}')
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        return f'--out {args.out!r} exists and is not a directory'
    return None


def _launch(args):
    """Start the job of ``--workers``/``--hosts`` and wait for it."""
    from ..dist import launcher
    problem = _check(args)
    if problem:
        return _fail(problem)
    try:
        job = launcher.prepare_job(
            lambda num_threads: _worker_argv(args, num_threads),
            num_workers=args.workers, num_servers=args.servers,
            hosts=args.hosts, port=args.port, num_threads=args.num_threads,
            timeout=args.timeout)
    except launcher.LaunchError as e:
        return _fail(e)
    num_shards = job.num_workers * _num_devices(args.devices)
    if args.batch_size < num_shards:
        return _fail(
            f'--batch-size {args.batch_size} is less than one sentence '
            f'pair for each of the {num_shards} shards of a batch '
            f'({job.num_workers} workers x {_num_devices(args.devices)} '
            f'device(s)): use --batch-size {num_shards} or more, or fewer '
            'workers')
    print(job.description, flush=True)
    status = launcher.run_job(job.roles, prog='d2l-bert pretrain')
    if status:
        # A worker killed while writing a file leaves its partial copy
        from ..files import remove_partial_files
        remove_partial_files(args.out)
    return status


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
    if args.workers is not None or args.hosts is not None:
        if args.kvstore:
            return _fail('--kvstore is for the workers a job starts, not '
                         'with --workers or --hosts')
        return _launch(args)
    for name in ('servers', 'port', 'timeout'):
        if getattr(args, name) is not None:
            return _fail(f'--{name} makes sense with --workers N or '
                         '--hosts FILE only')
    try:
        devices = _devices(args.devices)
    except ValueError as e:
        return _fail(f'--devices: {e}')
    problem = _check(args)
    if problem:
        return _fail(problem)
    kvstore = None
    if args.kvstore:
        from ..dist.workers import create_kvstore
        try:
            # Waits until every process of the job has joined
            kvstore = create_kvstore(args.kvstore)
        except ValueError as e:
            return _fail(f'--kvstore: {e}')
    if kvstore is None:
        return _pretrain(args, devices, kvstore)
    # Worker 0 alone prints (errors still go to stderr)
    with open(os.devnull, 'w') as devnull, (
            contextlib.redirect_stdout(devnull) if kvstore.rank != 0
            else contextlib.nullcontext()):
        status = _pretrain(args, devices, kvstore)
    if status:
        from ..dist.workers import leave_job
        leave_job(status)
    return status


def _pretrain(args, devices, kvstore):
    """Pretrain in this process (alone, or as a worker of a job)."""
    fail, out = _fail, args.out
    from mxnet import gluon, init, npx

    from .. import fast
    from ..bert import BERTModel
    from ..dataset import load_data_wiki
    from ..model_files import save_pretrained
    from ..training import evaluate_bert, train_bert_history

    # The book's first cell: every block is written for NumPy semantics
    npx.set_np()
    _seed_everything(args.seed)
    print(args.threads)
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

    leader = kvstore is None or kvstore.rank == 0
    if leader:
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
    where = devices if kvstore is None else \
        f'{kvstore.num_workers} workers x {devices}'
    print(f'pretraining {args.steps} steps on {where} ...', flush=True)
    plot = os.path.join(out, PLOT_FILE)
    try:
        history = train_bert_history(
            train_iter, net, loss, len(vocab), devices, args.steps,
            learning_rate=args.lr, plot=plot, checkpoint=checkpoint,
            checkpoint_every=args.checkpoint_every, resume=args.resume,
            config=settings, batch_loss=batch_loss, kvstore=kvstore)
    except ValueError as e:
        return fail(e)
    if not leader:
        return 0

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
