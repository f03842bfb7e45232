"""Pretraining throughput on 2 hosts against 1, over links of known speed.

::

    python benchmarks/bench_hosts.py                   # ~8 min, as root
    python benchmarks/bench_hosts.py --rounds 1 --repeats 3
    python benchmarks/bench_hosts.py --batch-size 1024 --compression 2bit

The hosts are network namespaces of this machine (`cluster.py`), one
core each, their links held to 1 Gb/s, then 10 Gb/s.  At the book's
settings (batch 512, max_len 64, the small BERT, vocabulary 20256, Adam)
it times the step of ``d2l-bert pretrain`` (`fast.batch_loss`, `Trainer`,
the losses gathered) in:

- 1 host x 1 core: one process, 1 thread, on host 1;
- the same with a twin: host 2 runs the same process at the same time.
  The hosts share this machine's caches and memory, so each of two
  hosts computes slower than one host alone; the twin shows by how much;
- 2 hosts x 1 core at 1 Gb/s, and at 10 Gb/s: ``d2l-bert launch --hosts``
  from host 1, a worker and a server on each host (the defaults).

The configurations take turns (one order, then the other, ``--rounds``)
and each keeps its best round.  Whole steps are timed as the command line
runs them; then steps cut into phases, with a wait after each: compute
(forward and backward), wait (a one-number round trip through the
servers: the time the faster worker waits for the slower), push/pull
(every gradient pushed to the servers and the sums pulled back), update
(Adam, on every worker), losses (gathered).  Worker 0 reports medians and
the bytes its host's link carried a step, both ways.  The projection is
docs/performance-history.md's ``2 P (M - 1) / (M b)`` of communication
beside the computing divided M ways.
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
import cluster as C  # noqa: E402

#: (name, hosts, link); hosts 0: one host beside a twin (below)
CONFIGURATIONS = (('1 host x 1 core', 1, None),
                  ('1 host x 1 core, a twin beside it', 0, None),
                  ('2 hosts x 1 core, 1 Gb/s', 2, '1gbit'),
                  ('2 hosts x 1 core, 10 Gb/s', 2, '10gbit'))
MARK = 'BENCH '
PHASES = ('compute', 'wait', 'push/pull', 'update', 'losses')


def parse_args(argv=None):
    p = _options.arg_parser(__doc__, repeats=5,
                            batch_size=_common.BOOK['batch_size'])
    p.add_argument('--rounds', type=int, default=2,
                   help='runs of every configuration, taking turns (2)')
    p.add_argument('--compression', choices=('none', '1bit', '2bit'),
                   default='none',
                   help="the two hosts' gradients compressed by MXNet's "
                        'kvstore (set_gradient_compression, threshold '
                        '0.5): fewer bytes, other numbers (none)')
    p.add_argument('--worker', action='store_true',
                   help='time the step in this process (one of a job, '
                        'or alone) and print the result as JSON')
    return p.parse_args(argv)


def link_bytes():
    """Bytes this host's eth0 sent and received since it was made."""
    with open('/proc/net/dev') as f:
        for line in f:
            name, _, rest = line.partition(':')
            if name.strip() == 'eth0':
                fields = rest.split()
                return int(fields[0]) + int(fields[8])
    return 0


def compress(kvstore, kind):
    """Have `kvstore` compress what it pushes (before the trainer gives it
    its keys).  MXNet 1.9's dist kvstore refuses compression in
    `pushpull` ("Compression not supported with PushPull"), which the
    `Trainer` and `Workers.all_gather` use: here they push, then pull."""
    kvstore.set_gradient_compression({'type': kind, 'threshold': 0.5})

    def pushpull(key, value, out=None, priority=0):
        kvstore.push(key, value, priority=priority)
        kvstore.pull(key, out=value if out is None else out,
                     priority=priority)
    kvstore.pushpull = pushpull


def worker(args):
    """Time the step here; worker 0 (or the one process) prints JSON."""
    print(_machine.set_threads(1), file=sys.stderr)
    from mxnet import autograd, npx

    from d2l_bert.runs.pretraining import _mean_losses
    job = _steps.job_worker(
        args.batch_size, None if args.compression == 'none' else
        lambda kvstore: compress(kvstore, args.compression))
    workers, batch_loss, trainer, shards, net = (
        job.workers, job.batch_loss, job.trainer, job.shards, job.net)

    def compute():
        with autograd.record():
            mlm_ls, nsp_ls, ls = batch_loss(*shards)
        for l in ls:
            l.backward()
        return mlm_ls, nsp_ls

    def whole_step():
        mlm_ls, nsp_ls = compute()
        trainer.step(1)
        _mean_losses(workers, mlm_ls, nsp_ls)
        npx.waitall()

    def phases():
        marks = [time.perf_counter()]
        mlm_ls, nsp_ls = compute()
        for phase in (npx.waitall, lambda: workers.all_gather([0.0]),
                      trainer.allreduce_grads, lambda: trainer.update(1),
                      lambda: _mean_losses(workers, mlm_ls, nsp_ls)):
            phase()
            npx.waitall()
            marks.append(time.perf_counter())
        return [b - a for a, b in zip(marks, marks[1:])]

    for _ in range(2):                   # graphs built, kvstore keys made
        whole_step()
    steps, bytes_before = [], link_bytes()
    for _ in range(args.repeats):
        start = time.perf_counter()
        whole_step()
        steps.append(time.perf_counter() - start)
    carried = (link_bytes() - bytes_before) / args.repeats
    cut = [phases() for _ in range(args.repeats)]
    params = sum(p.data().size for p in net.collect_params().values())
    if workers.leader:
        print(MARK + json.dumps(dict(
            step=statistics.median(steps), pairs=args.batch_size,
            phases=[statistics.median(c[i] for c in cut)
                    for i in range(len(PHASES))],
            params=params, link=carried)), flush=True)


