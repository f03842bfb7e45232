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

from ._args import (RunError, UsageError, add_devices, at_least, examples,
                    in_options, learning_rate, option, per_machine,
                    positive_int, rate, resolve_devices, seed)
from ._paths import name_or_dir, output_dir
from ..presets import BERT_SMALL, FINETUNING, FINETUNING_SYNTHETIC

DEFAULT_OUT = 'finetuned-bert'
MODEL_FILE = 'finetuned.params'

# Defaults of the options left out: the book's run on SNLI (550k pairs,
# hours on a CPU), and one that takes minutes on the synthetic data
BOOK_SETTINGS = dict(epochs=FINETUNING['num_epochs'],
                     batch_size=FINETUNING['batch_size'],
                     max_len=FINETUNING['max_len'], lr=FINETUNING['lr'])
SYNTHETIC_SETTINGS = dict(epochs=FINETUNING_SYNTHETIC['num_epochs'],
                          batch_size=FINETUNING_SYNTHETIC['batch_size'],
                          max_len=FINETUNING_SYNTHETIC['max_len'],
                          lr=FINETUNING_SYNTHETIC['lr'])
# Below this `cls_spread`, the pretrained model encodes every input alike
COLLAPSED_SPREAD = 1e-3
#: Bytes of memory a byte of SNLI's files takes once read and packed
#: (100,000 synthetic pairs: 42 MB of files, 360 MB more memory)
SNLI_BYTES = 10


def add_arguments(parser):
    """Add the options of `d2l-bert finetune` to `parser`."""
    parser.epilog = examples(
        "d2l-bert finetune                    # the book's run: bert.small,"
        ' SNLI',
        'd2l-bert pretrain --lr 0.001 --out my-bert',
        'd2l-bert finetune --model my-bert --data synthetic')
    # the first name is the default
    for flag, names, holds, text in (
            ('--model', ('bert.small', 'bert.base'),
             'pretrained.params and vocab.json',
             'pretrained BERT: a d2l hub name (downloaded, checked by '
             'SHA-1) or a directory with pretrained.params and vocab.json '
             '(as `d2l-bert pretrain --out DIR` writes)'),
            ('--data', ('snli', 'synthetic'),
             'snli_1.0_train.txt and snli_1.0_test.txt',
             'snli downloads SNLI; synthetic writes a small SNLI-format '
             'corpus, no network needed; DIR holds snli_1.0_train.txt and '
             'snli_1.0_test.txt')):
        parser.add_argument(
            flag, default=names[0], metavar='|'.join(('DIR',) + names),
            type=name_or_dir(names, f'a directory holding {holds}',
                             utf8=flag == '--model'),
            help=text)
    for name, metavar, check, text in (
            ('epochs', 'N', positive_int, 'number of epochs'),
            ('batch_size', 'B', positive_int, 'minibatch size'),
            ('max_len', 'T', at_least(3, ' (<cls> and two <sep>)'),
             'length of each BERT input, max_len'),
            ('lr', 'LR', learning_rate, "Adam's learning rate")):
        parser.add_argument(
            option(name), type=check, default=None, metavar=metavar,
            help=f'{text} (default: {BOOK_SETTINGS[name]:g}, the '
                 f"book's; {SYNTHETIC_SETTINGS[name]:g} with --data "
                 'synthetic)')
    parser.add_argument('--dropout', type=rate,
                        default=BERT_SMALL['dropout'], metavar='P',
                        help='dropout while fine-tuning')
    add_devices(parser, None)
    parser.add_argument('--num-workers', type=per_machine(0, 'processes'),
                        default=None, metavar='K',
                        help='worker processes that prepare the data '
                             '(default: 4, as the book; 0 on Windows)')
    parser.add_argument('--seed', type=seed, default=0,
                        help='random seed')
    parser.add_argument('--out', default=DEFAULT_OUT, metavar='DIR',
                        type=output_dir, help='output directory')
    parser.add_argument('--overwrite', action='store_true',
                        help='replace the fine-tuned model DIR holds '
                             '(without it, such a DIR is refused)')
    parser.add_argument('--no-progress', action='store_true',
                        help='no progress bars')


def settings_of(args):
    """Every setting of the run, composed once: the options given, and
    for those left out the defaults of ``--data``."""
    defaults = (SYNTHETIC_SETTINGS if args.data == 'synthetic'
                else BOOK_SETTINGS)
    settings = {name: getattr(args, name) for name in defaults}
    settings.update({name: value for name, value in defaults.items()
                     if settings[name] is None})
    num_workers = (args.num_workers if args.num_workers is not None
                   else 0 if sys.platform.startswith('win') else 4)
    return dict(settings, model=str(args.model), data=str(args.data),
                dropout=args.dropout, num_workers=num_workers,
                seed=args.seed, out=args.out,
                progress=not args.no_progress)


