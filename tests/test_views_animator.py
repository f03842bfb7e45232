"""`PacedAnimator`: d2l's `Animator` with the figure shown at most once
every `interval` seconds; every point is on the axes at once, so the
figure the inline backend shows at the end of the cell is d2l's."""
import matplotlib
import pytest

from d2l_bert.views import animator as A

matplotlib.use('agg')


@pytest.fixture
def shown(monkeypatch):
    """The figures `PacedAnimator` shows, and a clock it reads."""
    calls, clock = [], [100.0]
    monkeypatch.setattr(A.display, 'display', lambda fig: calls.append(fig))
    monkeypatch.setattr(A.display, 'clear_output', lambda wait: None)
    monkeypatch.setattr(A.time, 'monotonic', lambda: clock[0])
    return calls, clock


def lines(animator):
    return [(list(line.get_xdata()), list(line.get_ydata()))
            for line in animator.axes[0].get_lines()]


def test_the_figure_is_shown_once_an_interval_and_every_point_drawn(
        shown):
    calls, clock = shown
    d2l = A.d2l   # whose `display` is the same IPython module, silenced
    paced = A.PacedAnimator(xlabel='step', xlim=[1, 10], legend=['a', 'b'])
    book = d2l.Animator(xlabel='step', xlim=[1, 10], legend=['a', 'b'])
    shown_at = []
    for step in range(1, 11):
        before = len(calls)
        paced.add(step, (1.0 / step, 0.5))
        if len(calls) > before:
            shown_at.append(step)
        book.add(step, (1.0 / step, 0.5))
        clock[0] += 0.7          # a step of 0.7 s; interval 2 s
    assert shown_at == [1, 4, 7, 10]
    assert lines(paced) == lines(book)
    assert lines(paced)[0][1] == pytest.approx([1.0 / s for s in range(1, 11)],
                                               abs=1e-12)
    assert paced.axes[0].get_xlim() == book.axes[0].get_xlim() == (1, 10)
    assert paced.axes[0].get_ylim() == book.axes[0].get_ylim()
    d2l.plt.close('all')


def test_a_point_with_none_is_left_out_as_d2l_does(shown):
    paced = A.PacedAnimator(legend=['train', 'test'])
    paced.add(1, (0.5, None))
    paced.add(2, (0.4, 0.9))
    assert paced.X == [[1, 2], [2]] and paced.Y == [[0.5, 0.4], [0.9]]
    A.d2l.plt.close('all')
