"""Shared pieces of the benchmark scripts (not a test module).

Import this module BEFORE `mxnet`: `set_threads` must set the OpenMP
thread count before MXNet reads it, and MXNet reads it once, when it is
imported (and loads OpenBLAS, which picks its kernels then).

- `BOOK`, `FINETUNE`: the book's pretraining and fine-tuning settings,
  from `d2l_bert/presets.py`, read by path (`read_presets`) so that a
  Python without d2l_bert (the PyTorch peer's) reads them too;
- `set_threads`: all cores by default (MXNet alone would give OpenMP half
  of them, one thread on a 2-core machine), and OpenBLAS's AVX-512
  kernels on a CPU that has AVX-512 (`d2l_bert.threads.set_threads`);
  with ``isa='avx2'`` every library is held to AVX2 (`AVX2`), so that a
  machine with AVX-512 measures what a CPU without it runs;
- `book_batch`: a random batch shaped and typed like the book's
  pretraining batches (lengths spread like real data);
- `gemm_rate`: the float32 matrix multiply rate of this machine, measured
  with the MLM output layer's shapes;
- `alternate`: time several functions in turn, so that a machine shared
  with other work slows them all alike; report medians;
- `pretrain_step_flops`, `encode_flops`: the arithmetic of a step;
- `print_step_table`, `print_fastest_step`: the report of a step
  benchmark (GEMM peak, a row per step, the fastest step);
- `arg_parser`: the options every script takes; `add_profile_options`
  and `profile`: MXNet's operator profile of one call instead of timing;
- `cpu_model`, `machine`, `gemm_rates`, `best_gemm`, `print_machine`:
  what each benchmark prints first, the CPU model and the machine's best
  float32 GEMM (oneDNN's, MXNet's `np.dot`, NumPy's, SciPy's);
  `print_against_best`: rates as shares of that best;
- `start_step_benchmark`: the threads and the machine, printed;
- `timed`, `take_turns`: time functions here and turns of a PyTorch
  child in rounds, with a pause between turns;
- `find_torch_python`, `Child`, `serve`, `serve_torch`: a side of a
  benchmark (PyTorch, or one MXNet model alone) in a child process,
  driven through a pipe (both ends of the protocol); `in_processes`:
  MXNet steps, each in its own process, taking turns;
- `ours_step`: d2l_bert's training step, as ``d2l-bert pretrain`` runs it;
  `book_loop_step`: the book's loop on the accelerated model.
"""
import argparse
import collections
import contextlib
import importlib.util
import json
import os
import pickle
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

_HERE = os.path.dirname(os.path.abspath(__file__))

#: The file of the book's settings, `d2l_bert.presets`
PRESETS_FILE = os.path.join(os.path.dirname(_HERE), 'd2l_bert', 'presets.py')


def read_presets(path=PRESETS_FILE):
    """Return `d2l_bert.presets`, read from `path` without importing
    `d2l_bert`: the PyTorch peer runs this module in a Python that does
    not have it (`TorchChild`).  The module imports nothing, so it runs
    alone."""
    spec = importlib.util.spec_from_file_location('_d2l_bert_presets', path)
    presets = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(presets)
    return presets


_PRESETS = read_presets()

#: The book's pretraining settings (sec_bert-pretraining): the run's
#: batch, length and learning rate (`presets.PRETRAINING`), the small
#: BERT (`presets.BOOK_BERT`, whose `max_len` of positions is not the
#: sequences' `max_len` here), WikiText-2's vocabulary (the 20256 tokens
#: the book prints) and the ``round(0.15 * max_len)`` predictions of a
#: sequence
BOOK = dict(
    {k: _PRESETS.PRETRAINING[k] for k in ('batch_size', 'max_len', 'lr')},
    **{k: v for k, v in _PRESETS.BOOK_BERT.items() if k != 'max_len'},
    vocab_size=20256,
    num_preds=round(0.15 * _PRESETS.PRETRAINING['max_len']))

