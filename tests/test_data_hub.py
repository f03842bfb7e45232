"""Hub downloads against a tiny HTTP server on 127.0.0.1: checked by SHA-1
and length, mirrors tried in order, unpacked whole, never half-written,
clear when offline.  Every download of the package goes through here."""
import hashlib
import http.server
import io
import os
import re
import socket
import threading
import zipfile

import pytest

from d2l_bert.data import hub
from d2l_bert import presets
from d2l_bert.presets import DATA_ENV
from helpers import FilesHandler


def _zip_bytes(files):
    """Return a zip archive holding `files` (name -> bytes)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, 'w') as z:
        for name, data in files.items():
            z.writestr(name, data)
    return buffer.getvalue()


ARCHIVE = _zip_bytes({'bert.fake/vocab.json': b'["<unk>"]',
                      'bert.fake/pretrained.params': b'0' * 5000})
ARCHIVE_SHA1 = hashlib.sha1(ARCHIVE).hexdigest()


class _Handler(FilesHandler):
    files, asked = {}, []


@pytest.fixture
def server(monkeypatch):
    """Base URL of a server holding /bert.fake.zip, a different file under
    /other/bert.fake.zip, and /not-a-zip.zip."""
    for var in ('http_proxy', 'HTTP_PROXY', 'all_proxy', 'ALL_PROXY'):
        monkeypatch.delenv(var, raising=False)
    _Handler.files = {'/bert.fake.zip': ARCHIVE,
                      '/other/bert.fake.zip': b'another file, same name',
                      '/not-a-zip.zip': b'this is not a zip archive'}
    httpd = http.server.ThreadingHTTPServer(('127.0.0.1', 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f'http://127.0.0.1:{httpd.server_address[1]}'
    httpd.shutdown()
    httpd.server_close()
    thread.join()


@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / 'cache'
    monkeypatch.setenv(DATA_ENV, str(folder))
    return folder


def _closed_port_url(name):
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        port = s.getsockname()[1]
    return f'http://127.0.0.1:{port}/{name}'


def test_book_hub_entries_and_checksums():
    assert hub.DATA_HUB['bert.small'] == (
        hub.DATA_URL + 'bert.small.zip',
        'a4e718a47137ccd1809c9107ab4f5edd317bae2c')
    assert hub.DATA_HUB['bert.base'] == (
        hub.DATA_URL + 'bert.base.zip',
        '7b3820b35da691042e5d34c0971ac3edbd80d3f4')
    assert hub.DATA_HUB['SNLI'] == (
        'https://nlp.stanford.edu/projects/snli/snli_1.0.zip',
        '9fcde07509c7e87ec61c640c1b2753d9041758e4')


def test_download_extract_checks_and_unpacks(server, cache, monkeypatch):
    monkeypatch.setitem(hub.DATA_HUB, 'bert.fake',
                        (server + '/bert.fake.zip', ARCHIVE_SHA1))
    data_dir = hub.download_extract('bert.fake')
    assert data_dir == str(cache / 'bert.fake')
    with open(os.path.join(data_dir, 'vocab.json'), 'rb') as f:
        assert f.read() == b'["<unk>"]'
    # nothing but the archive and its folder: no temporary file is left
    assert sorted(os.listdir(cache)) == ['bert.fake', 'bert.fake.zip']


def test_cached_archive_is_used_without_network(server, cache, monkeypatch):
    monkeypatch.setitem(hub.DATA_HUB, 'bert.fake',
                        (server + '/bert.fake.zip', ARCHIVE_SHA1))
    hub.download_extract('bert.fake')
    monkeypatch.setitem(hub.DATA_HUB, 'bert.fake',
                        (_closed_port_url('bert.fake.zip'), ARCHIVE_SHA1))
    assert hub.download_extract('bert.fake') == str(cache / 'bert.fake')


def test_archive_copied_by_hand_is_used_without_network(cache, monkeypatch):
    os.makedirs(cache)
    (cache / 'bert.fake.zip').write_bytes(ARCHIVE)
    monkeypatch.setitem(hub.DATA_HUB, 'bert.fake',
                        (_closed_port_url('bert.fake.zip'), ARCHIVE_SHA1))
    data_dir = hub.download_extract('bert.fake')
    assert os.path.isfile(os.path.join(data_dir, 'pretrained.params'))


def test_mirrors_are_tried_in_order_until_one_is_right(server, cache,
                                                      monkeypatch, capsys):
    mirrors = (_closed_port_url('bert.fake.zip'),   # offline
               server + '/missing/bert.fake.zip',   # 404
               server + '/truncated/bert.fake.zip',
               server + '/other/bert.fake.zip',     # wrong SHA-1
               server + '/bert.fake.zip')
    monkeypatch.setitem(hub.DATA_HUB, 'bert.fake', (mirrors, ARCHIVE_SHA1))
    path = hub.download('bert.fake')
    assert path == str(cache / 'bert.fake.zip')
    assert hub.sha1_of(path) == ARCHIVE_SHA1
    # every mirror was tried, in order, and each failure left nothing
    tried = [line.split(' from ')[1].rstrip('.')
             for line in capsys.readouterr().err.splitlines()
             if line.startswith('Downloading ')]
    assert tried == list(mirrors)
    assert os.listdir(cache) == ['bert.fake.zip']


def test_checksum_mismatch_is_an_error_and_leaves_nothing(server, cache,
                                                          monkeypatch):
    monkeypatch.setitem(hub.DATA_HUB, 'bert.fake',
                        (server + '/bert.fake.zip', '0' * 40))
    with pytest.raises(hub.DownloadError,
                       match=f'SHA-1 mismatch: expected 0{{40}}, got '
                             f'{ARCHIVE_SHA1}'):
        hub.download_extract('bert.fake')
    assert not cache.exists()    # (no folder made, either)


def test_truncated_download_is_an_error_and_leaves_nothing(server, cache,
                                                           monkeypatch):
    monkeypatch.setitem(hub.DATA_HUB, 'bert.fake',
                        (server + '/truncated/bert.fake.zip', ARCHIVE_SHA1))
    with pytest.raises(hub.DownloadError,
                       match=f'truncated: received {len(ARCHIVE) // 2} of '
                             f'{len(ARCHIVE)} bytes'):
        hub.download('bert.fake')
    assert not cache.exists()    # (no folder made, either)


def test_offline_error_names_every_mirror_and_the_alternatives(
        cache, monkeypatch):
    mirrors = (_closed_port_url('bert.small.zip'),
               _closed_port_url('bert.small.zip'))
    monkeypatch.setitem(hub.DATA_HUB, 'bert.small',
                        (mirrors, hub.DATA_HUB['bert.small'][1]))
    # the error a file without an offline stand-in gives (bert.small has
    # one, `data.stand_ins`)
    monkeypatch.setattr(hub, 'STAND_INS', {})
    with pytest.raises(hub.DownloadError) as info:
        hub.download_extract('bert.small')
    message = str(info.value)
    assert "could not download 'bert.small' from any of its 2 mirrors" in (
        message)
    for url in mirrors:
        assert f'{url}: no network?' in message
    assert 'd2l-bert pretrain --out DIR' in message
    assert f'copy bert.small.zip into {cache}' in message
    # raised once all mirrors failed: no urllib traceback chained
    assert info.value.__context__ is None and info.value.__cause__ is None
    assert not cache.exists()    # (no folder made, either)


def test_offline_snli_error_points_to_the_synthetic_data(cache,
                                                         monkeypatch):
    monkeypatch.setitem(hub.DATA_HUB, 'SNLI',
                        (_closed_port_url('snli_1.0.zip'), '0' * 40))
    monkeypatch.setattr(hub, 'STAND_INS', {})  # as above
    with pytest.raises(hub.DownloadError, match='--data synthetic'):
        hub.download_extract('SNLI')


def test_missing_file_on_the_server_is_reported(server, cache, monkeypatch):
    monkeypatch.setitem(hub.DATA_HUB, 'bert.fake',
                        (server + '/missing.zip', ARCHIVE_SHA1))
    cache.mkdir()       # a folder that was there stays
    with pytest.raises(hub.DownloadError, match='server answered 404'):
        hub.download('bert.fake')
    assert os.listdir(cache) == []
    with pytest.raises(hub.DownloadError, match='server answered 404'):
        hub.download('bert.fake', str(cache / 'deep' / 'er'))
    assert os.listdir(cache) == []


def test_corrupt_archive_is_a_clear_error_and_unpacks_nothing(server, cache,
                                                              monkeypatch):
    bad_sha1 = hashlib.sha1(b'this is not a zip archive').hexdigest()
    monkeypatch.setitem(hub.DATA_HUB, 'bert.bad',
                        (server + '/not-a-zip.zip', bad_sha1))
    with pytest.raises(ValueError, match='not a valid zip archive'):
        hub.download_extract('bert.bad')
    assert os.listdir(cache) == ['not-a-zip.zip']


def test_stale_cached_file_is_downloaded_again(server, cache, monkeypatch):
    os.makedirs(cache)
    (cache / 'bert.fake.zip').write_bytes(b'an older, different file')
    monkeypatch.setitem(hub.DATA_HUB, 'bert.fake',
                        (server + '/bert.fake.zip', ARCHIVE_SHA1))
    path = hub.download('bert.fake')
    assert hub.sha1_of(path) == ARCHIVE_SHA1


@pytest.mark.parametrize('name', ['bert.tiny', [], ['ftp://x/y.zip']])
def test_unknown_name_is_a_clear_error(name):
    got = re.escape(repr(name))
    with pytest.raises(ValueError, match=f'one of DATA_HUB .* got {got}'):
        hub.download(name)


def test_reachable_tells_served_cached_and_offline_apart(server, cache,
                                                         monkeypatch):
    monkeypatch.setitem(hub.DATA_HUB, 'bert.fake',
                        (server + '/bert.fake.zip', ARCHIVE_SHA1))
    monkeypatch.setitem(hub.DATA_HUB, 'bert.gone',
                        (server + '/bert.gone.zip', ARCHIVE_SHA1))
    monkeypatch.setitem(hub.DATA_HUB, 'bert.offline',
                        (_closed_port_url('bert.offline.zip'), ARCHIVE_SHA1))
    monkeypatch.setitem(hub.DATA_HUB, 'bert.mirrored',
                        ((_closed_port_url('bert.fake.zip'),
                          server + '/bert.fake.zip'), ARCHIVE_SHA1))
    assert hub.reachable('bert.fake') is True
    assert hub.reachable('bert.mirrored', timeout=2) is True
    assert hub.reachable('bert.gone') is False
    assert hub.reachable('bert.offline', timeout=2) is False
    # once in the cache, no network is needed
    os.makedirs(cache)
    (cache / 'bert.offline.zip').write_bytes(ARCHIVE)
    assert hub.reachable('bert.offline', timeout=2) is True


def test_offline_name_with_a_stand_in_gets_it_and_one_line(cache, monkeypatch,
                                                           capsys):
    made = []

    def make(folder):
        os.makedirs(folder, exist_ok=True)
        made.append(folder)
        return folder, 'a fake model'
    url = _closed_port_url('bert.fake.zip')
    monkeypatch.setitem(hub.DATA_HUB, 'bert.fake', (url, ARCHIVE_SHA1))
    monkeypatch.setitem(hub.STAND_INS, 'bert.fake', make)
    directory = hub.download_extract('bert.fake', 'bert.fake')
    assert made == [directory] == [str(cache / 'stand-ins' / 'bert.fake')]
    # on stderr, after the line of the download tried
    lines = capsys.readouterr().err.splitlines()[-1:]
    assert lines == [f'bert.fake cannot be downloaded here ({url}: no '
                     f'network? <urlopen error [Errno 111] Connection '
                     f'refused>); in its place: a fake model, from '
                     f'{directory}']


def test_served_name_with_a_stand_in_is_downloaded(server, cache,
                                                   monkeypatch):
    monkeypatch.setitem(hub.DATA_HUB, 'bert.fake',
                        (server + '/bert.fake.zip', ARCHIVE_SHA1))
    monkeypatch.setitem(hub.STAND_INS, 'bert.fake', pytest.fail)
    assert hub.download_extract('bert.fake') == str(cache / 'bert.fake')


def test_offline_wikitext_2_is_the_embedded_corpus(cache, monkeypatch,
                                                    capsys):
    from d2l_bert.data import corpus
    monkeypatch.setitem(hub.DATA_HUB, 'wikitext-2', (
        _closed_port_url('wikitext-2-v1.zip'), '0' * 40))
    assert hub.download_extract('wikitext-2', 'wikitext-2') == (
        corpus.DATA_DIR)
    assert "d2l-bert's embedded corpus" in capsys.readouterr().err


def test_offline_setting_tries_no_server_and_gets_the_stand_in(
        server, cache, monkeypatch, capsys):
    # The server holds the file, yet D2L_BERT_OFFLINE=1 asks it nothing
    monkeypatch.setitem(hub.DATA_HUB, 'bert.fake',
                        (server + '/bert.fake.zip', ARCHIVE_SHA1))
    monkeypatch.setitem(hub.STAND_INS, 'bert.fake', lambda folder: (
        os.makedirs(folder, exist_ok=True) or folder, 'a fake model'))
    monkeypatch.setenv(presets.OFFLINE_ENV, '1')
    _Handler.asked = []
    assert hub.reachable('bert.fake') is False
    directory = hub.download_extract('bert.fake', 'bert.fake')
    assert _Handler.asked == []
    assert directory == str(cache / 'stand-ins' / 'bert.fake')
    assert capsys.readouterr().err.splitlines() == [
        f'bert.fake cannot be downloaded here ({presets.OFFLINE_ENV}=1 asks for '
        f'no network); in its place: a fake model, from {directory}']
    with pytest.raises(hub.DownloadError, match=r"^could not download "
                       r"'bert.fake': D2L_BERT_OFFLINE=1 asks for no "
                       r"network\. Nothing was saved$"):
        hub.download('bert.fake')
    # a file in the cache is read all the same
    (cache / 'bert.fake.zip').write_bytes(ARCHIVE)
    assert hub.reachable('bert.fake') is True
    assert hub.download('bert.fake') == str(cache / 'bert.fake.zip')
