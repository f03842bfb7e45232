"""What the tests share: the tiny configuration, seeding, the tolerances
of float comparisons and small runs on the embedded corpus.

Test files import from here (``from helpers import TINY``), never from
each other or from `conftest`, which holds the fixtures.
"""
import collections
import http.server
import json
import os
import zipfile

import mxnet as mx
import numpy as onp
import pytest
from mxnet import init

from d2l_bert.runs.seeding import seed_everything

#: A configuration small enough for fast tests (vocab 99, hidden 32, 2
#: blocks), in the book's argument names
TINY = dict(vocab_size=99, num_hiddens=32, ffn_num_hiddens=48, num_heads=4,
            num_blks=2, dropout=0.0, max_len=16)

#: The sequence length of the tiny pretraining runs (`make_run`)
RUN_MAX_LEN = 64

#: The tiny WikiText corpus the dataset tests read
WIKITEXT_FIXTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                'fixtures', 'wikitext-tiny')
#: The book's printed batch of `load_data_wiki(512, 64)`: shapes, dtypes
BOOK_BATCH_SHAPES = [(512, 64), (512, 64), (512,), (512, 10), (512, 10),
                     (512, 10), (512,)]
BOOK_BATCH_DTYPES = ['int32', 'int32', 'float32', 'int32', 'float32',
                     'int32', 'float32']


def tiny(**changes):
    """`TINY` with some arguments changed, as a new dict."""
    return dict(TINY, **changes)


# --- Tolerances --------------------------------------------------------------
#
# Float32 sums taken in another order (fused projections, an added mask,
# compiled loops, oneDNN's fused operators) differ by a few units in the
# 6th digit on values of order 1: `REORDERED` leaves room for that and for
# nothing else.  Gradients pass through the whole model and a sum over
# every position, and W_k's bias has a zero gradient in exact arithmetic
# (a softmax ignores a constant added to every score), so only rounding
# is left there: `GRADIENTS`.  Another device (a GPU's kernels) rounds
# differently again: `OTHER_DEVICE`.

Tolerance = collections.namedtuple('Tolerance', 'rtol atol')
EXACT = Tolerance(rtol=0, atol=0)
REORDERED = Tolerance(rtol=1e-5, atol=1e-5)
GRADIENTS = Tolerance(rtol=1e-4, atol=2e-5)
OTHER_DEVICE = Tolerance(rtol=1e-5, atol=1e-4)


def assert_close(actual, expected, tolerance=REORDERED, err_msg=''):
    """Assert two arrays (MXNet's or NumPy's) equal within `tolerance`."""
    onp.testing.assert_allclose(_numpy(actual), _numpy(expected),
                                rtol=tolerance.rtol, atol=tolerance.atol,
                                err_msg=err_msg)


def _numpy(a):
    return a.asnumpy() if hasattr(a, 'asnumpy') else onp.asarray(a)


def copy_params(src, dst):
    """Give `dst` the parameter values of `src`, matched by name."""
    src_params = src._collect_params_with_prefix()
    dst_params = dst._collect_params_with_prefix()
    assert sorted(src_params) == sorted(dst_params)
    for name, param in src_params.items():
        dst_params[name].set_data(param.data())


def kernel_params():
    """``[True, False]`` as the parameters `kernels` of a fast-layer test:
    the compiled loops (skipped where numba is missing or cannot compile)
    and MXNet's own operators."""
    from d2l_bert.fast import _ops
    return [pytest.param(True, id='kernels', marks=pytest.mark.skipif(
                not _ops.available(), reason='numba is missing or cannot '
                'compile here: no compiled loops to test')),
            pytest.param(False, id='mxnet-ops')]


# --- Tiny pretraining runs on the embedded corpus ----------------------------


def write_small_corpus(directory, num_train=60, num_valid=30):
    """Write the first paragraphs of the embedded corpus's two splits to
    `directory` (WikiText's file names) and return it as a string."""
    from d2l_bert.data import corpus
    os.makedirs(directory, exist_ok=True)
    for split, count in (('train', num_train), ('valid', num_valid)):
        name = corpus.FILE_NAMES[split]
        with open(os.path.join(corpus.DATA_DIR, name),
                  encoding='utf-8') as f:
            lines = [line for line in f if len(line.split(' . ')) >= 2]
        with open(os.path.join(directory, name), 'w',
                  encoding='utf-8') as f:
            f.writelines(lines[:count])
    return str(directory)


def run_config(vocab, dropout=0.0):
    """The tiny BERT's arguments for a run on `vocab`'s data."""
    return tiny(vocab_size=len(vocab), max_len=RUN_MAX_LEN, dropout=dropout)


def make_run(corpus_dir, batch_size=32, dropout=0.0, devices=None,
             seed=0):
    """Data, vocabulary and a freshly initialized tiny BERT, all seeded."""
    from d2l_bert import BERTModel
    from d2l_bert.runs.wiki_data import load_pretraining_data
    devices = devices or [mx.cpu()]
    seed_everything(seed)
    train_iter, vocab = load_pretraining_data(
        batch_size, RUN_MAX_LEN, corpus=corpus_dir, seed=seed)
    net = BERTModel(**run_config(vocab, dropout))
    net.initialize(init.Xavier(), ctx=devices)
    return train_iter, vocab, net


# --- d2l-bert pretrain runs and their checkpoints ------------------------

