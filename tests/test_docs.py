"""The documentation builds without a warning, documents every module
under a heading of its own, and renders without the markup faults that
reST makes of near-miss docstrings."""
import ast
import importlib
import os
import pkgutil
import re
import subprocess
import sys

import pytest

import d2l_bert
from d2l_bert import presets
from helpers import cache_book_outputs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, 'docs')


def public_modules():
    """Every module of `d2l_bert`, packages and their modules included,
    but `__main__` and those whose name has a part starting with `_`."""
    names = []
    for info in pkgutil.walk_packages(d2l_bert.__path__, 'd2l_bert.'):
        if not any(part.startswith('_') for part in info.name.split('.')):
            names.append(info.name)
    return sorted(names)


REFERENCE = os.path.join(DOCS, 'reference')
#: The pages of the API reference, in the order of the index's toctree
#: (`reference/api.md`), and the package each one documents (`None`: top
#: level modules)
REFERENCE_PAGES = {'sections': 'd2l_bert.book', 'data': 'd2l_bert.data',
                   'fast': 'd2l_bert.fast', 'runs': 'd2l_bert.runs',
                   'dist': 'd2l_bert.dist', 'hf': 'd2l_bert.hf',
                   'views': 'd2l_bert.views',
                   'chapter': 'd2l_bert.chapter', 'cli': 'd2l_bert.cli',
                   'utilities': None}


def listed_modules(page=None):
    """The module names of the `{api-modules}` lists of `page` of
    `docs/reference/`, or of every page there, in the index's order."""
    names = []
    for name in [page] if page else REFERENCE_PAGES:
        with open(os.path.join(REFERENCE, f'{name}.md'),
                  encoding='utf-8') as f:
            text = f.read()
        blocks = re.findall(r'^```\{api-modules\}\n(.*?)^```$', text,
                            re.MULTILINE | re.DOTALL)
        names += [module for block in blocks for module in block.split()]
    return names


def test_api_reference_lists_every_public_module():
    listed = listed_modules()
    missing = sorted(set(public_modules()) - set(listed))
    assert not missing, (
        f'add each module to a list of a page of docs/reference/: '
        f'{missing}')
    twice = sorted({name for name in listed if listed.count(name) > 1})
    assert not twice, f'listed twice in docs/reference/: {twice}'


def test_api_reference_pages_are_the_index_pages():
    # A page of `docs/reference/` this test does not know would hide its
    # modules from the checks above
    pages = sorted(name[:-3] for name in os.listdir(REFERENCE)
                   if name.endswith('.md'))
    assert pages == sorted(['api', *REFERENCE_PAGES])
    with open(os.path.join(REFERENCE, 'api.md'), encoding='utf-8') as f:
        index = f.read()
    toctree = re.search(r'^```\{toctree\}\n(.*?)^```$', index,
                        re.MULTILINE | re.DOTALL).group(1)
    entries = [line for line in toctree.splitlines()
               if line and not line.startswith(':')]
    assert entries == list(REFERENCE_PAGES)
    assert not re.search(r'^```\{api-modules\}', index, re.MULTILINE)


@pytest.mark.parametrize('page', list(REFERENCE_PAGES))
def test_each_package_has_its_page(page):
    # A package's modules on its own page; the top-level modules on the
    # pages of no package
    package = REFERENCE_PAGES[page]
    listed = listed_modules(page)
    if package:
        expected = [name for name in public_modules()
                    if name == package or name.startswith(package + '.')]
        assert sorted(listed) == expected
    else:
        packages = set(REFERENCE_PAGES.values())
        elsewhere = [name for name in listed
                     if name.count('.') != 1 or name in packages]
        assert not elsewhere, f'on the page of its package: {elsewhere}'


def test_api_reference_lists_only_modules_that_import():
    for name in listed_modules():
        importlib.import_module(name)


def closing_backtick_faults(text):
    """The places in `text` where a closing backtick is followed by a
    letter or digit (`` `nn.Block`s ``): reST then does not end the
    literal or the reference there, and the rest of the sentence up to
    the next backtick renders as code or emphasis."""
    faults = []
    start = text.find('`')
    while start >= 0:
        mark = '``' if text.startswith('``', start) else '`'
        end = text.find(mark, start + len(mark))
        if end < 0:
            break
        after = end + len(mark)
        if re.match(r'\w', text[after:after + 1]):
            faults.append(text[start:after + 10])
        start = text.find('`', after)
    return faults


