"""Modules that moved, and the shims that keep their old paths working.

The package was regrouped by what each module does (see ARCHITECTURE.md).
Each old path below is a small module that, when imported, warns with a
`DeprecationWarning` and stands for the new module: ``import
d2l_bert.training`` gives the very module `d2l_bert.runs.pretraining`,
so its names, private ones included, and any patch of them are shared.
The old paths will be removed in the release after 0.1.
"""
import importlib
import runpy
import sys
import warnings

#: Old module path -> new module path
MOVED = {
    'd2l_bert.training': 'd2l_bert.runs.pretraining',
    'd2l_bert.model_files': 'd2l_bert.runs.model_files',
    'd2l_bert.runner': 'd2l_bert.chapter.runner',
    'd2l_bert.book_outputs': 'd2l_bert.chapter.book_outputs',
    'd2l_bert.saved_cells': 'd2l_bert.chapter.saved_cells',
    'd2l_bert.editions': 'd2l_bert.chapter.editions',
    'd2l_bert.files': 'd2l_bert.data.atomic',
    'd2l_bert.hub': 'd2l_bert.data.hub',
    'd2l_bert.corpus': 'd2l_bert.data.corpus',
    'd2l_bert.snli_synthetic': 'd2l_bert.data.snli_synthetic',
    'd2l_bert.distributed': 'd2l_bert.dist.launcher',
    'd2l_bert.data_parallel': 'd2l_bert.dist.workers',
}

#: Submodules of a moved package, imported with it under the old path
SUBMODULES = {
    'd2l_bert.editions': ('cells', 'check', 'child', 'layout', 'markdown',
                          'notebook', 'place', 'rst'),
}


def _message(old):
    return (f'{old} moved to {MOVED[old]}: import it from there '
            f'({old} will be removed in the release after 0.1)')


def alias(old):
    """Warn that `old` moved, and make `old` the new module.

    Called at the top of the module `old`, the shim: the import that ran
    it then returns the new module (as `sys.modules[old]`).
    """
    warnings.warn(_message(old), DeprecationWarning, stacklevel=3)
    module = importlib.import_module(MOVED[old])
    sys.modules[old] = module
    for name in SUBMODULES.get(old, ()):
        sys.modules[f'{old}.{name}'] = importlib.import_module(
            f'{MOVED[old]}.{name}')
    return module


def run_as_main(old):
    """``python -m OLD``: warn, then run the new module as ``__main__``."""
    warnings.warn(_message(old), DeprecationWarning, stacklevel=3)
    runpy.run_module(MOVED[old], run_name='__main__', alter_sys=True)
