"""MXNet's operator profile of a step instead of its time (``--profile``
of the step benchmarks): `profile`, and `loop_times` for the compiled
loops' custom operators, which MXNet's profiler does not see."""
import collections
import contextlib
import json
import os
import shutil
import tempfile
import time


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
