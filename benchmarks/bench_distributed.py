"""Pretraining throughput on MXNet's parameter server against one process.

::

    python benchmarks/bench_distributed.py              # the book's settings
    python benchmarks/bench_distributed.py --repeats 3 --batch-size 128

At the book's settings (batch 512, max_len 64, the small BERT, vocabulary
20256, 10 predictions per sequence, Adam with learning rate 0.01), times
the pretraining step of ``d2l-bert pretrain`` (`d2l_bert.fast.batch_loss`,
`gluon.Trainer`, the losses gathered over the workers) in:

- one process with 2 threads (the reference), and with 1 thread;
- 2 workers with 1 thread each and 1 server (``d2l-bert launch
  --workers 2 --threads 1``), then 2 servers (``--servers 2``).

Each configuration runs in processes of its own: this script starts them
and runs itself in each (``--worker``).  On a machine shared with other
work, the configurations take turns (all in one order, then in the
other, ``--rounds``) and each keeps its best round; the CPU seconds of a
step (of worker 0, servers not counted) vary less than its time.  The
global batch is the same random batch shaped like the book's; each
worker takes its rows of it (`d2l_bert.dist.workers.worker_shards`).
Whole steps are timed as the command line runs them (the gradients'
transfer overlaps the backward pass); then steps cut into phases with a
wait after each (forward and backward; summing the gradients over the
workers; Adam's update; the losses gathered), to say where the time
goes.  Medians are reported.

Bytes: what each worker pushes a step (every gradient, float32; it pulls
as much back) against the model's size, and the bytes the loopback
interface carried a step on this machine while the whole steps ran (the
job's and anything else's: read it on a quiet machine).
"""
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import _common  # noqa: E402
import _gemm  # noqa: E402
import _machine  # noqa: E402  (before mxnet: sets the thread count)
import _options  # noqa: E402
import _steps  # noqa: E402

#: (name, threads per process, workers, servers); workers 0: one process
CONFIGURATIONS = (
    ('one process, 2 threads', 2, 0, 0),
    ('one process, 1 thread', 1, 0, 0),
    ('2 workers x 1 thread, 1 server', 1, 2, 1),
    ('2 workers x 1 thread, 2 servers', 1, 2, 2),
)
MARK = 'BENCH '


def parse_args(argv=None):
    p = _options.arg_parser(__doc__, repeats=5,
                            batch_size=_common.BOOK['batch_size'])
    p.add_argument('--rounds', type=int, default=2,
                   help='runs of every configuration, taking turns (2)')
    p.add_argument('--worker', action='store_true',
                   help='time the step in this process (one of a job, '
                        'or alone) and print the result as JSON')
    return p.parse_args(argv)


# ---------------------------------------------------------------------------
# In each process
# ---------------------------------------------------------------------------

def loopback_bytes():
    """Bytes sent over the loopback interface since boot (Linux), or
    None."""
    try:
        with open('/proc/net/dev') as f:
            for line in f:
                name, _, rest = line.partition(':')
                if name.strip() == 'lo':
                    return int(rest.split()[8])
    except OSError:
        pass
    return None


