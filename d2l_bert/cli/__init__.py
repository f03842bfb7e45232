"""The `d2l-bert` command: parses arguments and calls the sections.

Each subcommand lives in its own module of this package and provides
``add_arguments(parser)`` and ``main(args) -> int``.  The modules are
imported only when their command runs, so `d2l-bert --help` stays fast.

The options of every command come from one vocabulary (`_args`): a
usage error is one line, ``d2l-bert CMD: error: ...``, and exit status
2, whether argparse finds it or the command does (`_args.UsageError`);
an error of the run itself (a download that fails, say) is one line too,
and exit status 1 (`_args.RunError`).

Before any command imports `mxnet`, `main` makes the process's thread
choices with one explicit call (`d2l_bert.threads.set_threads`); the
commands that train print what it chose (``args.threads``).  The model
modules turn on MXNet's NumPy semantics when a command imports them, as
the book's first cell does.
"""
import importlib
import sys

from ._args import (Parser, RunError, UsageError, above_processors,
                    one_line, os_error)

# name -> (module, one-line help)
COMMANDS = {
    'chapter': ('d2l_bert.cli.chapter',
                "run the chapter's cells and compare with the book"),
    'check-text': ('d2l_bert.cli.check_text',
                   'run an edition of a section and check its outputs'),
    'finetune': ('d2l_bert.cli.finetune', 'fine-tune BERT on SNLI (NLI)'),
    'pretrain': ('d2l_bert.cli.pretrain',
                 'pretrain the small BERT (sec_bert-pretraining)'),
    'encode': ('d2l_bert.cli.encode',
               'represent text with a pretrained BERT'),
    'launch': ('d2l_bert.cli.launch',
               "run a command as the workers of a job on MXNet's "
               'parameter server (dist_sync)'),
}


def build_parser():
    """Return the top-level argument parser with every subcommand."""
    parser = Parser(
        prog='d2l-bert',
        description="The BERT chapter of Dive into Deep Learning, runnable.")
    sub = parser.add_subparsers(dest='command', metavar='COMMAND')
    parser.commands = {}
    for name, (module_name, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(_module=module_name, _name=name)
        importlib.import_module(module_name).add_arguments(p)
        parser.commands[name] = p
    return parser


def parse(parser, argv):
    """`parser.parse_args(argv)`, with the arguments no option takes
    refused by the command's own parser, so that the message names the
    command (``d2l-bert pretrain: error: unrecognized arguments: ...``)."""
    args, extra = parser.parse_known_args(argv)
    if extra:
        command = parser.commands.get(getattr(args, '_name', None), parser)
        command.error(f'unrecognized arguments: {" ".join(extra)}')
    return args


def main(argv=None):
    """Entry point of the `d2l-bert` console script; returns the exit code."""
    parser = build_parser()
    args = parse(parser, argv)
    if getattr(args, '_module', None) is None:
        parser.print_help()
        return 2
    # Before `mxnet` is imported: every core (or `--threads`), idle
    # OpenMP threads that sleep soon, OpenBLAS's AVX-512 kernels where the
    # CPU has them
    from ..threads import set_threads
    from ._setup import ensure_mxnet
    args.threads = set_threads(getattr(args, 'num_threads', None))
    prog = f'd2l-bert {args._name}'
    for note in above_processors(args):
        print(f'{prog}: {note}', file=sys.stderr)
    try:
        ensure_mxnet(prog)  # where pip installed d2l-bert alone
        module = importlib.import_module(args._module)
        return module.main(args)
    except (UsageError, RunError) as e:
        print(f'{prog}: error: {one_line(e)}', file=sys.stderr)
        return 2 if isinstance(e, UsageError) else 1
    except OSError as e:  # a file the run cannot read or write
        print(f'{prog}: error: {one_line(os_error(e))}', file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f'{prog}: interrupted', file=sys.stderr)
        return 130
