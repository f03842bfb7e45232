"""Downloads from the d2l data hub, checked and never half-written.

The book fetches its pretrained models and SNLI with `d2l.download_extract`:
a name is looked up in `DATA_HUB`, the archive is downloaded, checked
against its SHA-1 and unpacked next to it.  This module keeps those names
and that behaviour, and adds what a classroom needs:

- a progress bar;
- mirrors: a file may have several addresses, tried in order until one
  gives the right bytes;
- the archive is written to a temporary file in the cache directory and
  renamed into place only once its length and SHA-1 are right, so an
  interrupted, truncated or corrupt download leaves nothing behind;
- the archive is unpacked into a temporary directory that is renamed into
  place, so a half-unpacked folder is never mistaken for a complete one;
- without a network the error says what to do instead (a local directory,
  `d2l-bert pretrain --out DIR`, the synthetic data, or copying the archive
  into the cache by hand).

The cache is ``$D2L_BERT_DATA`` if set, else ``~/.cache/d2l_bert``.
With ``D2L_BERT_OFFLINE=1`` nothing is downloaded: a file not in the
cache fails as without a network, at once, and gets its stand-in (the
docs' build runs the notebooks so).
Every download of the package goes through `download` here, WikiText-2's
(`d2l_bert.data.wikitext.download_wikitext2`) included.
"""
import hashlib
import http.client
import os
import socket
import sys
import urllib.error
import urllib.request
import zipfile

from ..presets import DATA_ENV, OFFLINE_ENV
from . import stand_ins
from .atomic import (atomic_write, atomic_write_into, make_dirs,
                     remove_empty_dirs)

DATA_URL = 'http://d2l-data.s3-accelerate.amazonaws.com/'

# name -> (url, SHA-1 of the file), as `d2l.DATA_HUB`; the url may also be
# a tuple of mirrors, tried in order
DATA_HUB = {
    'bert.base': (DATA_URL + 'bert.base.zip',
                  '7b3820b35da691042e5d34c0971ac3edbd80d3f4'),
    'bert.small': (DATA_URL + 'bert.small.zip',
                   'a4e718a47137ccd1809c9107ab4f5edd317bae2c'),
    'SNLI': ('https://nlp.stanford.edu/projects/snli/snli_1.0.zip',
             '9fcde07509c7e87ec61c640c1b2753d9041758e4'),
}

# what to do instead when a hub file cannot be downloaded
OFFLINE_HINTS = {
    'bert.base': (
        'load a pretrained model from a local directory holding '
        '`pretrained.params` and `vocab.json` (`--model DIR`); '
        '`d2l-bert pretrain --out DIR` writes one'),
    'SNLI': (
        'use the synthetic SNLI data that needs no network '
        '(`--data synthetic`), or a directory holding '
        '`snli_1.0_train.txt` and `snli_1.0_test.txt` (`--data DIR`)'),
}
OFFLINE_HINTS['bert.small'] = OFFLINE_HINTS['bert.base']

#: Offline stand-ins: name -> ``make(folder) -> (directory, what)``.
#: When a hub file cannot be downloaded, `download_extract` returns the
#: directory `make` fills (or finds) in `folder` instead, and prints one
#: line naming `what` stands in.  Filled from `stand_ins.MAKERS`
#: (WikiText-2, SNLI, ``bert.small``, ``bert.base``); the chapter's runner
#: puts a smaller corpus in WikiText-2's place at small sizes.
#:
#: :meta hide-value:
STAND_INS = dict(stand_ins.MAKERS)

TIMEOUT = 30  # seconds without a byte before a download gives up
CHUNK = 1 << 20


class DownloadError(OSError):
    """A download failed: no network, truncated, or a checksum mismatch."""


def data_home():
    """Return the cache directory: ``$D2L_BERT_DATA`` or
    ``~/.cache/d2l_bert``."""
    return os.environ.get(DATA_ENV) or os.path.join(
        os.path.expanduser('~'), '.cache', 'd2l_bert')


def file_hash(file_name, algorithm='sha1'):
    """Return the hexadecimal digest of a file, read in chunks.

    Parameters
    ----------
    file_name : str
        Path of the file.
    algorithm : str, default 'sha1'
        A name `hashlib.new` knows: 'sha1' for the d2l hub and WikiText-2,
        'sha256' for the files of a pip package.
    """
    digest = hashlib.new(algorithm)
    with open(file_name, 'rb') as f:
        for data in iter(lambda: f.read(CHUNK), b''):
            digest.update(data)
    return digest.hexdigest()


def sha1_of(file_name):
    """Return the hexadecimal SHA-1 of a file (the hub's checksum)."""
    return file_hash(file_name, 'sha1')


