"""The table of tests/test_cli_runaway.py: each row a command line an
unforgiving user runs, the exit status and the last line of standard
error it must end with, and the files it must leave as they were."""
import os
import signal
from collections import namedtuple

import pytest

from d2l_bert.runs.out_dir import LOCK_FILE
from helpers import TINY_ARGS

#: The file-size limit of the full-disk rows
FULL = 20_000
TINY = ' '.join(TINY_ARGS)

Case = namedtuple('Case', 'argv status line same extra')
Case.__new__.__defaults__ = (None, {})


def case(argv, status, line, same=None, **extra):
    """A row: ``d2l-bert ARGV`` (a string split at spaces, or a list
    for arguments that hold spaces, are empty or are not UTF-8) ends
    with `status` and the last line of standard error `line` (None:
    standard error is empty, or holds only notes and progress bars,
    warnings included); the files of the directory `same` are
    byte-identical afterwards.  `extra`: ``fsize`` (a file-size limit),
    ``stdin`` (bytes), ``interrupt`` (a line of standard output after
    which Ctrl-C comes), ``signal`` (another signal than Ctrl-C's),
    ``seconds`` (at most; from the signal for a row with ``interrupt``,
    `ANSWER_SECONDS` unless it says), ``gone`` (files, a glob pattern,
    that must be gone afterwards), ``lock`` (hold ``--out``'s lock),
    ``marker`` (no process whose command line holds it may be left, in
    any session), ``address_space`` (its limit, in bytes, instead of
    `ADDRESS_SPACE`), ``readonly`` (a directory mounted read-only for the
    row, as root), ``tmpfs`` (a directory that is a full file system of
    its own for the row, as root)."""
    name = argv if isinstance(argv, str) else ' '.join(map(repr, argv))
    name = name.replace(f' {TINY}', '')
    name = name if len(name) <= 60 else f'{name[:36]}...{name[-20:]}'
    marks = extra.pop('marks', ())
    return pytest.param(Case(argv, status, line, same, extra), id=name,
                        marks=marks)


def error(command, message):
    return f'd2l-bert {command}: error: {message}'


MODEL = 'holds a pretrained model (pretrained.params, checkpoint.zip)'
NOT_TEXT = ('not a text file (it holds NUL bytes); write one '
            '[USER@]ADDRESS[:SSH_PORT] a line')
NOT_SAVED = ('the weights are no longer finite, and are not saved; use a '
             'smaller learning rate (0.01 in the book, 0.001 is safer)')
SIXTEEN = ("num_hiddens must be a positive integer, got 'sixteen'; "
           'correct it, or re-run `d2l-bert pretrain`')
CORRUPT = ('is corrupt or truncated (array 1 of 45, of shape (1, 1000, 32) '
           'and dtype float32, needs 128,000 bytes at offset 72, and the '
           'file ends at 1,000); download it again or re-run `d2l-bert '
           'pretrain`')

