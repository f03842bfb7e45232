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
import sys
import time

from ._args import (RunError, UsageError, add_devices, add_job_arguments,
                    add_threads, check_devices, examples, in_options,
                    learning_rate, option, plural, positive_int, rate,
                    resolve_devices, seed)
from ._paths import output_dir
from ..presets import BOOK_BERT, PRETRAINING

CHECKPOINT_FILE, PLOT_FILE = 'checkpoint.zip', 'loss.png'
MODEL_FILE = 'pretrained.params'
#: The positions of the model (`BERTModel`'s max_len), as in the book
MODEL_POSITIONS = BOOK_BERT['max_len']
#: Bytes of a corpus that takes more than a minute to prepare
LARGE_CORPUS = 10 << 20
#: The tokens of every vocabulary, whatever the corpus
SPECIAL_TOKENS = ('<unk>', '<pad>', '<mask>', '<cls>', '<sep>')
CORPUS_FILES = ('wiki.train.tokens', 'wiki.valid.tokens')


def corpus(text):
    """``--corpus``: embedded, wikitext-2, or a directory holding
    `CORPUS_FILES` (or the training file, the other beside it)."""
    if text in ('embedded', 'wikitext-2'):
        return text
    usage = ('give --corpus embedded, --corpus wikitext-2, or a directory '
             f'holding {CORPUS_FILES[0]} and {CORPUS_FILES[1]}')
    if not os.path.exists(text):
        raise argparse.ArgumentTypeError(
            f'no such file or directory: {text!r}; {usage}')
    folder = text if os.path.isdir(text) else os.path.dirname(text) or '.'
    wanted = CORPUS_FILES if os.path.isdir(text) else CORPUS_FILES[1:]
    missing = [name for name in wanted
               if not os.path.isfile(os.path.join(folder, name))]
    if missing and not os.path.isdir(text):
        raise argparse.ArgumentTypeError(
            f'{text!r} is a file, and no {missing[0]} is beside it in '
            f'{folder!r}; {usage}')
    if missing:
        raise argparse.ArgumentTypeError(
            f'{folder!r} holds no {" and no ".join(missing)}; {usage}')
    return text


def add_arguments(parser):
    parser.epilog = examples(
        "d2l-bert pretrain                    # the book's settings, 50 "
        'steps',
        'd2l-bert pretrain --steps 200 --devices cpu:0,cpu:1 --out my-bert',
        'd2l-bert pretrain --steps 400 --out my-bert --resume',
        'd2l-bert pretrain --workers 2 --steps 20   # 2 processes, one '
        'model')
    data = parser.add_argument_group('data')
    data.add_argument(
        '--corpus', default='embedded', type=corpus,
        metavar='embedded|wikitext-2|DIR',
        help='embedded (shipped with d2l-bert), wikitext-2 (the book\'s '
             'corpus, downloaded if need be) or a directory holding '
             'wiki.train.tokens and wiki.valid.tokens')
    _book_option(data, 'batch_size', positive_int, 'B',
                 'sentence pairs per step')
    _book_option(data, 'max_len', positive_int, 'T',
                 'tokens per BERT input (max_len)')
    _add_model_arguments(parser)
    _add_training_arguments(parser)
    job = parser.add_argument_group(
        "several processes (MXNet's parameter server, the dist_sync "
        'kvstore)')
    add_job_arguments(job, 'train in N worker processes, each on its '
                           'share of every batch, with the numbers of one '
                           'process that has all their devices (default: '
                           'one process; with --hosts, one per machine)')
    # Set by the launcher in each worker's command, not by hand
    job.add_argument('--kvstore', default=None, help=argparse.SUPPRESS)


def _book_option(group, name, check, metavar, text, setting=None):
    """Add the option `name` to `group`, its default the book's run's
    (`presets.PRETRAINING[setting]`, `setting` defaulting to `name`)."""
    group.add_argument(option(name), type=check, metavar=metavar,
                       default=PRETRAINING[setting or name], help=text)


