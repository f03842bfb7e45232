"""d2l's `Animator`, paced: the curves redrawn in the notebook at most once
a `PacedAnimator.interval`, so that drawing does not take the training's
time.

d2l's `Animator.add` shows the whole figure again after every point, which
in a kernel costs about 0.1 s a call (the figure rendered as SVG and sent
to the page): 5 of the pretraining notebook's 20 s in `train_bert`.
`PacedAnimator` keeps every point and plots it on the figure's axes at
once, but shows the figure only when `interval` has passed since it last
did; at the end of the cell the inline backend shows the figure, every
point drawn, as it does d2l's.  The chapter's kernels use it
(`chapter.hosted.in_kernel`); each notebook's list of differences says so.
"""
import time

from d2l import mxnet as d2l
from IPython import display


class PacedAnimator(d2l.Animator):
    """`d2l.Animator`, showing the figure at most once every `interval`
    seconds (the first point at once).

    Parameters
    ----------
    *args, **kwargs
        As for `d2l.Animator`.
    """

    #: Seconds between two showings of the figure
    interval = 2.0

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.shown = None  # time.monotonic() when last shown

    def add(self, x, y):
        """Add a point to each curve, as `d2l.Animator.add` does; show
        the figure if `interval` has passed since it last was."""
        if not hasattr(y, '__len__'):
            y = [y]
        n = len(y)
        if not hasattr(x, '__len__'):
            x = [x] * n
        if not self.X:
            self.X = [[] for _ in range(n)]
        if not self.Y:
            self.Y = [[] for _ in range(n)]
        for i, (a, b) in enumerate(zip(x, y)):
            if a is not None and b is not None:
                self.X[i].append(a)
                self.Y[i].append(b)
        self.axes[0].cla()
        for x, y, fmt in zip(self.X, self.Y, self.fmts):
            self.axes[0].plot(x, y, fmt)
        self.config_axes()
        now = time.monotonic()
        if self.shown is None or now - self.shown >= self.interval:
            self.shown = now
            display.display(self.fig)
            display.clear_output(wait=True)
