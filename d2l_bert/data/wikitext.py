"""WikiText corpora for `d2l_bert.runs.wiki_data.load_pretraining_data`:
where the corpus is, WikiText-2's download, and a seeded minibatch order.

`load_pretraining_data` reads the small corpus shipped with the package
(``'embedded'``, written by `d2l_bert.data.corpus`), WikiText-2
(``'wikitext-2'``, from the data folder, ``$D2L_BERT_DATA``, or where
the book keeps it, ``../data/wikitext-2``, or downloaded from a mirror
into the data folder: the book's address no longer serves it), or a
path to files in WikiText's token format; `locate_corpus` turns that
choice into a directory and a file name, and the `Corpus*Error`
classes say what is wrong with one.
"""
import os

import numpy as onp
from mxnet import gluon

from . import hub
from .corpus import DATA_DIR as EMBEDDED_DIR

# WikiText-2 :cite:`Merity.Xiong.Bradbury.ea.2016`.  The book's s3 address
# (tried last) no longer serves the archive
WIKITEXT2_URLS = (
    'https://wikitext.smerity.com/wikitext-2-v1.zip',
    'https://s3.amazonaws.com/research.metamind.io/wikitext/'
    'wikitext-2-v1.zip')
WIKITEXT2_SHA1 = '3c914d17d80b1459be871a5039ac23e752a53cbe'
#: Where the book's `d2l.download_extract` keeps its data, relative to
#: the working directory: WikiText-2 found there is read from there
BOOK_DATA_ROOT = os.path.join('..', 'data')


class CorpusError(ValueError):
    """The corpus given to `load_pretraining_data` cannot be used as it is."""


class CorpusNotFoundError(CorpusError, FileNotFoundError):
    """The corpus file or directory does not exist."""


class CorpusUnavailableError(RuntimeError):
    """WikiText-2 is neither on disk nor downloadable (no network?)."""


def check_sentence_pairs(paragraphs, max_len):
    """Raise a clear error when `paragraphs` can give no BERT example.

    Parameters
    ----------
    paragraphs : list of list of list of str
        Paragraphs of tokenized sentences, as `_WikiTextDataset` holds
        them.
    max_len : int
        T, the length a sentence pair must fit in with its three special
        tokens.

    Raises
    ------
    CorpusError
        When no paragraph has two sentences.
    ValueError
        When no pair fits in `max_len`.
    """
    pair_lens = [len(paragraph[i]) + len(paragraph[i + 1]) + 3
                 for paragraph in paragraphs
                 for i in range(len(paragraph) - 1)]
    if not pair_lens:
        raise CorpusError(
            "the corpus has no paragraph of two sentences, so there is no "
            "sentence pair to learn from: each line of a WikiText file is a "
            "paragraph and its sentences end with ' . '")
    if min(pair_lens) > max_len:
        raise ValueError(
            f'max_len={max_len} is too small for any sentence pair of the '
            f'corpus: the shortest pair needs {min(pair_lens)} tokens (its '
            f"two sentences, one '<cls>' and two '<sep>'); use max_len >= "
            f'{min(pair_lens)} (the book uses 64)')