#: The model's options, `BERTModel`'s arguments; their defaults are the
#: book's small BERT (`presets.BOOK_BERT`)
MODEL_OPTIONS = (
    ('num_hiddens', 'H', positive_int,
     "the size of each token's vector in every block"),
    ('ffn_num_hiddens', 'F', positive_int,
     "the hidden size of each block's position-wise feed-forward network"),
    ('num_heads', 'N', positive_int,
     'attention heads of each block; they must divide --num-hiddens'),
    ('num_blks', 'N', positive_int, 'transformer encoder blocks'),
    ('dropout', 'P', rate,
     'the probability that dropout zeroes a value while training'))


def _add_model_arguments(parser):
    model = parser.add_argument_group(
        "model (the book's small BERT, BERTModel's arguments)")
    for name, metavar, check, text in MODEL_OPTIONS:
        model.add_argument(option(name), type=check, default=BOOK_BERT[name],
                           metavar=metavar, help=f'{name}: {text}')


def _add_training_arguments(parser):
    train = parser.add_argument_group('training')
    _book_option(train, 'steps', positive_int, 'N', 'steps in total',
                 setting='num_steps')
    _book_option(train, 'lr', learning_rate, 'LR', "Adam's learning rate")
    add_devices(train, None, 'every GPU, else the CPU, as the book')
    train.add_argument('--seed', type=seed, default=0,
                       help='seed of every random choice')
    train.add_argument('--out', default='bert-pretrained', metavar='DIR',
                       type=output_dir,
                       help='where the model, plot and checkpoint go')
    train.add_argument('--resume', action='store_true',
                       help=f'continue from DIR/{CHECKPOINT_FILE} if it '
                            'exists')
    train.add_argument('--overwrite', action='store_true',
                       help='start over in a DIR that holds a model or a '
                            'checkpoint, replacing them (without it or '
                            '--resume, such a DIR is refused)')
    train.add_argument('--checkpoint-every', type=positive_int,
                       default=10, metavar='K',
                       help='save a checkpoint every K steps')
    add_threads(train, 'CPU threads of each process (default: every core; '
                       'with --workers N, cores // N)')


#: The options a worker gets as they are; the others make the job
FORWARDED = ('corpus', 'batch_size', 'max_len', 'num_hiddens',
             'ffn_num_hiddens', 'num_heads', 'num_blks', 'dropout', 'steps',
             'lr', 'devices', 'seed', 'out', 'resume', 'overwrite',
             'checkpoint_every')
JOB_OPTIONS = ('workers', 'servers', 'hosts', 'port', 'num_threads',
               'kvstore', 'timeout')


def _worker_argv(args, num_threads):
    """A worker's command: this one, without the job's options, plus
    ``--kvstore dist_sync`` and its thread count."""
    argv = [sys.executable, '-m', 'd2l_bert', 'pretrain']
    for name in FORWARDED:
        value = getattr(args, name)
        # (`is`, not `in (None, False)`: 0 and 0.0 equal False)
        if value is True:
            argv.append(option(name))
        elif value is not None and value is not False:
            argv += [option(name), str(value)]
    return argv + ['--kvstore', 'dist_sync', '--threads', str(num_threads)]


def _num_devices(text):
    """How many devices `--devices` names, without importing `mxnet`
    (the workers check the names): 1 for the default and 'all-gpus'."""
    if text is None or text == 'all-gpus':
        return 1
    return len(text.split(','))


def _check_batch_size(batch_size, num_devices):
    """Refuse a batch with fewer sentence pairs than ``--devices``: each
    device trains on its own rows of every batch, at least one."""
    if batch_size < num_devices:
        raise UsageError(
            f'--batch-size {batch_size} is less than one sentence pair for '
            f'each of the {num_devices} devices of --devices: use '
            f'--batch-size {num_devices} or more, or fewer devices')


def _check_pairs(args, num_pairs, num_shards):
    """Refuse a corpus of fewer training pairs than the shards of a
    batch (the devices of every process): no batch could feed them."""
    if num_pairs < num_shards:
        pairs = plural(num_pairs, 'training pair')
        raise UsageError(
            f'--corpus {args.corpus} gives {pairs}, fewer than one for each '
            f'of the {num_shards} devices of the run: give a larger corpus, '
            'or fewer devices')


