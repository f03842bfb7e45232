"""The `chapter` and `check-text` commands, as a user runs them."""
import json
import os
import re
import subprocess
import sys

import pytest

from d2l_bert import presets
from d2l_bert import cli
from d2l_bert.cli import chapter
from d2l_bert.devices import num_gpus
from excerpts import Cuts

FIXTURES = os.path.join(os.path.dirname(__file__), 'fixtures', 'editions')
NO_GPU = pytest.mark.skipif(num_gpus() > 0, reason='this machine has a GPU')


def fixture(name):
    return os.path.join(FIXTURES, name)


def in_sec_bert(name, tmp_path):
    """A copy of the fixture `name` labelled as a part of sec_bert (the
    fixtures name sections of their own, which check-text refuses)."""
    with open(fixture(name), encoding='utf-8') as f:
        text = re.sub(r':label:`sec_fixture_\w+`', ':label:`sec_bert`',
                      f.read())
    path = tmp_path / name
    path.write_text(text, encoding='utf-8')
    return str(path)


def run(argv):
    """Run ``d2l-bert ARGV`` here; the exit status."""
    try:
        return cli.main(argv)
    except SystemExit as e:  # a usage error found by argparse
        return e.code


def test_check_text_prints_each_cell_and_the_summary(capsys):
    assert cli.main(['check-text', fixture('bilingual.md')]) == 0
    out = capsys.readouterr().out
    assert 'sec_bert cell 3 (line 52): tokens = np.random.randint(' in out
    assert "    match (from the book's table, exact)" in out
    assert out.rstrip().endswith(
        '3 cells, 3 ran, 1 outputs documented: 1 compared, 0 shown')


def test_check_text_places_an_excerpt_and_runs_what_it_leaves_out(
        capsys, tmp_path):
    # sec_bert from the masked language model on, without its label line
    cuts = Cuts('en/bert.md')
    path = cuts.write(tmp_path, cuts.indices(5, 11))
    assert cli.main(['check-text', path]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:4] == [
        f'== {path} (markdown, section sec_bert)',
        "section sec_bert inferred from the code: the file's label "
        "subsec_nsp is not a section's; 7 of its 7 MXNet cells match "
        "d2l-bert's edition of it (next: sec_bert-dataset, 0)",
        "excerpt of sec_bert: cells 7-13 of 13; cells 1-6 taken from "
        "d2l-bert's edition",
        'sec_bert cell 1 (line 1): class MaskLM(nn.Block):']
    assert lines[-2] == '7 cells, 7 ran, 4 outputs documented: 4 compared, ' \
        '0 shown'


def test_check_text_refuses_a_file_of_no_bert_section(capsys, tmp_path):
    path = tmp_path / 'snippet.md'
    path.write_text('```{.python .input}\ntally = {"a": 1}\n```\n'
                    '```{.python .input}\ntally["a"]\n```\n')
    other = tmp_path / 'transformer.md'
    other.write_text(':label:`sec_transformer`\n\n```{.python .input}\n'
                     'x = 1\n```\n')
    assert cli.main(['check-text', str(path), str(other)]) == 2
    out, err = capsys.readouterr()
    assert out == ''
    assert err.splitlines() == [
        f'd2l-bert check-text: error: {path}: not a section of the BERT '
        "chapter: the file has no section label, and no section of "
        "d2l-bert's holds its cells; closest section: sec_bert (0 of 2 "
        'cells match)',
        f'd2l-bert check-text: error: {other}: not a section of the BERT '
        'chapter: d2l-bert has no edition of sec_transformer, and no other '
        "section of its holds these cells; closest section: sec_bert (0 of "
        '1 cells match)']


def test_check_text_help_says_it_runs_the_files_code(capsys):
    with pytest.raises(SystemExit):
        cli.main(['check-text', '--help'])
    help_text = ' '.join(capsys.readouterr().out.split())
    assert 'check-text runs the code of the files it is given, with your ' \
        'rights' in help_text
    assert 'Check a file you do not trust (someone else\'s pull request) ' \
        'in a container, or in CI.' in help_text


