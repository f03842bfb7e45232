"""The package's API: `read_edition` reads a file of any format, and every
name the callers use is still `editions.<name>`."""
import os

import pytest

from d2l_bert.chapter import editions
from d2l_bert.chapter.editions import (cells, check, layout, markdown,
                                       notebook, read_edition, rst)


@pytest.mark.parametrize('name, module', [
    ('FRAMEWORKS', cells), ('Cell', cells), ('Edition', cells),
    ('EditionError', cells), ('parse_markdown', markdown),
    ('parse_rst', rst), ('parse_notebook', notebook),
    ('relayout', layout), ('LayoutError', layout),
    ('check_edition', check), ('CellReport', check),
    ('EditionReport', check), ('NAMES_0_17', check),
])
def test_package_offers_each_name_of_its_modules(name, module):
    assert getattr(editions, name) is getattr(module, name)


def test_unreadable_file_is_an_edition_error(tmp_path):
    with pytest.raises(editions.EditionError, match='cannot read'):
        read_edition(str(tmp_path / 'missing.md'))
    (tmp_path / 'binary.md').write_bytes(b'\xff\xfe\x00')
    with pytest.raises(editions.EditionError, match='cannot read'):
        read_edition(str(tmp_path / 'binary.md'))


def test_what_is_no_regular_file_or_too_large_is_an_edition_error(
        tmp_path):
    # Refused before a byte is read: /dev/urandom never ends
    link = tmp_path / 'noise.md'
    os.symlink('/dev/urandom', link)
    with pytest.raises(editions.EditionError) as info:
        read_edition(str(link))
    assert str(info.value) == (
        f'{link} (a symbolic link to /dev/urandom) is a character device, '
        'not a file: give an edition of a section, a .md, .rst or .ipynb '
        'file')
    big = tmp_path / 'big.ipynb'
    with open(big, 'wb') as f:
        f.truncate(cells.MAX_EDITION_BYTES + 5)
    with pytest.raises(editions.EditionError, match=r'holds 10,485,765 '
                       r'bytes, more than the 10 MB an edition'):
        read_edition(str(big))


@pytest.mark.parametrize('text', [
    '```{.python .input}', '<!--', '```{.python .input}\n#@tab\nx',
    '.. code:: python if x: else: .. raw:: html', '```\n```{.json .output}',
    '.. code:: python x = "unterminated', '#@tab mxnet\n```',
])
def test_garbage_never_raises(tmp_path, text):
    for ext in ('.md', '.rst'):
        path = tmp_path / f'garbage{ext}'
        path.write_text(text)
        read_edition(str(path))