def _check(args):
    """The checks that need no `mxnet`."""
    if args.num_hiddens % args.num_heads:
        raise UsageError(f'--num-heads {args.num_heads} must divide '
                         f'--num-hiddens {args.num_hiddens}')
    if args.max_len > MODEL_POSITIONS:
        raise UsageError(f'--max-len {args.max_len} is more than the '
                         f'{MODEL_POSITIONS} positions of the model; use '
                         f'--max-len {MODEL_POSITIONS} or less')
    _check_memory(args, vocab_size=len(SPECIAL_TOKENS))
    if args.resume and args.overwrite:
        raise UsageError('--resume goes on from the checkpoint and '
                         '--overwrite starts over: give one of them')


def _check_memory(args, vocab_size):
    """Refuse sizes whose arrays need more memory than the machine has
    (`vocab_size`: a lower bound before the corpus is read)."""
    from ..runs.memory import bert_bytes, check_fits
    sizes = ('num_hiddens', 'ffn_num_hiddens', 'num_heads', 'num_blks',
             'batch_size', 'max_len')
    need = bert_bytes(vocab_size, args.num_hiddens, args.ffn_num_hiddens,
                      args.num_heads, args.num_blks, MODEL_POSITIONS,
                      args.batch_size, args.max_len)
    try:
        check_fits(need, ' '.join(f'{option(name)} {getattr(args, name)}'
                                  for name in sizes))
    except ValueError as e:
        raise UsageError(e) from None


def _claim(args):
    """Lock ``--out`` for this run, after checking that it replaces no
    model unasked and that ``--resume`` has steps left to train."""
    from ..runs.out_dir import FINETUNED_FILES, OutDirError, claim
    out = args.out
    what = 'a pretrained model'
    if os.path.exists(os.path.join(out, CHECKPOINT_FILE)) and \
            not os.path.exists(os.path.join(out, MODEL_FILE)):
        what = 'the checkpoint of a run whose model is not written'
    try:
        lock = claim(out, (MODEL_FILE, CHECKPOINT_FILE),
                     resume=args.resume, overwrite=args.overwrite,
                     what=what,
                     other=(FINETUNED_FILES[:1], 'a fine-tuned model'))
    except OutDirError as e:
        raise UsageError(e) from None
    try:
        _check_resume(args)
    except BaseException:
        lock.release()
        raise
    return lock


def _check_resume(args):
    """With ``--resume``: a checkpoint to go on from, not yet at
    ``--steps`` unless the model of its step is not written (then the
    run writes it and trains no step)."""
    checkpoint = os.path.join(args.out, CHECKPOINT_FILE)
    if not args.resume:
        return
    if not os.path.exists(checkpoint):
        if os.path.exists(os.path.join(args.out, MODEL_FILE)):
            raise UsageError(
                f'--resume: {args.out} holds a model but no '
                f'{CHECKPOINT_FILE} to go on from; give --overwrite to '
                'start over, or another --out')
        return
    from ..runs.checkpoints import read_checkpoint_meta
    try:
        step = int(read_checkpoint_meta(checkpoint)['step'])
    except (ValueError, KeyError, TypeError) as e:
        raise UsageError(f'--resume: {e}') from None
    if step >= args.steps and _model_step(args.out) != step:
        # A run that stopped while saving its model (a full disk)
        print(f'--resume: {checkpoint} is at step {step:,} already but '
              f'its model is not written: writing it, without training',
              flush=True)
    elif step >= args.steps:
        raise UsageError(
            f'--resume --steps {args.steps}: {checkpoint} is at step '
            f'{step:,} already, nothing to train; give --steps {step + 1} '
            'or more to go on')


def _model_step(out):
    """The step the model in `out` was saved at (None: no model, or
    one whose config.json does not say)."""
    import json
    from ..data.bounded import read_bounded
    from ..data.model_dir import CONFIG_FILE, MAX_CONFIG_BYTES
    if not os.path.isfile(os.path.join(out, MODEL_FILE)):
        return None
    try:  # a config.json too large, or not a file, says no step
        data = read_bounded(os.path.join(out, CONFIG_FILE), MAX_CONFIG_BYTES)
        return int(json.loads(data)['pretraining']['num_steps'])
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        return None


