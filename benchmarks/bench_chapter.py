"""Time `d2l-bert chapter` with a network: bert.small and SNLI served from
127.0.0.1 at their real sizes.

::

    python benchmarks/bench_chapter.py                 # the default run
    python benchmarks/bench_chapter.py -- --full       # options of chapter
    python benchmarks/bench_chapter.py --offline       # the server has nothing

The chapter's default run downloads `bert.small` and SNLI, as the book
does, and fine-tunes on the first 1,000 pairs of each split.  This script
times that run (set-up aside) as a user with a network sees it, the
downloads and the unpacking included, without sending a byte beyond this
machine: it writes stand-ins of the real archives' sizes (an untrained
model of bert.small's sizes and 60,005-token vocabulary; synthetic pairs
in SNLI's layout, 549,367 training and 9,824 test pairs, each split
also as a ``.jsonl`` as in the real archive), serves them on
127.0.0.1, points the hub there, and runs ``d2l-bert chapter`` in this
process with an empty cache.  The stand-ins are written once into
``--work`` and kept.  What the real network adds is the transfer of the
two archives, whose sizes the script prints.
"""
import argparse
import http.server
import os
import sys
import tempfile
import threading
import time
import zipfile

from d2l_bert.presets import BERT_SMALL_VOCAB_SIZE, DATA_ENV, SNLI_SPLITS


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--work', default=os.path.join(
        tempfile.gettempdir(), 'd2l-bert-bench-chapter'),
        help='where the stand-in archives are written once and kept')
    p.add_argument('--offline', action='store_true',
                   help='the server answers 404: the run a machine without '
                        'a network gets, for comparison')
    p.add_argument('chapter', nargs='*',
                   help='options of `d2l-bert chapter`, after --')
    return p.parse_args(argv)


def _zip(folder, name, copies=False):
    """Return a function writing a zip of `folder`'s files under
    ``name/``; with `copies`, each ``.txt`` also as a ``.jsonl`` (the
    real archive holds each split in both formats)."""
    def write(path):
        with zipfile.ZipFile(path, 'w', zipfile.ZIP_DEFLATED) as z:
            for file_name in sorted(os.listdir(folder)):
                source = os.path.join(folder, file_name)
                z.write(source, f'{name}/{file_name}')
                if copies and file_name.endswith('.txt'):
                    z.write(source, f'{name}/{file_name[:-4]}.jsonl')
    return write


def write_archives(work):
    """Write (once) and return ``{'/bert.small.zip': path,
    '/snli_1.0.zip': path}``."""
    paths = {'/bert.small.zip': os.path.join(work, 'bert.small.zip'),
             '/snli_1.0.zip': os.path.join(work, 'snli_1.0.zip')}
    if all(os.path.isfile(p) for p in paths.values()):
        return paths
    from d2l_bert.data.atomic import atomic_write
    from d2l_bert.data.snli_synthetic import make_snli_synthetic
    model = os.path.join(work, 'bert.small')
    _untrained_bert_small(model)
    atomic_write(paths['/bert.small.zip'], _zip(model, 'bert.small'))
    print(f'writing {sum(SNLI_SPLITS.values()):,} synthetic SNLI '
          'pairs...', flush=True)
    snli = make_snli_synthetic(os.path.join(work, 'snli'),
                               SNLI_SPLITS['train'], SNLI_SPLITS['dev'],
                               SNLI_SPLITS['test'])
    atomic_write(paths['/snli_1.0.zip'], _zip(snli, 'snli_1.0', True))
    return paths


