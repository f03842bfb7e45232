"""Sphinx configuration of the d2l-bert documentation.

Build: ``python3 run.py docs`` (or, inside `.venv`,
``sphinx-build -W -b html docs docs/_build/html``).  Pages are Markdown
(myst-parser); the API reference comes from the numpy-doc docstrings
(autodoc + napoleon).
"""
import os
import re
import sys

from docutils import nodes

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # document the checkout, installed or not

project = 'd2l-bert'
author = 'the d2l-bert developers'
copyright = '2026, the d2l-bert developers'

extensions = [
    'myst_parser',
    'sphinx.ext.autodoc',
    'sphinx.ext.napoleon',
    'sphinx.ext.viewcode',
]
source_suffix = {'.md': 'markdown', '.rst': 'restructuredtext'}
root_doc = 'index'
exclude_patterns = ['_build', 'Thumbs.db', '.DS_Store']

myst_heading_anchors = 3

# Docstrings are numpy-doc ("Parameters\n----------")
napoleon_google_docstring = False
napoleon_numpy_docstring = True
napoleon_use_rtype = False
autodoc_member_order = 'bysource'
autodoc_default_options = {'members': True}
autodoc_typehints = 'none'
# A default shows as the source writes it (`urls=WIKITEXT2_URLS`, not the
# tuple it names; `root=DATA_ROOT`), so a signature stays short and exact
autodoc_preserve_defaults = True
# Objects under their module's heading: `BERTEncoder(...)`, not
# `d2l_bert.book.bert.BERTEncoder(...)` (the heading names the module; the
# anchors and the index keep the full name).  A signature longer than a
# line of the source puts each parameter on a line of its own
add_module_names = False
python_maximum_signature_line_length = 79
# `name` in a docstring is code, as in the book's text, and a link when it
# names a documented object
default_role = 'py:obj'

html_theme = 'alabaster'
html_static_path = ['_static']
html_theme_options = {'description': 'The BERT chapter of Dive into Deep '
                                     'Learning, tested, in MXNet/Gluon',
                      # 1280 px screens: room for 90-column code lines
                      # (alabaster caps the text at 800 px by default)
                      'page_width': '1220px',
                      'sidebar_width': '220px',
                      'body_max_width': 'none'}

# ---------------------------------------------------------------------------
# The book's cross-references in our docstrings
#
# Each object says which section of the book defines it, as the book does:
# "Defined in :numref:`sec_bert`".  Those labels live in the book, not in
# these pages, so they become links to the section on d2l.ai; a label we do
# not know becomes plain text rather than a broken link.

BOOK = 'https://d2l.ai/'
_NLP_PRE = 'chapter_natural-language-processing-pretraining/'
_NLP_APP = 'chapter_natural-language-processing-applications/'
_ATTN = 'chapter_attention-mechanisms-and-transformers/'
BOOK_PAGES = {
    'sec_bert': _NLP_PRE + 'bert.html',
    'subsec_bert_input_rep': _NLP_PRE + 'bert.html',
    'subsec_bert_pretraining_tasks': _NLP_PRE + 'bert.html',
    'subsec_mlm': _NLP_PRE + 'bert.html',
    'subsec_nsp': _NLP_PRE + 'bert.html',
    'sec_bert-dataset': _NLP_PRE + 'bert-dataset.html',
    'subsec_prepare_mlm_data': _NLP_PRE + 'bert-dataset.html',
    'sec_bert-pretraining': _NLP_PRE + 'bert-pretraining.html',
    'sec_finetuning-bert': _NLP_APP + 'finetuning-bert.html',
    'sec_natural-language-inference-bert':
        _NLP_APP + 'natural-language-inference-bert.html',
    'sec_natural-language-inference-attention':
        _NLP_APP + 'natural-language-inference-attention.html',
    'sec_natural-language-inference-and-dataset':
        _NLP_APP + 'natural-language-inference-and-dataset.html',
    'sec_attention-scoring-functions':
        _ATTN + 'attention-scoring-functions.html',
    'subsec_batch_dot': _ATTN + 'attention-scoring-functions.html',
    'sec_multihead-attention': _ATTN + 'multihead-attention.html',
    'sec_transformer': _ATTN + 'transformer.html',
    'subsec_positionwise-ffn': _ATTN + 'transformer.html',
    'sec_utils': 'chapter_appendix-tools-for-deep-learning/utils.html',
    'sec_image_augmentation': 'chapter_computer-vision/'
                              'image-augmentation.html',
    'sec_multi_gpu_concise': 'chapter_computational-performance/'
                             'multiple-gpus-concise.html',
}