def test_closing_backtick_fault_is_found():
    assert closing_backtick_faults('plain `nn.Block`s with `forward`') == [
        '`nn.Block`s with `fo']
    assert closing_backtick_faults('a ``x``s b') == ['``x``s b']
    assert closing_backtick_faults('`a` and `b`, ``c`` (`d`)') == []


def files_under(top, suffix, relative_to):
    """Yield `(path relative to relative_to, text)` of every file under
    `top` whose name ends with `suffix` (Sphinx's `_build` left out)."""
    for folder, _, files in os.walk(top):
        if '_build' in folder:
            continue
        for name in sorted(files):
            if name.endswith(suffix):
                path = os.path.join(folder, name)
                with open(path, encoding='utf-8') as f:
                    yield os.path.relpath(path, relative_to), f.read()


def package_sources():
    """Yield `(path relative to the checkout, text)` of every Python file
    of the package."""
    yield from files_under(os.path.dirname(d2l_bert.__file__), '.py', ROOT)


def package_docstrings():
    """Yield `(place, docstring)` for every module, class and function of
    the package's source."""
    for path, text in package_sources():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.Module, ast.ClassDef,
                                 ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node, clean=False)
                if doc:
                    yield f'{path}:{getattr(node, "lineno", 1)}', doc


def test_docstrings_close_every_backtick_before_a_space():
    faults = [f'{place}: {fault}' for place, doc in package_docstrings()
              for fault in closing_backtick_faults(doc)]
    assert not faults, (
        'a closing backtick followed by a letter breaks the markup '
        '(write "`nn.Block` blocks", not "`nn.Block`s"):\n'
        + '\n'.join(faults))