def _untrained_bert_small(folder):
    """An untrained `BERTModel` of bert.small's sizes and vocabulary size:
    the embedded corpus's tokens, then fillers."""
    import mxnet as mx
    from mxnet import np

    from d2l_bert.book.bert import BERTModel
    from d2l_bert.fast import pad_bert_inputs_stacked
    from d2l_bert.presets import BERT_SMALL
    from d2l_bert.runs.model_files import save_pretrained
    from d2l_bert.runs.wiki_data import load_pretraining_data
    _, vocab = load_pretraining_data(64, 32, corpus='embedded', seed=0,
                                     pad=pad_bert_inputs_stacked)
    vocab.idx_to_token += [f'filler{i}' for i in range(
        BERT_SMALL_VOCAB_SIZE - len(vocab))]
    net = BERTModel(BERT_SMALL_VOCAB_SIZE, **BERT_SMALL)
    net.initialize(mx.init.Xavier())
    tokens = np.zeros((1, 4), dtype='int32')
    net(tokens, tokens, np.array([4.0]), np.zeros((1, 1), dtype='int32'))
    save_pretrained(net, vocab, folder,
                    dict(BERT_SMALL, vocab_size=BERT_SMALL_VOCAB_SIZE))


class _Handler(http.server.BaseHTTPRequestHandler):
    files = {}

    def do_GET(self):
        path = self.files.get(self.path)
        if path is None:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header('Content-Length', str(os.path.getsize(path)))
        self.end_headers()
        with open(path, 'rb') as f:
            while True:
                data = f.read(1 << 20)
                if not data:
                    break
                self.wfile.write(data)

    def do_HEAD(self):
        self.send_response(200 if self.path in self.files else 404)
        self.end_headers()

    def log_message(self, *args):
        pass


def serve(paths, cache, offline=False):
    """Serve `paths` on 127.0.0.1 (nothing if `offline`) and point the
    hub there, with the empty cache `cache`; return the server."""
    from d2l_bert.book import finetuning
    from d2l_bert.data import hub
    for var in ('http_proxy', 'HTTP_PROXY', 'all_proxy', 'ALL_PROXY'):
        os.environ.pop(var, None)
    os.environ[DATA_ENV] = cache
    _Handler.files = {} if offline else paths
    httpd = http.server.ThreadingHTTPServer(('127.0.0.1', 0), _Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f'http://127.0.0.1:{httpd.server_address[1]}/'
    # The notebook's book cell sets `DATA_HUB['bert.small']` again from
    # the `DATA_URL` it imports from `d2l_bert.book.finetuning`, with the real
    # archive's SHA-1: the stand-in is taken for it
    finetuning.DATA_URL = url
    real_sha1 = hub.DATA_HUB['bert.small'][1]
    ours = hub.sha1_of(paths['/bert.small.zip'])
    sha1_of = hub.sha1_of
    hub.sha1_of = lambda name: (real_sha1 if sha1_of(name) == ours
                                else sha1_of(name))
    hub.DATA_HUB['bert.small'] = (url + 'bert.small.zip', real_sha1)
    hub.DATA_HUB['SNLI'] = (url + 'snli_1.0.zip',
                            hub.sha1_of(paths['/snli_1.0.zip']))
    return httpd


def main(argv=None):
    args = parse_args(argv)
    from d2l_bert.threads import set_threads
    set_threads()  # before mxnet, which building the stand-ins imports
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import _gemm
    _gemm.print_machine()
    from d2l_bert import cli
    paths = write_archives(args.work)
    for path in paths.values():
        print(f'{os.path.basename(path)}: {os.path.getsize(path) / 1e6:.0f}'
              ' MB served from 127.0.0.1')
    with tempfile.TemporaryDirectory(prefix='d2l-bert-cache-') as cache:
        httpd = serve(paths, cache, args.offline)
        start = time.perf_counter()
        try:
            status = cli.main(['chapter', *args.chapter])
        finally:
            httpd.shutdown()
            httpd.server_close()
        seconds = time.perf_counter() - start
    load = ', '.join(f'{x:.1f}' for x in os.getloadavg())
    where = ('offline (the server had nothing)' if args.offline
             else 'with the downloads from 127.0.0.1')
    print(f'd2l-bert chapter {" ".join(args.chapter)}: {seconds:.1f} s '
          f'{where} (load average {load})')
    return status


if __name__ == '__main__':
    sys.exit(main())