def book_reference(app, env, node, contnode):
    """Resolve ``:numref:`` to a book label as a link to d2l.ai."""
    if node.get('reftype') != 'numref':
        return None
    label = node['reftarget']
    text = f'the book, {label}'
    if label not in BOOK_PAGES:
        return nodes.literal(label, text)
    link = nodes.reference('', '', internal=False,
                           refuri=BOOK + BOOK_PAGES[label])
    link += nodes.literal(label, text)
    return link


def cite_role(name, rawtext, text, lineno, inliner, options=None,
              content=None):
    """``:cite:`Key``` as in the book's sources: shown as the key."""
    return [nodes.emphasis(rawtext, f'[{text}]')], []


# ---------------------------------------------------------------------------
# The API reference: one page per part of the package, one heading per
# module
#
# Each page of `reference/` (`reference/api.md` is their index) lists its
# modules, one name a line, in a fenced block marked `{api-modules}`;
# before the page is parsed, each name becomes a heading of its own
# followed by its `automodule`.  Adding a module to the reference is
# adding its name to a list.

API_MODULES = re.compile(r'^```\{api-modules\}\n(.*?)^```\n',
                         re.MULTILINE | re.DOTALL)


def api_module_sections(names):
    """Markdown for `names` (one module per line): a heading and an
    `automodule` block each."""
    import importlib.util
    parts = []
    for name in names.split():
        # a package's `__all__` re-exports its modules' names, which their
        # own sections document: list only what the package itself defines
        package = importlib.util.find_spec(name).submodule_search_locations
        option = '   :ignore-module-all:\n' if package else ''
        parts.append(f'## `{name}`\n\n```{{eval-rst}}\n'
                     f'.. automodule:: {name}\n{option}```\n')
    return '\n'.join(parts)


def expand_api_modules(app, docname, source):
    """Expand the `{api-modules}` lists of a page as it is read."""
    source[0] = API_MODULES.sub(
        lambda match: api_module_sections(match.group(1)), source[0])


# ---------------------------------------------------------------------------
# Module constants: their value only when it is short
#
# autodoc writes a documented constant's value into its signature; a long
# one (a table of checksums, a warning's text, the command line's option
# table) would fill the page, so the `#:` comment that says what it holds
# stands alone; so does one that holds functions (a table of stand-ins),
# whose text is an address in memory.

MAX_VALUE_CHARS = 100


def short_value_documenter():
    """A `DataDocumenter` that leaves out values longer than
    `MAX_VALUE_CHARS` characters, and those that hold functions."""
    from sphinx.ext.autodoc import DataDocumenter
    from sphinx.util.inspect import object_description

    class ShortValueDocumenter(DataDocumenter):
        def should_suppress_value_header(self):
            text = object_description(self.object)
            return (super().should_suppress_value_header()
                    or len(text) > MAX_VALUE_CHARS or '<function' in text)
    return ShortValueDocumenter


def bare_colon(text):
    """Whether `text` holds a colon outside backticks (where napoleon
    splits an attribute's first line into "type: description")."""
    return ':' in re.sub(r'`[^`]*`', '', text)


def keep_attribute_text(app, what, name, obj, options, lines):
    """Stop napoleon from taking the words before a colon on the first
    line of a constant's comment for its type: the line is text.  An
    empty reST comment (``..``) becomes the first line, which napoleon
    reads as the description and which renders as nothing."""
    if (what in ('data', 'attribute', 'property') and lines
            and bare_colon(lines[0])):
        lines[:0] = ['..', '']


def function_defaults_by_name(signature):
    """Write a default that is a function by its name, as the source does
    (``pad=_pad_bert_inputs``), not by its repr (where
    `autodoc_preserve_defaults` finds no source)."""
    return re.sub(r'<function ([\w.]+) at 0x[0-9a-f]+>|'
                  r'<function ([\w.]+)>',
                  lambda m: m.group(1) or m.group(2), signature)


