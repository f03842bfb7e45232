"""How long each notebook's code is against its section in the book.

A notebook shows the book's cells, the definitions its section writes
out (``#@save``) and, for what the book does not do (reading the
environment, running offline), one short call into the package each.
Its code cells should stay within `MAX_RATIO` times the MXNet code of
the book's section: that is what a reader sees to be "the book's cells",
and machinery that grows past it belongs in the package::

    python -m d2l_bert.chapter.lengths ../shared/book/en   # the table

Lines are counted the same way on both sides (`code_lines`): every
line of an MXNet code cell that is not blank, comments included, the
book's ``#@tab`` lines left out.
"""
import os
import sys
from dataclasses import dataclass

from .editions import read_edition
from .saved_cells import NOTEBOOK_DIR, NOTEBOOKS

#: The most lines of notebook code per line of the book's section
MAX_RATIO = 1.3


def code_lines(edition):
    """Count the code lines of an edition's MXNet cells.

    Parameters
    ----------
    edition : editions.Edition
        A section, as `editions.read_edition` reads a notebook or one of
        the book's files.

    Returns
    -------
    int
        The lines of its MXNet cells that are not blank and not a
        ``#@tab`` marker.
    """
    return sum(1 for cell in edition.cells if cell.is_mxnet
               for line in cell.code.splitlines()
               if line.strip() and not line.lstrip().startswith('#@tab'))


@dataclass(frozen=True)
class Length:
    """A notebook's code lines against its section's in the book.

    Attributes
    ----------
    label : str
        The section's label (``'sec_bert-pretraining'``).
    notebook : str
        The notebook's file name, also that of the book's markdown source
        with ``.md`` in place of ``.ipynb``.
    book_lines, notebook_lines : int
        `code_lines` of the book's section and of the notebook.
    """
    label: str
    notebook: str
    book_lines: int
    notebook_lines: int

    @property
    def ratio(self):
        """Notebook lines per book line."""
        return self.notebook_lines / self.book_lines

    def __str__(self):
        return (f'{self.label:38} book {self.book_lines:4}  notebook '
                f'{self.notebook_lines:4}  {self.ratio:.2f}x')


def measure(book_dir, notebook_dir=None):
    """Measure every notebook against the book's markdown source.

    Parameters
    ----------
    book_dir : str
        A folder of the book's markdown sources (``bert.md``, ...): the
        English ones are in ``en/`` of the book's repository.
    notebook_dir : str, optional
        The notebooks' folder (default: `saved_cells.NOTEBOOK_DIR`,
        ``notebooks/`` of the checkout).

    Returns
    -------
    list of Length
        One per notebook of `saved_cells.NOTEBOOKS`, in the book's order.

    Raises
    ------
    FileNotFoundError
        If a notebook or its section's source is missing.
    """
    notebook_dir = NOTEBOOK_DIR if notebook_dir is None else notebook_dir
    lengths = []
    for name, (_, labels) in NOTEBOOKS.items():
        source = os.path.join(book_dir, os.path.splitext(name)[0] + '.md')
        for path in (source, os.path.join(notebook_dir, name)):
            if not os.path.isfile(path):
                raise FileNotFoundError(f'{path} is not there')
        lengths.append(Length(
            labels[0], name, code_lines(read_edition(source)),
            code_lines(read_edition(os.path.join(notebook_dir, name)))))
    return lengths


def main(argv=None):
    """Print `measure`'s table; exit status 1 when a notebook is longer
    than `MAX_RATIO` times its section."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print('usage: python -m d2l_bert.chapter.lengths BOOK_DIR  (the '
              "book's markdown sources, such as ../shared/book/en)",
              file=sys.stderr)
        return 2
    try:
        lengths = measure(argv[0])
    except FileNotFoundError as e:
        print(e, file=sys.stderr)
        return 2
    for length in lengths:
        print(length)
    long = [x.notebook for x in lengths if x.ratio > MAX_RATIO]
    if long:
        print(f'longer than {MAX_RATIO}x the book: {", ".join(long)}')
    return 1 if long else 0


if __name__ == '__main__':
    sys.exit(main())
