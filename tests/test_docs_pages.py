"""Tests of the README and the documentation's pages as written, that
need no Sphinx build: the set-up time, the commands, the speed pages'
wording, no commit hashes, and the docs workflow."""
import os
import re

import pytest

from test_docs import DOCS, ROOT, files_under, read


def test_readme_and_install_page_give_the_same_set_up_time():
    # "83 s in a fresh clone": the figure a reader checks their machine by
    pattern = r'(\d+) s in a\s+fresh clone'
    readme = re.findall(pattern, read('README.md'))
    install = re.findall(pattern, read('docs', 'install.md'))
    assert readme and readme == install[:len(readme)], (readme, install)


def test_readme_has_a_line_for_every_command():
    from d2l_bert.cli import COMMANDS
    readme = read('README.md')
    missing = [name for name in COMMANDS if name != 'chapter'
               and f'- `{name}`: ' not in readme]
    assert not missing, f'README.md has no line for: {missing}'


def test_readme_stays_short():
    # A student reads it in two minutes; the figures live in the docs
    assert len(read('README.md').splitlines()) <= 150


@pytest.mark.parametrize('name', ['performance.md',
                                  'performance-history.md'])
def test_speed_pages_name_no_machine_path_and_no_issue(name):
    # A reader of the repository has no issue tracker to look numbers up
    page = read('docs', name)
    found = re.findall(r'(?<![\w.])/(?:work|root|home|Users)/\S*', page)
    assert not found, found
    assert not re.findall(r'\bissue', page, re.IGNORECASE)


#: A commit's abbreviated or full hash: 7 to 40 hex digits, at least one
#: a letter and one a digit (so neither "99999996" nor "defaced")
COMMIT_HASH = re.compile(
    r'\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b')


def doc_pages():
    """Yield `(path relative to docs/, text)` of every Markdown page we
    write (the chapter's pages are the notebooks', written by the
    build)."""
    for path, text in files_under(DOCS, '.md', DOCS):
        if not (path.startswith('chapter' + os.sep)
                and path != os.path.join('chapter', 'index.md')):
            yield path, text


def test_commit_hashes_are_found():
    text = 'main at `5542d60`, (commit ef498ed); 0.99999996, defaced, 1e-12'
    assert COMMIT_HASH.findall(text) == ['5542d60', 'ef498ed']


def test_docs_cite_no_commit():
    # A hash names a state of one clone's history, which a reader of the
    # page cannot see; the pages say what the code did instead
    found = [f'{page}: {found}' for page, text in doc_pages()
             for found in COMMIT_HASH.findall(
                 re.sub(r'https?://\S+', '', text))]
    assert not found, found


#: Words of a diary, which date a statement by the day it was written
DIARY = re.compile(r'\b(this|that|of the) day\b|\btoday\b|\byesterday\b|'
                   r'\btonight\b|\bthis (round|morning|evening)\b|'
                   r'\bthe days before\b|\bat hand\b|\bmain at\b|'
                   r'\bbranch `|\b[0-2][0-9]:[0-5][0-9]\b', re.IGNORECASE)


@pytest.mark.parametrize('name', ['performance.md',
                                  'performance-history.md'])
def test_speed_pages_speak_without_a_diary(name):
    # "Three changes of this day", "No such machine was at hand this
    # day": the figures carry their date and machine, the text none
    found = [match.group(0) for match in DIARY.finditer(read('docs', name))]
    assert not found, found


def docs_workflow():
    import yaml
    with open(os.path.join(ROOT, '.github', 'workflows', 'docs.yml')) as f:
        workflow = yaml.safe_load(f)
    # YAML 1.1 reads the key `on` as True
    workflow['on'] = workflow.pop(True, workflow.get('on'))
    return workflow


def test_the_docs_workflow_builds_on_main_and_deploys_to_pages():
    workflow = docs_workflow()
    assert workflow['on']['push'] == {'branches': ['main']}
    assert workflow['permissions'] == {'contents': 'read', 'pages': 'write',
                                       'id-token': 'write'}
    build, deploy = workflow['jobs']['build'], workflow['jobs']['deploy']
    runs = [step['run'] for step in build['steps'] if 'run' in step]
    assert runs == ['python3 run.py docs']
    uses = [step['uses'].split('@')[0] for step in build['steps']
            if 'uses' in step]
    assert uses == ['actions/checkout', 'actions/setup-python',
                    'actions/cache', 'actions/configure-pages',
                    'actions/upload-pages-artifact']
    upload = build['steps'][-1]
    assert upload['with'] == {'path': 'docs/_build/html'}
    assert deploy['needs'] == 'build'
    assert deploy['environment']['name'] == 'github-pages'
    assert [s['uses'].split('@')[0] for s in deploy['steps']] == [
        'actions/deploy-pages']


def test_the_docs_workflow_caches_what_the_chapter_cache_is_keyed_by():
    # `chapter.execute.cache_key`: the notebook, d2l_bert/ and the lock
    # of the Python that runs the build
    workflow = docs_workflow()
    build = workflow['jobs']['build']
    [python] = [s['with']['python-version'] for s in build['steps']
                if s.get('uses', '').startswith('actions/setup-python')]
    [cache] = [s for s in build['steps']
               if s.get('uses', '').startswith('actions/cache')]
    assert cache['with']['path'] == 'docs/_build/.chapter-cache'
    lock = 'requirements/py%s.txt' % python.replace('.', '')
    assert os.path.isfile(os.path.join(ROOT, lock))
    assert cache['with']['key'] == (
        "chapter-${{ hashFiles('notebooks/*.ipynb', 'd2l_bert/**', "
        f"'{lock}') }}}}")
