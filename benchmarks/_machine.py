"""The machine a benchmark runs on: its threads, its instruction set and
its CPU.

Import this module BEFORE `mxnet`: `set_threads` must set the OpenMP
thread count before MXNet reads it, and MXNet reads it once, when it is
imported (and loads OpenBLAS, which picks its kernels then).

- `set_threads`: all cores by default (MXNet alone would give OpenMP half
  of them, one thread on a 2-core machine), and OpenBLAS's AVX-512
  kernels on a CPU that has AVX-512 (`d2l_bert.threads.set_threads`);
  with ``isa='avx2'`` every library is held to AVX2 (`hold_isa`,
  `AVX2`), so that a machine with AVX-512 measures what a CPU without it
  runs;
- `cpu_model`, `cpu_kind`, `machine`: what each benchmark prints first.
"""
import os
import platform
import subprocess
import sys


#: What holds each library to AVX2 on a CPU that has AVX-512: OpenBLAS
#: (MXNet's and SciPy's), oneDNN (MXNet's and PyTorch's), numba's compiled
#: loops, and PyTorch's own kernels and MKL.  Set before any is loaded.
AVX2 = {'OPENBLAS_CORETYPE': 'Haswell', 'DNNL_MAX_CPU_ISA': 'AVX2',
        'ONEDNN_MAX_CPU_ISA': 'AVX2', 'NUMBA_CPU_NAME': 'haswell',
        'ATEN_CPU_CAPABILITY': 'avx2', 'MKL_ENABLE_INSTRUCTIONS': 'AVX2'}


def hold_isa(isa):
    """Hold every library to `isa` ('native': leave them; 'avx2': set
    `AVX2` in this process's environment, which its children inherit).

    Returns a line saying what was set.
    """
    if isa == 'native':
        return 'instruction set: native (what each library picks)'
    if isa != 'avx2':
        raise ValueError(f"isa={isa!r}: expected 'native' or 'avx2'")
    if 'mxnet' in sys.modules:
        raise RuntimeError('hold_isa must run before `import mxnet`')
    os.environ.update(AVX2)
    held = ('instruction set: held to AVX2 (' +
            ' '.join(f'{k}={v}' for k, v in AVX2.items()) + ')')
    if not cpu_kind().split('; ')[-1].startswith('AVX-512'):
        return held
    return (held + '; this CPU has wider instructions, so the run checks '
            'the AVX2 kernels, not the speed of a CPU without AVX-512')


def set_threads(num_threads=None, short_spin=True, isa='native'):
    """`d2l_bert.threads.set_threads`, before `mxnet` is imported, as the
    command line does, after `hold_isa(isa)`.

    Without `short_spin`, libgomp keeps its default spin (or what the
    environment sets): a benchmark that runs no compiled loops should not
    give d2l's operators the short spin, which only our loops need.

    Returns a description of the choices, one line each.
    """
    if 'mxnet' in sys.modules:
        raise RuntimeError('set_threads must run before `import mxnet`')
    from d2l_bert.threads import set_threads as choose
    held = hold_isa(isa)
    lines = choose(num_threads, short_spin=short_spin)
    if not short_spin:
        lines = lines.replace(
            "OpenMP idle threads: libgomp's default spin",
            "OpenMP idle threads: libgomp's default spin (no compiled loops "
            "run here; with a short spin d2l's many small operators wait "
            'for sleeping threads)')
    return held + '\n' + lines


def cpu_model():
    """The CPU's model name: `lscpu`'s "Model name", else the "model name"
    of /proc/cpuinfo, else what `platform` knows."""
    try:
        done = subprocess.run(['lscpu'], capture_output=True, text=True,
                              timeout=30, env=dict(os.environ, LC_ALL='C'))
        for line in done.stdout.splitlines():
            if line.startswith('Model name:'):
                return line.split(':', 1)[1].strip()
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        with open('/proc/cpuinfo') as f:
            for line in f:
                if line.startswith('model name'):
                    return line.split(':', 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_kind(cpuinfo=None):
    """The kind of CPU, from the first CPU of /proc/cpuinfo (or of the
    text `cpuinfo`): its family and model, and its widest vector
    instructions, such as 'family 25, model 1; AVX2, no AVX-512' or
    'AVX-512, AVX-512 BF16, AMX'; on ARM 'NEON' or 'SVE'.  '' where
    nothing is known."""
    if cpuinfo is None:
        try:
            with open('/proc/cpuinfo') as f:
                cpuinfo = f.read()
        except OSError:
            return ''
    fields = {}
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(':')
        fields.setdefault(key.strip(), value.strip())
    flags = set(fields.get('flags', fields.get('Features', '')).split())
    parts = []
    if 'cpu family' in fields:
        parts.append(f"family {fields['cpu family']}, model "
                     f"{fields.get('model', '?')}")
    if 'avx512f' in flags:
        parts.append(', '.join(['AVX-512'] + [name for flag, name in (
            ('avx512_bf16', 'AVX-512 BF16'), ('amx_tile', 'AMX'))
            if flag in flags]))
    elif 'avx2' in flags:
        parts.append('AVX2, no AVX-512')
    elif 'flags' in fields:
        parts.append('no AVX2')
    elif flags:
        parts.append('SVE' if 'sve' in flags else 'NEON' if 'asimd' in
                     flags else 'no NEON')
    return '; '.join(parts)


def machine():
    """Describe the CPU (`cpu_model`, `cpu_kind`), the core count and
    the load, in one line."""
    load = os.getloadavg()[0] if hasattr(os, 'getloadavg') else float('nan')
    kind = cpu_kind()
    return (f'{cpu_model()}{f" ({kind})" if kind else ""}, '
            f'{os.cpu_count()} logical CPUs, load average {load:.1f}, '
            f'Python {platform.python_version()}')