def _launch(args):
    """Start the job of ``--workers``/``--hosts`` and wait for it."""
    from ..dist import launcher
    if args.kvstore:
        raise UsageError('--kvstore is for the workers a job starts, not '
                         'with --workers or --hosts')
    _check(args)
    with _claim(args):
        return _run_job(args, launcher)


def _run_job(args, launcher):
    """Prepare the job, start it and wait for it; return its status."""
    try:
        job = launcher.prepare_job(
            lambda num_threads: _worker_argv(args, num_threads),
            num_workers=args.workers, num_servers=args.servers,
            hosts=args.hosts, port=args.port, num_threads=args.num_threads,
            timeout=args.timeout)
    except launcher.LaunchError as e:
        raise UsageError(e) from None
    per_worker = _num_devices(args.devices)
    num_shards = job.num_workers * per_worker
    if args.batch_size < num_shards:
        raise UsageError(
            f'--batch-size {args.batch_size} is less than one sentence '
            f'pair for each of the {num_shards} shards of a batch '
            f'({job.num_workers} workers x {per_worker} device(s)): use '
            f'--batch-size {num_shards} or more, or fewer workers')
    print(job.description, flush=True)
    status = launcher.run_job(job.roles, prog='d2l-bert pretrain')
    if status:
        # A worker killed while writing a file leaves its partial copy
        from ..data.atomic import remove_partial_files
        remove_partial_files(args.out)
    return status


def main(args):
    """Run ``d2l-bert pretrain``; return the exit status."""
    if args.workers is not None or args.hosts is not None:
        return _launch(args)
    for name in ('servers', 'port', 'timeout'):
        if getattr(args, name) is not None:
            raise UsageError(f'--{name} makes sense with --workers N or '
                             '--hosts FILE only')
    if args.kvstore is None:  # (a job's launcher checked its shards)
        _check_batch_size(args.batch_size, _num_devices(args.devices))
    check_devices(args.devices)
    _check(args)
    kvstore = _join_job(args.kvstore)
    if kvstore is None:
        with _claim(args):
            return _pretrain(args, resolve_devices(args.devices), kvstore)
    devices = resolve_devices(args.devices)
    # A worker of a job: the launcher holds the lock on --out
    # Worker 0 alone prints (errors still go to stderr)
    with open(os.devnull, 'w') as devnull, (
            contextlib.redirect_stdout(devnull) if kvstore.rank != 0
            else contextlib.nullcontext()):
        try:
            status = _pretrain(args, devices, kvstore)
        except UsageError as e:
            print(f'd2l-bert pretrain: error: {e}', file=sys.stderr)
            status = 2
    if status:
        from ..dist.workers import leave_job
        leave_job(status)
    return status


def _join_job(name):
    """The kvstore of ``--kvstore`` (None without); waits until every
    process of the job has joined."""
    if not name:
        return None
    from ..dist.workers import create_kvstore
    try:
        return create_kvstore(name)
    except ValueError as e:
        raise UsageError(f'--kvstore: {e}') from None


def _pretrain(args, devices, kvstore):
    """Pretrain in this process (alone, or as a worker of a job): load,
    build, train, evaluate and save."""
    from mxnet import npx

    from ..runs.seeding import seed_everything

    # The book's first cell: every block is written for NumPy semantics
    npx.set_np()
    seed_everything(args.seed)
    print(args.threads)
    train_iter, valid_iter, vocab = _load_corpus(
        args, warn=kvstore is None or kvstore.rank == 0)
    _check_pairs(args, len(train_iter._dataset), len(devices) * (
        1 if kvstore is None else kvstore.num_workers))
    # What a resumed run must share with the run it continues (not the
    # step count: resuming with more steps trains on)
    model = dict(vocab_size=len(vocab), num_hiddens=args.num_hiddens,
                 ffn_num_hiddens=args.ffn_num_hiddens,
                 num_heads=args.num_heads, num_blks=args.num_blks,
                 dropout=args.dropout, max_len=MODEL_POSITIONS)
    _check_memory(args, vocab_size=len(vocab))
    run = dict(corpus=args.corpus, batch_size=args.batch_size,
               seq_len=args.max_len, learning_rate=args.lr, seed=args.seed)
    net, loss, batch_loss = _build(model, devices)
    history = _train(args, train_iter, (net, loss, batch_loss), devices,
                     kvstore, dict(model, **run))
    if kvstore is not None and kvstore.rank != 0:
        return 0
    accuracy = _evaluate(batch_loss.graph.net, valid_iter, len(vocab),
                         devices)
    pretraining = dict(run, num_steps=history.num_steps,
                       mlm_loss=history.mlm_loss, nsp_loss=history.nsp_loss,
                       mlm_accuracy=accuracy.mlm_accuracy,
                       nsp_accuracy=accuracy.nsp_accuracy)
    _save(args.out, net, vocab, dict(model, pretraining=pretraining))
    return 0


