"""The command line's one vocabulary (d2l_bert/cli/_args.py): the same
device option in every command, help and defaults written one way, and
the validators."""
import argparse
import os
import subprocess
import sys

import pytest

from d2l_bert import cli
from d2l_bert.cli import _args


def subparsers():
    parser = cli.build_parser()
    [action] = [a for a in parser._actions
                if isinstance(a, argparse._SubParsersAction)]
    return action.choices


def options(parser):
    return [a for a in parser._actions
            if a.option_strings and a.dest != 'help'
            and a.help is not argparse.SUPPRESS]


def test_every_command_but_launch_has_one_devices_option_with_its_alias():
    for name, parser in subparsers().items():
        devices = [a for a in parser._actions if a.dest == 'devices']
        if name == 'launch':  # each worker's command chooses its own
            assert devices == []
            continue
        # --devices in --help; --ctx, the older spelling, accepted unshown
        action, alias = devices
        assert action.option_strings == ['--devices'], name
        assert alias.option_strings == ['--ctx'], name
        assert alias.help == argparse.SUPPRESS, name
        assert action.metavar == 'DEVICES' and \
            action.type is alias.type is _args.devices_text, name
        assert _args.DEVICES_VALUES in action.help, name
        assert '--ctx' not in parser.format_help(), name


def test_every_option_has_help_and_its_default_written_one_way():
    for name, parser in subparsers().items():
        formatter = parser._get_formatter()
        for action in options(parser):
            text = formatter._expand_help(action)
            where = f'{name} {action.option_strings[0]}'
            assert len(text) > 10, where
            assert '(default ' not in text and 'default:' not in \
                text.replace('(default: ', ''), where
            if action.default not in (None, False, []):
                assert '(default: ' in text, where


def test_pretrain_help_explains_the_model_sizes(capsys):
    with pytest.raises(SystemExit):
        cli.main(['pretrain', '--help'])
    out = ' '.join(capsys.readouterr().out.split())
    for line in ["--num-hiddens H num_hiddens: the size of each token's "
                 'vector in every block (default: 128)',
                 '--ffn-num-hiddens F ffn_num_hiddens: the hidden size of '
                 "each block's position-wise feed-forward network "
                 '(default: 256)',
                 '--num-heads N num_heads: attention heads of each block; '
                 'they must divide --num-hiddens (default: 2)',
                 '--num-blks N num_blks: transformer encoder blocks '
                 '(default: 2)',
                 '--dropout P dropout: the probability that dropout zeroes '
                 'a value while training (default: 0.2)']:
        assert line in out


@pytest.mark.parametrize('check, good, bad', [
    (_args.positive_int, [('1', 1), ('512', 512)], ['0', '-1', '2.5', 'x']),
    (_args.non_negative_int, [('0', 0)], ['-1', 'x']),
    (_args.positive_float, [('1e-4', 1e-4)], ['0', '-1', 'inf', 'x']),
    (_args.rate, [('0', 0.0), ('0.2', 0.2)], ['1', '-0.1', 'nan']),
    (_args.seconds, [('0', 0.0), ('1.5', 1.5), ('604800', 604800.0)],
     ['-1', 'inf', 'soon', '604801', '1e10']),
    (_args.port, [('9091', 9091)], ['0', '65536', 'http']),
    (_args.job_timeout, [('3', 3.0), ('12.5', 12.5), ('3600', 3600.0)],
     ['0', '2.9', '3601', 'nan', '-inf', 'inf', '1e400', 'soon']),
    (_args.devices_text, [('CPU', 'cpu'), ('cpu:0, cpu:1', 'cpu:0,cpu:1'),
                          ('all-gpus', 'all-gpus'), ('gpu:3', 'gpu:3')],
     ['tpu', 'cpu:x', 'cpu,cpu', '', 'all-gpus,cpu', 'cpu:256',
      'cpu:0,gpu:99999999999999999999']),
])
def test_validators_take_what_they_name_and_refuse_the_rest(check, good,
                                                            bad):
    for text, value in good:
        assert check(text) == value
    for text in bad:
        with pytest.raises(argparse.ArgumentTypeError,
                           match=f'got {text!r}'):
            check(text)


