"""What a user sees from the command line: a table of bad command lines,
each answered with one line ``d2l-bert CMD: error: ...`` that names the
option and the value, exit status 2, no traceback and no errno; and
known-good command lines, at tiny sizes, that still succeed.

Every command runs in this process (`d2l_bert.cli.main`), as the console
script does, in a temporary working directory.
"""
import os

import numpy as onp
import pytest

from d2l_bert import cli
from d2l_bert.devices import num_gpus
from d2l_bert.data.snli_synthetic import make_snli_synthetic
from helpers import write_small_corpus

HERE = os.path.dirname(os.path.abspath(__file__))
TINY_HF = os.path.join(HERE, 'fixtures', 'tiny_bert')
BILINGUAL = os.path.join(HERE, 'fixtures', 'editions', 'bilingual.md')
NO_GPU = pytest.mark.skipif(num_gpus() > 0, reason='this machine has a GPU')
TINY_PRETRAIN = ['--batch-size', '16', '--num-hiddens', '16',
                 '--ffn-num-hiddens', '16', '--num-heads', '2']


def run(argv, capsys):
    """``d2l-bert ARGV`` here: its exit status, standard output and
    error."""
    try:
        status = cli.main(argv)
    except SystemExit as e:  # argparse: --help, or a usage error
        status = e.code
    out, err = capsys.readouterr()
    return status, out, err


@pytest.fixture(scope='module')
def files(tmp_path_factory):
    """The files the command lines name: a corpus, a text file, a
    directory, a README, a .txt, a synthetic SNLI and a tiny pretrained
    model."""
    root = tmp_path_factory.mktemp('cli-messages')
    (root / 'adir').mkdir()
    (root / 'README.md').write_text('# d2l-bert\n\nNo code here.\n')
    (root / 'notes.txt').write_text('```{.python .input}\nx = 1\n```\n')
    (root / 'texts.lines').write_text('a crane is flying\nhello\n')
    (root / 'a-file').write_text('x')
    write_small_corpus(root / 'corpus')
    make_snli_synthetic(str(root / 'snli'), num_train=200, num_dev=10,
                        num_test=50)
    assert cli.main(['pretrain', '--corpus', str(root / 'corpus'),
                     '--steps', '1', '--out', str(root / 'model')]
                    + TINY_PRETRAIN) == 0
    return root


#: (command line, the one line of standard error after
#: 'd2l-bert CMD: error: '); the command lines run in `files`
BAD = [
    ('encode --model tiny --file texts.txt --out v.npy',
     "argument --file: no such file: 'texts.txt'"),
    ('encode --model tiny --file adir --out v.npy',
     "argument --file: 'adir' is a directory, not a file"),
    ('encode --model nowhere a',
     "--model 'nowhere': no such directory; give a directory that holds "
     'pretrained.params and vocab.json, such as the --out directory of '
     '`d2l-bert pretrain`, a Hugging Face BERT directory (config.json), '
     'or minilm'),
    ('encode --model model --batch-size 2.5 --file texts.lines --out v.npy',
     "argument --batch-size: must be a positive integer, got '2.5'"),
    ('encode a', 'the following arguments are required: --model'),
    ('check-text README.md',
     'README.md: no MXNet code cell, nothing to check: give an edition of '
     'a section of the BERT chapter (sec_bert, sec_bert-dataset, '
     'sec_bert-pretraining, sec_natural-language-inference-bert)'),
    ('check-text notes.txt',
     "argument FILE: 'notes.txt' has .txt: check-text reads .md, .rst (or "
     "Sphinx's .rst.txt) and .ipynb editions; rename the file to say which "
     'it is'),
    ('check-text --timeout soon README.md',
     'argument --timeout: must be a number of seconds from 0 to 604800 (a '
     "week; 0 for no limit), got 'soon'"),
    ('pretrain --corpus ./no/such/dir',
     "argument --corpus: no such file or directory: './no/such/dir'; give "
     '--corpus embedded, --corpus wikitext-2, or a directory holding '
     'wiki.train.tokens and wiki.valid.tokens'),
    ('pretrain --corpus adir',
     "argument --corpus: 'adir' holds no wiki.train.tokens and no "
     'wiki.valid.tokens; give --corpus embedded, --corpus wikitext-2, or a '
     'directory holding wiki.train.tokens and wiki.valid.tokens'),
    ('pretrain --steps 0',
     "argument --steps: must be a positive integer, got '0'"),
    ('pretrain --dropout 1.5',
     "argument --dropout: must be a number in [0, 1), got '1.5'"),
    ('pretrain --num-heads 3 --out out',
     '--num-heads 3 must divide --num-hiddens 128'),
    ('pretrain --out a-file', "argument --out: 'a-file' exists and is not "
                              'a directory'),
    ('pretrain --ctx tpu',
     'argument --ctx: must be cpu, cpu:N, gpu, gpu:N, a '
     "comma-separated list of them (cpu:0,cpu:1) or all-gpus, got 'tpu'"),
    ('pretrain --servers 2 --out out',
     '--servers makes sense with --workers N or --hosts FILE only'),
    ('pretrain --workers 2 --port 0',
     "argument --port: must be a port number from 1 to 65535, got '0'"),
    pytest.param('chapter --ctx gpu',
                 "--devices gpu: device 'gpu' is not available: this "
                 'machine has no GPU that MXNet can use; ask for cpu '
                 "instead, or install a CUDA build of MXNet (see the docs' "
                 'install page)', marks=NO_GPU),
    ('chapter --devices cpu:0,cpu:1',
     '--devices cpu:0,cpu:1: chapter runs on one device, got 2; give one, '
     'such as cpu or gpu:0'),
    ('check-text --devices cpu:0,cpu:1 README.md',
     '--devices cpu:0,cpu:1: check-text runs on one device, got 2; give '
     'one, such as cpu or gpu:0'),
    pytest.param('check-text --devices cpu,gpu:1 README.md',
                 "--devices cpu,gpu:1: device 'gpu:1' is not available: "
                 'this machine has no GPU that MXNet can use; ask for cpu '
                 "instead, or install a CUDA build of MXNet (see the docs' "
                 'install page)', marks=NO_GPU),
    ('finetune --data nowhere',
     "argument --data: no such directory: 'nowhere'; give snli, synthetic "
     'or a directory holding snli_1.0_train.txt and snli_1.0_test.txt'),
    ('finetune --model a-file',
     "argument --model: not a directory: 'a-file'; give bert.small, "
     'bert.base or a directory holding pretrained.params and vocab.json'),
    ('finetune --data adir --model model',
     '--data adir: adir/snli_1.0_train.txt not found: the SNLI directory '
     'must hold snli_1.0_train.txt and snli_1.0_test.txt (the snli_1.0 '
     'folder of snli_1.0.zip, or the synthetic data of '
     '`d2l_bert.data.snli_synthetic.make_snli_synthetic`)'),
    ('finetune --batch-size 0',
     "argument --batch-size: must be a positive integer, got '0'"),
    ('finetune --max-len 2',
     'argument --max-len: must be an integer of at least 3 (<cls> and two '
     "<sep>), got '2'"),
    ('finetune --lr 0', "argument --lr: must be a number above 0, got '0'"),
    ('finetune --model model --data snli --max-len 2000',
     '--max-len 2000 is longer than the 1000 positions of the pretrained '
     "model 'model'; use --max-len 1000 or less"),
    ('launch', 'give the command each worker runs, such as '
               '`python train.py`'),
    ('launch --workers 0 python', "argument --workers: must be a positive "
                                  "integer, got '0'"),
]


