"""A simulated hosted platform for `bench_notebooks.py --platform`: the
platform of the hosted tests (`tests/hosted_platforms.Platform`: the
platform's Python outside a venv, its pip and packages, its kernel), and
a wheel of this checkout for the notebooks' set-up cell to install.

Each notebook then runs on it as on a new runtime: its set-up cell
installs d2l-bert from the wheel and MXNet and d2l from PyPI, with no
settings file of this machine (its local indexes), and the platform's
`reset` uninstalls what it added.
"""
import os
import sys

from _common import PRESETS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, 'tests'))
import hosted_platforms  # noqa: E402

PLATFORMS = hosted_platforms.PLATFORMS


def make(name, folder, published=False):
    """The platform `name` made in `folder`, with its `wheel`; one line
    and exit 1 where it cannot be made."""
    try:
        platform = hosted_platforms.Platform(name, folder, published)
        platform.wheel = hosted_platforms.build_wheel(folder)
    except (hosted_platforms.NoPython, RuntimeError) as e:
        sys.exit(f'bench_notebooks.py: error: --platform {name}: '
                 f'{str(e).splitlines()[0]}')
    return platform


def env(platform):
    """What a notebook's kernel gets beyond a new runtime's: the wheel as
    the set-up cell's source, the platform's kernels and its image's
    variables, and pip without this machine's settings files."""
    return {PRESETS.SOURCE_ENV: platform.wheel,
            'JUPYTER_PATH': platform.jupyter, 'PIP_CONFIG_FILE': os.devnull,
            **platform.start_env}
