"""Does company slow d2l 1.0.3's pretraining step?  d2l's step in a
process of its own against d2l's step in a process that runs ours, the
book's loop and the GEMM between its steps.

::

    python benchmarks/bench_reference_company.py --repeats 5

The two processes take turns step by step (`_children.Child`), so the load
hits both alike; each round prints the wall and CPU seconds of both d2l
steps, their system time and their minor page faults (`getrusage`), and
the medians and the ratio close the run.  Held to AVX2, 2 threads, the
book's settings (`bench_pretrain_step.py`'s `build`).
"""
import argparse
import os
import resource
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _children  # noqa: E402
import _gemm  # noqa: E402
import _machine  # noqa: E402  (before mxnet: sets the thread count)
import _timing  # noqa: E402


def worker(kind, batch):
    """Serve d2l's step ('step'), the others' ('others', in the 'mixed'
    process only) and the process's counters ('faults')."""
    _machine.set_threads(None, isa='avx2')
    import bench_pretrain_step

    def setup():
        from mxnet import npx
        args = bench_pretrain_step.parse_args(['--batch', batch])
        sides = ('d2l',) if kind == 'alone' else ('d2l', 'ours', 'book')
        steps, _, _ = bench_pretrain_step.build(args, sides)
        fns = {'step': _timing.waited(steps['d2l']), 'faults': counters}
        if kind == 'mixed':
            gemm = _gemm.gemm_rate()[0]

            def others():
                for side in ('ours', 'book'):
                    steps[side]()
                    npx.waitall()
                gemm()
                npx.waitall()
            fns['others'] = others
        return fns, None
    return _children.serve(setup)


def counters():
    """Minor page faults, user and system seconds of this process."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_minflt, r.ru_utime, r.ru_stime


def one_round(alone, mixed, pause=0.2):
    """The others' steps in `mixed`, then d2l's step in each process;
    return name -> (wall s, CPU s, page faults, system s)."""
    mixed.ask('others')
    time.sleep(pause)
    got = {}
    for name, child in (('alone', alone), ('mixed', mixed)):
        before = child.ask('faults')[3]
        _, wall, cpu, _ = child.ask('step')
        after = child.ask('faults')[3]
        got[name] = (wall, cpu, after[0] - before[0], after[2] - before[2])
        time.sleep(pause)
    return got


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--worker', default=None, help=argparse.SUPPRESS)
    p.add_argument('--batch', choices=('wikitext', 'random'),
                   default='wikitext')
    p.add_argument('--repeats', type=int, default=5,
                   help='timed rounds after one warm-up (5)')
    args = p.parse_args()
    if args.worker:
        return worker(args.worker, args.batch)
    print(_machine.hold_isa('avx2'))
    _gemm.print_machine()
    children = {kind: _children.Child(sys.executable, __file__, kind,
                                      '--batch', args.batch)
                for kind in ('alone', 'mixed')}
    try:
        for child in children.values():
            child.ask('setup')
        rows = {'alone': [], 'mixed': []}
        for r in range(args.repeats + 1):
            got = one_round(children['alone'], children['mixed'])
            print(f'round {r}: ' + ', '.join(
                f'{n} {w:.2f} s (CPU {c:.2f}, system {s:.2f}, {f} faults)'
                for n, (w, c, f, s) in got.items()), flush=True)
            if r:                                       # 0: the warm-up
                for name in rows:
                    rows[name].append(got[name])
    finally:
        for child in children.values():
            child.close()
    for name, got in rows.items():
        wall, cpu, faults, system = [statistics.median(g[i] for g in got)
                                     for i in range(4)]
        print(f'd2l {name}: median {wall:.2f} s, CPU {cpu:.2f} s, system '
              f'{system:.2f} s, {faults:.0f} page faults')
    ratio = statistics.median(m[0] / a[0] for m, a in zip(rows['mixed'],
                                                          rows['alone']))
    print(f'mixed / alone, median of the rounds: {ratio:.2f}; load '
          'average ' + ', '.join(f'{x:.1f}' for x in os.getloadavg()))
    return 0


if __name__ == '__main__':
    sys.exit(main())