def run(args):
    """Fine-tune as the options say; return the history dict."""
    from ..runs.seeding import seed_everything
    settings = settings_of(args)
    devices = resolve_devices(args.devices)
    seed_everything(settings['seed'])
    start = time.time()
    config, bert, vocab = _load_model(settings, devices)
    train_set, test_set = _load_data(settings, vocab)
    net, history = _train(settings, bert, train_set, test_set, devices)
    seconds = time.time() - start
    _save(settings, net, vocab, history, dict(
        config, vocab_size=len(vocab), model=settings['model'],
        data=settings['data'], epochs=settings['epochs'],
        batch_size=settings['batch_size'],
        finetune_max_len=settings['max_len'], lr=settings['lr'],
        seed=settings['seed'], devices=[str(d) for d in devices],
        seconds=round(seconds, 1), test_acc=history['test acc'][-1]))
    print(f'{seconds:.1f} s in all; saved the fine-tuned model, history and '
          f'{os.path.join(settings["out"], "finetune.png")}')
    return history


def _load_model(settings, devices):
    """The pretrained model's sizes (with ``--dropout``), the model and
    its vocabulary."""
    from ..data.hub import DownloadError
    from ..runs import finetuning as runs_ft
    model = settings['model']
    try:
        config = runs_ft.load_pretrained_config(model)
        if settings['max_len'] > config['max_len']:
            raise UsageError(
                f'--max-len {settings["max_len"]} is longer than the '
                f"{config['max_len']} positions of the pretrained model "
                f'{model!r}; use --max-len {config["max_len"]} or less')
        config['dropout'] = settings['dropout']
        _check_memory(settings, config)
        bert, vocab = _load_pretrained_model(model, devices, config)
    except DownloadError as e:
        raise RunError(f'--model {model}: {e}') from None
    except (ValueError, FileNotFoundError) as e:
        raise UsageError(f'--model {model}: {e}') from None
    return config, bert, vocab


def _load_pretrained_model(model, devices, config):
    """The book's `load_pretrained_model`, with one line for a parameter
    file MXNet cannot read."""
    from ..checks import check_inputs
    from ..data.model_dir import PARAMS_FILE, damaged, is_mxnet_trace
    from ..runs import finetuning as runs_ft
    try:
        bert, vocab = runs_ft.load_checked_model(model, devices=devices,
                                                 **config)
        return check_inputs(bert), vocab
    except (ValueError, RuntimeError) as e:
        if not is_mxnet_trace(e) and not is_mxnet_trace(e.__cause__):
            raise
        where = runs_ft._pretrained_dir(model)
        raise damaged(os.path.join(where, PARAMS_FILE)) from None


def _check_memory(settings, config):
    """Refuse a batch whose arrays need more memory than the machine
    has, before the model is loaded."""
    from ..runs.memory import bert_bytes, check_fits
    need = bert_bytes(5, config['num_hiddens'], config['ffn_num_hiddens'],
                      config['num_heads'], config['num_blks'],
                      config['max_len'], settings['batch_size'],
                      settings['max_len'])
    try:
        check_fits(need, f'--batch-size {settings["batch_size"]} '
                         f'--max-len {settings["max_len"]} with --model '
                         f'{settings["model"]}')
    except ValueError as e:
        raise UsageError(e) from None


def _load_data(settings, vocab):
    """The training and test sets of ``--data``, packed to ``--max-len``,
    after warning of a batch larger than the data or pairs cut short."""
    from ..book import finetuning as ft
    from ..data.hub import DownloadError
    from ..runs import finetuning as runs_ft
    from ..runs.memory import check_files_fit
    data = settings['data']
    try:
        data_dir = runs_ft.snli_data_dir(data)
        check_files_fit([os.path.join(data_dir, f'snli_1.0_{split}.txt')
                         for split in ('train', 'test')], SNLI_BYTES,
                        f'the SNLI files of {data_dir}')
        train = runs_ft.read_snli_pairs(data_dir, True)
        test = runs_ft.read_snli_pairs(data_dir, False)
    except DownloadError as e:
        raise RunError(f'--data {data}: {e}') from None
    except (ValueError, FileNotFoundError) as e:
        raise UsageError(in_options(f'--data {data}: {e}')) from None
    for warning in data_warnings(settings, train):
        print(f'd2l-bert finetune: warning: {warning}', file=sys.stderr)
    from ..checks import check_snli_dataset
    for split in (train, test):
        try:
            check_snli_dataset(split, settings['max_len'], vocab)
        except (ValueError, TypeError) as e:
            raise UsageError(f'--data {data}: {e}') from None
    return tuple(ft.SNLIBERTDataset(split, settings['max_len'], vocab)
                 for split in (train, test))