#: The NLI section's fine-tuning settings
#: (sec_natural-language-inference-bert): the run's batch, length and
#: learning rate (`presets.FINETUNING`), `bert.small`'s sizes
#: (`presets.BERT_SMALL`, its positions as `pretrained_max_len`), its
#: 60005-token vocabulary and SNLI's three classes
FINETUNE = dict(
    {k: _PRESETS.FINETUNING[k] for k in ('batch_size', 'max_len', 'lr')},
    **{k: v for k, v in _PRESETS.BERT_SMALL.items() if k != 'max_len'},
    pretrained_max_len=_PRESETS.BERT_SMALL['max_len'], vocab_size=60005,
    num_classes=3)


#: The PyTorch and ONNX Runtime peers' versions (`TorchChild`): not
#: dependencies of d2l-bert
TORCH_PINS = ('torch==2.13.0 transformers==5.23.0 onnxruntime==1.32.0 '
              'onnx==1.23.2 onnxscript==0.7.2')

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


#: Another row count M for every GEMM timed here: the test suite runs
#: the scripts at 512, to check their logic rather than the machine
GEMM_ROWS_ENV = 'D2L_BERT_BENCH_GEMM_ROWS'


def gemm_shape():
    """``(M, K, N)`` of every GEMM timed here, (M, K) @ (K, N): the MLM
    output layer's at the book's settings, 5120 rows of 128 times 128 x
    20256, or `GEMM_ROWS_ENV`'s rows."""
    rows = os.environ.get(GEMM_ROWS_ENV, '5120')
    if not rows.isdigit() or int(rows) < 1:
        raise SystemExit(f'{GEMM_ROWS_ENV} must be a positive number of '
                         f'rows, got {rows!r}')
    return int(rows), 128, 20256


def gemm_rates(repeats=3):
    """GFLOP/s of a float32 GEMM of `gemm_shape()` by each library of this
    process, the fastest of `repeats` after one untimed call, each
    writing into an output it reuses.

    Run after `set_threads` (MXNet imported afterwards): the libraries'
    threads are then those the benchmarks run with.

    Returns
    -------
    dict of str -> float
        "oneDNN FullyConnected" (`gemm_rate`, what Gluon's `Dense`
        runs), "MXNet np.dot", "NumPy matmul" and "SciPy sgemm" (when
        SciPy imports).
    """
    import numpy as onp
    from mxnet import np
    M, K, N = gemm_shape()
    X = onp.random.uniform(-1, 1, (M, K)).astype('float32')
    W = onp.random.uniform(-1, 1, (K, N)).astype('float32')
    fc, _ = gemm_rate()
    X_mx, W_mx, out_mx = np.array(X), np.array(W), np.zeros((M, N))
    out = onp.empty((M, N), 'float32')
    runs = {'oneDNN FullyConnected': fc,
            'MXNet np.dot': lambda: np.dot(X_mx, W_mx,
                                           out=out_mx).wait_to_read(),
            'NumPy matmul': lambda: onp.matmul(X, W, out=out)}
    try:
        from scipy.linalg.blas import sgemm
        X_f, W_f = onp.asfortranarray(X), onp.asfortranarray(W)
        out_f = onp.empty((M, N), 'float32', order='F')
        runs['SciPy sgemm'] = lambda: sgemm(1.0, X_f, W_f, c=out_f,
                                             overwrite_c=True)
    except ImportError:
        pass
    rates = {}
    for name, run in runs.items():
        run()
        best = min(timed(run)[0] for _ in range(repeats))
        rates[name] = 2 * M * K * N / best / 1e9
    return rates


def best_gemm(threads=None):
    """The machine's best float32 GEMM rate: `gemm_rates` measured in a
    process of its own (after `set_threads(threads)`, with the
    instruction set this process's environment holds).

    Returns
    -------
    best : float
        The highest of the libraries' rates, GFLOP/s.
    line : str
        Every library's rate and the best, to print.
    """
    command = [sys.executable, os.path.abspath(__file__), '--gemm-rates']
    if threads is not None:
        command += ['--threads', str(threads)]
    done = subprocess.run(command, capture_output=True, text=True,
                          timeout=600)
    if done.returncode != 0:
        raise RuntimeError('measuring the GEMMs failed:\n' + done.stderr)
    rates = json.loads(done.stdout.strip().splitlines()[-1])
    name = max(rates, key=rates.get)
    M, K, N = gemm_shape()
    return rates[name], (
        f'float32 GEMM {M}x{K} @ {K}x{N}, fastest of 3: ' +
        ', '.join(f'{n} {r:.0f}' for n, r in rates.items()) +
        f' GFLOP/s; best {rates[name]:.0f} ({name})')


