"""What an edition is made of, and what the readers of every format share.

`Cell` is one code cell, with the frameworks it belongs to and the output
the edition documents for it; `Edition` is one section as read from one
file.  The readers (`markdown`, `rst`, `notebook`) make them and `check`
runs them.
"""
import re
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
