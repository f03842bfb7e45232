"""SNLI read by the book's `read_snli`, with what the book leaves out.

The book's `read_snli` (`d2l_bert.book.finetuning`) reads every pair of
a split.  `reading_first_pairs` wraps it from outside, as a hook the runs
and the notebooks apply: with `SNLI_PAIRS_ENV` set to a number N only the
first N pairs of each split are returned, and one line on standard error
says so (five epochs over all 549,367 training pairs take hours on a
CPU; the chapter's notebooks read the first 1,000 unless told ``all``).
A missing file or a row without three columns is named in one line.
"""
import functools
import os
import sys

from ..presets import SNLI_PAIRS_ENV

#: The files of the two splits, by `is_train`, as the book's `read_snli`
#: names them
SPLIT_FILES = {True: 'snli_1.0_train.txt', False: 'snli_1.0_test.txt'}
#: The gold labels of the rows the book's `read_snli` keeps
LABELS = ('entailment', 'contradiction', 'neutral')


def snli_pairs(environ=None):
    """The pairs of each split a hooked `read_snli` reads: `SNLI_PAIRS_ENV`
    of `environ` (default `os.environ`) as a number, 0 for every pair (not
    set, empty, 0 or ``all``).

    Raises
    ------
    ValueError
        If the variable is neither a whole number nor ``all``.
    """
    environ = os.environ if environ is None else environ
    value = environ.get(SNLI_PAIRS_ENV, '').strip().lower()
    if value in ('', 'all'):
        return 0
    if not value.isdigit():
        raise ValueError(f'{SNLI_PAIRS_ENV} must be a number of pairs or '
                         f'all, got {environ[SNLI_PAIRS_ENV]!r}')
    return int(value)


def reading_first_pairs(read_snli):
    """`read_snli` that reads the first pairs `SNLI_PAIRS_ENV` asks for.

    Parameters
    ----------
    read_snli : callable
        ``read_snli(data_dir, is_train)`` -> ``(premises, hypotheses,
        labels)``, three lists of N items: the book's.

    Returns
    -------
    callable
        The same call, which also raises `FileNotFoundError` for a
        directory without the split's file and `ValueError` (naming the
        file and the line) for a row of fewer than three columns or a
        file without a labelled pair; with `SNLI_PAIRS_ENV` set to N,
        it returns the first N pairs and says so in one line.
    """
    @functools.wraps(read_snli)
    def read(data_dir, is_train):
        file_name = os.path.join(data_dir, SPLIT_FILES[bool(is_train)])
        if not os.path.isfile(file_name):
            raise FileNotFoundError(
                f'{file_name} not found: the SNLI directory must hold '
                'snli_1.0_train.txt and snli_1.0_test.txt (the snli_1.0 '
                'folder of snli_1.0.zip, or the synthetic data of '
                '`d2l_bert.data.snli_synthetic.make_snli_synthetic`)')
        try:
            premises, hypotheses, labels = read_snli(data_dir, is_train)
        except IndexError:
            raise _short_row(file_name) from None
        if not labels:
            raise ValueError(f'{file_name} holds no labelled example')
        first = snli_pairs()
        if first and first < len(labels):
            print(f'read_snli: the first {first:,} of {len(labels):,} pairs '
                  f'of {os.path.basename(file_name)} ({SNLI_PAIRS_ENV}='
                  f'{first}; all reads every pair)', file=sys.stderr,
                  flush=True)
            premises, hypotheses, labels = (premises[:first],
                                            hypotheses[:first],
                                            labels[:first])
        return premises, hypotheses, labels
    return read


def _short_row(file_name):
    """The `ValueError` for the first labelled row of `file_name` (after
    its header) that has fewer than three tab-separated columns."""
    with open(file_name, encoding='utf-8') as f:
        for line_no, line in enumerate(f, 1):
            row = line.split('\t')
            if line_no > 1 and row[0] in LABELS and len(row) < 3:
                return ValueError(
                    f'{file_name}, line {line_no}: expected tab-separated '
                    f'label, premise and hypothesis, got {line[:60]!r}')
    return ValueError(f'{file_name}: a row could not be read')
