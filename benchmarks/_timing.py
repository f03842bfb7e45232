"""Timing functions on a machine shared with other work.

- `alternate`: time several functions in turn, so that the machine's
  load slows them all alike; report medians;
- `timed`, `take_turns`: time a function here, and turns (of this
  process's functions or of child processes) in rounds, with a pause
  between turns;
- `waited`: a function that waits until MXNet has done its work.
"""
import statistics
import time


def alternate(functions, repeats=5, warmup=1, progress=True):
    """Time each function `repeats` times, taking turns; return medians.

    Parameters
    ----------
    functions : dict of name -> callable
        Each call is timed until MXNet has finished all its work.
    repeats, warmup : int

    Returns
    -------
    dict of name -> (median seconds, list of seconds, median CPU seconds)
        CPU seconds count the work of every thread of the process: on a
        machine shared with other jobs they vary less than wall time.
    """
    from mxnet import npx
    for name, f in functions.items():
        for _ in range(warmup):
            f()
            npx.waitall()
    times = {name: [] for name in functions}
    cpu = {name: [] for name in functions}
    for r in range(repeats):
        for name, f in functions.items():
            start, start_cpu = time.perf_counter(), time.process_time()
            f()
            # Reading a loss back does not wait for the update
            npx.waitall()
            times[name].append(time.perf_counter() - start)
            cpu[name].append(time.process_time() - start_cpu)
        if progress:
            line = ', '.join(f'{n} {t[-1] * 1e3:.0f} ms'
                             for n, t in times.items())
            print(f'  round {r + 1}/{repeats}: {line}', flush=True)
    return {name: (statistics.median(t), t, statistics.median(cpu[name]))
            for name, t in times.items()}


def timed(f):
    """Run `f` here until MXNet is done; return (wall s, CPU s)."""
    from mxnet import npx
    start, start_cpu = time.perf_counter(), time.process_time()
    f()
    npx.waitall()
    return time.perf_counter() - start, time.process_time() - start_cpu


def take_turns(turns, repeats, warmup=1, pause=0.2):
    """Run the turns in rounds, idle `pause` seconds after each turn (so
    that threads one side leaves spinning sleep before the other starts);
    print each round.

    Parameters
    ----------
    turns : dict of name -> function returning (wall s, CPU s)
    repeats : int
        Timed rounds.
    warmup : int
        Untimed rounds first.
    pause : float

    Returns
    -------
    times : dict of name -> list of (wall s, CPU s), one per round
    wall, cpu : dict of name -> median seconds
    """
    for _ in range(warmup):
        for f in turns.values():
            f()
            time.sleep(pause)
    times = {name: [] for name in turns}
    for r in range(repeats):
        for name, f in turns.items():
            times[name].append(f())
            time.sleep(pause)
        line = ', '.join(f'{n} {t[-1][0] * 1e3:.0f} ms'
                         for n, t in times.items())
        print(f'  round {r + 1}/{repeats}: {line}', flush=True)
    wall = {n: statistics.median(w for w, _ in t) for n, t in times.items()}
    cpu = {n: statistics.median(c for _, c in t) for n, t in times.items()}
    return times, wall, cpu


def waited(f):
    """`f`, then wait until MXNet has finished all its work (a step's
    update included), for `serve` to time."""
    def run():
        from mxnet import npx
        result = f()
        npx.waitall()
        return result
    return run