@pytest.fixture(scope='module')
def sphinx_run(tmp_path_factory):
    """Build the HTML docs once, warnings as errors.

    Returns the output folder and the finished process.  `--keep-going`
    writes every page even when a warning fails the build, so the page
    checks below do not depend on the warning check.
    """
    pytest.importorskip('sphinx', reason='sphinx is not installed (docs '
                        'extra: pip install -r requirements/py3XX.txt)')
    pytest.importorskip('myst_parser', reason='myst-parser is not installed')
    out = tmp_path_factory.mktemp('html')
    # The chapter's pages from notebooks that print the book's outputs:
    # the build executes no notebook (tests/test_chapter_pages.py runs one)
    cache = tmp_path_factory.mktemp('chapter-cache')
    cache_book_outputs(str(cache))
    chapter = os.path.join(DOCS, 'chapter')
    # the pages a real build wrote there, given back after
    before = {name: read('docs', 'chapter', name)
              for name in os.listdir(chapter) if name != 'index.md'}
    result = subprocess.run(
        [sys.executable, '-m', 'sphinx', '-W', '--keep-going', '-q',
         '-b', 'html', DOCS, str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        universal_newlines=True, timeout=600,
        env={**os.environ, presets.DOCS_CACHE_ENV: str(cache)})
    for name in os.listdir(chapter):
        if name != 'index.md' and name not in before:
            os.remove(os.path.join(chapter, name))
    for name, text in before.items():
        with open(os.path.join(chapter, name), 'w', encoding='utf-8') as f:
            f.write(text)
    return out, result


@pytest.fixture
def built_docs(sphinx_run):
    return sphinx_run[0]


def test_docs_build_with_warnings_as_errors(sphinx_run):
    out, result = sphinx_run
    assert result.returncode == 0, (
        f'sphinx-build -W failed:\n{result.stdout[-6000:]}')


def test_docs_have_the_install_names_and_api_pages(built_docs):
    for page in ('index.html', 'install.html', 'names.html',
                 os.path.join('reference', 'api.html'),
                 *[os.path.join('reference', f'{name}.html')
                   for name in REFERENCE_PAGES]):
        assert (built_docs / page).is_file(), page


def api_pages(built_docs):
    """`{page: html}` of the pages of the API reference."""
    return {page: (built_docs / 'reference' / f'{page}.html')
            .read_text('utf-8') for page in REFERENCE_PAGES}


def api_page(built_docs):
    """The pages of the API reference, one after the other."""
    return '\n'.join(api_pages(built_docs).values())


def test_the_book_classes_and_their_parameters_are_on_the_sections_page(
        built_docs):
    html = api_pages(built_docs)['sections']
    for name in ('d2l_bert.book.bert.BERTEncoder', 'd2l_bert.book.bert.BERTModel',
                 'd2l_bert.book.attention.MultiHeadAttention',
                 'd2l_bert.book.transformer.TransformerEncoderBlock'):
        assert f'id="{name}"' in html, name
    # napoleon turned the numpy-doc sections into field lists
    assert 'ffn_num_hiddens' in html and 'Parameters' in html


def test_book_labels_link_to_the_book(built_docs):
    html = api_page(built_docs)
    assert ('https://d2l.ai/chapter_natural-language-processing-pretraining/'
            'bert.html') in html
    assert ':numref:' not in html


def object_at(html, position):
    """The id of the documented object whose entry holds `position`."""
    ids = [(m.start(), m.group(1)) for m in
           re.finditer(r'<dt class="sig[^"]*" id="([^"]+)"', html)]
    before = [name for start, name in ids if start < position]
    return before[-1] if before else '(page)'


def empty_descriptions(html):
    """`object: parameter` for each field rendered as "name (type) –"
    with nothing after the dash (a numpy-doc entry without text), or
    with only a list that reST made of its text ("V." becomes a list
    numbered from V)."""
    entry = re.compile(r'<strong>([^<]+)</strong>((?:(?!</p>|<strong>).)*?)'
                       r'–\s*(</p>|<ol|<ul)', re.DOTALL)
    return [f'{object_at(html, m.start())}: {m.group(1)}'
            for m in entry.finditer(html)]


def test_empty_descriptions_are_found():
    html = ('<dt class="sig" id="m.f"></dt><li><p><strong>a</strong> '
            '(<em>int</em>) – </p></li><li><p><strong>b</strong> (<em>int'
            '</em>) – <ol class="upperalpha simple" start="22">'
            '<li></li></ol>'
            '</p></li><li><p><strong>c</strong> (<em>int</em>) – Count.</p>')
    assert empty_descriptions(html) == ['m.f: a', 'm.f: b']


def test_every_parameter_has_a_description(built_docs):
    empty = empty_descriptions(api_page(built_docs))
    assert not empty, (
        'give each of these numpy-doc entries a sentence:\n'
        + '\n'.join(empty))


def test_no_text_became_a_lettered_list(built_docs):
    # "V." or "H." alone on a docstring line is an enumerated list in reST
    html = api_page(built_docs)
    lists = [object_at(html, m.start()) for m in re.finditer(
        r'<ol class="(upper|lower)(alpha|roman)', html)]
    assert not lists, f'lists numbered by letters in: {lists}'


def test_no_backtick_is_left_in_the_rendered_text(built_docs):
    # A backtick that reaches the page is markup reST did not close
    html = re.sub(r'<pre.*?</pre>', '', api_page(built_docs),
                  flags=re.DOTALL)
    text = re.sub(r'<[^>]+>', '', html)
    left = [line.strip()[:100] for line in text.splitlines()
            if '`' in line]
    assert not left, 'stray backticks:\n' + '\n'.join(left)


def test_each_module_has_a_heading_of_its_own(built_docs):
    for page, html in api_pages(built_docs).items():
        headings = re.findall(
            r'<h2><code[^>]*><span class="pre">(d2l_bert[\w.]*)</span>',
            html)
        assert headings == listed_modules(page), page


def test_no_api_page_is_the_whole_reference(built_docs):
    # One page held all 521 entries (947 KB), a long load on a phone
    pages = api_pages(built_docs)
    entries = {page: html.count('<dt class="sig')
               for page, html in pages.items()}
    assert max(entries.values()) < sum(entries.values()) / 2, entries
    heavy = {page: len(html.encode('utf-8'))
             for page, html in pages.items()
             if len(html.encode('utf-8')) > 400_000}
    assert not heavy, f'pages over 400 KB: {heavy}'


def test_pages_load_the_stylesheet_that_wraps_code_and_tables(built_docs):
    assert (built_docs / '_static' / 'd2l-bert.css').is_file()
    for page in ('index.html', 'names.html',
                 os.path.join('reference', 'api.html'),
                 os.path.join('reference', 'sections.html')):
        html = (built_docs / page).read_text('utf-8')
        assert 'd2l-bert.css' in html, page


def read(*path):
    with open(os.path.join(ROOT, *path), encoding='utf-8') as f:
        return f.read()


# -------------------------------------------------------------------------
# Rendering faults: a bogus "Type:" field, a build path, a dumped
# constant, an example as prose, a word split in a table

def constant_comments():
    """Yield `(place, first line)` of each `#:` comment of the package,
    the lines autodoc takes for a constant's documentation."""
    for path, text in package_sources():
        lines = text.splitlines()
        for number, line in enumerate(lines):
            previous = lines[number - 1] if number else ''
            if line.lstrip().startswith('#:') and \
                    not previous.lstrip().startswith('#:'):
                yield f'{path}:{number + 1}', line.lstrip()[2:].strip()


def test_no_constant_comment_becomes_a_type_field(built_docs):
    # napoleon reads "words: more words" on a constant's first line as
    # "type: description"; `docs/conf.py` keeps such a line as text
    html = api_page(built_docs)
    types = set(re.findall(
        r'<dt class="field-[a-z]+">Type<span class="colon">:</span></dt>'
        r'\s*<dd class="field-[a-z]+"><p>(.*?)</p>', html, re.DOTALL))
    assert types, 'no Type field found: the pattern is out of date'
    bogus = [f'{place}: {first}' for place, first in constant_comments()
             if ':' in first
             and first.split(':')[0].replace("'", '’') in types]
    assert not bogus, 'rendered as a "Type:" field:\n' + '\n'.join(bogus)


def test_no_build_path_in_the_pages(built_docs):
    # A default computed from `__file__` shows the build machine's path
    found = [os.path.relpath(os.path.join(folder, name), built_docs)
             for folder, _, files in os.walk(built_docs)
             for name in files if name.endswith('.html')
             and ROOT in open(os.path.join(folder, name),
                              encoding='utf-8').read()]
    assert not found, f'{ROOT} appears in: {found}'


def test_long_constants_are_not_dumped(built_docs):
    html = api_page(built_docs)
    long = [(name, len(text)) for name, text in re.findall(
        r'<dl class="py data">\s*<dt class="sig[^"]*" id="([^"]+)">(.*?)'
        r'</dt>', html, re.DOTALL)
        if len(re.sub(r'<[^>]+>', '', text).strip()) > 200]
    assert not long, f'values written out in full: {long}'
    assert '&lt;function' not in html


def test_the_one_visible_call_renders_as_code(built_docs):
    html = api_page(built_docs)
    # An indented example without `::` before it becomes a block quote
    assert '<blockquote>' not in html
    code = re.findall(r'<pre>.*?</pre>', html, re.DOTALL)
    assert any('accelerate' in re.sub(r'<[^>]+>', '', block)
               for block in code)


def css_rules(text):
    """`(selector, declarations)` of each rule of a stylesheet."""
    text = re.sub(r'/\*.*?\*/', '', text, flags=re.DOTALL)
    return [(selector.strip(), body)
            for selector, body in re.findall(r'([^{}]+)\{([^{}]*)\}', text)]


def test_tables_scroll_rather_than_split_words():
    rules = css_rules(read('docs', '_static', 'd2l-bert.css'))
    for selector, body in rules:
        if 'table' in selector or 'td' in selector or 'th' in selector:
            assert 'anywhere' not in body and 'word-break' not in body, (
                selector)
    table = [body for selector, body in rules
             if selector == 'table.docutils']
    assert table and 'overflow-x: auto' in table[0]
    assert 'display: block' in table[0]


def rule(selector):
    """The declarations of `docs/_static/d2l-bert.css` for `selector`,
    each rule for it joined (media queries included)."""
    rules = css_rules(read('docs', '_static', 'd2l-bert.css'))
    return ' '.join(body for found, body in rules
                    if selector in [part.strip()
                                    for part in found.split(',')])


def test_field_names_stay_whole_on_one_line():
    # Sphinx's `word-break: break-word` split "Parameters:" between its
    # letters when its column was narrow, as on a phone
    dt = rule('dl.field-list > dt')
    assert 'word-break: normal' in dt and 'white-space: nowrap' in dt


def check_widths():
    """`docs/check_widths.py`, the pages measured in Chromium."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        'check_widths', os.path.join(DOCS, 'check_widths.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(check_widths().chromium() is None,
                    reason='Chromium is not installed (apt-get install '
                    'chromium): the pages are measured in a real browser')
def test_no_page_scrolls_sideways_and_no_block_is_cut(built_docs):
    # A phone's 390 px in a frame (a window cannot be that narrow), and a
    # projector's 1280 px; the chapter's pages hold the book's outputs
    widths = check_widths()
    found = widths.measure(str(built_docs))
    pages = widths.html_pages(str(built_docs))
    assert len(found) == 2 * len(pages) and len(pages) >= 20
    assert 'chapter/bert-pretraining.html' in pages
    assert {(r['asked'], r['width']) for r in found} == {(390, 390),
                                                          (1280, 1280)}
    assert sum(r['tables'] for r in found) >= 2 * 40
    assert sum(r['pres'] for r in found) >= 2 * 100
    assert widths.problems(found) == []


def test_code_blocks_and_index_tables_scroll_in_their_own_box():
    assert 'overflow-x: auto' in rule('div.highlight pre')
    assert 'max-width: 100%' in rule('div.highlight pre')
    index = rule('table.indextable')
    assert 'display: block' in index and 'overflow-x: auto' in index


def signature_defaults(html):
    """`(object, default)` of each parameter default written in the
    signatures of functions, classes and methods (a constant's value is
    `test_long_constants_are_not_dumped`'s)."""
    import html as markup
    found = []
    for kind, name, sig in re.findall(
            r'<dl class="py (\w+)">\s*<dt class="sig[^"]*" id="([^"]+)">'
            r'(.*?)</dt>', html, re.DOTALL):
        if kind not in ('data', 'attribute', 'property'):
            for value in re.findall(r'<span class="default_value">(.*?)'
                                    r'</span></em>', sig, re.DOTALL):
                text = re.sub(r'<[^>]+>', '', value)
                found.append((name, markup.unescape(text)))
    return found


def test_signature_defaults_are_written_as_the_source_writes_them(
        built_docs):
    defaults = signature_defaults(api_page(built_docs))
    assert len(defaults) > 100, 'no defaults found: the pattern is stale'
    assert ('d2l_bert.data.wikitext.download_wikitext2',
            'WIKITEXT2_URLS') in defaults
    # a dataclass field's factory, not the generated `__init__`'s stand-in
    assert ('d2l_bert.chapter.runner.CellResult',
            'field(default_factory=list)') in defaults
    assert not [d for d in defaults if '<factory>' in d[1]]
    long = [d for d in defaults if len(d[1]) > 40]
    assert not long, f'defaults longer than 40 characters: {long}'


def test_a_code_name_moves_to_the_next_line_whole():
    # Each word of a literal is a span.pre: as an inline block it breaks
    # inside only when longer than the line (white-space: normal on a
    # plain span broke `--isa` after its dashes on a phone)
    words = rule('code.literal span.pre')
    assert 'display: inline-block' in words and 'max-width: 100%' in words
    assert 'display: inline;' in rule('table.docutils span.pre')


def one_line_signatures(html):
    """`(object, text)` of the signatures of functions, classes and
    methods written on one line (a long one lists its parameters in a
    `dl`), without the "class" keyword and the links after them."""
    import html as markup
    found, multi_line = [], 0
    for kind, name, sig in re.findall(
            r'<dl class="py (\w+)">\s*<dt class="sig[^"]*" id="([^"]+)">'
            r'(.*?)</dt>', html, re.DOTALL):
        if kind in ('data', 'attribute', 'property'):
            continue
        if '<dl>' in sig:
            multi_line += 1
            continue
        sig = re.sub(r'<a class="(reference internal|headerlink)".*?</a>'
                     r'|<em class="property">.*?</em>', '', sig,
                     flags=re.DOTALL)
        text = markup.unescape(re.sub(r'<[^>]+>', '', sig))
        found.append((name, ' '.join(text.split())))
    return found, multi_line


def test_a_long_signature_lists_one_parameter_a_line(built_docs):
    # Under its module's heading an object goes without the module's
    # name; a signature longer than a line of the source wraps, one
    # parameter a line, as on a phone it must
    html = api_page(built_docs)
    assert 'sig-prename' not in html
    found, multi_line = one_line_signatures(html)
    assert multi_line > 10, 'no multi-line signature: the pattern is stale'
    long = [(name, len(text)) for name, text in found if len(text) > 79]
    assert not long, f'one-line signatures over 79 characters: {long}'
