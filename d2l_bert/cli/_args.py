"""The command line's one vocabulary: shared options, validators, errors.

Every command builds its options from here, so that an option means the
same in each: ``--devices`` (``--ctx`` is its old spelling, still
accepted) takes the same values everywhere, sizes are checked by the
same validators, and each help line ends with its default written one
way, ``(default: 512)``.

A usage error is one line, ``d2l-bert CMD: error: ...``, naming the
option and the value, and exit status 2, whether argparse finds it while
parsing (`Parser.error`) or the command finds it later (`UsageError`,
which `d2l_bert.cli.main` reports).

Nothing here imports `mxnet`: the options are parsed before the process
chooses its threads (`d2l_bert.threads`).
"""
import argparse
import os
import re
import stat
import textwrap
import unicodedata

from ..dist.hosts_file import (MAX_TIMEOUT, MIN_TIMEOUT, HostsError,
                               check_timeout, file_kind, timeout_range)

#: What ``--devices`` takes, in every command
DEVICES_VALUES = ('cpu, cpu:N, gpu, gpu:N, a comma-separated list of them '
                  '(cpu:0,cpu:1) or all-gpus')

_DEVICE = re.compile(r'(cpu|gpu)(:\d+)?$')
#: The largest device number ``--devices`` takes: MXNet keeps a table of
#: every number up to the largest it was given (cpu:10000000 took 2 GB
#: and a minute, cpu:2147483648 never returned)
MAX_DEVICE_NUMBER = 255


class UsageError(Exception):
    """The command line asks for what cannot be done; `cli.main` prints
    ``d2l-bert CMD: error: MESSAGE`` and exits with status 2."""


class RunError(Exception):
    """The run itself failed (a download, a file that cannot be read):
    `cli.main` prints ``d2l-bert CMD: error: MESSAGE``, exit status 1."""


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions and epilogs as written (their examples keep their
    lines); each option's default at the end of its help, as
    ``(default: X)``, unless the help already says it."""

    def _get_help_string(self, action):
        text, default = action.help or '', action.default
        # (`is`: 0 and 0.0 equal False, and are defaults to show)
        if '(default: ' in text or not action.option_strings or \
                default is None or default is False or default == [] or \
                default is argparse.SUPPRESS:
            return text
        return f'{text} (default: %(default)s)'


class Parser(argparse.ArgumentParser):
    """An `ArgumentParser` whose usage errors are one line, exit 2."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault('formatter_class', HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message):
        self.exit(2, f'{self.prog}: error: {one_line(message)}\n')


def one_line(message):
    """`message` with its control characters escaped as `repr` escapes
    them (a newline as ``\\n``): a file name or an argument that holds
    one keeps an error message on one line, and no escape sequence
    reaches the terminal."""
    return ''.join(repr(c)[1:-1] if unicodedata.category(c) == 'Cc' else c
                   for c in str(message))


def examples(*lines, note=None):
    """An epilog: the command lines `lines`, then `note` wrapped."""
    text = 'examples:\n' + '\n'.join(f'  {line}' for line in lines)
    if note:
        text += '\n\n' + textwrap.fill(note, 79)
    return text


# --- validators: argparse `type=` functions --------------------------------

def _number(text, kind):
    try:
        return kind(text)
    except (TypeError, ValueError):
        return None


def positive_int(text):
    """An int of at least 1."""
    return at_least(1)(text)


def at_least(low, why=''):
    """A validator of ints of at least `low` (`why`: the reason, said in
    the message)."""
    def check(text):
        value = _number(text, int)
        if value is None or value < low:
            wanted = 'a positive integer' if low == 1 else \
                f'an integer of at least {low}{why}'
            raise argparse.ArgumentTypeError(f'must be {wanted}, got '
                                             f'{text!r}')
        return value
    check.__name__ = 'positive_int' if low == 1 else f'int>={low}'
    return check


def non_negative_int(text):
    """An int of at least 0."""
    value = _number(text, int)
    if value is None or value < 0:
        raise argparse.ArgumentTypeError(
            f'must be an integer of at least 0, got {text!r}')
    return value


#: The largest seed NumPy's and MXNet's generators take
MAX_SEED = 2**32 - 1

#: How many times the machine's processors a count of workers or
#: threads may be: beyond, the processes only fight over the cores
PER_PROCESSOR = 8


