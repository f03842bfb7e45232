"""The chapter's pages: each documented output with the book's value and
the verdict, figures inline, failures and mismatches reported."""
import base64
import os
import re

import nbformat
from d2l_bert.chapter import book_outputs, pages

from helpers import cache_book_outputs

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def notebook(*cells, label='sec_bert', seconds=12.0):
    """A notebook of `cells` (``(code, outputs)`` pairs, or markdown
    strings)."""
    nb = nbformat.v4.new_notebook()
    nb.metadata['d2l_bert'] = {'label': label, 'seconds': seconds}
    for cell in cells:
        if isinstance(cell, str):
            nb.cells.append(nbformat.v4.new_markdown_cell(cell))
        else:
            code, outputs = cell
            nb.cells.append(nbformat.v4.new_code_cell(code, outputs=outputs))
    return nb


def result(text):
    return nbformat.v4.new_output('execute_result', {'text/plain': text},
                                  execution_count=1)


def stream(text, name='stdout'):
    return nbformat.v4.new_output('stream', name=name, text=text)


def test_a_documented_shape_gets_the_books_value_and_ok():
    nb = notebook('[badges](x)', '# BERT\n\nText.',
                  ('encoded_X.shape', [result('(2, 8, 768)')]))
    text, problems = pages.notebook_page(nb, 'bert.ipynb')
    assert problems == []
    assert text.startswith('# BERT\n\nText.\n\n[badges](x)\n\n'
                           '<p class="book-summary">')
    assert 'from its first cell in 12 s' in text
    assert 'Outputs the book documents: 1 ok, 0 shown, 0 MISMATCH.' in text
    assert ('```python\nencoded_X.shape\n```\n\n'
            '<pre class="cell-output result">(2, 8, 768)</pre>\n\n'
            '<div class="book-check ok"><span class="book-verdict">ok'
            '</span> <span class="book-said">the book (sec_bert, cell 5) '
            'prints</span><pre>(2, 8, 768)</pre></div>') in text


def test_another_shape_is_a_mismatch_and_a_problem():
    nb = notebook(('encoded_X.shape', [result('(2, 8, 256)')]))
    text, problems = pages.notebook_page(nb, 'bert.ipynb')
    assert '<div class="book-check MISMATCH">' in text
    assert '1 MISMATCH' in text
    assert problems == ["bert.ipynb, cell 1: MISMATCH with the book "
                        "('(2, 8, 256)')"]


def test_a_trained_number_is_shown_with_why_and_a_failure_is_reported():
    entry = next(e for e in book_outputs.DOCUMENTED
                 if e.label == 'sec_bert-pretraining' and e.mode == 'shown')
    code = 'train_bert(train_iter, net, loss, len(vocab), devices, 50)'
    assert book_outputs.documented(entry.label, code) == entry
    error = nbformat.v4.new_output('error', ename='ValueError',
                                   evalue='bad', traceback=[])
    nb = notebook((code, [stream('MLM loss 5.1, NSP loss 0.7\n')]),
                  ('x = 1', [error]), label=entry.label)
    text, problems = pages.notebook_page(nb, 'bert-pretraining.ipynb')
    assert '<div class="book-check shown">' in text
    assert f'<span class="book-why">{entry.why}</span>' in text
    assert '<pre class="cell-output error">ValueError: bad</pre>' in text
    assert problems == ['bert-pretraining.ipynb, cell 2: ValueError: bad']


def test_figures_are_inline_images_and_text_is_escaped():
    svg = '<?xml version="1.0"?>\n<svg>\n\n<rect/></svg>'
    figure = nbformat.v4.new_output('display_data', {
        'image/svg+xml': svg, 'text/plain': '<Figure>'})
    nb = notebook(('plot()', [figure, stream('a < b\n\nc', 'stderr')]))
    text, _ = pages.notebook_page(nb, 'x.ipynb')
    [data] = re.findall(r'<img alt="figure" src="data:image/svg\+xml;'
                        r'base64,([^"]+)">', text)
    assert base64.b64decode(data).decode() == svg
    assert '<Figure>' not in text
    assert '<pre class="cell-output stderr">a &lt; b\n\nc</pre>' in text


def test_a_long_output_is_cut_and_says_so():
    nb = notebook(('print(x)', [stream('y' * (pages.MAX_OUTPUT_CHARS + 7))]))
    text, _ = pages.notebook_page(nb, 'x.ipynb')
    assert ('y' * pages.MAX_OUTPUT_CHARS
            + '\n[... 7 more characters cut on this page]</pre>') in text


def test_every_documented_output_of_the_chapter_gets_its_box(tmp_path):
    # The chapter's own notebooks, "executed" to print the book's outputs
    cache_book_outputs(str(tmp_path / 'cache'))
    out = tmp_path / 'chapter'
    assert pages.write_pages(str(out), pages.chapter_notebooks(),
                             str(tmp_path / 'cache')) == []
    names = sorted(os.listdir(out))
    assert names == sorted(os.path.basename(p)[:-6] + '.md'
                           for p in pages.chapter_notebooks())
    boxes = {}
    for name in names:
        text = (out / name).read_text('utf-8')
        boxes[name] = re.findall(r'<div class="book-check (\w+)">.*?'
                                 r'\((sec_[\w-]+), cell (\d+)\)', text)
    documented = sorted((e.label, str(e.cell))
                        for e in book_outputs.DOCUMENTED
                        if e.label in {b[1] for bs in boxes.values()
                                       for b in bs})
    assert sorted((label, cell) for bs in boxes.values()
                  for _, label, cell in bs) == documented
    assert len(documented) >= 12
    verdicts = {v for bs in boxes.values() for v, _, _ in bs}
    assert verdicts == {'ok', 'shown'}


def test_pages_of_notebooks_gone_are_removed(tmp_path):
    cache_book_outputs(str(tmp_path / 'cache'))
    out = tmp_path / 'chapter'
    out.mkdir()
    (out / 'index.md').write_text('kept')
    (out / 'old-section.md').write_text('gone')
    first = pages.chapter_notebooks()[:1]
    pages.write_pages(str(out), first, str(tmp_path / 'cache'))
    assert sorted(os.listdir(out)) == ['bert.md', 'index.md']


def test_chapter_notebooks_are_the_books_sections_in_order_then_ours():
    from d2l_bert.chapter.saved_cells import BEYOND_BOOK, NOTEBOOKS
    names = [os.path.basename(p) for p in pages.chapter_notebooks()]
    assert names == list(NOTEBOOKS) + list(BEYOND_BOOK)
    assert names[:4] == ['bert.ipynb', 'bert-dataset.ipynb',
                         'bert-pretraining.ipynb',
                         'natural-language-inference-bert.ipynb']