def _lookup(name):
    """Return ``(urls, sha1_hash, label)`` for `download`'s `name`.

    `urls` is a tuple of mirrors, `label` what error messages call the
    file: the `DATA_HUB` key, else the file name.
    """
    if isinstance(name, str) and name in DATA_HUB:
        urls, sha1_hash = DATA_HUB[name]
        urls = (urls,) if isinstance(urls, str) else tuple(urls)
        return urls, sha1_hash, name
    urls = (name,) if isinstance(name, str) else tuple(name)
    if not urls or not all(isinstance(url, str) and url.startswith(
            ('http://', 'https://')) for url in urls):
        raise ValueError(
            f'name must be one of DATA_HUB {sorted(DATA_HUB)}, a URL or a '
            f'non-empty list of URLs (mirrors), got {name!r}')
    return urls, None, urls[0].split('/')[-1]


def _fetch(url, file_name, sha1_hash, timeout):
    """Stream `url` into `file_name` with a progress bar and check it.

    Raises `DownloadError` saying why when the server cannot be reached or
    refuses, sends fewer bytes than it announced, or the SHA-1 is not
    `sha1_hash` (None: not checked).
    """
    from tqdm import tqdm
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            length = r.headers.get('Content-Length')
            total = int(length) if length and length.isdigit() else None
            received = 0
            with open(file_name, 'wb') as f, tqdm(
                    total=total, unit='B', unit_scale=True, file=sys.stderr,
                    desc=os.path.basename(url), leave=False) as bar:
                while True:
                    try:
                        data = r.read(CHUNK)
                    except http.client.IncompleteRead as e:
                        f.write(e.partial)
                        received += len(e.partial)
                        break
                    if not data:
                        break
                    f.write(data)
                    received += len(data)
                    bar.update(len(data))
    except urllib.error.HTTPError as e:
        raise DownloadError(
            f'the server answered {e.code} {e.reason}') from e
    except (urllib.error.URLError, socket.timeout, ConnectionError,
            http.client.HTTPException) as e:
        raise DownloadError(f'no network? {e}') from e
    if total is not None and received != total:
        raise DownloadError(
            f'truncated: received {received} of {total} bytes')
    if sha1_hash is not None:
        got = sha1_of(file_name)
        if got != sha1_hash:
            raise DownloadError(
                f'SHA-1 mismatch: expected {sha1_hash}, got {got} (a '
                'corrupt download, or the file on the server changed)')


def offline(environ=None):
    """Whether ``D2L_BERT_OFFLINE=1`` asks for no download."""
    return (os.environ if environ is None else environ).get(
        OFFLINE_ENV) == '1'


def reachable(name, timeout=5.0):
    """Return whether `name` can be had: cached already, or one of its
    mirrors answers within `timeout` seconds.

    Lets a notebook choose its offline stand-ins up front instead of
    failing halfway.

    Parameters
    ----------
    name : str or sequence of str
        A key of `DATA_HUB`, a URL or a list of mirrors.
    timeout : float, default 5.0
        Seconds to wait for each server.

    Returns
    -------
    bool
    """
    urls, _, _ = _lookup(name)
    if os.path.exists(os.path.join(data_home(), urls[0].split('/')[-1])):
        return True
    if offline():
        return False
    for url in urls:
        try:
            with urllib.request.urlopen(
                    urllib.request.Request(url, method='HEAD'),
                    timeout=timeout):
                return True
        except urllib.error.HTTPError as e:
            if e.code < 400:
                return True
        except (urllib.error.URLError, socket.timeout, ConnectionError,
                http.client.HTTPException, ValueError):
            pass
    return False


def download(name, folder=None, sha1_hash=None, timeout=TIMEOUT,
             offline_hint=None):
    """Download a `DATA_HUB` file (or a URL) into `folder`; return its path.

    Defined in :numref:`sec_utils` (as `d2l.download`).

    A file already in `folder` whose SHA-1 matches is used as is, so an
    archive copied there by hand works without a network.  Otherwise the
    mirrors are tried in order: one that cannot be reached, sends a
    truncated file or a file with the wrong SHA-1 passes the turn to the
    next.  Each attempt writes to a temporary file in `folder`, renamed
    into place only once complete and checked, so nothing half-written is
    ever left there.

    Parameters
    ----------
    name : str or sequence of str
        A key of `DATA_HUB` (``'bert.small'``, ``'bert.base'``,
        ``'SNLI'``), a URL, or a list of URLs of the same file (mirrors).
        The file is saved under the last part of the first URL.
    folder : str, optional
        Cache directory; `data_home()` by default.
    sha1_hash : str, optional
        Expected SHA-1 (taken from `DATA_HUB` for a name); None: the file
        is not checked.
    timeout : float, default 30
        Seconds without a byte before a mirror is given up.
    offline_hint : str, optional
        What to do instead when no mirror works, for the error message
        (`OFFLINE_HINTS` has those of the `DATA_HUB` names).

    Returns
    -------
    str
        Path of the checked file.

    Raises
    ------
    DownloadError
        No mirror gave the file; the message names each mirror, why it
        failed and what to do offline.
    """
    return _download(name, folder, sha1_hash, timeout, offline_hint)[0]


