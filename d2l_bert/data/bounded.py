"""Reading a file whole, within a bound.

A model's small files (``config.json``, ``vocab.json``, a tokenizer's
settings) are read whole.  `read_bounded` reads one only if it is a
regular file (not a FIFO, a device such as ``/dev/zero``, or a
directory) no larger than a limit of its kind, and never reads past
that limit, even if the file grows while it is read.  `check_regular`
makes the first of these checks alone, for a file another library
reads.
"""
import os
import stat


def check_regular(path, limit, error=ValueError):
    """Return the size of the regular file `path`, at most `limit` bytes.

    Parameters
    ----------
    path : str
        The file; a link is followed.
    limit : int
        The largest size allowed, in bytes.
    error : type, default ValueError
        The exception raised, with a message naming `path`.

    Returns
    -------
    int
        The size in bytes.
    """
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise FileNotFoundError(f'{path} is missing') from None
    except OSError as e:
        raise error(f'{path}: cannot read it: {e.strerror}') from None
    if not stat.S_ISREG(info.st_mode):
        raise error(f'{path} is not a regular file (a directory, a device '
                    f'or a pipe); it should be a file of its own')
    if info.st_size > limit:
        raise error(f'{path} holds {info.st_size:,} bytes, more than the '
                    f'{limit:,} such a file may hold: it is not the file '
                    f'it should be')
    return info.st_size


def read_bounded(path, limit, error=ValueError):
    """Return the bytes of the regular file `path`, of at most `limit`.

    Raises `error` naming `path` if it is not a regular file, is larger
    than `limit`, or cannot be read; `FileNotFoundError` if it is
    missing.
    """
    check_regular(path, limit, error)
    try:
        with open(path, 'rb') as f:
            data = f.read(limit + 1)
    except OSError as e:
        raise error(f'{path}: cannot read it: {e.strerror}') from None
    if len(data) > limit:  # it grew since `check_regular`
        raise error(f'{path} holds more than the {limit:,} bytes such a '
                    f'file may hold: it is not the file it should be')
    return data


#: The deepest nesting a settings file may have (theirs is 3 at most);
#: Python before 3.13 refuses a few thousand levels, 3.13 reads them
MAX_JSON_DEPTH = 100


def json_value(text):
    """The JSON value of `text`, nested at most `MAX_JSON_DEPTH` deep.

    Raises
    ------
    ValueError
        If `text` is not JSON, or is nested deeper (the message is then
        ``'nested too deeply'`` on every Python).
    """
    import json
    try:
        value = json.loads(text)
    except RecursionError:
        raise ValueError('nested too deeply') from None
    level = [value]
    for _ in range(MAX_JSON_DEPTH):
        level = [item for v in level if isinstance(v, (dict, list))
                 for item in (v.values() if isinstance(v, dict) else v)]
        if not level:
            return value
    raise ValueError('nested too deeply')