TABLE = [
    # A finished model is never replaced unasked
    case(f'pretrain --corpus corpus --steps 3 --out M {TINY}', 2, error(
        'pretrain', f'--out M {MODEL} that this run would replace: give '
        '--resume to go on from it, --overwrite to start over, or another '
        '--out'), same='M'),
    case('finetune --model M --data nli --out F', 2, error(
        'finetune', '--out F holds a fine-tuned model (finetuned.params) '
        'that this run would replace: give --overwrite to replace it, or '
        'another --out'), same='F'),
    case(f'pretrain --corpus corpus --steps 2 --out M --resume {TINY}', 2,
         error('pretrain', '--resume --steps 2: M/checkpoint.zip is at '
               'step 2 already, nothing to train; give --steps 3 or more to '
               'go on'), same='M'),
    case(f'pretrain --corpus corpus --steps 5 --out M --resume {TINY}', 2,
         error('pretrain', f'--out M: another run is using this directory '
               f'(it holds M/{LOCK_FILE}); wait for it to end, or give '
               'another --out'), same='M', lock='M'),
    case(f'pretrain --corpus corpus --steps 2 --out M --resume --overwrite '
         f'{TINY}', 2, error('pretrain', '--resume goes on from the '
                             'checkpoint and --overwrite starts over: give '
                             'one of them'), same='M'),
    # nor one model's parameters left beside the other's config.json
    case('finetune --model M --data nli --out M', 2, error(
        'finetune', '--out M holds a pretrained model (pretrained.params, '
        'checkpoint.zip), not a fine-tuned model: give another --out, or '
        '--overwrite to replace it with a fine-tuned model'), same='M'),
    case(f'pretrain --corpus corpus --steps 1 --out F {TINY}', 2, error(
        'pretrain', '--out F holds a fine-tuned model (finetuned.params), '
        'not a pretrained model: give another --out, or --overwrite to '
        'replace it with a pretrained model'), same='F'),
    case(f'pretrain --corpus corpus --steps 3 --out F --resume {TINY}', 2,
         error('pretrain', '--out F holds a fine-tuned model '
               '(finetuned.params), not a pretrained model: give another '
               '--out, or --overwrite to replace it with a pretrained '
               'model'), same='F'),
    case('finetune --model M --data nli --epochs 1 --batch-size 16 '
         '--max-len 16 --num-workers 0 --no-progress --out Mfine '
         '--overwrite', 0, None, gone=('Mfine/pretrained.params',
                                        'Mfine/checkpoint.zip',
                                        'Mfine/loss.png')),
    case(f'pretrain --corpus corpus --steps 1 --out Fpre --overwrite '
         f'{TINY}', 0, None, gone=('Fpre/finetuned.params',
                                   'Fpre/history.json', 'Fpre/finetune.png')),
    # Today's good ones: resuming (which removes what a killed run left)
    # and starting over
    case(f'pretrain --corpus corpus --steps 3 --out Mcopy --resume {TINY}',
         0, None, gone=('Mcopy/.checkpoint.zip.0badc0de.tmp',
                        f'Mcopy/{LOCK_FILE}')),
    case(f'pretrain --corpus corpus --steps 1 --out Mnew {TINY}', 0, None),
    case('encode --model M crane', 0, None, same='M'),
    # Requests that run away, refused before any work
    case('finetune --num-workers 100000', 2, error(
        'finetune', 'argument --num-workers: must be at most {max} (8 '
        'processes for each of the {cpus} processors of this machine), got '
        "'100000'")),
    case('pretrain --threads 100000', 2, error(
        'pretrain', 'argument --threads: must be at most {max} (8 threads '
        'for each of the {cpus} processors of this machine), got '
        "'100000'")),
    case('launch --workers 100000 true', 2, error(
        'launch', 'argument --workers: must be at most {max} (8 processes '
        'for each of the {cpus} processors of this machine), got '
        "'100000'")),
    case('launch --workers 1 --servers 100000 true', 2, error(
        'launch', 'argument --servers: must be at most {max} (8 processes '
        'for each of the {cpus} processors of this machine), got '
        "'100000'")),
    case('pretrain --workers 1 --servers 100000', 2, error(
        'pretrain', 'argument --servers: must be at most {max} (8 '
        'processes for each of the {cpus} processors of this machine), '
        "got '100000'")),
    # Ctrl-C ends what a worker started in a session of its own too
    case('launch --workers 1 -- sh setsid.sh', 130,
         'd2l-bert launch: interrupted; stopped the job', interrupt='started',
         marker='d2l-bert-setsid-child'),
    case('launch --workers 2 true', 0, 'd2l-bert launch: note: the workers '
         'have exited, but scheduler, server 0 still waited for them (did '
         "each worker join the job, with mx.kv.create('dist_sync')?); "
         'stopped', seconds=15),
    # more epochs than the wall limit allows: only Ctrl-C ends it in time
    case('finetune --model M --data nli --epochs 100000 --batch-size 8 '
         '--max-len 16 --num-workers 0 --no-progress --out Fint', 130,
         'd2l-bert finetune: interrupted', interrupt='path: '),
    # SIGTERM (as `kill` and service managers send it) ends a run at
    # once, its checkpoint written every step: no temporary file left
    case(f'pretrain --corpus corpus --steps 100000 --checkpoint-every 1 '
         f'--out Mterm {TINY}', -signal.SIGTERM, None,
         interrupt='pretraining ', signal=signal.SIGTERM,
         gone=('Mterm/.*.tmp',)),
    case('check-text --timeout 2 runaway.md', 1, None,
         marker='d2l-bert-runaway-cell'),
    # SIGTERM and SIGHUP end a cell's process and what it started in a
    # session of its own, as Ctrl-C does; then check-text ends by them
    case('check-text --timeout 100 sleeping.md', -signal.SIGTERM, None,
         interrupt='    ran', signal=signal.SIGTERM,
         marker='d2l-bert-sleeping-cell'),
    case('check-text --timeout 100 sleeping.md', -signal.SIGHUP, None,
         interrupt='    ran', signal=signal.SIGHUP,
         marker='d2l-bert-sleeping-cell'),
    # Values that MXNet or the machine cannot take
    case('pretrain --seed -1', 2, error(
        'pretrain', 'argument --seed: must be an integer from 0 to '
        '4294967295 (2**32 - 1), the seeds NumPy and MXNet take, got '
        "'-1'")),
    case('finetune --seed 4294967296', 2, error(
        'finetune', 'argument --seed: must be an integer from 0 to '
        '4294967295 (2**32 - 1), the seeds NumPy and MXNet take, got '
        "'4294967296'")),
    case('pretrain --lr 1e300', 2, error(
        'pretrain', "argument --lr: must be at most 1.08e+39, for Adam's "
             "first step (LR x 0.316) to be a finite float32, got "
             "'1e300'")),
    case(f'pretrain --corpus corpus --steps 2 --lr 1e39 --out Mlr {TINY}',
         2, error('pretrain', '--lr 1e+39: bertencoder0_pos_embedding '
                  'holds values that are not finite after the first '
                  'update; use a smaller learning rate (0.01 in the book, '
                  '0.001 is safer)')),
    # weights that became NaN are never saved: the models kept whole
    case(f'pretrain --corpus corpus --steps 3 --lr 1e30 --overwrite --out '
         f'Mnan {TINY}', 2, error(
             'pretrain', f'--lr 1e+30: MLM loss nan at step 2: {NOT_SAVED}'),
         same='Mnan'),
    case('finetune --model M --data nli --epochs 1 --batch-size 16 '
         '--max-len 16 --num-workers 0 --no-progress --lr 1e30 --overwrite '
         '--out Fnan', 2, error(
             'finetune', f'--lr 1e+30: loss nan at step 2: {NOT_SAVED}'),
         same='Fnan'),
    case('pretrain --max-len 100000000', 2, error(
        'pretrain', '--max-len 100000000 is more than the 1000 positions '
        'of the model; use --max-len 1000 or less')),
    case('pretrain --num-hiddens 10000000', 2, error(
        'pretrain', '--num-hiddens 10000000 --ffn-num-hiddens 256 '
        '--num-heads 2 --num-blks 2 --batch-size 512 --max-len 64: the '
        'model and one batch need at least 14.2 PB of memory, and this '
        'machine has 1.0 GB available; use smaller sizes'),
        address_space=1 << 30),
    case('launch --hosts binary true', 2, error(
        'launch', f'--hosts binary: {NOT_TEXT}')),
    # Full disks and damaged files: one line, the old files kept (a
    # model's files, its plot included, come all or none)
    case(f'pretrain --corpus corpus --steps 5 --out M --resume {TINY}', 1,
         error('pretrain', 'M/checkpoint.zip: File too large'), same='M',
         fsize=FULL),
    case('finetune --model M --data nli --epochs 1 --batch-size 16 '
         '--max-len 16 --num-workers 0 --no-progress --out Ffull', 1,
         error('finetune', 'Ffull/finetune.png: File too large'),
         fsize=FULL, gone=('Ffull',)),
    case('finetune --model M --data nli --epochs 1 --batch-size 16 '
         '--max-len 16 --num-workers 0 --no-progress --out full/F', 1,
         error('finetune', 'full/F/history.json: No space left on '
               'device'), same='full', tmpfs='full', gone=('full/F',)),
    case('encode --model M --file texts.lines --out F/v.npy', 1,
         error('encode', 'F/v.npy: File too large'), same='F', fsize=100),
    case(f'pretrain --corpus corpus --steps 5 --out Mro --resume {TINY}',
         2, error('pretrain', "argument --out: cannot write 'Mro': "
                  "'{root}/Mro' is on a read-only file system"),
         same='Mro', readonly='Mro'),
    # a run whose disk filled at its last save: no file of the model,
    # nothing that looks finished; --resume writes it
    case('encode --model Mhalf a crane', 2, error(
        'encode', "--model 'Mhalf': an incomplete d2l BERT directory, it "
        'holds checkpoint.zip but no pretrained.params (the run that wrote '
        'it stopped before saving its model); `d2l-bert pretrain --out '
        'Mhalf --resume` writes it from checkpoint.zip'), same='Mhalf'),
    case(f'pretrain --corpus corpus --steps 2 --out Mhalf {TINY}', 2, error(
        'pretrain', '--out Mhalf holds the checkpoint of a run whose model '
        'is not written (checkpoint.zip) that this run would replace: give '
        '--resume to go on from it, --overwrite to start over, or another '
        '--out'), same='Mhalf'),
    case('finetune --model M --data nli --out Mhalf', 2, error(
        'finetune', '--out Mhalf holds a pretraining checkpoint whose model '
        'is not written (checkpoint.zip), not a fine-tuned model: give '
        'another --out, or --overwrite to replace it with a fine-tuned '
        'model'), same='Mhalf', seconds=10),
    case(f'pretrain --corpus corpus --steps 2 --out Mhalf2 --resume {TINY}',
         0, None),
    case('encode --model Mbad a crane', 2,
         error('encode', f'Mbad/pretrained.params {CORRUPT}'), same='Mbad'),
    case('finetune --model Mbad --data nli --out Fbad', 2,
         error('finetune', f'--model Mbad: Mbad/pretrained.params '
               f'{CORRUPT}'), same='Mbad'),
    # a config.json of other types or sizes than the parameters': one
    # line, and no run on a model of sizes it was not trained with
    case('encode --model Mtype a crane', 2, error(
        'encode', f'Mtype/config.json: {SIXTEEN}'), same='Mtype'),
    case('finetune --model Mtype --data nli --out Ftype', 2, error(
        'finetune', f'--model Mtype: Mtype/config.json: {SIXTEEN}'),
        same='Mtype', gone=('Ftype',)),
    case('encode --model Msize a crane', 2, error(
        'encode', 'Msize/pretrained.params does not fit the sizes of '
        'config.json (num_hiddens=64, ffn_num_hiddens=48, num_heads=2, '
        'num_blks=2, max_len=1000): its encoder.pos_embedding has shape '
        "(1, 1000, 32), the model's (1, 1000, 64); correct them, or re-run "
        '`d2l-bert pretrain`'), same='Msize'),
    case('finetune --model Msize --data nli --out Fsize', 2, error(
        'finetune', '--model Msize: Msize/pretrained.params does not fit '
        'BERTModel(vocab_size=108, num_hiddens=64, ffn_num_hiddens=48, '
        'num_heads=2, num_blks=2, max_len=1000): its encoder.pos_embedding '
        "has shape (1, 1000, 32), the model's (1, 1000, 64); correct them, "
        'or re-run `d2l-bert pretrain`'), same='Msize', gone=('Fsize',)),
    case(f'pretrain --corpus corpus --steps 9 --out Mmeta --resume {TINY}',
         2, error('pretrain', '--resume: Mmeta/checkpoint.zip: meta.json is '
                  'not valid JSON (Unterminated string starting at: line 1 '
                  'column 13 (char 12)); the checkpoint is damaged'),
         same='Mmeta'),
    case('encode --model M --file - --out v.npy', 2, error(
        'encode', '--file -: standard input is binary (a NUL byte at '
        'offset 1), not text; give one text a line, in UTF-8'),
        stdin=b'a\0b\n'),
    # an --out that MXNet could not write to, refused before any work
    # (not after the training, when the model is saved)
    case(['pretrain', '--corpus', 'corpus', '--steps', '1', '--out',
          os.fsdecode(b'M\xff')] + TINY.split(), 2, error(
        'pretrain', "argument --out: must be a path in UTF-8 (MXNet writes "
        "its files by UTF-8 names), got the bytes b'M\\xff'; give a name "
        'of UTF-8 characters'), seconds=10, gone=('M?',)),
    case(['finetune', '--model', 'M', '--data', 'nli', '--out',
          os.fsdecode(b'F\xff')], 2, error(
        'finetune', "argument --out: must be a path in UTF-8 (MXNet writes "
        "its files by UTF-8 names), got the bytes b'F\\xff'; give a name "
        'of UTF-8 characters'), seconds=10),
    case(['pretrain', '--out', ''], 2, error(
        'pretrain', "argument --out: must name a directory, got ''; give a "
        'path such as my-bert'), seconds=10),
    case('pretrain --out dangling', 2, error(
        'pretrain', "argument --out: 'dangling' is a symbolic link to "
        "'gone/M', which does not exist; give a directory that exists or "
        'can be made'), seconds=10),
    case('encode --model M --file texts.lines --out dangling.npy', 2, error(
        'encode', "argument --out: 'dangling.npy' is a symbolic link to "
        "'gone/v.npy', which does not exist; give a .npy file that exists "
        'or can be made'), seconds=10),
    # more devices than a batch has pairs: a larger batch, not a corpus
    case('pretrain --corpus corpus --devices ' + ','.join(
        f'cpu:{i}' for i in range(20)) + ' --batch-size 16', 2, error(
        'pretrain', '--batch-size 16 is less than one sentence pair for '
        'each of the 20 devices of --devices: use --batch-size 20 or more, '
        'or fewer devices'), seconds=10),
    # a corpus of one paragraph: trained, with a word of warning
    case(f'pretrain --corpus one --steps 1 --out Mone {TINY}', 0,
         'd2l-bert pretrain: warning: --corpus one gives 2 training pairs '
         "from 1 line of text, 1 paragraph of 2 sentences or more (what the "
         "book's pipeline takes): fewer than one batch (--batch-size 32) "
         'and no word in its vocabulary (a word needs 5 occurrences; every '
         'one is <unk>), too little to learn from; give a corpus of many '
         "paragraphs, one a line, its sentences ending ' . ' (such as "
         '--corpus embedded)'),
    # and one of fewer pairs than devices, refused before training
    case(f'pretrain --corpus one --steps 1 --out Mthree {TINY} --devices '
         'cpu:0,cpu:1,cpu:2', 2, error(
             'pretrain', '--corpus one gives 2 training pairs, fewer than '
             'one for each of the 3 devices of the run: give a larger '
             'corpus, or fewer devices'), gone=('Mthree',)),
    # Messages that name what they are about
    case('pretrain --corpus ./a-file', 2, error(
        'pretrain', "argument --corpus: './a-file' is a file, and no "
        "wiki.valid.tokens is beside it in '.'; give --corpus embedded, "
        '--corpus wikitext-2, or a directory holding wiki.train.tokens and '
        'wiki.valid.tokens')),
    case('pretrain --no-such-option 1', 2, error(
        'pretrain', 'unrecognized arguments: --no-such-option 1')),
]
