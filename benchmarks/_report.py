"""What a step benchmark prints: its start (the threads and the machine)
and its table (the GEMM peak, a row per step, the fastest step, the
rates against the machine's best GEMM)."""
import os

from _gemm import gemm_shape, print_machine
from _machine import hold_isa, set_threads


def print_step_table(res, flops, gemm_flops, batch_size, labels,
                     best=None):
    """Print the GEMM peak and a row per step of a run of `alternate`.

    Parameters
    ----------
    res : dict of name -> (median s, list of s, median CPU s)
        What `alternate` returned; 'd2l' and 'gemm' among the names.
    flops : int
        Arithmetic of one step.
    gemm_flops : int
        Arithmetic of one GEMM (`gemm_rate`).
    batch_size : int
    labels : sequence of (name, label)
        The rows, in order.
    best : float, optional
        The machine's best float32 GEMM rate (`print_machine`), GFLOP/s:
        each row's rate against it is printed too (`print_against_best`).

    Returns
    -------
    float
        The peak in GFLOP/s: the fastest GEMM round (next to d2l's step,
        which leaves the kernel reclaiming memory, the median GEMM is
        slower).
    """
    fastest = min(res['gemm'][1])
    peak = gemm_flops / fastest / 1e9
    M, K, N = gemm_shape()
    print(f"\nstep arithmetic: {flops / 1e9:.0f} GFLOP; float32 GEMM "
          f"peak in this run: {peak:.0f} GFLOP/s (fastest of "
          f"{len(res['gemm'][1])} rounds, {fastest * 1e3:.0f} ms for "
          f"{M}x{K} @ {K}x{N}; median {res['gemm'][0] * 1e3:.0f} ms)")
    print(f"{'':30s}{'ms/step':>9s}{'pairs/s':>9s}{'GFLOP/s':>9s}"
          f"{'of GEMM':>9s}{'CPU s':>8s}{'vs d2l':>8s}")
    for name, label in labels:
        t = res[name][0]
        rate = flops / t / 1e9
        print(f'{label:30s}{t * 1e3:9.0f}{batch_size / t:9.0f}'
              f'{rate:9.1f}{100 * rate / peak:8.0f}%{res[name][2]:8.2f}'
              f"{res['d2l'][0] / t:7.2f}x")
    if best is not None:
        print_against_best({label: flops / res[name][0] / 1e9
                            for name, label in labels}, best)
    return peak


def print_against_best(rates, best):
    """Print each rate of `rates` (label -> GFLOP/s) as a share of the
    machine's best float32 GEMM rate `best` (`print_machine`)."""
    print(f"against the machine's best float32 GEMM ({best:.0f} GFLOP/s, "
          'measured at the start): ' + ', '.join(
              f'{label.strip()} {100 * rate / best:.0f}%'
              for label, rate in rates.items()))


def print_fastest_step(res, flops, peak):
    """Print our fastest step ('ours' in `res`) against the GEMM peak.

    The peak is a fastest round and the table's steps are medians: the
    fastest step against the fastest GEMM compares like with like.
    """
    fastest = min(res['ours'][1])
    rate = flops / fastest / 1e9
    print(f'fastest d2l_bert step: {fastest * 1e3:.0f} ms, {rate:.1f} '
          f'GFLOP/s, {100 * rate / peak:.0f}% of the GEMM peak')


def start_step_benchmark(args):
    """Set the threads of a step benchmark (`set_threads`, before `mxnet`
    is imported) and, with `args.profile`, one operator per engine job,
    so that each gets its own time; print the choices and the machine
    (`print_machine`).  Returns the machine's best float32 GEMM rate."""
    threads = set_threads(args.threads, isa=args.isa)
    if args.profile:
        os.environ['MXNET_EXEC_BULK_EXEC_TRAIN'] = '0'
    print(threads)
    return print_machine(args.threads)


def start_steps(args):
    """The start of a step benchmark's run: in this process
    (``--one-process`` or ``--profile``) `start_step_benchmark`; else,
    each side in its own process, hold the instruction set the sides
    inherit and print the machine (`print_machine`).  Returns the
    machine's best float32 GEMM rate, GFLOP/s."""
    if args.one_process or args.profile:
        return start_step_benchmark(args)
    print(hold_isa(args.isa))
    return print_machine(args.threads)