def test_the_timeout_of_a_job_says_the_range_the_launcher_takes():
    # one range, from the hosts file's module, in the message and the
    # launcher's own check
    from d2l_bert.dist import hosts_file
    for text in ('2', '4000'):
        with pytest.raises(argparse.ArgumentTypeError) as e:
            _args.job_timeout(text)
        assert str(e.value) == (
            'must be a number of seconds from 3 to 3600 (how long a machine '
            f"of --hosts may be silent), got '{text}'")
    for value in (hosts_file.MIN_TIMEOUT, hosts_file.MAX_TIMEOUT):
        assert hosts_file.check_timeout(value) == value
        assert _args.job_timeout(str(value)) == value


def test_a_hosts_file_must_be_a_regular_file(tmp_path):
    fifo = tmp_path / 'fifo'
    os.mkfifo(fifo)
    (tmp_path / 'hosts.txt').write_text('10.0.0.1\n')
    assert _args.regular_file(str(tmp_path / 'hosts.txt'))
    for path, kind in ((str(fifo), 'a FIFO (a named pipe)'),
                       (os.devnull, 'a character device')):
        with pytest.raises(argparse.ArgumentTypeError) as e:
            _args.regular_file(path)
        assert str(e.value) == f'{path!r} is {kind}, not a regular file'


def test_an_error_is_one_line_whatever_the_names_it_holds():
    # a file named with a newline, an argument with a terminal's escape
    assert _args.one_line("--hosts h\nx line 1: 'a\tb' \x1b[31m é") == (
        "--hosts h\\nx line 1: 'a\\tb' \\x1b[31m é")


def test_an_os_error_is_its_file_and_reason_never_a_bare_errno():
    error = FileNotFoundError(2, 'No such file or directory', 'texts.txt')
    assert _args.os_error(error) == 'texts.txt: No such file or directory'
    assert _args.os_error(OSError('disk full')) == 'disk full'
    assert _args.os_error(OSError()) == 'OSError'


def test_a_run_that_fails_on_a_file_is_one_line_and_exit_1(
        capsys, monkeypatch):
    from d2l_bert.cli import chapter

    def unreadable():
        raise PermissionError(13, 'Permission denied', 'notebooks')
    monkeypatch.setattr(chapter, 'notebook_dir', unreadable)
    assert cli.main(['chapter']) == 1
    assert capsys.readouterr().err == (
        'd2l-bert chapter: error: notebooks: Permission denied\n')


def test_library_spelling_becomes_the_options():
    assert _args.in_options(
        "max_len=8 is too small; use max_len >= 12; corpus='x'") == \
        "--max-len 8 is too small; use --max-len >= 12; --corpus 'x'"
    assert _args.plural(1, 'step') == '1 step'
    assert _args.plural(1200, 'step') == '1,200 steps'



def test_checking_cpu_devices_imports_no_mxnet():
    # check-text's cells run in a child process: its own process checks
    # a CPU without the seconds MXNet's import takes, and a GPU with it
    code = ('import sys; from d2l_bert.cli import _args\n'
            "_args.check_devices('cpu:1', 'check-text')\n"
            "print('mxnet' in sys.modules)\n"
            'try:\n'
            "    _args.check_devices('gpu:0', 'check-text')\n"
            'except _args.UsageError:\n'
            '    pass  # no GPU here\n'
            "print('mxnet' in sys.modules)\n")
    done = subprocess.run([sys.executable, '-c', code], capture_output=True,
                          text=True, timeout=120)
    assert (done.returncode, done.stdout) == (0, 'False\nTrue\n'), \
        done.stderr
