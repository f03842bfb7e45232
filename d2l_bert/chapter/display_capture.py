"""Figures and IPython displays of the chapter runner's cells.

Outside a notebook nothing shows a figure: while a cell runs,
`capture_display` makes `IPython.display.display` count the figures it
is given (`figure_count`) and print the `repr` of anything else, and
`clear_output` do nothing; after the cell, `close_figures` closes every
matplotlib figure.  The runner picks matplotlib's backend before the
first cell (`d2l_bert.views.pyplot.settle_backend`).
"""
import contextlib
import sys


@contextlib.contextmanager
def capture_display(out, figures):
    """Make `IPython.display.display` append figures to `figures` and
    print the rest to `out`, and `clear_output` do nothing, for the
    duration of a cell."""
    try:
        from IPython import display as ipy_display
    except ImportError:
        yield
        return

    def display(*objs, **kwargs):
        for obj in objs:
            if type(obj).__name__ == 'Figure':
                figures.append(obj)
            else:
                print(repr(obj), file=out)

    saved = ipy_display.display, ipy_display.clear_output
    ipy_display.display = display
    ipy_display.clear_output = lambda *args, **kwargs: None
    try:
        yield
    finally:
        ipy_display.display, ipy_display.clear_output = saved


def figure_count(figures):
    """How many different figures `figures` holds (one displayed twice,
    as d2l's `Animator` does, is one)."""
    return len({id(f) for f in figures})


def close_figures():
    """Close every matplotlib figure, if pyplot was imported."""
    plt = sys.modules.get('matplotlib.pyplot')
    if plt is not None:
        plt.close('all')