def dataclass_factories_as_written(obj, signature):
    """Write a dataclass field's default as its source does
    (``notes=field(default_factory=list)``), not as ``<factory>``, the
    stand-in of the generated `__init__`, which has no source."""
    import dataclasses
    if not (isinstance(obj, type) and dataclasses.is_dataclass(obj)):
        return signature
    for item in dataclasses.fields(obj):
        written = getattr(item.default_factory, '__qualname__', '<')
        if '<' not in written:
            signature = re.sub(
                rf'\b{item.name}=<factory>',
                f'{item.name}=field(default_factory={written})', signature)
    return signature


def has_source(obj):
    """Whether `inspect` finds the source of `obj`."""
    import inspect
    try:
        inspect.getsource(obj)
    except (OSError, TypeError):
        return False
    return True


def preserve_defaults_if_source(app, obj, bound_method):
    """Switch `autodoc_preserve_defaults` off for an object without
    source: Sphinx 7.1's handler (priority 500, just after this one)
    fails on a dataclass's generated `__init__` (8.1 skips it)."""
    app.config.autodoc_preserve_defaults = (autodoc_preserve_defaults
                                            and has_source(obj))


def preserve_defaults_again(app, obj, bound_method):
    """Back to the setting of this file, after Sphinx's handler."""
    app.config.autodoc_preserve_defaults = autodoc_preserve_defaults


def signature_as_written(app, what, name, obj, options, signature,
                         return_annotation):
    """The defaults of a signature as the source writes them (Sphinx
    keeps the first answer of this event, so one handler does both)."""
    if signature:
        signature = dataclass_factories_as_written(
            obj, function_defaults_by_name(signature))
    return signature, return_annotation


# ---------------------------------------------------------------------------
# Tables on a phone: each row a card of its cells
#
# Below 600 px `_static/d2l-bert.css` shows each row of a table as a card
# and each cell under its column's name, so that no table is wider than
# the phone.  The names are written into the cells here, hidden at other
# widths.


def label_table_cells(app, doctree, docname):
    """Begin each body cell of a table that has one header row with a
    `cell-label` span holding its column's name."""
    for table in doctree.findall(nodes.table):
        for group in table.findall(nodes.tgroup):
            heads = [row for head in group.findall(nodes.thead)
                     for row in head.findall(nodes.row)]
            if len(heads) != 1:
                continue
            names = [entry.astext() for entry in heads[0].children]
            for body in group.findall(nodes.tbody):
                for row in body.findall(nodes.row):
                    for name, entry in zip(names, row.children):
                        if name.strip():
                            entry.insert(0, nodes.inline(
                                '', name, classes=['cell-label']))


# ---------------------------------------------------------------------------
# The chapter: each section's notebook as it ran
#
# Before the pages are read, each notebook is executed in a kernel (or
# read from the cache of executed notebooks, keyed by the notebook's,
# the package's and the lock file's contents) and written as a page of
# `chapter/` with its outputs, figures and the book's values
# (`d2l_bert.chapter.pages`).  ``D2L_BERT_DOCS_CACHE`` moves the cache
# (default `docs/_build/.chapter-cache`).  A cell that fails, or an
# output that is not the book's, is a warning, so the build fails.

from d2l_bert.presets import DOCS_CACHE_ENV  # noqa: E402

CHAPTER_CACHE = os.environ.get(DOCS_CACHE_ENV) or os.path.join(
    ROOT, 'docs', '_build', '.chapter-cache')


def chapter_pages(app):
    """Write `chapter/NAME.md` for each notebook of the chapter."""
    from sphinx.util import logging
    from d2l_bert.chapter.pages import chapter_notebooks, write_pages

    log = logging.getLogger('d2l-bert')
    problems = write_pages(os.path.join(app.srcdir, 'chapter'),
                           chapter_notebooks(), CHAPTER_CACHE,
                           progress=log.info)
    for problem in problems:
        log.warning(problem)


def setup(app):
    app.connect('builder-inited', chapter_pages)
    app.connect('doctree-resolved', label_table_cells)
    app.add_autodocumenter(short_value_documenter(), override=True)
    app.connect('autodoc-before-process-signature',
                preserve_defaults_if_source, priority=499)
    app.connect('autodoc-before-process-signature',
                preserve_defaults_again, priority=501)
    app.connect('autodoc-process-signature', signature_as_written)
    app.connect('autodoc-process-docstring', keep_attribute_text,
                priority=400)
    app.connect('missing-reference', book_reference)
    app.connect('source-read', expand_api_modules)
    app.add_role('cite', cite_role)
    app.add_css_file('d2l-bert.css')
