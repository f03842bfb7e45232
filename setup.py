"""Install d2l-bert: ``pip install -e .`` (see README.md for the full set-up).

The direct requirements are pinned here; `requirements/` holds the full
lock files, one per supported Python, that `run.py` installs so that a
fresh machine resolves exactly the same versions every time.
"""
import sys

SUPPORTED = ((3, 8), (3, 11))

if not SUPPORTED[0] <= sys.version_info[:2] <= SUPPORTED[1]:
    sys.exit(
        f"d2l-bert needs Python 3.8 to 3.11; this is Python "
        f"{sys.version_info[0]}.{sys.version_info[1]}. MXNet 1.9.1 and "
        "numpy 1.23.5 publish no wheels for newer Pythons. Install Python "
        "3.11 (pyenv, uv, conda or python.org) and follow README.md: "
        "`python3.11 run.py chapter`.")

from setuptools import find_packages, setup  # noqa: E402  (after the check)

INSTALL_REQUIRES = [
    'mxnet==1.9.1',
    'numpy==1.23.5',  # MXNet 1.9.1 breaks on numpy 1.24 and later
    'd2l==1.0.3',
    'tqdm==4.67.1',
    'matplotlib==3.7.2',  # the version d2l 1.0.3 pins
    # read Hugging Face BERT checkpoints (weights, WordPiece) without torch
    'safetensors==0.5.3',
    'tokenizers==0.20.3',
    # compiles the CPU loops of the fast pretraining step (d2l_bert/fast)
    'numba==0.58.1',  # the last numba for Python 3.8; numpy 1.22 to 1.26
    # reads notebook editions (`d2l-bert check-text FILE.ipynb`, chapter)
    'nbformat==5.10.4',
]

EXTRAS = {
    'test': [
        'pytest==8.3.5',
        'nbclient==0.10.1',
        'ipykernel==6.29.5',
    ],
    'docs': [
        'sphinx==7.1.2',  # the last Sphinx that runs on Python 3.8
        'myst-parser==3.0.1',
    ],
}

with open('README.md', encoding='utf-8') as f:
    README = f.read()

setup(
    name='d2l-bert',
    version='0.1.0',
    description=('The BERT chapter of Dive into Deep Learning as a tested '
                 'MXNet/Gluon package'),
    long_description=README,
    long_description_content_type='text/markdown',
    # The notebooks are the package's own edition of the chapter, which
    # `d2l-bert chapter` runs: a regular install copies them into
    # d2l_bert/notebooks/ (an editable one finds them in the checkout)
    packages=find_packages(include=['d2l_bert', 'd2l_bert.*'])
    + ['d2l_bert.notebooks'],
    package_dir={'d2l_bert.notebooks': 'notebooks'},
    include_package_data=True,
    package_data={'d2l_bert': ['data/*', 'data/embedded/*', 'data/**/*'],
                  'd2l_bert.notebooks': ['*.ipynb']},
    python_requires='>=3.8,<3.12',
    install_requires=INSTALL_REQUIRES,
    extras_require=EXTRAS,
    entry_points={'console_scripts': ['d2l-bert = d2l_bert.cli:main']},
    classifiers=[
        'Programming Language :: Python :: 3.8',
        'Programming Language :: Python :: 3.9',
        'Programming Language :: Python :: 3.10',
        'Programming Language :: Python :: 3.11',
    ],
)