def seed(text):
    """A seed of the random generators, 0 to `MAX_SEED`."""
    value = _number(text, int)
    if value is None or not 0 <= value <= MAX_SEED:
        raise argparse.ArgumentTypeError(
            f'must be an integer from 0 to {MAX_SEED} (2**32 - 1), the '
            f'seeds NumPy and MXNet take, got {text!r}')
    return value


def processors():
    """The processors this process may run on."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:
        return os.cpu_count() or 1


def per_machine(low, what):
    """A validator of a count of `what` (processes or threads), from
    `low` to `PER_PROCESSOR` times the machine's processors."""
    def check(text):
        value = at_least(low)(text)
        high = PER_PROCESSOR * processors()
        if value > high:
            raise argparse.ArgumentTypeError(
                f'must be at most {high} ({PER_PROCESSOR} {what} for each '
                f'of the {processors()} processors of this machine), got '
                f'{text!r}')
        return value
    check.__name__ = f'{what} count'
    return check


#: The options `per_machine` bounds whose values above the processors
#: get a note, by the name they are stored under (not a job's
#: ``--workers``, whose threads the launcher divides among them)
PER_MACHINE = {'num_threads': '--threads', 'worker_threads': '--threads',
               'num_workers': '--num-workers'}


def above_processors(args):
    """Notes (one line each) on the options of `PER_MACHINE` that ask
    for more processes or threads than the machine has processors."""
    notes = []
    for name, flag in PER_MACHINE.items():
        value = getattr(args, name, None)
        if isinstance(value, int) and value > processors():
            notes.append(f'note: {flag} {value} is more than the '
                         f'{processors()} processors of this machine; '
                         'they will share them, and may run slower')
    return notes


#: The units of a size of memory, in powers of 1,024 bytes
SIZE_UNITS = {'': 0, 'K': 1, 'M': 2, 'G': 3, 'T': 4}


def memory_size(text):
    """A size of memory (``4G``, ``1500M``: units of 1,024 bytes), from
    `processes.MIN_MEMORY` to this machine's memory; its bytes."""
    from ..processes import MIN_MEMORY, machine_memory
    from ..runs.memory import size_text
    found = re.fullmatch(r'(\d+(?:\.\d+)?) ?([KMGT]?)(?:i?B)?', text.strip(),
                         re.I)
    value = None if found is None else int(
        float(found.group(1)) * 1024 ** SIZE_UNITS[found.group(2).upper()])
    high = machine_memory() or float('inf')
    if value is None or not MIN_MEMORY <= value <= high:
        most = '' if high == float('inf') else \
            f" to {size_text(high)} (this machine's memory)"
        raise argparse.ArgumentTypeError(
            f'must be a size from {size_text(MIN_MEMORY)}{most}, such as '
            f'4G or 1500M, got {text!r}')
    return value


def process_count(text):
    """A count of processes and threads, from `processes.MIN_PROCESSES`
    to `processes.MAX_PROCESSES`."""
    from ..processes import MAX_PROCESSES, MIN_PROCESSES
    value = _number(text, int)
    if value is None or not MIN_PROCESSES <= value <= MAX_PROCESSES:
        raise argparse.ArgumentTypeError(
            f'must be an integer from {MIN_PROCESSES} to {MAX_PROCESSES}, '
            f'got {text!r}')
    return value


def positive_float(text):
    """A finite number above 0 (a learning rate)."""
    value = _number(text, float)
    if value is None or not 0 < value < float('inf'):
        raise argparse.ArgumentTypeError(
            f'must be a number above 0, got {text!r}')
    return value


#: The largest float32, what MXNet's Adam takes as its step size
FLOAT32_MAX = 3.4028234663852886e38
#: Adam's first step size over its learning rate, with the default betas
#: (0.9, 0.999): ``sqrt(1 - 0.999) / (1 - 0.9)``
ADAM_FIRST_STEP = (1 - 0.999) ** 0.5 / (1 - 0.9)


def learning_rate(text):
    """Adam's learning rate: above 0, and such that the step size of
    the first update is a finite float32 (`FLOAT32_MAX`)."""
    value = positive_float(text)
    high = FLOAT32_MAX / ADAM_FIRST_STEP
    if value > high:
        raise argparse.ArgumentTypeError(
            f"must be at most {high:.3g}, for Adam's first step "
            f'(LR x {ADAM_FIRST_STEP:.3f}) to be a finite float32, got '
            f'{text!r}')
    return value


