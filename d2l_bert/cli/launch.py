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
"""
import argparse
import sys


def add_job_arguments(parser, workers_help):
    """``--workers``, ``--servers``, ``--hosts`` and ``--port``: the
    options of a job, here and in ``d2l-bert pretrain``."""
    from .pretrain import _positive_int
    parser.add_argument('--workers', type=_positive_int, default=None,
                        metavar='N', help=workers_help)
    parser.add_argument('--servers', type=_positive_int, default=None,
                        metavar='S',
                        help='parameter servers, which sum the gradients '
                             '(1; with --hosts, one per machine)')
    parser.add_argument('--hosts', default=None, metavar='FILE',
                        help='run over ssh on the machines of FILE, one '
                             '[USER@]ADDRESS[:SSH_PORT] a line (see the '
                             'docs\' "Several processes and machines")')
    parser.add_argument('--port', type=int, default=None,
                        help="the scheduler's port (default: a free one on "
                             '127.0.0.1; 9091 with --hosts)')
    parser.add_argument('--timeout', type=float, default=None,
                        metavar='SECONDS',
                        help='with --hosts: stop the job when a machine is '
                             'silent this long (default: 30)')


def add_arguments(parser):
    from .pretrain import _positive_int
    add_job_arguments(parser, 'worker processes (default: one per machine '
                              'of --hosts)')
    parser.add_argument('--threads', type=_positive_int, default=None,
                        metavar='K', dest='worker_threads',
                        help="each worker's OMP_NUM_THREADS (default: the "
                             "machine's cores divided among its workers)")
    parser.add_argument('command', nargs=argparse.REMAINDER,
                        metavar='COMMAND [ARG ...]',
                        help="each worker's command")


def main(args):
    """Run ``d2l-bert launch``; return the exit status."""
    from ..dist import launcher

    def fail(message):
        print(f'd2l-bert launch: error: {message}', file=sys.stderr)
        return 2
    command = args.command[1:] if args.command[:1] == ['--'] \
        else args.command
    if not command:
        return fail('give the command each worker runs, such as '
                    '`python train.py`')
    try:
        job = launcher.prepare_job(
            lambda num_threads: command, num_workers=args.workers,
            num_servers=args.servers, hosts=args.hosts, port=args.port,
            num_threads=args.worker_threads, timeout=args.timeout)
    except launcher.LaunchError as e:
        return fail(e)
    print(job.description, flush=True)
    return launcher.run_job(job.roles, prog='d2l-bert launch')