def _load_corpus(args, warn=True):
    """The training and held-out minibatches of ``--corpus``, and the
    vocabulary (`warn`: say on standard error when the corpus is too
    small to learn from, as worker 0 of a job does for all)."""
    from ..runs.wiki_data import load_pretraining_data
    from ..fast import pad_bert_inputs_stacked as pad
    print(f'loading the {args.corpus} corpus ({_corpus_size(args.corpus)}'
          f'batch size {args.batch_size}, max_len {args.max_len}) ...',
          flush=True)
    start = time.perf_counter()
    try:
        train_iter, vocab = load_pretraining_data(
            args.batch_size, args.max_len, corpus=args.corpus,
            seed=args.seed, pad=pad)
        valid_iter, _ = load_pretraining_data(
            args.batch_size, args.max_len, corpus=args.corpus,
            split='valid', vocab=vocab, pad=pad)
    except RuntimeError as e:  # WikiText-2 cannot be downloaded
        raise RunError(in_options(e)) from None
    except (ValueError, FileNotFoundError) as e:
        message = in_options(e)
        if '--' not in message:
            message = f'--corpus {args.corpus}: {message}'
        raise UsageError(message) from None
    print(f'{len(train_iter._dataset)} training pairs, '
          f'{len(valid_iter._dataset)} held-out pairs, vocabulary of '
          f'{len(vocab)} tokens ({time.perf_counter() - start:.1f} s)')
    warning = warn and small_corpus_warning(
        args, len(train_iter._dataset), len(vocab))
    if warning:
        print(f'd2l-bert pretrain: warning: {warning}', file=sys.stderr)
    return train_iter, valid_iter, vocab


def small_corpus_warning(args, num_pairs, vocab_size):
    """One line on a training corpus too small to learn from: fewer
    pairs than a batch, or no word in the vocabulary (None otherwise).

    Parameters
    ----------
    args : argparse.Namespace
        ``--corpus`` and ``--batch-size``.
    num_pairs, vocab_size : int
        The training pairs and the tokens of the vocabulary.
    """
    from ..runs.wiki_data import MIN_FREQ
    problems = []
    if num_pairs < args.batch_size:
        problems.append(f'fewer than one batch (--batch-size '
                        f'{args.batch_size})')
    if vocab_size <= len(SPECIAL_TOKENS):
        problems.append(f'no word in its vocabulary (a word needs '
                        f'{MIN_FREQ} occurrences; every one is <unk>)')
    if not problems:
        return None
    lines, paragraphs = _count_paragraphs(args.corpus)
    pairs = plural(num_pairs, 'training pair')
    return (f'--corpus {args.corpus} gives {pairs} from '
            f'{plural(lines, "line")} of text, '
            f'{plural(paragraphs, "paragraph")} of 2 sentences or more '
            "(what the book's pipeline takes): "
            f'{" and ".join(problems)}, too little to learn from; give a '
            "corpus of many paragraphs, one a line, its sentences ending "
            "' . ' (such as --corpus embedded)")