def worker(args):
    """Time the step here; worker 0 (or the one process) prints JSON."""
    print(_machine.set_threads(args.threads, isa=args.isa), file=sys.stderr)
    from mxnet import autograd, npx

    from d2l_bert.runs.pretraining import _mean_losses
    job = _steps.job_worker(args.batch_size)
    workers, batch_loss, trainer, shards, net, devices = (
        job.workers, job.batch_loss, job.trainer, job.shards, job.net,
        job.devices)

    def forward_backward():
        with autograd.record():
            mlm_ls, nsp_ls, ls = batch_loss(*shards)
        for l in ls:
            l.backward()
        return mlm_ls, nsp_ls

    def whole_step():
        mlm_ls, nsp_ls = forward_backward()
        trainer.step(1)
        _mean_losses(workers, mlm_ls, nsp_ls)
        npx.waitall()

    def phases():
        times = []
        start = time.perf_counter()
        mlm_ls, nsp_ls = forward_backward()
        npx.waitall()
        times.append(time.perf_counter())
        trainer.allreduce_grads()
        npx.waitall()
        times.append(time.perf_counter())
        trainer.update(1)
        npx.waitall()
        times.append(time.perf_counter())
        _mean_losses(workers, mlm_ls, nsp_ls)
        times.append(time.perf_counter())
        return [b - a for a, b in zip([start] + times, times)]

    for _ in range(2):                   # graphs built, kvstore keys made
        whole_step()
    steps, cpu, lo_before = [], [], loopback_bytes()
    for _ in range(args.repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        whole_step()
        steps.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    lo_after = loopback_bytes()
    cut = [phases() for _ in range(args.repeats)]
    grads = sum(p.grad(devices[0]).size for p in net.collect_params().values()
                if p.grad_req != 'null')
    params = sum(p.data(devices[0]).size
                 for p in net.collect_params().values())
    if workers.leader:
        result = dict(
            step=statistics.median(steps), cpu=statistics.median(cpu),
            phases=[statistics.median(c[i] for c in cut) for i in range(4)],
            pairs=args.batch_size, params=params,
            pushed=4 * grads + 4 * 2 * len(devices) * workers.num_workers
            * (workers.num_workers > 1),
            loopback=(None if lo_before is None else
                      (lo_after - lo_before) / args.repeats))
        print(MARK + json.dumps(result), flush=True)


# ---------------------------------------------------------------------------
# Here: one configuration after the other
# ---------------------------------------------------------------------------

def measure(name, threads, num_workers, num_servers, args):
    me = [sys.executable, os.path.abspath(__file__), '--worker',
          '--repeats', str(args.repeats), '--batch-size',
          str(args.batch_size)]
    if num_workers:
        command = [sys.executable, '-m', 'd2l_bert', 'launch', '--workers',
                   str(num_workers), '--servers', str(num_servers),
                   '--threads', str(threads)] + me
    else:
        command = me + ['--threads', str(threads)]
    print(f'{name}: {" ".join(command[1:])}', flush=True)
    done = subprocess.run(command, stdout=subprocess.PIPE,
                          universal_newlines=True)
    lines = [line for line in done.stdout.splitlines()
             if line.startswith(MARK)]
    if done.returncode or len(lines) != 1:
        sys.exit(f'{name}: failed (status {done.returncode})')
    return json.loads(lines[0][len(MARK):])


def main(argv=None):
    args = parse_args(argv)
    if args.worker:
        return worker(args)
    _gemm.print_machine(args.threads)
    runs = {name: [] for name, _, _, _ in CONFIGURATIONS}
    for r in range(args.rounds):
        order = CONFIGURATIONS if r % 2 == 0 else CONFIGURATIONS[::-1]
        for name, threads, workers, servers in order:
            runs[name].append(measure(name, threads, workers, servers,
                                      args))
    # Each configuration's best round: the least disturbed
    results = [(name, min(runs[name], key=lambda r: r['step']))
               for name, _, _, _ in CONFIGURATIONS]
    print(_machine.machine())
    reference = results[0][1]['step']
    mb = 1e6
    print(f'\nthe book\'s settings, batch {args.batch_size}: medians of '
          f'{args.repeats} steps (ms), best of {args.rounds} rounds\n')
    print('| configuration | pairs/s | x one process | step | CPU | '
          'forward+backward | gradients summed | update | losses |')
    print('|---|---:|---:|---:|---:|---:|---:|---:|---:|')
    for name, r in results:
        compute, comm, update, losses = (1e3 * t for t in r['phases'])
        print(f'| {name} | {r["pairs"] / r["step"]:.0f} | '
              f'{reference / r["step"]:.2f} | {1e3 * r["step"]:.0f} | '
              f'{1e3 * r["cpu"]:.0f} | {compute:.0f} | {comm:.0f} | '
              f'{update:.0f} | {losses:.1f} |')
    model = 4 * results[0][1]['params']
    print(f'\nmodel: {results[0][1]["params"]:,} parameters, '
          f'{model / mb:.1f} MB of float32')
    for name, r in results[2:]:
        line = (f'{name}: each worker pushes {r["pushed"] / mb:.1f} MB a '
                f'step ({r["pushed"] / model:.3f} x the model) and pulls as '
                'much')
        if r['loopback'] is not None:
            line += (f'; the loopback carried {r["loopback"] / mb:.1f} MB a '
                     f'step ({r["loopback"] / r["pushed"]:.2f} x one '
                     'worker\'s push)')
        print(line)


if __name__ == '__main__':
    main()