@pytest.mark.parametrize('line, message', BAD)
def test_a_bad_command_line_is_one_line_and_exit_2(files, capsys,
                                                   monkeypatch, line,
                                                   message):
    monkeypatch.chdir(files)
    argv = line.split()
    status, out, err = run(argv, capsys)
    assert (status, err) == (2, f'd2l-bert {argv[0]}: error: {message}\n')
    assert 'Traceback' not in out


def test_an_unknown_command_is_one_line_and_exit_2(capsys):
    status, _, err = run(['pretrian'], capsys)
    # Python 3.12.8 and 3.13 dropped argparse's quotes around the choices
    choices = ['chapter', 'check-text', 'finetune', 'pretrain', 'encode',
               'launch']
    assert (status, err) in [(2, (
        "d2l-bert: error: argument COMMAND: invalid choice: 'pretrian' "
        f"(choose from {', '.join(quote(c) for c in choices)})\n"))
        for quote in (repr, str)]


# --- command lines that work --------------------------------------------

def test_help_of_every_command_exits_0(capsys):
    for command in cli.COMMANDS:
        status, out, _ = run([command, '--help'], capsys)
        assert status == 0 and '\nexamples:\n' in out, command


def test_pretrain_one_step_says_step(files, capsys, tmp_path):
    status, out, err = run(['pretrain', '--corpus', str(files / 'corpus'),
                            '--steps', '1', '--out', str(tmp_path)]
                           + TINY_PRETRAIN, capsys)
    assert (status, err) == (0, '')
    assert 'pretraining 1 step on [cpu(0)] ...\n' in out


@pytest.mark.parametrize('argv', [
    ['encode', '--model', '{tiny}', 'a crane is flying'],
    ['encode', '--model', '{tiny}', '--ctx', 'cpu', '--json', 'a'],
    ['encode', '--model', 'model', '--compare', 'the', 'the of', 'of the'],
    ['encode', '--model', '{tiny}', '--file', 'texts.lines', '--out',
     'v.npy'],
    ['encode', '--model', '{tiny}', '--file', 'texts.lines', '--out',
     'v.npy', '--overwrite'],
    ['check-text', '--devices', 'cpu', '{bilingual}'],
])
def test_a_good_command_line_succeeds(files, capsys, monkeypatch, argv):
    monkeypatch.chdir(files)
    argv = [a.format(tiny=TINY_HF, bilingual=BILINGUAL) for a in argv]
    status, out, err = run(argv, capsys)
    assert (status, err) == (0, '')
    if '--file' in argv:
        assert onp.load(files / 'v.npy').shape == (2, 16)


def test_finetune_warns_of_a_batch_larger_than_the_data(
        files, capsys, tmp_path):
    status, out, err = run(
        ['finetune', '--model', str(files / 'model'), '--data',
         str(files / 'snli'), '--epochs', '1', '--batch-size', '500',
         '--max-len', '8', '--num-workers', '0', '--no-progress', '--out',
         str(tmp_path)], capsys)
    assert status == 0
    lines = err.splitlines()
    assert lines[0] == (
        'd2l-bert finetune: warning: --batch-size 500 exceeds the 200 '
        'training examples: each epoch is one step; use --batch-size 20 '
        'or so for ten steps an epoch')
    assert lines[1].startswith('d2l-bert finetune: warning: --max-len 8 '
                               'cuts ')
    assert os.path.isfile(tmp_path / 'finetuned.params')
