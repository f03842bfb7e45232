"""The documentation builds without a warning and documents every module."""
import os
import pkgutil
import subprocess
import sys

import pytest

import d2l_bert

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, 'docs')


def public_modules():
    """Top-level modules of `d2l_bert` whose names do not start with `_`,
    but for the old paths of moved modules (their docstring starts with
    "Moved to")."""
    return sorted(f'd2l_bert.{info.name}'
                  for info in pkgutil.iter_modules(d2l_bert.__path__)
                  if not info.ispkg and not info.name.startswith('_')
                  and not _moved(info.name))


def _moved(name):
    path = os.path.join(os.path.dirname(d2l_bert.__file__), f'{name}.py')
    with open(path, encoding='utf-8') as f:
        return f.read().startswith('"""Moved to')


def test_api_reference_lists_every_public_module():
    with open(os.path.join(DOCS, 'reference', 'api.md'),
              encoding='utf-8') as f:
        page = f.read()
    missing = [name for name in public_modules()
               if f'.. automodule:: {name}\n' not in page]
    assert not missing, (
        f'add one automodule block per module to docs/reference/api.md: '
        f'{missing}')


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
    result = subprocess.run(
        [sys.executable, '-m', 'sphinx', '-W', '--keep-going', '-q',
         '-b', 'html', DOCS, str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        universal_newlines=True, timeout=600)
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
                 os.path.join('reference', 'api.html')):
        assert (built_docs / page).is_file(), page


def test_api_page_holds_the_book_classes_with_their_parameters(built_docs):
    html = (built_docs / 'reference' / 'api.html').read_text('utf-8')
    for name in ('d2l_bert.bert.BERTEncoder', 'd2l_bert.bert.BERTModel',
                 'd2l_bert.attention.MultiHeadAttention',
                 'd2l_bert.transformer.TransformerEncoderBlock'):
        assert f'id="{name}"' in html, name
    # napoleon turned the numpy-doc sections into field lists
    assert 'ffn_num_hiddens' in html and 'Parameters' in html


def test_book_labels_link_to_the_book(built_docs):
    html = (built_docs / 'reference' / 'api.html').read_text('utf-8')
    assert ('https://d2l.ai/chapter_natural-language-processing-pretraining/'
            'bert.html') in html
    assert ':numref:' not in html
