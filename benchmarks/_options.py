"""The command-line options the benchmarks share: `arg_parser` (every
script's), `add_profile_options` (``--profile``), `add_process_options`
(the sides in processes of their own) and `worker_args` (the options a
side's process gets)."""
import argparse
import platform


def isa_choice(value):
    """`--isa`'s type: 'avx2' only where there is AVX2 (x86-64)."""
    machine = platform.machine()
    if value == 'avx2' and machine not in ('x86_64', 'AMD64'):
        raise argparse.ArgumentTypeError(
            f'avx2 holds x86-64 libraries to AVX2, and this machine is '
            f'{machine}: leave --isa out')
    return value


def arg_parser(doc, repeats, batch_size,
               threads_help='OpenMP threads (default: every core)'):
    """A parser with the options every benchmark takes: --threads,
    --repeats, --batch-size; its description is `doc`'s first paragraph."""
    p = argparse.ArgumentParser(description=doc.split('\n\n')[0])
    p.add_argument('--threads', type=int, default=None, help=threads_help)
    p.add_argument('--repeats', type=int, default=repeats,
                   help=f'timed rounds ({repeats}); the median is reported')
    p.add_argument('--batch-size', type=int, default=batch_size)
    p.add_argument('--isa', type=isa_choice, choices=('native', 'avx2'),
                   default='native',
                   help='native: each library picks its kernels; avx2: '
                        'hold OpenBLAS, oneDNN, numba (and PyTorch) to '
                        'AVX2, as on a CPU without AVX-512')
    return p


def add_profile_options(p):
    """Add the step benchmarks' --profile and --top options to `p`."""
    p.add_argument('--profile', action='store_true',
                   help="print MXNet's operator profile of one step of "
                        'each model instead of timing')
    p.add_argument('--top', type=int, default=15,
                   help='operators shown by --profile (15)')


def add_process_options(p):
    """The options of a step benchmark whose sides run in processes of
    their own: ``--one-process``, ``--pause`` and the hidden
    ``--worker``."""
    p.add_argument('--one-process', action='store_true',
                   help='time the steps alternating in this process, not '
                        'each in its own')
    p.add_argument('--pause', type=float, default=0.2,
                   help='seconds of idle between turns (0.2)')
    p.add_argument('--worker', default=None, help=argparse.SUPPRESS)


def worker_args(args):
    """The options a worker process gets from this run's `args`."""
    options = ['--isa', args.isa, '--batch-size', str(args.batch_size),
               '--batch', args.batch]
    if args.threads is not None:
        options += ['--threads', str(args.threads)]
    return options
