"""How many threads MXNet's operators use on the CPU.

MXNet reads the OpenMP thread count once, when it is imported.  Unless
``OMP_NUM_THREADS`` is set, it takes half the processors, assuming that
every core runs two hardware threads: on a laptop or a virtual machine
without them (2 cores, 2 processors), one core sits idle.  `use_all_cores`
sets ``OMP_NUM_THREADS`` to the number of physical cores this process may
run on, before MXNet is imported, and says what it chose.

This module must not import `mxnet`.
"""
import os
import sys


def physical_cores():
    """Return the number of physical cores this process may run on.

    Hardware threads of one core (hyper-threading, SMT) count once.  Read
    from Linux's ``/sys``; elsewhere, the number of logical processors.
    """
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1
    cores = set()
    for cpu in cpus:
        path = (f'/sys/devices/system/cpu/cpu{cpu}/topology/'
                'thread_siblings_list')
        try:
            with open(path) as f:
                cores.add(f.read().strip())
        except OSError:
            cores.add(str(cpu))
    return max(len(cores), 1)


def use_all_cores(num_threads=None):
    """Make MXNet use every core (or `num_threads`), if still possible.

    Parameters
    ----------
    num_threads : int, optional
        Thread count to use; default: `physical_cores()`, unless the
        environment already sets ``OMP_NUM_THREADS`` (then that is kept).

    Returns
    -------
    str
        One line saying what MXNet will use and why.
    """
    cores = physical_cores()
    default = max((os.cpu_count() or 1) // 2, 1)
    if num_threads is not None and (not isinstance(num_threads, int)
                                    or num_threads < 1):
        raise ValueError(f'num_threads must be a positive integer, got '
                         f'{num_threads!r}')
    if 'mxnet' in sys.modules:
        current = os.environ.get('OMP_NUM_THREADS')
        chosen = current if current else f'{default} (MXNet default)'
        return (f'CPU threads: {chosen}; MXNet was imported before the '
                'thread count could be set (set OMP_NUM_THREADS before '
                'starting Python to change it)')
    if num_threads is None and os.environ.get('OMP_NUM_THREADS'):
        return (f"CPU threads: {os.environ['OMP_NUM_THREADS']} "
                f'(OMP_NUM_THREADS from the environment; {cores} cores)')
    chosen = num_threads if num_threads is not None else cores
    os.environ['OMP_NUM_THREADS'] = str(chosen)
    return (f'CPU threads: {chosen} of {cores} cores (MXNet alone would '
            f'use {default}; set OMP_NUM_THREADS to choose)')
