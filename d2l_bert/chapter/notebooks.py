"""What the notebooks run beyond the book's cells, and where it is set.

The notebooks' code cells are the book's.  What they need beyond it is
applied underneath, where the book's calls land, or by the tools that run
them, never by a cell that reads the environment:

- offline stand-ins for WikiText-2, ``bert.small``, ``bert.base`` and
  SNLI, returned by `d2l_bert.data.hub.download_extract` when the file
  cannot be downloaded (registered by `d2l_bert.data` and
  `d2l_bert.book.finetuning`);
- the first `CHAPTER_SNLI_PAIRS` pairs of each SNLI split, which
  `d2l_bert.book.finetuning.read_snli` reads when `SNLI_PAIRS_ENV` says so:
  the notebooks' first cell (`hosted.in_kernel`) and ``d2l-bert chapter``
  set it unless the user did, ``d2l-bert chapter --full`` sets ``all``;
- small sizes (`SMALL_ENV`): the chapter runner replaces the cells'
  sizes (`runner.SMALL_CODE`), in a kernel too
  (`runner.small_sizes_in_kernel`).
"""
import ast
import os

#: Environment variable that asks the notebooks for small sizes
SMALL_ENV = 'D2L_BERT_SMALL'

#: Environment variable that sets how many pairs of each SNLI split the
#: fine-tuning notebook reads: a number, or 0 or ``all`` for the book's
#: run (`d2l-bert chapter --full`); `d2l_bert.book.finetuning.SNLI_PAIRS_ENV`
SNLI_PAIRS_ENV = 'D2L_BERT_SNLI_PAIRS'

#: The pairs the fine-tuning notebook reads unless `SNLI_PAIRS_ENV` asks
#: for the book's run: five epochs over all of SNLI take hours on a CPU
CHAPTER_SNLI_PAIRS = 1000

#: The pairs of the book's run (SNLI's training split)
BOOK_SNLI_PAIRS = 549367

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
