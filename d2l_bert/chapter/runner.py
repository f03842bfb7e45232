"""Run a chapter's code cells in order, in one namespace, as a notebook would.

`d2l-bert chapter` and `d2l-bert check-text` both stand on this module.
Each cell is executed in a namespace shared with the cells before it; the
value of a final expression is displayed with `repr`, as IPython does, and
whatever the cell prints is captured (`output.CappedOutput`), figures
counted (`display_capture`).  A failing cell is reported with the last
line of its error (``sys.exit()`` too), and the next cells still run.

`Runner` puts together what the other modules of this folder hold:

- the namespace's `d2l` (`d2l_shim.D2LShim`): this package's objects
  first, then the real d2l 1.0.3, and the edition's own ``#@save``
  definitions (`own_definitions`);
- the names and keywords of d2l's 0.17 releases (`names_0_17`);
- the data and training hooks (`data_hooks.DataHooks`), which at small
  sizes rewrite each cell (`small_sizes.SmallSizes`);
- while a cell runs, Parameters that cells written for MXNet 2.0's Gluon
  assign as block attributes are entered in their blocks (`gluon2`).
"""
import ast
import builtins
import contextlib
import functools
import sys
import time
import traceback
import types
import weakref
from dataclasses import dataclass, field

from . import gluon2
from .d2l_shim import D2LPackage, D2LShim, cell_import
from .data_hooks import DataHooks
from .display_capture import capture_display, close_figures, figure_count
from .names_0_17 import ADAPTER_0_17, adapt_0_17_calls, with_0_17_keywords
from .output import CappedOutput
from .own_definitions import saved_names
from .small_sizes import seed_small_run, small_wikitext_stand_in
from ..views.pyplot import settle_backend


@dataclass
class CellResult:
    """What running one cell gave.

    Attributes
    ----------
    status : str
        ``'ran'`` or ``'failed'``.
    output : str
        Printed text, then the `repr` of a final expression's value.
    error : str or None
        Last line of the error (``'NameError: name ...'``) if failed.
    traceback : str or None
        The full traceback if failed.
    seconds : float
        Wall-clock time of the cell.
    figures : int
        Matplotlib figures the cell displayed.
    skipped_lines : list of str
        IPython magics and shell lines (``%...``, ``!...``) not run.
    notes : list of str
        How the cell was run, when that is worth saying (in a new process,
        see `editions.child`).
    """
    status: str
    output: str = ''
    error: str = None
    traceback: str = None
    seconds: float = 0.0
    figures: int = 0
    skipped_lines: list = field(default_factory=list)
    notes: list = field(default_factory=list)

    @property
    def ran(self):
        return self.status == 'ran'


class Runner:
    """Execute cells in one namespace with a `d2l` shim, as a notebook.

    Parameters
    ----------
    ctx : mxnet.Context, optional
        Run every cell under ``with ctx:`` so arrays and parameters that a
        cell creates without naming a device land there.
    hooks : DataHooks, optional
        Data and training hooks (default: `DataHooks()`).

    Examples
    --------
    >>> runner = Runner()
    >>> runner.run('x = 2\\nprint(x)\\nx + 1').output
    '2\\n3\\n'
    """

    _count = 0  # runners made, for unique module names

    def __init__(self, ctx=None, hooks=None):
        settle_backend()
        self.ctx = ctx
        self.hooks = hooks if hooks is not None else DataHooks()
        self.d2l = D2LShim(self.hooks.overrides(), self.hooks.used)
        cell_builtins = dict(vars(builtins))
        cell_builtins['__import__'] = functools.partial(
            cell_import, D2LPackage(self.d2l))
        # The namespace is a registered module's, so that pickle finds the
        # classes cells define (the book's `SNLIBERTDataset` hands its
        # methods to a `multiprocessing.Pool`)
        Runner._count += 1
        module = types.ModuleType(f'__d2l_bert_cells_{Runner._count}__')
        sys.modules[module.__name__] = module
        # and only while the runner lives: the namespace holds whatever
        # the cells made (sec_bert's models, 150 MB a run)
        weakref.finalize(self, sys.modules.pop, module.__name__, None)
        self.namespace = vars(module)
        self.namespace.update({'__builtins__': cell_builtins,
                               'd2l': self.d2l,
                               ADAPTER_0_17: with_0_17_keywords})
        self.hooks.namespace = self.namespace
        self.count = 0
        if self.hooks.small:
            seed_small_run()

    def run(self, source):
        """Run one cell; return its `CellResult`."""
        self.count += 1
        source, skipped = _drop_magics(source)
        start = time.perf_counter()
        out = CappedOutput()
        figures = []
        try:
            body, last = self._compile(source)
            with contextlib.ExitStack() as stack:
                stack.enter_context(contextlib.redirect_stdout(out))
                stack.enter_context(capture_display(out, figures))
                if self.ctx is not None:
                    stack.enter_context(self.ctx)
                if self.hooks.small:
                    stack.enter_context(small_wikitext_stand_in())
                stack.enter_context(
                    gluon2.parameters_as_attributes(self.hooks.used))
                # the edition's ``#@save`` definitions, made or not
                stack.callback(self.d2l.save, saved_names(source),
                               self.namespace)
                exec(body, self.namespace)
                if last is not None:
                    value = eval(last, self.namespace)
                    if value is not None:
                        print(repr(value), file=out)
        # a cell's error is a result, not a crash; so is `sys.exit()`,
        # which must not end the runner's process
        except (Exception, SystemExit) as e:
            return CellResult(
                'failed', out.getvalue(), _last_line(e),
                ''.join(traceback.format_exception(type(e), e,
                                                   e.__traceback__)),
                time.perf_counter() - start, figure_count(figures), skipped)
        finally:
            close_figures()
        return CellResult('ran', out.getvalue(), None, None,
                          time.perf_counter() - start, figure_count(figures),
                          skipped)

    def _compile(self, source):
        name = f'<cell {self.count}>'
        tree = ast.parse(source, name)
        # the 0.17 editions' keyword names, then the hooks' small sizes
        tree = self.hooks.transform(adapt_0_17_calls(tree))
        last = None
        quiet = source.rstrip().endswith(';')
        if tree.body and isinstance(tree.body[-1], ast.Expr) and not quiet:
            last = ast.Expression(tree.body.pop().value)
            last = compile(last, name, 'eval')
        return compile(tree, name, 'exec'), last


def _drop_magics(source):
    kept, skipped = [], []
    for line in source.splitlines():
        if line.lstrip().startswith(('%', '!')):
            skipped.append(line.strip())
        else:
            kept.append(line)
    return '\n'.join(kept) + '\n', skipped


def _last_line(e):
    if isinstance(e, SyntaxError):
        where = f' (line {e.lineno})' if e.lineno else ''
        return f'SyntaxError: {e.msg}{where}'
    lines = traceback.format_exception_only(type(e), e)
    return lines[-1].strip() if lines else type(e).__name__