def _download(name, folder=None, sha1_hash=None, timeout=TIMEOUT,
              offline_hint=None):
    """`download`, also telling whether the file was fetched just now."""
    urls, hub_sha1, label = _lookup(name)
    sha1_hash = sha1_hash or hub_sha1
    folder = folder or data_home()
    base_name = urls[0].split('/')[-1]
    fname = os.path.join(folder, base_name)
    if os.path.exists(fname):
        if sha1_hash is None or sha1_of(fname) == sha1_hash:
            return fname, False
        print(f'{fname} does not match its SHA-1; downloading it again',
              file=sys.stderr)
    if offline():
        raise DownloadError(f'could not download {label!r}: '
                            f'{OFFLINE_ENV}=1 asks for no network. Nothing '
                            f'was saved')
    # A download that fails leaves no folder it made
    made = make_dirs(folder)
    failures = []
    try:
        for url in urls:
            print(f'Downloading {fname} from {url}...', file=sys.stderr)
            try:
                atomic_write(fname, lambda tmp, url=url: _fetch(
                    url, tmp, sha1_hash, timeout))
                return fname, True
            except DownloadError as e:
                failures.append(f'{url}: {e}')
    except BaseException:
        remove_empty_dirs(made)
        raise
    remove_empty_dirs(made)
    # Raised here, outside the `except`, so no urllib traceback is chained
    hint = offline_hint or OFFLINE_HINTS.get(label)
    mirrors = f' from any of its {len(urls)} mirrors' if len(urls) > 1 else ''
    raise DownloadError(
        f'could not download {label!r}{mirrors}: ' + '; '.join(failures) +
        '. Nothing was saved. Check the network and run the same command '
        'again, or instead: ' + (f'{hint}; or ' if hint else '') +
        f'copy {base_name} into {folder} by hand (it is checked against '
        'its SHA-1)')


def extract(file_name, folder=None):
    """Unpack a zip archive into `folder` (its own directory by default).

    Defined in :numref:`sec_utils` (as `d2l.extract`).

    The archive is unpacked into a temporary directory first; each of its
    top-level entries is then renamed into place, replacing any older
    copy (`atomic_write_into`), so an interrupted extraction leaves no
    partial folder.
    """
    folder = folder or os.path.dirname(file_name)
    if not file_name.endswith('.zip'):
        raise ValueError(
            f'only zip archives can be extracted, got {file_name!r}')

    def unpack(tmp):
        try:
            with zipfile.ZipFile(file_name) as fp:
                fp.extractall(tmp)
        except (zipfile.BadZipFile, EOFError) as e:
            raise ValueError(
                f'{file_name} is not a valid zip archive ({e}); delete it '
                'and download it again') from e
    atomic_write_into(folder, unpack)


def download_extract(name, folder=None, *, stand_in=True):
    """Download a zip archive, unpack it and return the data directory.

    Defined in :numref:`sec_utils` (as `d2l.download_extract`).

    Parameters
    ----------
    name : str
        A key of `DATA_HUB` or a URL of a zip file; beyond d2l, a
        directory on disk is returned as it is (a model that
        ``d2l-bert pretrain --out DIR`` saved, for the book's
        `load_pretrained_model`).
    folder : str, optional
        Name of the directory inside the archive to return; by default the
        archive's name without ``.zip`` (``bert.small.zip`` holds
        ``bert.small/``).
    stand_in : bool, keyword-only, default True
        Whether a name of `STAND_INS` that cannot be downloaded gets its
        stand-in (the book's cells) or the `DownloadError` (the command
        line, where the user named the file and gets the offline hint).

    Returns
    -------
    str
        Path of the unpacked directory in the cache; for a name of
        `STAND_INS` that cannot be downloaded, its stand-in's directory
        (one printed line says so).

    Raises
    ------
    DownloadError
        When the file cannot be downloaded and has no stand-in.
    """
    if (isinstance(name, (str, os.PathLike)) and name not in DATA_HUB
            and os.path.isdir(name)):
        return os.fspath(name)  # a directory on disk: already there
    try:
        fname, fresh = _download(name)
    except DownloadError as e:
        if not (stand_in and isinstance(name, str) and name in STAND_INS):
            raise
        return _stand_in(name, e)
    base_dir = os.path.dirname(fname)
    data_dir = (os.path.join(base_dir, folder) if folder
                else os.path.splitext(fname)[0])
    if fresh or not os.path.isdir(data_dir):
        extract(fname, base_dir)
    if not os.path.isdir(data_dir):
        raise ValueError(
            f'{fname} does not contain the directory '
            f'{os.path.basename(data_dir)!r}')
    return data_dir


def _stand_in(name, error):
    """Return the directory of `name`'s offline stand-in, saying in one
    line why and what stands in (`STAND_INS`); `error` is the
    `DownloadError` of the download tried first."""
    why = str(error).split(': ', 1)[-1].split('; ')[0].split('. ')[0]
    folder = os.path.join(data_home(), 'stand-ins', name)
    directory, what = STAND_INS[name](folder)
    # beside the download's lines, apart from what the book's cell prints;
    # flushed: a kernel's worker processes forked next (the book's
    # `SNLIBERTDataset`) would lose what is still buffered
    print(f'{name} cannot be downloaded here ({why}); in its place: '
          f'{what}, from {directory}', file=sys.stderr, flush=True)
    return directory
