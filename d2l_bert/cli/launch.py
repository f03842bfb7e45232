"""`d2l-bert launch`: run a command as the workers of a ``dist_sync`` job.

::

    d2l-bert launch --workers 2 python train_book_bert.py
    d2l-bert launch --hosts hosts.txt python train_book_bert.py

Starts MXNet's parameter server, a scheduler and the servers, and runs
COMMAND once per worker, with the ``DMLC_*`` variables that make
``mx.kv.create('dist_sync')`` join the job and ``OMP_NUM_THREADS`` set to
the worker's share of the cores (`d2l_bert.dist.launcher`).  The job ends
when every worker has exited; when one fails, one line says which, and
every other process is stopped.  ``d2l-bert pretrain --workers N`` is
this command running ``d2l-bert pretrain`` in each worker.

What it promises: when the job ends (its workers done, a process
failed, Ctrl-C, SIGTERM, SIGHUP, or `launch` killed, even by SIGKILL),
every process it started on this machine ends, with what those
started: in their process groups, and on Linux also in a session of
their own (``setsid``) or double-forked, for each runs under a
supervisor that is their subreaper (`d2l_bert.processes`).  Not
covered: such processes on other systems, and those started outside
the process tree (``systemd-run``, ``docker run``).
"""
import argparse
import textwrap

from ._args import UsageError, add_job_arguments, examples, per_machine


def add_arguments(parser):
    parser.description = textwrap.fill(
        f'{parser.description}. When the job ends (the workers done, a '
        'process failed, Ctrl-C, SIGTERM, SIGHUP, or launch killed, even '
        'by SIGKILL), every process it started on this machine ends, with '
        'what those started, on Linux also in a session of their own '
        '(setsid): each runs under a supervisor that is their subreaper. '
        'Elsewhere such a process may remain.', 79)
    parser.epilog = examples(
        'd2l-bert launch --workers 2 python train_book_bert.py',
        'd2l-bert launch --hosts hosts.txt --threads 4 python train.py')
    add_job_arguments(parser, 'worker processes (default: one per machine '
                              'of --hosts; needed without it)')
    parser.add_argument('--threads', type=per_machine(1, 'threads'),
                        default=None,
                        metavar='K', dest='worker_threads',
                        help="each worker's OMP_NUM_THREADS (default: the "
                             "machine's cores divided among its workers)")
    parser.add_argument('command', nargs=argparse.REMAINDER,
                        metavar='COMMAND [ARG ...]',
                        help="each worker's command")


def main(args):
    """Run ``d2l-bert launch``; return the exit status."""
    from ..dist import launcher
    command = args.command[1:] if args.command[:1] == ['--'] \
        else args.command
    if not command:
        raise UsageError('give the command each worker runs, such as '
                         '`python train.py`')
    try:
        job = launcher.prepare_job(
            lambda num_threads: command, num_workers=args.workers,
            num_servers=args.servers, hosts=args.hosts, port=args.port,
            num_threads=args.worker_threads, timeout=args.timeout)
    except launcher.LaunchError as e:
        raise UsageError(e) from None
    print(job.description, flush=True)
    return launcher.run_job(job.roles, prog='d2l-bert launch')
