"""`d2l-bert chapter` with a network: bert.small and SNLI served from
127.0.0.1, as the download tests serve theirs.

The fine-tuning section downloads both, as the book does, and then
fine-tunes on the first pairs of each split only, unless ``--full`` asks
for the book's run; the chapter says which it ran.  At small sizes the
cells download as well, and run at their replaced sizes.  The archives are
tiny fakes: an untrained model of bert.small's sizes with the embedded
corpus's vocabulary, and synthetic pairs in SNLI's layout.
"""
import hashlib
import http.server
import io
import os
import re
import threading
import zipfile

import pytest

from d2l_bert import cli
from d2l_bert.book import finetuning as ft
from d2l_bert import presets
from d2l_bert.data import hub, stand_ins
from d2l_bert.data.snli_synthetic import make_snli_synthetic
from helpers import FilesHandler

NLI = 'sec_natural-language-inference-bert'
#: The cap these tests give the chapter (1,000 by default): one small
#: batch per epoch keeps the test short
PAIRS = 40


def _zip_folder(folder, name):
    """Return a zip archive of `folder`'s files under ``name/``."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, 'w') as z:
        for file_name in sorted(os.listdir(folder)):
            z.write(os.path.join(folder, file_name), f'{name}/{file_name}')
    return buffer.getvalue()


@pytest.fixture(scope='module')
def archives(tmp_path_factory):
    """``{'/bert.small.zip': bytes, '/snli_1.0.zip': bytes}``: the fakes."""
    tmp = tmp_path_factory.mktemp('fake-hub')
    model, _ = stand_ins.hub_stand_in('bert.small', str(tmp / 'bert.small'))
    snli = make_snli_synthetic(str(tmp / 'snli'), num_train=PAIRS + 20,
                               num_dev=4, num_test=PAIRS + 10)
    return {'/bert.small.zip': _zip_folder(model, 'bert.small'),
            '/snli_1.0.zip': _zip_folder(snli, 'snli_1.0')}


class _Handler(FilesHandler):
    files, asked = {}, []


@pytest.fixture
def served(archives, tmp_path, monkeypatch):
    """Serve the fakes on 127.0.0.1 as the hub's bert.small and SNLI, with
    an empty cache; return the paths the server was asked for."""
    for var in ('http_proxy', 'HTTP_PROXY', 'all_proxy', 'ALL_PROXY'):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv(presets.DATA_ENV, str(tmp_path / 'cache'))
    _Handler.files, _Handler.asked = archives, []
    httpd = http.server.ThreadingHTTPServer(('127.0.0.1', 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    url = f'http://127.0.0.1:{httpd.server_address[1]}/'
    # The notebook's book cell sets `DATA_HUB['bert.small']` again from
    # `DATA_URL` (imported from `d2l_bert.book.finetuning`), with the real
    # archive's SHA-1: the fake stands in for it
    monkeypatch.setattr(ft, 'DATA_URL', url)
    fake_sha1 = hashlib.sha1(archives['/bert.small.zip']).hexdigest()
    real_sha1 = hub.DATA_HUB['bert.small'][1]
    sha1_of = hub.sha1_of
    monkeypatch.setattr(hub, 'sha1_of', lambda name: real_sha1 if sha1_of(
        name) == fake_sha1 else sha1_of(name))
    monkeypatch.setitem(hub.DATA_HUB, 'bert.small',
                        (url + 'bert.small.zip', real_sha1))
    # The same cell points bert.base at the fake server too: restored
    # after the test, as bert.small is
    monkeypatch.setitem(hub.DATA_HUB, 'bert.base', hub.DATA_HUB['bert.base'])
    monkeypatch.setitem(hub.DATA_HUB, 'SNLI', (
        url + 'snli_1.0.zip',
        hashlib.sha1(archives['/snli_1.0.zip']).hexdigest()))
    monkeypatch.setattr(presets, 'CHAPTER_SNLI_PAIRS', PAIRS)
    yield _Handler.asked
    httpd.shutdown()
    httpd.server_close()
    thread.join()


def _run_section(capsys, *options):
    """The exit status, the lines printed and those beside them (stderr:
    downloads, stand-ins, the SNLI pairs read)."""
    status = cli.main(['chapter', '--section', NLI, *options])
    out, err = capsys.readouterr()
    return status, out.splitlines(), err.splitlines()


def test_chapter_downloads_then_fine_tunes_on_the_first_pairs(served,
                                                               capsys):
    status, lines, notes = _run_section(capsys)
    assert status == 0, '\n'.join(lines)
    assert sorted(served) == ['/bert.small.zip', '/snli_1.0.zip']
    read = [line for line in lines if 'read ' in line and ' examples' in line]
    assert len(read) == 1 and re.search(
        f'prints read {PAIRS} examples / read {PAIRS} examples', read[0])
    assert (f'read_snli: the first {PAIRS} of {PAIRS + 20} pairs of '
            f'snli_1.0_train.txt (D2L_BERT_SNLI_PAIRS={PAIRS}; all reads '
            'every pair)') in notes
    assert lines[-1].startswith('chapter: 1 section(s), ')


def test_chapter_full_reads_every_pair_as_the_book_does(served, capsys):
    status, lines, notes = _run_section(capsys, '--full')
    assert status == 0, '\n'.join(lines)
    read = [line for line in lines if 'read ' in line and ' examples' in line]
    assert len(read) == 1 and re.search(
        f'prints read {PAIRS + 20} examples / read {PAIRS + 10} examples',
        read[0])
    assert not any(line.startswith('read_snli:') for line in notes)


def test_chapter_small_downloads_as_the_book_and_shrinks_the_cells(
        served, capsys):
    status, lines, _ = _run_section(capsys, '--small')
    assert status == 0, '\n'.join(lines)
    # the book's cells download; the small run changes their sizes only
    assert sorted(served) == ['/bert.small.zip', '/snli_1.0.zip']
    assert (f'note ({NLI}): small sizes: `lr, num_epochs = 1e-4, 5` -> '
            '`lr, num_epochs = 1e-4, 1`') in lines