def rate(text):
    """A probability in [0, 1) (a dropout rate)."""
    value = _number(text, float)
    if value is None or not 0 <= value < 1:
        raise argparse.ArgumentTypeError(
            f'must be a number in [0, 1), got {text!r}')
    return value


#: The longest time limit, in seconds: a week, well below what Python's
#: waits take (``poll`` stops at 2**31 - 1 ms, 24.8 days)
MAX_SECONDS = 7 * 24 * 3600


def seconds(text):
    """A number of seconds from 0 (no limit) to `MAX_SECONDS`."""
    value = _number(text, float)
    if value is None or not 0 <= value <= MAX_SECONDS:
        raise argparse.ArgumentTypeError(
            f'must be a number of seconds from 0 to {MAX_SECONDS} (a '
            f'week; 0 for no limit), got {text!r}')
    return value


def job_timeout(text):
    """``--timeout`` of a job over ssh: the seconds a machine may be
    silent, in the range `d2l_bert.dist.hosts_file.check_timeout` takes."""
    try:
        return check_timeout(_number(text, float))
    except HostsError:
        raise argparse.ArgumentTypeError(
            f'must be {timeout_range()}, got {text!r}') from None


def port(text):
    """A TCP port, 1 to 65535."""
    value = _number(text, int)
    if value is None or not 0 < value < 65536:
        raise argparse.ArgumentTypeError(
            f'must be a port number from 1 to 65535, got {text!r}')
    return value


def existing_file(text):
    """The path of a file that exists and can be read."""
    if not os.path.exists(text):
        raise argparse.ArgumentTypeError(f'no such file: {text!r}')
    if os.path.isdir(text):
        raise argparse.ArgumentTypeError(
            f'{text!r} is a directory, not a file')
    if not os.access(text, os.R_OK):
        raise argparse.ArgumentTypeError(f'cannot read {text!r}: '
                                         'permission denied')
    return text


def regular_file(text):
    """An existing file that is a regular file: not a device, a FIFO or
    a socket, whose reading might never end (``--hosts``)."""
    existing_file(text)
    mode = os.stat(text).st_mode
    if not stat.S_ISREG(mode):
        raise argparse.ArgumentTypeError(
            f'{text!r} is {file_kind(mode)}, not a regular file')
    return text


def devices_text(text):
    """A device list as ``--devices`` takes it (see `DEVICES_VALUES`),
    normalized; checked for its form only, without importing `mxnet`
    (`resolve_devices` checks that the devices exist)."""
    value = str(text).strip().lower()
    parts = [p.strip() for p in value.split(',')]
    if value != 'all-gpus' and not all(_DEVICE.match(p) for p in parts):
        raise argparse.ArgumentTypeError(
            f'must be {DEVICES_VALUES}, got {text!r}')
    if len(set(parts)) != len(parts):
        raise argparse.ArgumentTypeError(
            f'must name each device once, got {text!r}')
    if any(int(p.partition(':')[2] or 0) > MAX_DEVICE_NUMBER
           for p in parts if p != 'all-gpus'):
        raise argparse.ArgumentTypeError(
            f'must number each device from 0 to {MAX_DEVICE_NUMBER}, got '
            f'{text!r}')
    return ','.join(parts)


# --- shared options ---------------------------------------------------------

def add_devices(parser, default, default_text=None, one=False):
    """``--devices`` (alias ``--ctx``): the devices a command runs on.

    Parameters
    ----------
    parser : argparse.ArgumentParser or argument group
    default : str or None
        None: every GPU, else the CPU (`devices.try_all_gpus`).
    default_text : str, optional
        How `--help` says the default, when `default` is None.
    one : bool, default False
        The command runs on one device (`resolve_devices` checks it).
    """
    default_text = default_text or 'every GPU, else the CPU'
    help_text = f'the devices to run on: {DEVICES_VALUES}'
    if one:
        help_text += '; this command runs on one'
    if default is None:
        help_text += f' (default: {default_text})'
    parser.add_argument('--devices', dest='devices', type=devices_text,
                        default=default, metavar='DEVICES', help=help_text)
    # The older spelling, accepted and not shown: one name in --help
    parser.add_argument('--ctx', dest='devices', type=devices_text,
                        default=default, help=argparse.SUPPRESS)


