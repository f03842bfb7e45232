"""Tests of d2l_bert.data.wikitext: finding a corpus and downloading
WikiText-2 (against a server on 127.0.0.1)."""
import functools
import hashlib
import http.server
import os
import shutil
import socket
import threading
import zipfile

import pytest

from d2l_bert.runs.wiki_data import load_pretraining_data
from d2l_bert.data import wikitext as W
from d2l_bert.presets import DATA_ENV
from helpers import WIKITEXT_FIXTURE as FIXTURE


def test_wikitext2_found_where_d2l_keeps_it(tmp_path):
    data_dir = tmp_path / 'wikitext-2'
    shutil.copytree(FIXTURE, data_dir)
    # No URL to try: the files on disk must be enough
    assert W.download_wikitext2(str(tmp_path), urls=()) == str(data_dir)
    data_iter, vocab = load_pretraining_data(4, 64, corpus='wikitext-2',
                                             root=str(tmp_path), seed=0)
    assert len(data_iter._dataset) > 10


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture
def server(tmp_path):
    """Serve a WikiText-2-like zip made from the fixture; yield its URL."""
    served = tmp_path / 'served'
    served.mkdir()
    with zipfile.ZipFile(served / 'wikitext-2-v1.zip', 'w') as zf:
        for name in ('wiki.train.tokens', 'wiki.valid.tokens'):
            zf.write(os.path.join(FIXTURE, name), f'wikitext-2/{name}')
    with open(served / 'wikitext-2-v1.zip', 'rb') as f:
        sha1 = hashlib.sha1(f.read()).hexdigest()
    httpd = http.server.ThreadingHTTPServer(
        ('127.0.0.1', 0),
        functools.partial(_QuietHandler, directory=str(served)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f'http://127.0.0.1:{httpd.server_port}', sha1
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


# Mirrors, checksums, truncation and never half-writing are the shared
# downloader's, tested in tests/test_data_hub.py; here WikiText-2 goes
# through it

def test_download_goes_through_the_hub_and_extracts(tmp_path, server,
                                                    monkeypatch):
    url, sha1 = server
    calls = []
    monkeypatch.setattr(W.hub, 'download', functools.partial(
        _recording, W.hub.download, calls))
    root = tmp_path / 'data'
    data_dir = W.download_wikitext2(
        str(root), urls=(f'{url}/wikitext-2-v1.zip',), sha1_hash=sha1)
    assert calls == [((f'{url}/wikitext-2-v1.zip',), str(root), sha1)]
    assert data_dir == str(root / 'wikitext-2')
    with open(os.path.join(data_dir, 'wiki.train.tokens')) as f, \
            open(os.path.join(FIXTURE, 'wiki.train.tokens')) as g:
        assert f.read() == g.read()
    assert sorted(os.listdir(root)) == ['wikitext-2', 'wikitext-2-v1.zip']


def _recording(download, calls, name, folder, sha1_hash, *args):
    calls.append((name, folder, sha1_hash))
    return download(name, folder, sha1_hash, *args)


def test_server_down_gives_the_offline_options(tmp_path, monkeypatch):
    # A port that nobody listens on: bind one, then close it
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        port = s.getsockname()[1]
    root = tmp_path / 'data'
    url = f'http://127.0.0.1:{port}/wikitext-2-v1.zip'
    dead = functools.partial(W.download_wikitext2, urls=(url,),
                             sha1_hash='0' * 40, timeout=5)
    # `load_pretraining_data` passes the error on, whatever its default mirrors
    monkeypatch.setattr(W, 'download_wikitext2', dead)
    with pytest.raises(W.CorpusUnavailableError) as info:
        load_pretraining_data(4, 64, corpus='wikitext-2', root=str(root))
    message = str(info.value)
    assert "corpus='embedded'" in message
    assert 'wiki.train.tokens' in message and str(root) in message
    assert f'{url}: no network?' in message
    assert 'refused' in message.lower()
    # Raised outside the `except` block: no urllib traceback chained
    assert info.value.__context__ is None and info.value.__cause__ is None
    assert not root.exists()


def test_wikitext2_is_found_in_the_data_folder_then_where_the_book_has_it(
        tmp_path, monkeypatch):
    (tmp_path / 'work').mkdir()
    monkeypatch.chdir(tmp_path / 'work')
    monkeypatch.setenv(DATA_ENV, str(tmp_path / 'cache'))
    shutil.copytree(FIXTURE, tmp_path / 'data' / 'wikitext-2')
    assert W.download_wikitext2(urls=()) == os.path.join(
        '..', 'data', 'wikitext-2')
    shutil.copytree(FIXTURE, tmp_path / 'cache' / 'wikitext-2')
    assert W.download_wikitext2(urls=()) == str(
        tmp_path / 'cache' / 'wikitext-2')


def test_a_download_that_fails_makes_no_folder(tmp_path, monkeypatch):
    # (it made an empty ../data beside the working directory, and never
    # looked at $D2L_BERT_DATA)
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        port = s.getsockname()[1]
    (tmp_path / 'work').mkdir()
    monkeypatch.chdir(tmp_path / 'work')
    cache = tmp_path / 'cache' / 'd2l'
    monkeypatch.setenv(DATA_ENV, str(cache))
    with pytest.raises(W.CorpusUnavailableError) as info:
        W.download_wikitext2(urls=(f'http://127.0.0.1:{port}/w.zip',),
                             timeout=5)
    assert (f'unzip wikitext-2-v1.zip into {str(cache)!r} (the data folder, '
            '$D2L_BERT_DATA)') in str(info.value)
    assert os.listdir(tmp_path) == ['work']
    assert os.listdir(tmp_path / 'work') == []