def data_warnings(settings, train):
    """What makes a run end near chance: a batch larger than the
    training set, or ``--max-len`` cutting most pairs.

    Parameters
    ----------
    settings : dict
        `settings_of`'s.
    train : (premises, hypotheses, labels)
        As `read_snli` returns the training set.

    Returns
    -------
    list of str
        One line a warning.
    """
    premises, hypotheses, _ = train
    count, warnings = len(premises), []
    batch_size, max_len = settings['batch_size'], settings['max_len']
    if batch_size > count:
        warnings.append(
            f'--batch-size {batch_size} exceeds the {count:,} training '
            'examples: each epoch is one step; use --batch-size '
            f'{max(1, count // 10)} or so for ten steps an epoch')
    # <cls>, two <sep> and the words of both texts
    lengths = [len(p.split()) + len(h.split()) + 3
               for p, h in zip(premises, hypotheses)]
    cut = sum(length > max_len for length in lengths)
    if 2 * cut > count:
        warnings.append(
            f'--max-len {max_len} cuts {cut:,} of the {count:,} training '
            f'pairs short (the longest needs {max(lengths)} tokens): use '
            f'--max-len {max(lengths)} to keep every pair whole')
    return warnings


def _train(settings, bert, train_set, test_set, devices):
    """Fine-tune `bert` with a new classifier; return it and the
    history."""
    from mxnet import gluon

    from .. import fast
    from ..book import finetuning as ft
    from ..runs import finetuning as runs_ft
    _warn_if_collapsed(settings['model'],
                       runs_ft.cls_spread(bert, train_set))
    # the loaders' worker processes are forked with a copy of what
    # standard output holds: flushed now, no line is printed twice
    sys.stdout.flush()
    loaders = [gluon.data.DataLoader(
        dataset, settings['batch_size'], shuffle=shuffle,
        num_workers=settings['num_workers'])
        for dataset, shuffle in ((train_set, True), (test_set, False))]
    net = ft.BERTClassifier(bert)
    net.output.initialize(ctx=devices)
    # The fast layer: the same parameters, one graph, compiled loops
    twin = fast.accelerate(net)
    print(f'path: {fast.describe(twin)}', flush=True)
    trainer = gluon.Trainer(twin.collect_params(), 'adam',
                            {'learning_rate': settings['lr']})
    loss = gluon.loss.SoftmaxCrossEntropyLoss()
    try:
        history = runs_ft.train_ch13_history(
            twin, *loaders, loss, trainer, settings['epochs'], devices,
            progress=settings['progress'])
    except ValueError as e:  # a learning rate that overflows the weights
        raise UsageError(in_options(e)) from None
    return net, history


def _warn_if_collapsed(model, spread):
    if spread < COLLAPSED_SPREAD:
        print(f'd2l-bert finetune: warning: {model} encodes every input '
              f'alike (spread {spread:.1e} of the <cls> encoding across '
              'examples): its pretraining collapsed, and fine-tuning will '
              'likely stay near chance. Short pretraining at the learning '
              'rate 0.01 does this; pretrain with a smaller one (d2l-bert '
              'pretrain --lr 0.001) or use bert.small', file=sys.stderr)


def _save(settings, net, vocab, history, config):
    """Write the classifier, its vocabulary, `config` (sizes, settings
    and numbers), the history and its plot into ``--out``, all or none,
    the classifier last (a full disk leaves the files there as they
    were, and no classifier beside another's files); a pretrained
    model there (``--overwrite``) is removed once they are written."""
    import json

    from ..data.atomic import atomic_write_all
    from ..runs import finetuning as runs_ft
    from ..runs.out_dir import PRETRAINED_FILES, other_model_files
    out = settings['out']
    model_file = os.path.join(out, MODEL_FILE)
    theirs = other_model_files(out, PRETRAINED_FILES)
    atomic_write_all(
        [(os.path.join(out, name), json.dumps(obj, indent=2))
         for name, obj in (('vocab.json', vocab.idx_to_token),
                           ('history.json', history),
                           ('config.json', config))]
        + [(os.path.join(out, 'finetune.png'),
            runs_ft.history_png(history)),
           (model_file, net.save_parameters)],
        remove_first=[model_file] + theirs)


def main(args):
    """Run `d2l-bert finetune`; return the exit code."""
    from ..runs.out_dir import (PRETRAINED_FILES, OutDirError, claim,
                                finished_files)
    # A run stopped before saving its model leaves its checkpoint alone
    theirs = 'a pretrained model'
    if finished_files(args.out, PRETRAINED_FILES[:2]) == \
            [PRETRAINED_FILES[1]]:
        theirs = 'a pretraining checkpoint whose model is not written'
    try:
        lock = claim(args.out, (MODEL_FILE,), overwrite=args.overwrite,
                     what='a fine-tuned model',
                     other=(PRETRAINED_FILES[:2], theirs))
    except OutDirError as e:
        raise UsageError(e) from None
    with lock:
        run(args)
    return 0