def print_machine(threads=None):
    """Print the CPU model (`cpu_model`), the cores and the load
    (`machine`), and the machine's best float32 GEMM (`best_gemm`), at
    the start of a benchmark; return that best rate in GFLOP/s, the rate
    a benchmark's arithmetic is compared with."""
    print(machine(), flush=True)
    best, line = best_gemm(threads)
    print(line, flush=True)
    return best


def book_batch(batch_size=BOOK['batch_size'], max_len=BOOK['max_len'],
               vocab_size=BOOK['vocab_size'], num_preds=BOOK['num_preds'],
               seed=0):
    """A random pretraining batch typed and shaped like the book's.

    Returns numpy arrays ``(tokens_X, segments_X, valid_lens_x,
    pred_positions_X, mlm_weights_X, mlm_Y, nsp_y)``: int32 (B, T), int32
    (B, T), float32 (B,), int32 (B, P), float32 (B, P), int32 (B, P),
    int32 (B,).  Valid lengths are spread between 12 and T, as WikiText
    sentence pairs are; about 15% of a sequence is predicted, so short
    sequences pad `pred_positions` with 0 and weight 0, as the book does.
    """
    import numpy as onp
    rng = onp.random.RandomState(seed)
    B, T, P = batch_size, max_len, num_preds
    valid_lens = rng.randint(min(12, T), T + 1, size=B)
    tokens = rng.randint(5, vocab_size, size=(B, T)).astype('int32')
    segments = onp.zeros((B, T), 'int32')
    pred_positions = onp.zeros((B, P), 'int32')
    mlm_weights = onp.zeros((B, P), 'float32')
    mlm_Y = onp.zeros((B, P), 'int32')
    for i, n in enumerate(valid_lens):
        tokens[i, 0], tokens[i, n - 1] = 2, 3            # <cls>, last <sep>
        tokens[i, n:] = 1                                # <pad>
        first_sep = max(1, n // 2)
        tokens[i, first_sep] = 3
        segments[i, first_sep + 1:n] = 1
        num = min(P, max(1, round(n * 0.15)))
        candidates = [j for j in range(1, n - 1) if j != first_sep]
        pos = onp.sort(rng.choice(candidates, num, replace=False))
        pred_positions[i, :num] = pos
        mlm_weights[i, :num] = 1
        mlm_Y[i, :num] = tokens[i, pos]
    nsp_y = rng.randint(0, 2, size=B).astype('int32')
    return (tokens, segments, valid_lens.astype('float32'), pred_positions,
            mlm_weights, mlm_Y, nsp_y)


def pretrain_step_flops(batch_size=BOOK['batch_size'], max_len=BOOK['max_len'],
                        num_hiddens=BOOK['num_hiddens'],
                        ffn_num_hiddens=BOOK['ffn_num_hiddens'],
                        num_blks=BOOK['num_blks'],
                        vocab_size=BOOK['vocab_size'],
                        num_preds=BOOK['num_preds'], **_):
    """Floating-point operations of one training step (matrix products).

    Forward: per block, the four projections, the FFN and the two batched
    products of attention; then the MLM head on B*P rows and the NSP head.
    Backward costs twice the forward (gradients of inputs and weights).
    """
    N, H, F = batch_size * max_len, num_hiddens, ffn_num_hiddens
    block = (2 * N * H * 4 * H + 2 * N * H * F * 2
             + 2 * 2 * batch_size * max_len * max_len * H)
    M = batch_size * num_preds
    heads = 2 * M * H * H + 2 * M * H * vocab_size + 2 * batch_size * H * H
    return 3 * (num_blks * block + heads)


def encode_flops(batch_size=64, max_len=128, num_hiddens=128,
                 ffn_num_hiddens=256, num_blks=2, **_):
    """Floating-point operations of encoding a batch (forward only)."""
    N, H, F = batch_size * max_len, num_hiddens, ffn_num_hiddens
    block = (2 * N * H * 4 * H + 2 * N * H * F * 2
             + 2 * 2 * batch_size * max_len * max_len * H)
    return num_blks * block


def gemm_rate():
    """Return a function that runs one float32 GEMM and its FLOP count.

    The shapes are `gemm_shape()`'s, the MLM output layer's, through
    `npx.fully_connected` (oneDNN), the kernel Gluon's `Dense` uses.  The
    output array is reused, so no time goes to allocation.
    """
    import mxnet as mx
    from mxnet import np
    M, K, N = gemm_shape()
    X = np.random.uniform(-1, 1, size=(M, K))
    W = np.random.uniform(-1, 1, size=(N, K))
    out = np.zeros((M, N))

    def run():
        mx.nd.FullyConnected(X.as_nd_ndarray(), W.as_nd_ndarray(),
                             no_bias=True, num_hidden=N,
                             out=out.as_nd_ndarray())
        out.wait_to_read()
    return run, 2 * M * K * N


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


def find_torch_python(path):
    """Return the interpreter to run PyTorch with, or None."""
    if path is not None:
        return path
    if all(importlib.util.find_spec(m) for m in ('torch', 'transformers')):
        return sys.executable
    return None


class Child:
    """One side of a benchmark in a child process driven through a pipe:
    `script` run with ``--worker`` and `worker_args`, which calls `serve`
    (the PyTorch side, or one MXNet model alone in its process)."""

    def __init__(self, python, script, *worker_args):
        self.proc = subprocess.Popen(
            [python, os.path.abspath(script), '--worker', *worker_args],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def ask(self, *command):
        try:
            pickle.dump(command, self.proc.stdin, protocol=4)
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass                    # it ended: its last words are below
        try:
            answer = pickle.load(self.proc.stdout)
        except EOFError:
            raise RuntimeError('the child process ended (see its '
                               'messages above)') from None
        if answer[0] == 'error':
            raise RuntimeError(answer[1])
        return answer

    def close(self):
        try:
            pickle.dump(('quit',), self.proc.stdin, protocol=4)
            self.proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


#: The PyTorch side (`bench_torch.py`, `bench_minilm.py`)
TorchChild = Child


def serve_torch(setup):
    """`serve` for the PyTorch side: exit status 2 if torch or
    transformers cannot be imported.  Runs in the child, which imports no
    MXNet."""
    return serve(setup, needs=('torch', 'transformers'))


def serve(setup, needs=()):
    """Serve a `Child`: read pickled commands on stdin, answer on stdout.

    Commands: ``('setup', *args)``, answered ``('ready', info)`` where
    ``fns, info = setup(*args)``; the name of a function of `fns`,
    answered ``(name, wall seconds, CPU seconds of this process,
    result)``, timed here; ``('quit',)``.  Returns the exit status (2 if
    a module of `needs` cannot be imported).
    """
    # Keep stdout for answers: whatever a library prints goes to stderr
    out = os.fdopen(os.dup(1), 'wb')
    os.dup2(2, 1)
    inp = sys.stdin.buffer

    def send(*answer):
        pickle.dump(answer, out, protocol=4)
        out.flush()

    try:
        for module in needs:
            importlib.import_module(module)
    except ImportError as e:
        send('error', f'{type(e).__name__}: {e}')
        return 2
    fns = {}
    while True:
        try:
            command = pickle.load(inp)
        except EOFError:
            return 0
        if command[0] == 'setup':
            fns, info = setup(*command[1:])
            send('ready', info)
        elif command[0] in fns:
            start, start_cpu = time.perf_counter(), time.process_time()
            result = fns[command[0]]()
            send(command[0], time.perf_counter() - start,
                 time.process_time() - start_cpu, result)
        elif command[0] == 'quit':
            return 0
        else:
            send('error', f'unknown command {command[0]!r}')


def in_processes(script, sides, worker_args, repeats, warmup=1,
                 pause=0.2):
    """Time MXNet steps, each side in a process of its own, taking turns.

    In one process, what one model leaves behind (memory the kernel must
    zero again, idle OpenMP threads, numba's threads) slows the next
    (d2l 1.0.3's pretraining step, alternating with ours, runs slower
    than alone).  Here every side runs alone in its process, as a user runs
    it; the turns (with `pause` seconds of idle between them) still share
    the machine's load alike.

    Parameters
    ----------
    script : str
        The benchmark, run as ``script --worker SIDE *worker_args``; its
        worker calls `serve` with a setup giving ``{'step': f}``.
    sides : sequence of str
    worker_args : list of str
        The options each worker gets (threads, instruction set, sizes).
    repeats, warmup : int
    pause : float

    Returns
    -------
    res : dict of side -> (median wall s, list of wall s, median CPU s)
        As `alternate` returns them.
    infos : dict of side -> what its setup returned
    """
    children = {}
    try:
        for side in sides:
            children[side] = Child(sys.executable, script, side,
                                   *worker_args)
        infos = {side: child.ask('setup')[1]
                 for side, child in children.items()}
        turns = {side: (lambda child=child: child.ask('step')[1:3])
                 for side, child in children.items()}
        times, wall, cpu = take_turns(turns, repeats, warmup, pause)
    finally:
        for child in children.values():
            child.close()
    res = {side: (wall[side], [w for w, _ in times[side]], cpu[side])
           for side in times}
    return res, infos


def waited(f):
    """`f`, then wait until MXNet has finished all its work (a step's
    update included), for `serve` to time."""
    def run():
        from mxnet import npx
        result = f()
        npx.waitall()
        return result
    return run


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


def profile(fn, label, top, steps=5):
    """Print the `top` operators of `fn`, their time per call over
    `steps` calls and their share, then the compiled loops' custom
    operators (`loop_times`), which MXNet's profiler does not see."""
    import mxnet as mx
    from mxnet import npx
    fn()
    npx.waitall()
    # A file of our own: MXNet replaces its profile file when it dumps,
    # and given os.devnull it once turned /dev/null into a regular file
    folder = tempfile.mkdtemp(prefix='d2l-bert-profile-')
    try:
        mx.profiler.set_config(profile_all=True, aggregate_stats=True,
                               filename=os.path.join(folder, 'profile.json'))
        with loop_times() as loops:
            mx.profiler.set_state('run')
            for _ in range(steps):
                fn()
                npx.waitall()
            mx.profiler.set_state('stop')
        stats = mx.profiler.dumps(reset=True, format='json')
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    ops = json.loads(stats)['Time'].get('operator', {})
    total = sum(v['Total'] for v in ops.values()) / steps
    rows = sorted(ops.items(), key=lambda kv: -kv[1]['Total'])[:top]
    print(f'\n{label}: {total:.0f} ms of operator time a step '
          f'(mean of {steps})')
    for name, v in rows:
        ms = v['Total'] / steps
        print(f"  {name[:40]:40s} {v['Count'] // steps:4d} x {ms:9.1f} ms "
              f"{100 * ms / total:5.1f}%")
    if loops:
        print(f'  and the compiled loops: '
              f'{sum(loops.values()) / steps:.0f} ms')
    for name, ms in sorted(loops.items(), key=lambda kv: -kv[1]):
        print(f'  {name[:40]:40s}        {ms / steps:9.1f} ms')


@contextlib.contextmanager
def loop_times():
    """Time each call of the compiled loops' custom operators
    (`d2l_bert.fast._attention_ops`, `_norm_ops`, `_loss_ops`) while the
    block runs; yields a dict, name of the operator and pass
    ('_SelfAttention.backward') -> milliseconds."""
    import mxnet as mx
    from d2l_bert.fast import _attention_ops, _loss_ops, _norm_ops
    times, saved = collections.defaultdict(float), []
    for name, cls in [item for ops in (_attention_ops, _norm_ops, _loss_ops)
                      for item in vars(ops).items()]:
        if not (isinstance(cls, type) and issubclass(
                cls, mx.operator.CustomOp)):
            continue
        for method in ('forward', 'backward'):
            original = cls.__dict__.get(method)
            if original is None:
                continue

            def timed_call(*args, _f=original, _key=f'{name}.{method}',
                           **kwargs):
                start = time.perf_counter()
                try:
                    return _f(*args, **kwargs)
                finally:
                    times[_key] += 1e3 * (time.perf_counter() - start)
            saved.append((cls, method, original))
            setattr(cls, method, timed_call)
    try:
        yield times
    finally:
        for cls, method, original in saved:
            setattr(cls, method, original)


def ours_step(net, vocab_size, batch):
    """d2l_bert's pretraining step on one device, as ``d2l-bert pretrain``
    runs it: `d2l_bert.fast.batch_loss` (model and losses in one graph),
    Adam at 0.01.

    Parameters
    ----------
    net : d2l_bert.BERTModel, initialized
    vocab_size : int
    batch : list of the 7 arrays of a pretraining batch

    Returns
    -------
    step : function of no argument; one training step, returning the
        (mlm, nsp) losses
    losses : (mlm, nsp) before training, dropout off
    """
    from mxnet import gluon
    from d2l_bert import fast

    batch_loss = fast.batch_loss(net, gluon.loss.SoftmaxCELoss(),
                                 vocab_size)
    return _step(batch_loss, batch_loss.graph.net, batch)


def book_loop_step(net, vocab_size, batch):
    """One step of the book's own loop (`_get_batch_loss_bert`, as
    `train_bert` calls it, Adam at 0.01) on ``fast.accelerate(net)`` and
    ``fast.accelerate(loss)``: what the pretraining notebook runs.  Same
    parameters and returns as `ours_step`."""
    import functools

    from mxnet import gluon
    from d2l_bert import fast
    from d2l_bert.book.pretraining import _get_batch_loss_bert

    twin = fast.accelerate(net)
    loss = fast.accelerate(gluon.loss.SoftmaxCELoss())
    batch_loss = functools.partial(_get_batch_loss_bert, twin, loss,
                                   vocab_size)
    return _step(batch_loss, twin, batch)


def _step(batch_loss, net, batch):
    from mxnet import autograd, gluon
    trainer = gluon.Trainer(net.collect_params(), 'adam',
                            {'learning_rate': BOOK['lr']})
    shards = [[b] for b in batch]

    def step():
        with autograd.record():
            mlm_ls, nsp_ls, ls = batch_loss(*shards)
        for l in ls:
            l.backward()
        trainer.step(1)
        return float(mlm_ls[0]), float(nsp_ls[0])

    mlm, nsp, _ = batch_loss(*shards)                     # dropout off
    return step, (float(mlm[0]), float(nsp[0]))


def finetune_batch(batch_size=FINETUNE['batch_size'],
                   max_len=FINETUNE['max_len'],
                   vocab_size=FINETUNE['vocab_size'],
                   num_classes=FINETUNE['num_classes'], seed=0):
    """A random batch shaped and typed like `SNLIBERTDataset`'s.

    Returns numpy arrays ``(tokens_X, segments_X, valid_lens_x, y)``:
    int32 (B, T), int32 (B, T), float32 (B,), float32 (B,).  Each row is
    ``<cls> premise <sep> hypothesis <sep>`` padded with `<pad>`, with a
    valid length between 12 and T as in `book_batch`.
    """
    import numpy as onp
    rng = onp.random.RandomState(seed)
    B, T = batch_size, max_len
    valid_lens = rng.randint(min(12, T), T + 1, size=B)
    tokens = rng.randint(5, vocab_size, size=(B, T)).astype('int32')
    segments = onp.zeros((B, T), 'int32')
    for i, n in enumerate(valid_lens):
        first_sep = max(1, n // 2)
        tokens[i, 0], tokens[i, first_sep], tokens[i, n - 1] = 2, 3, 3
        tokens[i, n:] = 1                                # <pad>
        segments[i, first_sep + 1:n] = 1
    y = rng.randint(0, num_classes, size=B).astype('float32')
    return tokens, segments, valid_lens.astype('float32'), y


def finetune_step_flops(batch_size=FINETUNE['batch_size'],
                        max_len=FINETUNE['max_len'],
                        num_hiddens=FINETUNE['num_hiddens'],
                        ffn_num_hiddens=FINETUNE['ffn_num_hiddens'],
                        num_blks=FINETUNE['num_blks'],
                        num_classes=FINETUNE['num_classes'], **_):
    """Floating-point operations of one fine-tuning step (matrix
    products): the encoder's blocks as in `pretrain_step_flops`, then the
    `hidden` layer and the classifier on the `<cls>` rows; backward costs
    twice the forward."""
    N, H, F = batch_size * max_len, num_hiddens, ffn_num_hiddens
    block = (2 * N * H * 4 * H + 2 * N * H * F * 2
             + 2 * 2 * batch_size * max_len * max_len * H)
    heads = 2 * batch_size * H * H + 2 * batch_size * H * num_classes
    return 3 * (num_blks * block + heads)


def serve_step(args, build_side):
    """Serve one side of a step benchmark from this process (`serve`):
    its step, or the GEMM when ``args.worker == 'gemm'``.

    ``build_side(args)`` returns ``(step, info)``: the step function and
    a dict the parent reads (its losses, the settings).
    """
    threads = set_threads(args.threads, isa=args.isa)

    def setup():
        if args.worker == 'gemm':
            gemm, gemm_flops = gemm_rate()
            return {'step': waited(gemm)}, dict(flops=gemm_flops,
                                                threads=threads)
        step, info = build_side(args)
        return {'step': waited(step)}, dict(info, threads=threads)
    return serve(setup)


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



def job_worker(batch_size, prepare_kvstore=None):
    """A worker's side of the pretraining step of ``d2l-bert pretrain``
    (or one process's, outside a job), on the book's model and a
    book-shaped batch of `batch_size`: the model, its one-graph loss, the
    trainer, the workers and this worker's shards.

    `prepare_kvstore(kvstore)`, if given, runs on a job's kvstore before
    the trainer gives it its keys.
    """
    import types

    import mxnet as mx
    from mxnet import gluon, init, np, npx

    from d2l_bert import BERTModel, fast
    from d2l_bert.dist.workers import (Workers, create_kvstore,
                                       share_initial_weights, worker_shards)
    from d2l_bert.runs.pretraining import _make_trainer

    npx.set_np()
    kvstore = create_kvstore() if os.environ.get('DMLC_ROLE') else None
    cfg = dict(BOOK, batch_size=batch_size)
    V = cfg['vocab_size']
    batch = [np.array(a) for a in book_batch(
        batch_size, cfg['max_len'], V, cfg['num_preds'])]
    mx.random.seed(0)
    net = BERTModel(V, cfg['num_hiddens'], cfg['ffn_num_hiddens'],
                    cfg['num_heads'], cfg['num_blks'], cfg['dropout'])
    devices = [mx.cpu()]
    net.initialize(init.Xavier(), ctx=devices)
    batch_loss = fast.batch_loss(net, gluon.loss.SoftmaxCELoss(), V)
    if kvstore is not None and prepare_kvstore is not None:
        prepare_kvstore(kvstore)
    trainer = _make_trainer(net, BOOK['lr'], kvstore)
    if kvstore is not None:
        share_initial_weights(trainer)
    workers = Workers(kvstore)
    return types.SimpleNamespace(
        net=net, batch_loss=batch_loss, trainer=trainer, workers=workers,
        devices=devices, batch_size=batch_size,
        shards=worker_shards(batch, devices, workers.rank,
                             workers.num_workers))


if __name__ == '__main__':
    # `best_gemm`'s process: the libraries' GEMM rates, as JSON
    if sys.argv[1:2] == ['--gemm-rates']:
        p = argparse.ArgumentParser()
        p.add_argument('--gemm-rates', action='store_true')
        p.add_argument('--threads', type=int, default=None)
        options = p.parse_args()
        # the instruction set is the environment's, inherited
        print(set_threads(options.threads), file=sys.stderr)
        print(json.dumps(gemm_rates()))