def _count_paragraphs(corpus):
    """The lines of text of `corpus`'s training file, and those that
    are paragraphs of 2 sentences or more."""
    from ..data.wikitext import locate_corpus
    data_dir, file_name = locate_corpus(corpus, 'train')
    with open(os.path.join(data_dir, file_name), encoding='utf-8') as f:
        lines = [line for line in f if line.strip()]
    return len(lines), sum(len(line.split(' . ')) >= 2 for line in lines)


def _corpus_size(corpus):
    """``'12.5 MB, '`` for a corpus in a directory (nothing for the
    named ones), with a word on the minutes a large one takes."""
    if corpus in ('embedded', 'wikitext-2'):
        return ''
    from ..runs.memory import size_text
    folder = corpus if os.path.isdir(corpus) else \
        os.path.dirname(corpus) or '.'
    size = sum(os.path.getsize(os.path.join(folder, name))
               for name in CORPUS_FILES
               if os.path.isfile(os.path.join(folder, name)))
    slow = ', minutes to prepare' if size > LARGE_CORPUS else ''
    return f'{size_text(size)}{slow}; '


def _build(model, devices):
    """The book's `BERTModel` of the sizes `model`, and the fast layer's
    one-graph step over it (the model and both losses)."""
    from mxnet import gluon, init

    from .. import fast
    from ..book.bert import BERTModel
    from ..checks import check_inputs
    net = check_inputs(BERTModel(
        model['vocab_size'], model['num_hiddens'], model['ffn_num_hiddens'],
        model['num_heads'], model['num_blks'], model['dropout']))
    net.initialize(init.Xavier(), ctx=devices)
    loss = gluon.loss.SoftmaxCELoss()
    # The book model's parameters are trained in place
    batch_loss = fast.batch_loss(net, loss, model['vocab_size'])
    print(f'path: {fast.describe(batch_loss.graph.net)}, model and losses '
          'in one graph (d2l_bert.fast.batch_loss)')
    print(fast.describe_loops(devices))
    return net, loss, batch_loss


def _train(args, train_iter, model, devices, kvstore, settings):
    """Train `model` (`_build`'s three) for ``--steps`` with checkpoints;
    return the history."""
    from ..runs.checkpoint_meta import ResumeError
    from ..runs.pretraining import train_bert_history
    net, loss, batch_loss = model
    if kvstore is None or kvstore.rank == 0:
        os.makedirs(args.out, exist_ok=True)
    checkpoint = os.path.join(args.out, CHECKPOINT_FILE)
    if args.resume and not os.path.exists(checkpoint):
        print(f'no checkpoint at {checkpoint}: starting from step 0')
    where = devices if kvstore is None else \
        f'{kvstore.num_workers} workers x {devices}'
    print(f'pretraining {plural(args.steps, "step")} on {where} ...',
          flush=True)
    try:
        return train_bert_history(
            train_iter, net, loss, settings['vocab_size'], devices, args.steps,
            learning_rate=args.lr, plot=os.path.join(args.out, PLOT_FILE),
            checkpoint=checkpoint, checkpoint_every=args.checkpoint_every,
            resume=args.resume, config=settings, batch_loss=batch_loss,
            kvstore=kvstore)
    except ResumeError as e:
        raise UsageError(f'--resume: {e}') from None
    except ValueError as e:
        raise UsageError(in_options(str(e))) from None


def _evaluate(twin, valid_iter, vocab_size, devices):
    """Print and return the held-out accuracies."""
    from ..runs.pretraining import evaluate_bert
    accuracy = evaluate_bert(twin, valid_iter, vocab_size, devices,
                             progress=True)
    print(f'held-out {accuracy}')
    return accuracy


def _save(out, net, vocab, config):
    """Write the model in bert.small's layout, and say what is where."""
    from ..runs.model_files import save_pretrained
    from ..runs.out_dir import FINETUNED_FILES, other_model_files
    save_pretrained(net, vocab, out, config,
                    replacing=other_model_files(out, FINETUNED_FILES))
    print(f'saved the model to {out}/ (pretrained.params, vocab.json, '
          'config.json)')
    print(f'saved the loss curves to {os.path.join(out, PLOT_FILE)}')
    print(f'checkpoint: {os.path.join(out, CHECKPOINT_FILE)} (continue '
          'with --resume --steps MORE)')
