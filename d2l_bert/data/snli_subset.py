"""The first pairs of SNLI, in SNLI's layout, for a short fine-tuning run.

The book fine-tunes on all 549,367 training pairs of SNLI: hours on a
laptop CPU.  `d2l-bert chapter` runs the same cells on the first 1,000
pairs of each split instead, unless asked for the book's run (``--full``);
`first_snli_pairs` writes them.  The files keep SNLI's layout (its header
line, then its rows as they are), so `read_snli` reads them as it reads
the real ones, and the book's cells run unchanged on them.
"""
import os

from ..checks import check_positive_int
from .atomic import atomic_write

#: Labels of the rows `read_snli` keeps; other rows (``-``, where the
#: annotators disagreed) are not counted
GOLD_LABELS = ('entailment', 'contradiction', 'neutral')

#: SNLI's two files that `read_snli` reads
SPLITS = ('snli_1.0_train.txt', 'snli_1.0_test.txt')


def first_snli_pairs(data_dir, num_pairs, folder):
    """Write the first `num_pairs` labelled pairs of each SNLI split.

    Reads only as many lines of each file as it needs, so the 549,367
    training pairs are never all read.

    Parameters
    ----------
    data_dir : str
        A directory holding ``snli_1.0_train.txt`` and
        ``snli_1.0_test.txt`` (``snli_data_dir('snli')``).
    num_pairs : int
        Pairs with a gold label to keep from each split (a split with
        fewer keeps all of them).
    folder : str
        Where to write the two files; each is written whole or not at all
        (`atomic_write`), and replaced on every call.

    Returns
    -------
    str
        `folder`, ready for ``read_snli(folder, is_train)``.

    Raises
    ------
    FileNotFoundError
        If `data_dir` lacks one of the two files.
    """
    num_pairs = check_positive_int('num_pairs', num_pairs)
    for file_name in SPLITS:
        source = os.path.join(data_dir, file_name)
        if not os.path.isfile(source):
            raise FileNotFoundError(
                f'{source} not found: the SNLI directory must hold '
                'snli_1.0_train.txt and snli_1.0_test.txt')
        atomic_write(os.path.join(folder, file_name),
                     ''.join(_first_rows(source, num_pairs)))
    return folder


def _first_rows(file_name, num_pairs):
    """The header line, then the first `num_pairs` rows with a gold
    label, of an SNLI file."""
    with open(file_name, encoding='utf-8', newline='') as f:
        lines = [next(f, '')]                                  # the header
        kept = 0
        for line in f:
            if kept == num_pairs:
                break
            if line.split('\t', 1)[0] in GOLD_LABELS:
                lines.append(line)
                kept += 1
    return lines