def download_wikitext2(root=None, urls=WIKITEXT2_URLS,
                       sha1_hash=WIKITEXT2_SHA1, timeout=30):
    """Return the WikiText-2 directory, downloading it if needed.

    Looks for ``wikitext-2/wiki.train.tokens`` in `root`; by default in
    the data folder (`hub.data_home`: ``$D2L_BERT_DATA``, else
    ``~/.cache/d2l_bert``), then where the book's `d2l.download_extract`
    puts it (`BOOK_DATA_ROOT`).  Otherwise `hub.download` fetches
    ``wikitext-2-v1.zip`` into `root` or the data folder (a checked copy
    already there is used as is), trying each of `urls` in turn, and
    the archive is unpacked with `hub.extract`.  Nothing half-written is
    ever left, and a download that fails creates nothing.

    Parameters
    ----------
    root : str, optional
        The folder to look in and download to; default the data folder
        (and the book's, to look in).
    urls : sequence of str
        Mirrors of ``wikitext-2-v1.zip``, tried in order.
    sha1_hash : str
        Expected SHA-1 of the archive.
    timeout : float
        Seconds to wait for a server.

    Returns
    -------
    str
        ``ROOT/wikitext-2``.

    Raises
    ------
    CorpusUnavailableError
        When no mirror gives the archive (for example without network);
        the message names each mirror tried, why it failed, and the other
        ways to get a corpus.  Also when the archive holds no
        ``wikitext-2/wiki.train.tokens``.
    """
    roots = [root] if root is not None else [hub.data_home(),
                                             BOOK_DATA_ROOT]
    for folder in roots:
        data_dir = os.path.join(folder, 'wikitext-2')
        if os.path.isfile(os.path.join(data_dir, 'wiki.train.tokens')):
            return data_dir
    root = roots[0]
    data_dir = os.path.join(root, 'wikitext-2')
    offline_hint = (
        "use corpus='embedded' (the small corpus shipped with d2l_bert; "
        '`--corpus embedded` on the command line), or pass corpus=PATH, a '
        'directory holding wiki.train.tokens (or that file), or unzip '
        f'wikitext-2-v1.zip into {os.path.abspath(root)!r} (the data '
        'folder, $D2L_BERT_DATA) so that '
        f'{os.path.abspath(data_dir)!r} holds wiki.train.tokens')
    failure = None
    try:
        zip_name = hub.download(urls, root, sha1_hash, timeout,
                                offline_hint)
    except hub.DownloadError as e:
        failure = str(e)
    # Raised outside the `except`, so no urllib traceback is chained
    if failure is not None:
        raise CorpusUnavailableError(f'WikiText-2: {failure}')
    hub.extract(zip_name, root)
    if not os.path.isfile(os.path.join(data_dir, 'wiki.train.tokens')):
        raise CorpusUnavailableError(
            f'{zip_name!r} holds no wikitext-2/wiki.train.tokens')
    return data_dir


def locate_corpus(corpus, split, root=None):
    """``(data_dir, file_name)`` of the `split` file of `corpus`
    (`root`: where WikiText-2 is, as `download_wikitext2` takes it)."""
    file_name = f'wiki.{split}.tokens'
    if corpus == 'embedded':
        if not os.path.isfile(os.path.join(EMBEDDED_DIR, file_name)):
            raise CorpusNotFoundError(
                f'the embedded corpus has no {file_name} in {EMBEDDED_DIR}'
                f' (an install without package data?): reinstall d2l_bert '
                f'or write it with `python -m d2l_bert.data.corpus`')
        return EMBEDDED_DIR, file_name
    if corpus == 'wikitext-2':
        return download_wikitext2(root), file_name
    if not isinstance(corpus, (str, os.PathLike)):
        raise TypeError(f"corpus must be 'embedded', 'wikitext-2' or a "
                        f'path, got {type(corpus).__name__} {corpus!r}')
    path = os.fspath(corpus)
    if os.path.isdir(path):
        if not os.path.isfile(os.path.join(path, file_name)):
            raise CorpusNotFoundError(
                f'corpus={corpus!r} is a directory without {file_name}; '
                f"give a directory holding WikiText's {file_name} or the "
                f'path of such a file')
        return path, file_name
    if os.path.isfile(path):
        if split == 'train':
            return os.path.dirname(path) or '.', os.path.basename(path)
        # A held-out split sits beside the named training file
        return os.path.dirname(path) or '.', file_name
    if os.sep in path or '/' in path or '.' in path:
        raise CorpusNotFoundError(
            f'corpus={corpus!r}: no such file or directory; give a '
            f'directory holding {file_name} or a file in WikiText\'s token '
            f"format, or use corpus='embedded' or 'wikitext-2'")
    where = 'the data folder' if root is None else root
    raise CorpusError(
        f"unknown corpus={corpus!r}: use 'embedded' (shipped with "
        f"d2l_bert), 'wikitext-2' (from {where} or downloaded) or a path "
        f'to a directory holding {file_name} or to such a file')


class SeededRandomSampler(gluon.data.Sampler):
    """Shuffle indices with a generator of its own, reproducibly per seed.

    Gluon's `RandomSampler` draws from NumPy's global generator.
    """

    def __init__(self, length, seed):
        self._length = length
        self._rng = onp.random.RandomState(seed)

    def __iter__(self):
        return iter(self._rng.permutation(self._length).tolist())

    def __len__(self):
        return self._length
