"""What the notebooks run beyond the book's cells, and where it is set.

The notebooks' code cells are the book's.  What they need beyond it is
applied underneath, where the book's calls land, or by the tools that run
them, never by a cell that reads the environment:

- offline stand-ins for WikiText-2, ``bert.small``, ``bert.base`` and
  SNLI, returned by `d2l_bert.data.hub.download_extract` when the file
  cannot be downloaded (registered by `d2l_bert.data` and
  `d2l_bert.book.finetuning`);
- the first `presets.CHAPTER_SNLI_PAIRS` pairs of each SNLI split, which
  `d2l_bert.book.finetuning.read_snli` reads when
  `presets.SNLI_PAIRS_ENV` says so:
  the notebooks' first cell (`hosted.in_kernel`) and ``d2l-bert chapter``
  set it unless the user did, ``d2l-bert chapter --full`` sets ``all``;
- small sizes (`presets.SMALL_ENV`): the chapter runner replaces the
  cells' sizes (`presets.SMALL_CODE`, by `small_sizes.SmallSizes`), in a
  kernel too (`small_sizes.small_sizes_in_kernel`).
"""
import ast
import os

from ..presets import SMALL_ENV

#: The functions through which the notebooks once read the environment;
#: `d2l-bert check-text` still recognizes a cell that calls one
SETTINGS_FUNCTIONS = ('pretraining_settings', 'finetuning_settings')


def small_sizes(environ=None):
    """Return True if `SMALL_ENV` of `environ` (default `os.environ`)
    asks for small sizes (set, and neither empty nor 0)."""
    environ = os.environ if environ is None else environ
    return environ.get(SMALL_ENV, '').strip() not in ('', '0')


def calls_settings(code):
    """Whether the cell `code` calls one of `SETTINGS_FUNCTIONS`: a cell
    that reads the environment."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = getattr(func, 'attr', getattr(func, 'id', None))
            if name in SETTINGS_FUNCTIONS:
                return True
    return False
