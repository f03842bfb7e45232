"""pyplot's backend, settled before d2l's plotting helpers run."""


def settle_backend():
    """Fix pyplot's backend to Agg, outside an IPython session, before
    any IPython shell exists.

    d2l's plotting helpers (`show_heatmaps`, `Animator`) call
    `d2l.use_svg_display`, which creates an IPython shell; pyplot then
    picks its backend on the first figure and, seeing the shell, imports
    a hook that matplotlib 3.7 and IPython 9 no longer share
    (`backend2gui`).  Picked here, before any shell exists, the backend
    is settled and that hook is never looked for.  Inside a real IPython
    session (a notebook) nothing is changed.
    """
    try:
        from IPython import get_ipython
    except ImportError:
        get_ipython = None
    if get_ipython is not None and get_ipython() is not None:
        return
    import matplotlib.pyplot as plt
    plt.switch_backend('agg')