def test_check_text_reports_a_cell_past_its_timeout_and_runs_the_rest(
        capsys, tmp_path):
    path = tmp_path / 'hangs.md'
    path.write_text(':label:`sec_bert`\n\n'
                    '```{.python .input}\nx = 1\n```\n'
                    '```{.python .input}\nwhile True:\n    pass\n```\n'
                    '```{.python .input}\nprint(x + 1)\n```\n')
    assert cli.main(['check-text', '--timeout', '1', str(path)]) == 1
    out = capsys.readouterr().out
    assert '    FAILED: TimeoutError: the cell ran for more than 1 s ' \
        '(--timeout)\n' in out
    assert 'sec_bert cell 3 (line 10): print(x + 1)\n    ran\n' \
        '    output:     2\n' in out


@pytest.mark.parametrize('value', ['-1', 'soon', '1e10'])
def test_check_text_timeout_must_be_seconds(capsys, value):
    # (1e10 s overflowed Python's wait for the cell's process)
    with pytest.raises(SystemExit) as exit:
        cli.main(['check-text', '--timeout', value, 'x.md'])
    assert exit.value.code == 2
    assert capsys.readouterr().err.endswith(
        'argument --timeout: must be a number of seconds from 0 to 604800 '
        f"(a week; 0 for no limit), got '{value}'\n")


def test_check_text_exits_1_on_a_failed_cell(capsys, tmp_path):
    assert cli.main(['check-text',
                     in_sec_bert('failing-cell.md', tmp_path)]) == 1
    assert "    FAILED: AttributeError: module 'd2l' has no attribute " \
        "'no_such_helper'" in capsys.readouterr().out


def test_check_text_exits_1_on_a_mismatch_and_a_malformed_file(capsys,
                                                               tmp_path):
    assert cli.main(['check-text', fixture('mismatch.md'),
                     in_sec_bert('unknown-tab.md', tmp_path)]) == 1
    out = capsys.readouterr().out
    assert '    MISMATCH (from the book\'s table, exact)' in out
    assert "    NOT RUN: unknown tab 'mxnett'" in out


def test_check_text_json_for_scripts(capsys):
    assert cli.main(['check-text', '--json', fixture('old-0.17.md')]) == 0
    [report] = json.loads(capsys.readouterr().out)
    assert report['summary']['matched'] == 2 and report['ok']
    assert report['names_0_17'][0].startswith('d2l.EncoderBlock')
    assert [c['status'] for c in report['cells']] == ['ran'] * 4


def test_check_text_missing_file_exits_2_before_running_any(capsys,
                                                            tmp_path):
    missing = str(tmp_path / 'nowhere.md')
    assert run(['check-text', fixture('bilingual.md'), missing]) == 2
    out, err = capsys.readouterr()
    assert out == ''
    assert err == (f"d2l-bert check-text: error: argument FILE: no such "
                   f"file: '{missing}'\n")


def test_check_text_malformed_notebook_is_one_line_and_exit_2(capsys,
                                                              tmp_path):
    path = tmp_path / 'broken.ipynb'
    path.write_text('{"cells": [')
    assert cli.main(['check-text', str(path)]) == 2
    assert capsys.readouterr().err == (
        f'd2l-bert check-text: error: {path} is not a notebook: Expecting '
        'value: line 1 column 12 (char 11)\n')


@NO_GPU
@pytest.mark.parametrize('command', ['chapter', 'check-text'])
def test_a_gpu_on_a_machine_without_one_is_one_line_and_exit_2(
        capsys, command):
    argv = [command, '--ctx', 'gpu:0']
    if command == 'check-text':
        argv.append(fixture('bilingual.md'))
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith(f"d2l-bert {command}: error: --devices gpu:0: "
                             "device 'gpu:0' is not available")


def test_notebook_dir_prefers_the_environment(monkeypatch, tmp_path):
    (tmp_path / 'bert.ipynb').write_text('{}')
    monkeypatch.setenv(chapter.NOTEBOOKS_ENV, str(tmp_path))
    assert chapter.notebook_dir() == str(tmp_path)