def measure(cluster, name, num_hosts, link, args):
    """Run one configuration on the cluster; worker 0's result.

    The hosts of the cluster are cores of one machine, which share its
    caches and memory: with ``num_hosts`` 0, host 1 runs alone as with
    1, while host 2 runs the same steps (its twin), so that the one
    host's computing shares the machine as each of two hosts' does."""
    if num_hosts > 1:
        cluster.up(num_hosts, link=link)
    elif not cluster.info():
        cluster.up(2, link='1gbit')
    me = [sys.executable, os.path.abspath(__file__), '--worker',
          '--repeats', str(args.repeats), '--batch-size',
          str(args.batch_size), '--compression', args.compression]
    if num_hosts > 1:
        command = [sys.executable, '-m', 'd2l_bert', 'launch', '--hosts',
                   cluster.hosts_file, '--threads', '1'] + me
    else:
        command = me
    print(f'{name}: {" ".join(command[1:])}', flush=True)
    twin = None if num_hosts else subprocess.Popen(
        cluster.argv(2, command), stdout=subprocess.DEVNULL, cwd=HERE)
    done = subprocess.run(cluster.argv(1, command), stdout=subprocess.PIPE,
                          universal_newlines=True, cwd=HERE)
    if twin is not None and twin.wait():
        sys.exit(f'{name}: the twin failed (status {twin.returncode})')
    lines = [line for line in done.stdout.splitlines()
             if line.startswith(MARK)]
    if done.returncode or len(lines) != 1:
        sys.exit(f'{name}: failed (status {done.returncode})')
    return json.loads(lines[0][len(MARK):])


def projection(one, model_bytes, rate_bits, hosts=2):
    """docs/performance-history.md's step on `hosts` hosts: the whole step of
    `one` (1 host) but its update divided among them, the update whole,
    and the gradients' traffic at the link's rate."""
    update = one['phases'][3]
    compute = (one['step'] - update) / hosts + update
    comm = 2 * model_bytes * (hosts - 1) / hosts / (rate_bits / 8)
    return compute + comm, comm


def report(results, args):
    one = results[0][1]
    model = 4 * one['params']
    compressed = ('' if args.compression == 'none' else
                  f', gradients compressed ({args.compression})')
    print(f'\nthe book\'s settings, batch {args.batch_size}{compressed}: '
          'medians of '
          f'{args.repeats} steps (ms), best of {args.rounds} rounds; '
          f'{os.getloadavg()[0]:.1f} load average at the end\n')
    print('| configuration | pairs/s | speed-up | projected | step | '
          + ' | '.join(PHASES) + ' | link MB/step |')
    print('|---|' + '---:|' * (4 + len(PHASES) + 1))
    for (name, r), (_, hosts, link) in zip(results, CONFIGURATIONS):
        projected = '1.00'
        if hosts > 1:
            step, _ = projection(one, model, C._bits(link), hosts)
            projected = f'{one["step"] / step:.2f}'
        print(f'| {name} | {r["pairs"] / r["step"]:.0f} | '
              f'{one["step"] / r["step"]:.2f} | {projected} | '
              f'{1e3 * r["step"]:.0f} | '
              + ' | '.join(f'{1e3 * t:.0f}' for t in r['phases'])
              + f' | {r["link"] / 1e6:.1f} |')
    twin = results[1][1]
    print(f'\nagainst one host beside a twin ({1e3 * twin["step"]:.0f} ms '
          'a step): ' + ', '.join(
              f'{name}: {twin["step"] / r["step"]:.2f}'
              for (name, r), (_, hosts, _) in zip(results, CONFIGURATIONS)
              if hosts > 1))
    print(f'\nmodel: {one["params"]:,} parameters, {model / 1e6:.1f} MB of '
          'float32; projected link traffic a step per host, both ways: '
          f'{2 * 2 * model * 1 / 2 / 1e6:.1f} MB')
    for (name, r), (_, hosts, link) in zip(results[2:], CONFIGURATIONS[2:]):
        seconds = r['phases'][2]
        print(f'{name}: push/pull {1e3 * seconds:.0f} ms for '
              f'{r["link"] / 1e6:.1f} MB: {r["link"] * 8 / seconds / 1e9:.2f}'
              f' Gb/s both ways, {r["link"] * 4 / seconds / C._bits(link):.0%}'
              ' of the link one way')


def main(argv=None):
    args = parse_args(argv)
    if args.worker:
        return worker(args)
    _gemm.print_machine()
    cluster = C.Cluster()
    runs = {name: [] for name, _, _ in CONFIGURATIONS}
    try:
        for r in range(args.rounds):
            order = CONFIGURATIONS if r % 2 == 0 else CONFIGURATIONS[::-1]
            for name, hosts, link in order:
                runs[name].append(measure(cluster, name, hosts, link, args))
    finally:
        cluster.down()
    results = [(name, min(runs[name], key=lambda r: r['step']))
               for name, _, _ in CONFIGURATIONS]
    report(results, args)


if __name__ == '__main__':
    main()
