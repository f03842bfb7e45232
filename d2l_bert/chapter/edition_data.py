"""Files that an edition's own definitions download, and their stand-ins.

An edition may read its data its own way: its ``#@save`` cells add a
name to ``d2l.DATA_HUB`` (another address, another SHA-1) and read the
file ``d2l.download`` gives them, such as WikiText-2 as a parquet file
read with pandas.  Their code runs as they wrote it; only the download
underneath is hooked (`download`, the chapter runner's ``d2l.download``):
where the file cannot be downloaded, a WikiText-2 parquet file gets a
stand-in in the format the edition reads, the lines of WikiText-2's
stand-in (the embedded corpus, or the small run's generated one) in a
parquet file's ``text`` column, one row a line, as WikiText's parquet
files hold them.  One line on standard error says what stands in, as
the data hub's stand-ins do.

Writing parquet takes pandas and one of its engines (`PARQUET_ENGINES`);
without either, the download's error says so and what to install.
"""
import importlib.util
import os
import re
import sys

#: The libraries pandas reads and writes parquet with, in its order
PARQUET_ENGINES = ('pyarrow', 'fastparquet')

#: What to install for a parquet stand-in, where no engine is
PARQUET_INSTALL = 'pip install fastparquet'

#: A file of WikiText-2 in parquet, by its name or address
_WIKITEXT_PARQUET = re.compile(r'wikitext.*\.parquet$', re.I | re.S)

#: The split a file name names -> the stand-in corpus's split
_SPLITS = (('train', 'train'), ('valid', 'valid'), ('test', 'valid'))


def parquet_engine():
    """The first of `PARQUET_ENGINES` installed, else None."""
    for name in PARQUET_ENGINES:
        if importlib.util.find_spec(name) is not None:
            return name
    return None


def hub_entry(data_hub, name):
    """``(name, sha1)`` to download for `name` of the cells' `data_hub`:
    `name` itself when the package's hub has the same entry, else the
    entry's address (or mirrors) and SHA-1."""
    from ..data import hub
    if not isinstance(name, str) or name not in data_hub or \
            hub.DATA_HUB.get(name) == data_hub[name]:
        return name, None
    urls, sha1 = data_hub[name]
    return (urls if isinstance(urls, str) else tuple(urls)), sha1


def download(data_hub, used, name, folder=None, sha1_hash=None, **kwargs):
    """``d2l.download`` of the chapter runner's cells (see the module).

    Parameters
    ----------
    data_hub : dict
        The cells' ``d2l.DATA_HUB``.
    used : set
        Gets a line when a stand-in is served (`data_hooks.DataHooks.used`).
    name, folder, sha1_hash, **kwargs
        As `data.hub.download` takes them.
    """
    from ..data import hub
    target, sha1 = hub_entry(data_hub, name)
    try:
        return hub.download(target, folder, sha1_hash or sha1, **kwargs)
    except hub.DownloadError as e:
        urls = (target,) if isinstance(target, str) else tuple(target)
        label = name if isinstance(name, str) else urls[0]
        file_name = urls[0].split('/')[-1]
        if not (_WIKITEXT_PARQUET.search(label) or
                _WIKITEXT_PARQUET.search(urls[0])):
            raise
        if parquet_engine() is None:
            used.add("WikiText-2's parquet stand-in not made: pandas writes "
                     f"and reads parquet with {' or '.join(PARQUET_ENGINES)}"
                     f', and neither is installed ({PARQUET_INSTALL})')
            raise hub.DownloadError(
                f'{e}; its stand-in, WikiText-2 in a parquet file, needs '
                f"{' or '.join(PARQUET_ENGINES)}, and neither is installed: "
                f'{PARQUET_INSTALL}') from None
        path, what = wikitext_parquet(file_name)
        why = str(e).split(': ', 1)[-1].split('; ')[0].split('. ')[0]
        print(f'{label} cannot be downloaded here ({why}); in its place: '
              f'{what}, from {path}', file=sys.stderr, flush=True)
        used.add(f'{file_name} (WikiText-2 in parquet) stood in for by '
                 f'{what}')
        return path


def wikitext_parquet(file_name):
    """Write WikiText-2's stand-in as the parquet file `file_name` (its
    split read from the name); return its path and what it holds."""
    import pandas as pd
    from ..data import corpus, hub
    from ..data.atomic import atomic_write
    directory, what = hub.STAND_INS['wikitext-2'](
        os.path.join(hub.data_home(), 'stand-ins', 'wikitext-2'))
    split = next((ours for theirs, ours in _SPLITS
                  if theirs in file_name.lower()), 'train')
    with open(os.path.join(directory, corpus.FILE_NAMES[split]),
              encoding='utf-8') as f:
        lines = f.read().splitlines(keepends=True)
    kind = 'embedded' if directory == corpus.DATA_DIR else 'small'
    path = os.path.join(hub.data_home(), 'stand-ins', 'wikitext-2-parquet',
                        kind, file_name)
    frame = pd.DataFrame({'text': lines})
    atomic_write(path, lambda tmp: frame.to_parquet(
        tmp, engine=parquet_engine(), index=False))
    return path, (f'the {split} lines of {what} in a parquet file\'s text '
                  f'column ({len(lines):,} rows)')