def test_notebook_dir_of_the_checkout_holds_bert_ipynb(monkeypatch):
    monkeypatch.delenv(chapter.NOTEBOOKS_ENV, raising=False)
    folder = chapter.notebook_dir()
    assert os.path.isfile(os.path.join(folder, 'bert.ipynb'))


def test_python_m_d2l_bert_chapter_prints_the_books_shapes():
    # one OpenMP thread: on a CI machine whose cores are shared, MXNet's
    # spinning threads slow every operator many times over
    env = {**os.environ, presets.SMALL_ENV: '1', 'OMP_NUM_THREADS': '1'}
    done = subprocess.run([sys.executable, '-m', 'd2l_bert', 'chapter'],
                          capture_output=True, text=True, env=env,
                          timeout=600)
    lines = done.stdout.splitlines()
    assert done.returncode == 0, done.stdout + done.stderr
    # first what MXNet was told to use, then the sections
    assert lines[0].startswith('CPU threads: 1 (OMP_NUM_THREADS from the '
                               'environment')
    assert lines[1].startswith('OpenMP idle threads: ')
    assert lines[2].startswith('OpenBLAS kernels: ')
    assert lines[3] == 'sec_bert (bert.ipynb, small sizes)'
    for final, shape in [('encoded_X.shape', '(2, 8, 768)'),
                         ('mlm_Y_hat.shape', '(2, 3, 10000)'),
                         ('mlm_l.shape', '(6,)'),
                         ('nsp_Y_hat.shape', '(2, 2)'),
                         ('nsp_l.shape', '(2,)')]:
        assert any(final in line and line.endswith(
            f'prints {shape}  |  book {shape}  ok') for line in lines), final
    assert lines[-1].startswith('chapter: ')
    assert ' 0 MISMATCH' in lines[-1] and ' 0 error(s)' in lines[-1]


def test_chapter_runs_only_the_sections_asked_for(capsys):
    assert cli.main(['chapter', '--section', 'sec_bert']) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith('CPU threads: ')
    assert lines[1].startswith('OpenMP idle threads: ')
    assert lines[2].startswith('OpenBLAS kernels: ')
    lines = lines[3:]
    assert lines[0] == 'sec_bert (bert.ipynb)'
    assert lines[1].split() == ['cell', '6', 'encoded_X.shape', 'prints',
                                '(2,', '8,', '768)', '|', 'book', '(2,',
                                '8,', '768)', 'ok']
    assert lines[-1].startswith('chapter: 1 section(s), 13 cells, 0 error(s)'
                                '; 5 documented outputs: 5 ok, 0 MISMATCH, '
                                '0 shown (')


def test_pretrain_then_encode_run_from_a_fresh_process(tmp_path):
    # In a new interpreter nothing but the command itself has turned on
    # MXNet's NumPy semantics (the tests' conftest does, for in-process
    # runs); two tiny steps, then the saved model encodes a text
    from helpers import write_small_corpus
    corpus_dir = write_small_corpus(tmp_path / 'corpus')
    out = str(tmp_path / 'model')
    env = dict(os.environ, OMP_NUM_THREADS='1')
    done = subprocess.run(
        [sys.executable, '-m', 'd2l_bert', 'pretrain', '--corpus',
         corpus_dir, '--steps', '2', '--out', out, '--batch-size', '16',
         '--num-hiddens', '16', '--ffn-num-hiddens', '16', '--num-heads',
         '2'],
        capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r'^MLM loss \d+\.\d{3}, NSP loss \d+\.\d{3}$',
                     done.stdout, re.M), done.stdout
    done = subprocess.run(
        [sys.executable, '-m', 'd2l_bert', 'encode', '--model', out,
         '--json', 'the of'],
        capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    encoded = json.loads(done.stdout)
    assert encoded['tokens'] == ['<cls>', 'the', 'of', '<sep>']
    assert [len(v) for v in encoded['encoded']] == [16] * 4