TINY_ARGS = ['--batch-size', '32', '--num-hiddens', '32',
             '--ffn-num-hiddens', '48', '--num-heads', '2']


JOB_ARGS = TINY_ARGS + ['--dropout', '0', '--checkpoint-every', '2']


def checkpoint_state(path):
    """``(meta, params, adam)`` of a checkpoint: its meta data, the
    parameters by name and Adam's moments (mean, variance) by parameter
    name, as NumPy arrays."""
    from d2l_bert.data.ndarray_bytes import read_ndarrays
    with zipfile.ZipFile(path) as z:
        meta = json.loads(z.read('meta.json'))
        params = read_ndarrays(z.read('model.params'))
        states = read_ndarrays(z.read('adam.params'))
    adam = {name[:-len('/mean')]: (states[name], states[f'{name[:-5]}/var'])
            for name in states if name.endswith('/mean')}
    return meta, params, adam


def write_version_1(src, dst, net, trainer):
    """Write the checkpoint `src` to `dst` as d2l-bert wrote checkpoints
    before they held no code: ``meta.json`` of version 1 without Adam's
    numbers, and ``trainer.states``, MXNet's own pickle of Adam's state
    (`Trainer.save_states`) once `src` is loaded into `net` and
    `trainer`."""
    from d2l_bert.runs.checkpoints import load_checkpoint
    load_checkpoint(str(src), net, trainer, net.collect_params().list_ctx())
    states = f'{dst}.states'
    trainer.save_states(states)
    try:
        with open(states, 'rb') as f:
            pickled = f.read()
    finally:
        os.remove(states)
    with zipfile.ZipFile(src) as z:
        meta = json.loads(z.read('meta.json'))
        params = z.read('model.params')
    del meta['adam']
    meta['version'] = 1
    with zipfile.ZipFile(dst, 'w') as z:
        z.writestr('meta.json', json.dumps(meta))
        z.writestr('model.params', params)
        z.writestr('trainer.states', pickled)


def checkpoint_step(path):
    """Steps done by the checkpoint at `path`; 0 while it is missing."""
    from d2l_bert.runs.checkpoints import read_checkpoint_meta
    try:
        return read_checkpoint_meta(path)['step']
    except (OSError, ValueError):
        return 0


def assert_same_state(a, b):
    """The same losses step by step, parameters and Adam moments, to the
    last bit."""
    (meta_a, params_a, adam_a), (meta_b, params_b, adam_b) = a, b
    assert meta_a['step'] == meta_b['step']
    assert meta_a['history']['mlm'] == meta_b['history']['mlm']
    assert meta_a['history']['nsp'] == meta_b['history']['nsp']
    assert sorted(params_a) == sorted(params_b)
    for name in params_a:
        onp.testing.assert_array_equal(params_a[name], params_b[name],
                                       err_msg=name)
    assert sorted(adam_a) == sorted(adam_b)
    for i in adam_a:
        for x, y in zip(adam_a[i], adam_b[i]):
            onp.testing.assert_array_equal(x, y)


class FilesHandler(http.server.BaseHTTPRequestHandler):
    """A test server's handler: serves the bytes of `files` by path and
    records the paths asked for in `asked`; under ``/truncated/`` it
    announces a file's full length and sends half of its bytes.  Each
    test module subclasses it with its own `files` and `asked`."""
    files, asked = {}, []

    def do_GET(self):
        self.asked.append(self.path)
        truncated = self.path.startswith('/truncated/')
        body = self.files.get(self.path.replace('/truncated', '', 1)
                              if truncated else self.path)
        if body is None:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body[:len(body) // 2] if truncated else body)

    def do_HEAD(self):
        body = self.files.get(self.path)
        self.send_response(200 if body is not None else 404)
        self.send_header('Content-Length', str(len(body or b'')))
        self.end_headers()

    def log_message(self, *args):
        pass


def cache_book_outputs(cache_dir, notebooks=None):
    """Fill `cache_dir` as `d2l_bert.chapter.execute` would, without a
    kernel: each notebook "executed", printing for each cell the book
    documents what the book prints (and a small figure for each cell
    that trains), so that building the docs executes nothing."""
    import nbformat
    from d2l_bert.chapter import book_outputs, execute, pages

    svg = ('<?xml version="1.0"?><svg xmlns="http://www.w3.org/2000/svg" '
           'width="200" height="100"><rect width="200" height="100" '
           'fill="#c33"/></svg>')
    os.makedirs(cache_dir, exist_ok=True)
    for path in notebooks or pages.chapter_notebooks():
        nb = nbformat.read(path, as_version=4)
        label = pages.section_label(nb, os.path.basename(path))
        for cell in nb.cells:
            entry = (book_outputs.documented(label, cell.source)
                     if cell.cell_type == 'code' else None)
            if entry is None:
                continue
            cell.outputs = [nbformat.v4.new_output(
                'execute_result', {'text/plain': entry.prints},
                execution_count=1)]
            if entry.mode == 'shown':
                cell.outputs.append(nbformat.v4.new_output(
                    'display_data', {'image/svg+xml': svg}))
        nb.metadata.setdefault('d2l_bert', {})['seconds'] = 1.0
        stem = os.path.basename(path)[:-len('.ipynb')]
        nbformat.write(nb, os.path.join(
            cache_dir, f'{stem}.{execute.cache_key(path)}.ipynb'))
