"""What a command needs before it runs: MXNet 1.9.1 and d2l 1.0.3.

``pip install d2l-bert`` (or ``pip install -e .``) installs the package
and the libraries it imports, but not MXNet or d2l: their own pins
(``numpy<2``, ``numpy==1.23.5``...) would replace what the environment
has, or have no wheels for today's Pythons.  So the first command run
there adds them as a notebook's set-up cell does
(`d2l_bert.chapter.hosted`): with ``--no-deps``, every installed
package held at its version, MXNet's NumPy hook written, and one line
that says what was added.  Where that cannot be done (no network, pip
refusing an environment it does not manage), the command ends in one
line that says what to run.
"""
import importlib.util
import sys
import time

from ._args import RunError, one_line

#: What to run by hand where the command cannot add them itself
BY_HAND = ('install them with `python -m pip install --no-deps '
           'mxnet==1.9.1 d2l==1.0.3` (then run the command again), or '
           'set up a checkout with `python3 run.py setup` (README.md)')


def missing():
    """The requirements of `hosted.NO_DEPS` and `hosted.NEEDS` whose
    modules do not import in this Python."""
    from ..chapter.hosted import NEEDS, NO_DEPS
    return [req for module, req in NO_DEPS + NEEDS
            if importlib.util.find_spec(module) is None]


def ensure_mxnet(prog):
    """Make ``import mxnet`` and ``import d2l`` work in this process,
    adding what is missing and saying so in one line on standard error.

    `mxnet` itself is not imported here: a process of a parameter-server
    job starts its role when it imports `mxnet`, which the command does.

    Raises
    ------
    RunError
        If pip cannot add them, if an installed package would change, or
        if the hook MXNet needs with this NumPy cannot be written.
    """
    from ..chapter import hosted
    needed = missing()
    start = time.time()
    try:
        if needed:
            print(f'{prog}: this Python ({sys.executable}) lacks what the '
                  f'chapter runs on; adding {", ".join(needed)}, changing '
                  'no installed package...', file=sys.stderr, flush=True)
            _, wrote = hosted.add_missing(hosted.versions())
            print(f'{prog}: added {", ".join(needed)} in '
                  f'{time.time() - start:.0f} s', file=sys.stderr,
                  flush=True)
        else:
            wrote = hosted.prepare_mxnet()
    except hosted.ChangedPackages as e:
        raise RunError(f'adding {", ".join(needed)} changed installed '
                       f'packages: {", ".join(e.changed)}') from None
    except RuntimeError as e:
        raise RunError(f'could not add {", ".join(needed)}: '
                       f'{_last_line(e)}; {BY_HAND}') from None
    except OSError as e:  # a site-packages this user may not write
        raise RunError(f'cannot write the hook that lets MXNet import with '
                       f'this NumPy: {one_line(str(e))}; {BY_HAND}') from None
    if wrote:
        from ..mxnet_compat import pth_path
        print(f'{prog}: wrote {pth_path()}, so that MXNet 1.9.1 imports '
              'with this NumPy', file=sys.stderr, flush=True)


def _last_line(error):
    """The last non-empty line of what pip said in `error`."""
    lines = [line for line in str(error).splitlines() if line.strip()]
    return lines[-1].strip() if lines else 'pip failed'
