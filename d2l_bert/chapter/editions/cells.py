"""What an edition is made of, and what the readers of every format share.

`Cell` is one code cell, with the frameworks it belongs to and the output
the edition documents for it; `Edition` is one section as read from one
file.  The readers (`markdown`, `rst`, `notebook`) make them and `check`
runs them.
"""
import os
import re
import stat
from dataclasses import dataclass, field

FRAMEWORKS = ('mxnet', 'pytorch', 'tensorflow', 'jax', 'paddle')

#: A section label in markdown (the book's sources, notebooks' text cells)
_LABEL_MD = re.compile(r':label:`([^`]+)`')


@dataclass
class Cell:
    """One code cell of an edition.

    Attributes
    ----------
    code : str
        The cell's source (the ``#@tab`` line included).
    frameworks : tuple of str
        Frameworks the cell belongs to (`FRAMEWORKS`), empty if unknown.
    line : int
        Line of the file where the cell starts (1-based).
    label : str or None
        Label of the section the cell belongs to.
    output : str or None
        The output the edition documents for this cell, if it carries one.
    finding : str or None
        Why the cell cannot run as it stands (a broken fence, an unknown
        tab, line breaks that cannot be rebuilt); None if it can.
    notes : list of str
        How the cell was read, when that is worth saying.
    tagged : bool
        Markdown: the cell has a ``#@tab`` line.
    panel : str or None
        rst: the tab panel the cell sits in, if the file says.
    """
    code: str
    frameworks: tuple = ()
    line: int = 0
    label: str = None
    output: str = None
    finding: str = None
    notes: list = field(default_factory=list)
    tagged: bool = False
    panel: str = None

    @property
    def is_mxnet(self):
        return 'mxnet' in self.frameworks

    @property
    def first_line(self):
        """First line of code that is not a comment or a ``#@`` marker."""
        for line in self.code.splitlines():
            if line.strip() and not line.lstrip().startswith('#'):
                return line.strip()
        return self.code.strip().splitlines()[0] if self.code.strip() else ''


@dataclass
class Edition:
    """A section as read from one file: its cells and how it was read."""
    path: str
    format: str
    label: str = None
    cells: list = field(default_factory=list)
    notes: list = field(default_factory=list)

    def mxnet_cells(self):
        """The cells to run or report: MXNet cells and cells with
        findings, in the file's order."""
        return [c for c in self.cells if c.is_mxnet or c.finding]


class EditionError(ValueError):
    """The file cannot be read as an edition at all (not found, binary)."""


def _section_label(labels):
    """The section's label: the first ``sec_`` label, else the first."""
    for label in labels:
        if label.startswith('sec_'):
            return label
    return labels[0] if labels else None


#: The most an edition's file may hold, in bytes: a section's notebook
#: with its outputs and figures holds less than 1 MB
MAX_EDITION_BYTES = 10 << 20

#: What a path that is not a regular file names, by the test of its kind
_KINDS = ((stat.S_ISDIR, 'a directory'),
          (stat.S_ISCHR, 'a character device'),
          (stat.S_ISBLK, 'a block device'), (stat.S_ISFIFO, 'a named pipe'),
          (stat.S_ISSOCK, 'a socket'))


def file_problem(path, name=None):
    """Why `path` cannot be an edition's file (not a regular file, or
    more than `MAX_EDITION_BYTES`), in words naming it `name` (default
    `path`); None if it can be, or does not exist."""
    name = path if name is None else name
    try:
        info = os.stat(path)
    except OSError:
        return None
    if os.path.islink(path):
        name += f' (a symbolic link to {os.path.realpath(path)})'
    if not stat.S_ISREG(info.st_mode):
        kind = next((kind for test, kind in _KINDS if test(info.st_mode)),
                    'not a regular file')
        return (f'{name} is {kind}, not a file: give an edition of a '
                'section, a .md, .rst or .ipynb file')
    if info.st_size > MAX_EDITION_BYTES:
        return (f'{name} holds {info.st_size:,} bytes, more than the '
                f'{MAX_EDITION_BYTES >> 20} MB an edition of a section may '
                'hold: give one section')
    return None


def read_text(path):
    """The text of the edition file `path`, read within
    `MAX_EDITION_BYTES`.

    Raises
    ------
    EditionError
        `path` cannot be read, is not a regular file (`file_problem`), is
        larger, or is not UTF-8.
    """
    problem = file_problem(path)
    if problem is not None:
        raise EditionError(problem)
    try:
        with open(path, 'rb') as f:
            data = f.read(MAX_EDITION_BYTES + 1)
        if len(data) > MAX_EDITION_BYTES:   # it grew meanwhile
            raise EditionError(file_problem(path) or f'{path} grew past '
                               f'{MAX_EDITION_BYTES >> 20} MB')
        return data.decode('utf-8')
    except (OSError, UnicodeDecodeError) as e:
        raise EditionError(f'cannot read {path}: {e}') from e
