"""Install d2l-bert: ``pip install -e .`` (see README.md for the full set-up).

The package asks only for the libraries it imports, unpinned, so that
``pip install`` keeps what an environment has (a hosted notebook's NumPy,
pandas...).  The versions are pinned in `requirements/`: `PINS` below are
the direct ones, which `requirements/lock.py` resolves into the lock
files, one per supported Python, that `run.py` installs so that a fresh
machine resolves exactly the same versions every time.  MXNet 1.9.1 and
d2l 1.0.3 are installed by `run.py` or by a notebook's set-up cell
(`d2l_bert/chapter/hosted.py`), on NumPy 2 without their own pins.
"""
import ast
import sys

# The Pythons d2l-bert installs on, the one place they are written
# (`run.py` and `requirements/lock.py` read this line).  3.8 to 3.11 get
# the book's exact environment (NumPy 1.23.5, d2l 1.0.3's own pins); 3.12
# and later get today's NumPy 2, with MXNet 1.9.1 and d2l 1.0.3 installed
# without their pins (`requirements/no-deps.txt`) and the few NumPy names
# MXNet still reads given back by `d2l_bert/mxnet_compat.py`.  Each has a
# lock file `requirements/pyXY.txt`.
SUPPORTED = ((3, 8), (3, 9), (3, 10), (3, 11), (3, 12), (3, 13), (3, 14))
FIRST, LAST = SUPPORTED[0], SUPPORTED[-1]
RANGE = f'{FIRST[0]}.{FIRST[1]} to {LAST[0]}.{LAST[1]}'

if not FIRST <= sys.version_info[:2] <= LAST:
    sys.exit(
        f"d2l-bert installs on Python {RANGE}; this is Python "
        f"{sys.version_info[0]}.{sys.version_info[1]}, for which it has no "
        "tested set of versions (requirements/pyXY.txt). Use Python 3.13 "
        "or 3.11 and follow README.md: `python3.13 run.py chapter`.")

from setuptools import find_packages, setup  # noqa: E402  (after the check)

#: Environment markers: the book's environment, and Python 3.12 and later
BOOK = 'python_version < "3.12"'
NEW = 'python_version >= "3.12"'

#: The direct pins the lock files resolve (not the package's metadata)
PINS = [
    # Python 3.8 to 3.11: the book's versions
    f'mxnet==1.9.1; {BOOK}',
    f'numpy==1.23.5; {BOOK}',  # MXNet 1.9.1 reads names 1.24 removed
    f'd2l==1.0.3; {BOOK}',
    f'matplotlib==3.7.2; {BOOK}',  # the version d2l 1.0.3 pins
    f'numba==0.58.1; {BOOK}',  # the last numba for Python 3.8
    f'tokenizers==0.20.3; {BOOK}',
    # Python 3.12 and later: NumPy 2.  MXNet 1.9.1 and d2l 1.0.3 pin
    # versions that have no wheels there (numpy<2, numpy==1.23.5,
    # pandas==2.0.3...), so run.py installs them with --no-deps from
    # requirements/no-deps.txt; what they import is listed here
    f'numpy==2.5.5; {NEW}',
    f'setuptools==84.2.1; {NEW}',  # its shim provides distutils for MXNet
    f'requests==2.32.5; {NEW}',  # MXNet and d2l
    f'pandas==3.1.1; {NEW}',  # d2l
    f'matplotlib==3.11.2; {NEW}',
    f'matplotlib-inline==0.2.2; {NEW}',
    f'jupyter==1.1.1; {NEW}',  # d2l declares it; runs the notebooks
    f'numba==0.68.1; {NEW}',
    # numba's `np.dot` calls SciPy's BLAS (the compiled attention); d2l
    # declares SciPy too
    f'scipy==1.18.1; {NEW}',
    f'tokenizers==0.23.3; {NEW}',  # 0.20.3 has no wheels for 3.14
    # every Python
    'tqdm==4.67.1',
    # read Hugging Face BERT checkpoints (weights, WordPiece) without torch
    'safetensors==0.5.3',
    # reads notebook editions (`d2l-bert check-text FILE.ipynb`, chapter)
    'nbformat==5.10.4',
    # pandas' parquet engine: an edition of its own that reads WikiText-2
    # from a parquet file gets the stand-in in that format (the checker)
    f'pyarrow==17.0.0; {BOOK}',  # the last pyarrow for Python 3.8
    f'pyarrow==22.0.0; {NEW}',
]

EXTRA_PINS = {
    'test': [
        'pytest==8.3.5',
        # `run.py test` runs the suite in a process a core
        'pytest-xdist==3.6.1',
        # a test that hangs fails with every thread's stack (pytest.ini)
        'pytest-timeout==2.4.0',
        'nbclient==0.10.1',
        'ipykernel==6.29.5',
    ],
    'docs': [
        # the last Sphinx that runs on Python 3.8; it needs `imghdr`,
        # which Python 3.13 removed
        f'sphinx==7.1.2; {BOOK}',
        f'myst-parser==3.0.1; {BOOK}',
        f'sphinx==8.1.3; {NEW}',
        f'myst-parser==4.0.1; {NEW}',
    ],
}



def hosted_names(*names):
    """Top-level constants of `d2l_bert/chapter/hosted.py`, read without
    importing the package: the repository, what the chapter imports."""
    with open('d2l_bert/chapter/hosted.py', encoding='utf-8') as f:
        tree = ast.parse(f.read())
    return {node.targets[0].id: ast.literal_eval(node.value)
            for node in tree.body if isinstance(node, ast.Assign)
            and getattr(node.targets[0], 'id', None) in names}


HOSTED = hosted_names('REPOSITORY', 'NEEDS')
#: What the package asks of pip: the libraries the chapter imports,
#: unpinned; setuptools only where Python lacks `distutils`
INSTALL_REQUIRES = [dist + (f'; {NEW}' if dist == 'setuptools' else '')
                    for _, dist in HOSTED['NEEDS']]
#: The extras, unpinned as well
EXTRAS = {extra: sorted({pin.split('==')[0] for pin in pins})
          for extra, pins in EXTRA_PINS.items()}

with open('README.md', encoding='utf-8') as f:
    README = f.read()

setup(
    name='d2l-bert',
    version='0.1.0',
    description=('The BERT chapter of Dive into Deep Learning as a tested '
                 'MXNet/Gluon package'),
    long_description=README,
    long_description_content_type='text/markdown',
    url=HOSTED['REPOSITORY'],
    # The notebooks are the package's own edition of the chapter, which
    # `d2l-bert chapter` runs: a regular install copies them into
    # d2l_bert/notebooks/ (an editable one finds them in the checkout)
    packages=find_packages(include=['d2l_bert', 'd2l_bert.*'])
    + ['d2l_bert.notebooks'],
    package_dir={'d2l_bert.notebooks': 'notebooks'},
    include_package_data=True,
    package_data={'d2l_bert': ['data/*', 'data/embedded/*', 'data/**/*'],
                  'd2l_bert.notebooks': ['*.ipynb']},
    python_requires=f'>={FIRST[0]}.{FIRST[1]},<{LAST[0]}.{LAST[1] + 1}',
    install_requires=INSTALL_REQUIRES,
    extras_require=EXTRAS,
    entry_points={'console_scripts': ['d2l-bert = d2l_bert.cli:main']},
    classifiers=[f'Programming Language :: Python :: {major}.{minor}'
                 for major, minor in SUPPORTED],
)