def resolve_devices(text, one=None):
    """The contexts of a ``--devices`` value (None: `devices.try_all_gpus`).

    Parameters
    ----------
    text : str or None
    one : str, optional
        The command, when it runs on one device only.

    Returns
    -------
    list of mxnet.Context

    Raises
    ------
    UsageError
        A device this machine does not have, or several for `one`.
    """
    from ..devices import parse_devices, try_all_gpus
    if text is None:
        devices = try_all_gpus()
    else:
        try:
            devices = parse_devices(text)
        except ValueError as e:
            raise UsageError(f'--devices {text}: {e}') from None
    if one and len(devices) > 1:
        raise _several(text, one, len(devices))
    return devices


def check_devices(text, one=None):
    """Refuse, before a command does any work, a ``--devices`` value that
    `resolve_devices` would refuse (`one`: as there).  Only a GPU needs
    `mxnet`, seconds to import, to be looked for: CPUs are checked by
    their form, and the default cannot fail."""
    parts = text.split(',') if text else []
    if not all(p.startswith('cpu') for p in parts):
        resolve_devices(text, one)
    elif one and len(parts) > 1:
        raise _several(text, one, len(parts))


def _several(text, one, count):
    """The error of `count` devices for the one-device command `one`."""
    return UsageError(f'--devices {text}: {one} runs on one device, got '
                      f'{count}; give one, such as cpu or gpu:0')


def add_threads(parser, help_text):
    """``--threads K``: CPU threads of each process."""
    parser.add_argument('--threads', type=per_machine(1, 'threads'),
                        default=None,
                        metavar='K', dest='num_threads', help=help_text)


def add_job_arguments(parser, workers_help):
    """``--workers``, ``--servers``, ``--hosts``, ``--port`` and
    ``--timeout``: the
    options of a job on MXNet's parameter server, in ``d2l-bert launch``
    and ``d2l-bert pretrain``."""
    parser.add_argument('--workers', type=per_machine(1, 'processes'),
                        default=None,
                        metavar='N', help=workers_help)
    parser.add_argument('--servers', type=per_machine(1, 'processes'),
                        default=None, metavar='S',
                        help='parameter servers, which sum the gradients '
                             '(default: 1; with --hosts, one per machine)')
    parser.add_argument('--hosts', type=regular_file, default=None,
                        metavar='FILE',
                        help='run over ssh on the machines of FILE, one '
                             '[USER@]ADDRESS[:SSH_PORT] a line (see the '
                             'docs\' "Several processes and machines")')
    parser.add_argument('--port', type=port, default=None, metavar='PORT',
                        help="the scheduler's port (default: a free one on "
                             '127.0.0.1; 9091 with --hosts)')
    parser.add_argument('--timeout', type=job_timeout, default=None,
                        metavar='SECONDS',
                        help='with --hosts: stop the job when a machine is '
                             f'silent this long, {MIN_TIMEOUT} to '
                             f'{MAX_TIMEOUT} (default: 30)')


#: Python's spelling of an argument -> the option that sets it
_SPELLINGS = {'corpus': '--corpus', 'max_len': '--max-len',
              'batch_size': '--batch-size', 'num_steps': '--steps',
              'data': '--data', 'num_workers': '--num-workers',
              'learning_rate': '--lr'}


def in_options(message):
    """`message` of a library error in the command line's spelling:
    ``corpus='x'`` becomes ``--corpus 'x'``, ``max_len=8`` ``--max-len
    8``."""
    names = '|'.join(_SPELLINGS)
    message = re.sub(rf'\b({names})=', lambda m: _SPELLINGS[m.group(1)]
                     + ' ', str(message))
    return re.sub(rf'\b({names})(?= [<>]=? )',
                  lambda m: _SPELLINGS[m.group(1)], message)


def os_error(error):
    """One line for an `OSError` of the run: the file and the reason,
    never a bare errno."""
    if error.filename is not None and error.strerror:
        return f'{error.filename}: {error.strerror}'
    return str(error) or type(error).__name__


def option(name):
    """``'batch_size'`` -> ``'--batch-size'``."""
    return '--' + name.replace('_', '-')


def plural(count, noun):
    """``plural(1, 'step')`` -> ``'1 step'``; ``plural(2, 'step')`` ->
    ``'2 steps'``."""
    return f'{count:,} {noun}{"" if count == 1 else "s"}'
