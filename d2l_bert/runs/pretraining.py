"""Pretraining beyond the book: resumable, recorded and measured.

The book's `train_bert` (`d2l_bert.book.pretraining`) trains and prints two
lines.  ``d2l-bert pretrain`` and the notebooks' small runs train with
`train_bert_history`, the same loop that also

- returns the loss of every step (`PretrainingHistory`), and plots it as
  the book does, inline in a notebook or into a PNG file;
- saves a checkpoint every few steps (`save_checkpoint`, of
  `d2l_bert.runs.checkpoints`): the parameters, Adam's state, the random
  states and the position in the data, none of it code, so that a
  resumed run (`load_checkpoint`) repeats an uninterrupted one exactly;
- shows a progress bar;
- trains as one of the N workers of a ``dist_sync`` job (``kvstore=``,
  ``d2l-bert pretrain --workers N``), with the numbers of one process
  that has the devices of all the workers (`d2l_bert.dist.workers`).

`evaluate_bert` then measures the masked-token and next-sentence
accuracy on held-out pairs.

Dimension key used in the shape comments:

B: batch size, T: sequence length, H: num_hiddens, V: vocab_size,
P: predicted positions per sequence (``round(0.15 * max_len)``)
"""
import functools
import os
import random
import sys
import time
from collections import namedtuple
from dataclasses import dataclass

import mxnet as mx
import numpy as onp
from mxnet import autograd, gluon, npx

from ..checks import (check_finite_loss, check_finite_parameters,
                      check_inputs, check_positive_int)
from ..dist.workers import (Workers, create_kvstore,
                            share_initial_weights, worker_shards)
from ..data.atomic import atomic_write
from ..presets import PRETRAINING
from . import interrupts
from .checkpoint_meta import DataPosition, set_rng_states
from .checkpoints import load_checkpoint, save_checkpoint
from ..book.pretraining import _get_batch_loss_bert


# ---------------------------------------------------------------------------
# The loop
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class PretrainingSettings:
    """How `train_bert_history` trains, beyond the book's arguments: its
    keyword arguments, each below with its default and what it does."""

    #: Adam's learning rate (the book's 0.01)
    learning_rate: float = PRETRAINING['lr']
    #: 'auto' draws the curves inline in a notebook and nothing
    #: elsewhere; True draws inline; a str saves a PNG there at the end
    plot: object = 'auto'
    #: Show a progress bar (outside notebooks) once training has run for
    #: more than 2 seconds
    progress: bool = True
    #: File to save a checkpoint to every `checkpoint_every` steps and at
    #: the end (None, no checkpoint).  With a checkpoint, MXNet's random
    #: generator is reseeded before each step, so that a resumed run
    #: repeats an uninterrupted one
    checkpoint: object = None
    #: Steps between two checkpoints
    checkpoint_every: int = 10
    #: Continue from `checkpoint` if the file exists
    resume: bool = False
    #: A dict stored in the checkpoint; resuming with another one is an
    #: error
    config: object = None
    #: ``batch_loss(*shards) -> (mlm_ls, nsp_ls, ls)``; None, the book's
    #: `_get_batch_loss_bert` on the net.  ``d2l-bert pretrain`` passes
    #: `d2l_bert.fast.batch_loss(net, loss, vocab_size)`
    batch_loss: object = None
    #: 'dist_sync' or an `mxnet.kvstore.KVStore` trains as a worker of a
    #: ``dist_sync`` job (`d2l_bert.dist.launcher`); None, one process.
    #: Every worker walks the same `train_iter` (made with the same seed)
    #: and trains on its rows of each batch
    #: (`d2l_bert.dist.workers.worker_shards`); the kvstore sums the
    #: gradients of all workers, and every worker takes the same Adam
    #: step.  Worker 0 alone prints, shows the progress bar, plots and
    #: saves the checkpoint; every worker resumes from `checkpoint`.  A
    #: batch with fewer pairs than there are devices in the job is
    #: skipped (one process with several devices skips it too)
    kvstore: object = None

def train_bert_history(train_iter, net, loss, vocab_size, devices,
                       num_steps, **settings):
    """`train_bert`'s loop with checkpoints, returning the per-step losses.

    Prints what `train_bert` prints, and draws the loss curves as it
    does.  ``d2l-bert pretrain`` trains with it.

    Parameters
    ----------
    train_iter : iterable of 7-tuples of ndarray
        ``(tokens_X, segments_X, valid_lens_x, pred_positions_X,
        mlm_weights_X, mlm_Y, nsp_y)`` with shapes ``(B, T)``, ``(B, T)``,
        ``(B,)``, ``(B, P)``, ``(B, P)``, ``(B, P)``, ``(B,)``; walked
        again from the start when exhausted.
    net : BERTModel
        Initialized on every context of `devices`.
    loss : gluon.loss.SoftmaxCELoss
        The loss of both tasks, as for the book's `train_bert`.
    vocab_size : int
        V, the number of classes of the MLM loss.
    devices : list of mxnet.Context
        Each batch is split over them.
    num_steps : int
        Total number of steps (a resumed run counts the steps done
        before).

    Other Parameters
    ----------------
    **settings
        Keyword-only: the fields of `PretrainingSettings` (`learning_rate`,
        `plot`, `progress`, `checkpoint`, `checkpoint_every`, `resume`,
        `config`, `batch_loss`, `kvstore`), which says what each does and
        gives its default.

    Returns
    -------
    PretrainingHistory
        The per-step losses (``.mlm``, ``.nsp``), their means
        (``.mlm_loss``, ``.nsp_loss``) and ``.pairs_per_sec``.
    """
    settings = PretrainingSettings(**settings)
    check_inputs(net)  # the book's blocks in `net` (a twin checks itself)
    run = _PretrainingRun(train_iter, net, loss, vocab_size, devices,
                          num_steps, settings)
    run.start()
    run.train()
    return run.finish()


class _PretrainingRun:
    """One run of `train_bert_history`, in the order it happens: set up
    (`__init__`), resume and seed (`start`), train (`train`: a `_step`
    then `_record` per step), report (`finish`)."""

    def __init__(self, train_iter, net, loss, vocab_size, devices,
                 num_steps, settings):
        self.num_steps = check_positive_int('num_steps', num_steps)
        if settings.resume and settings.checkpoint is None:
            raise ValueError('resume=True needs checkpoint=PATH')
        self.net, self.settings = net, settings
        self.devices = list(devices)
        kvstore = settings.kvstore
        if isinstance(kvstore, str):
            kvstore = create_kvstore(kvstore)
        self.workers = Workers(kvstore)
        # Each of the `num_shards` devices of the job needs a pair of a
        # batch
        self.num_shards = len(self.devices) * self.workers.num_workers
        self.trainer = _make_trainer(net, settings.learning_rate, kvstore)
        self.batch_loss = settings.batch_loss
        if self.batch_loss is None:
            self.batch_loss = functools.partial(_get_batch_loss_bert, net,
                                                loss, vocab_size)
        self.history = PretrainingHistory(self.devices)
        self.data = DataPosition(train_iter)
        self.step, self.mx_seed = 0, None
        self.animator = self.bar = None

    def start(self):
        """Resume from the checkpoint if asked, choose MXNet's seed, and
        open the plot and the progress bar."""
        checkpoint = self.settings.checkpoint
        if self.settings.resume and os.path.exists(checkpoint):
            self._resume(checkpoint)
        if self.mx_seed is None and (checkpoint is not None
                                     or self.workers.num_workers > 1):
            self.mx_seed = random.getrandbits(31)
        if self.workers.num_workers > 1:
            share_initial_weights(self.trainer)
        # Every worker must have resumed from the same step (one that
        # found no checkpoint would train on after the others stopped)
        self.workers.check_same('step to start from (does every worker '
                                'read the same checkpoint?)', self.step)
        plot, leader = self.settings.plot, self.workers.leader
        if leader and (plot is True or (plot == 'auto' and _in_notebook())):
            self.animator = _InlineAnimator(self.num_steps)
        self.bar = _progress_bar(
            self.num_steps, self.step,
            self.settings.progress and self.animator is None and leader)

    def _resume(self, checkpoint):
        meta = load_checkpoint(checkpoint, self.net, self.trainer,
                               self.devices, config=self.settings.config,
                               num_batches=self.data.epoch_length())
        self.step, self.mx_seed = meta['step'], meta['mx_seed']
        self.history = PretrainingHistory.from_dict(meta['history'])
        self.history.devices = [str(d) for d in self.devices]
        # The data position first: replaying the epoch's shuffle moves
        # the random states, which we then set to the checkpoint's
        if meta['data'] is not None:
            self.data.restore(meta['data'], checkpoint)
        set_rng_states(meta['rng'])

    @interrupts.between_steps()
    def train(self):
        """Train until `num_steps`; the progress bar closes in any case,
        the plot too if training fails.  A Ctrl-C ends the current step
        first."""
        try:
            while self.step < self.num_steps:
                interrupts.check()
                self._record(*self._step())
            self._check_finite()
        except BaseException:
            if self.animator is not None:
                self.animator.close(show=False)
            raise
        finally:
            self.bar.close()

    def _step(self):
        """Train on the next batch; return its number of pairs, the MLM
        loss and the NSP loss, and the seconds the step took."""
        workers = self.workers
        batch = self.data.next_batch(min_rows=self.num_shards)
        shards = worker_shards(batch, self.devices, workers.rank,
                               workers.num_workers)
        # Timed from here until all of this step's work is done
        start = time.perf_counter()
        if self.mx_seed is not None:
            mx.random.seed(_step_seed(self.mx_seed, self.step, workers.rank))
        with autograd.record():
            mlm_ls, nsp_ls, ls = self.batch_loss(*shards)
        for l in ls:
            l.backward()
        self.trainer.step(1)
        if not self.history.mlm:    # the run's first update
            check_finite_parameters(self.net.collect_params().values(),
                                    self.settings.learning_rate)
        mlm_l, nsp_l = _mean_losses(workers, mlm_ls, nsp_ls)
        # Reading the losses back waits for the forward pass only.  The
        # book stops its timer there; the backward pass and the update
        # then finish while the next batch is copied, untimed, which
        # overstated the throughput up to 2.5 times: wait for them
        npx.waitall()
        return batch[0].shape[0], mlm_l, nsp_l, time.perf_counter() - start

    def _record(self, num_pairs, mlm_l, nsp_l, seconds):
        """Count a step in the history, the plot and the progress bar, and
        save a checkpoint when one is due."""
        history, settings = self.history, self.settings
        for name, value in (('MLM loss', mlm_l), ('NSP loss', nsp_l)):
            check_finite_loss(name, value, self.step + 1,
                              settings.learning_rate)
        history.seconds += seconds
        history.mlm.append(mlm_l)
        history.nsp.append(nsp_l)
        history.num_pairs += num_pairs
        self.step += 1
        if self.animator is not None:
            self.animator.update(history)
        self.bar.update(1)
        self.bar.set_postfix(mlm=f'{mlm_l:.3f}', nsp=f'{nsp_l:.3f}',
                             refresh=False)
        if settings.checkpoint is not None and self.workers.leader and (
                self.step % settings.checkpoint_every == 0
                or self.step == self.num_steps):
            self._check_finite()
            save_checkpoint(settings.checkpoint, self.net, self.trainer,
                            self.step, history,
                            data_state=self.data.state(),
                            mx_seed=self.mx_seed, config=settings.config)

    def _check_finite(self):
        """Raise a ValueError unless every weight is finite (before they
        are saved)."""
        check_finite_parameters(self.net.collect_params().values(),
                                self.settings.learning_rate, self.step)

    def finish(self):
        """Print the book's two lines, close the plot or save it, and
        return the history (other workers than the leader stay quiet)."""
        history, workers, plot = self.history, self.workers, \
            self.settings.plot
        if not workers.leader:
            return history
        where = str(self.devices) if workers.num_workers == 1 else \
            f'{workers.num_workers} workers x {self.devices}'
        print(f'MLM loss {history.mlm_loss:.3f}, '
              f'NSP loss {history.nsp_loss:.3f}')
        print(f'{history.pairs_per_sec:.1f} sentence pairs/sec on {where}')
        if self.animator is not None:
            self.animator.close()
        if isinstance(plot, (str, os.PathLike)) and plot != 'auto':
            history.plot(plot)
        return history


def _mean_losses(workers, mlm_ls, nsp_ls):
    """The MLM and the NSP loss of a step: the means over the shards of
    every worker, taken in the order of the shards, as one process with
    all the devices of the job takes them."""
    D = len(mlm_ls)
    every = workers.all_gather([float(l) for l in mlm_ls]
                               + [float(l) for l in nsp_ls])
    mlm = [l for losses in every for l in losses[:D]]
    nsp = [l for losses in every for l in losses[D:]]
    return sum(mlm) / len(mlm), sum(nsp) / len(nsp)


def _step_seed(mx_seed, step, rank):
    """MXNet's seed for `step` of worker `rank`: each worker draws other
    dropout masks (one process is worker 0)."""
    return (mx_seed + step + 7919 * rank) % 2**31


def _make_trainer(net, learning_rate, kvstore=None):
    """The book's Adam trainer, its parameters in an order of the model's.

    Given `net.collect_params()`, Gluon's `Trainer` sorts the parameters
    by their global names (``dense0_weight``, ``dense10_weight``, ...),
    which depend on how many blocks the process made before `net`.  The
    optimizer keeps its states by position in that order (and the
    checkpoints of version 1 stored them so), so we sort by path in the
    model (``encoder.blks.0...``) instead.

    With the `kvstore` of a ``dist_sync`` job, the kvstore sums the
    gradients of the workers and each worker updates its own parameters
    (``update_on_kvstore=False``), as one process does; updated on the
    servers, Adam's state could not be saved in a checkpoint
    (`KVStore.save_optimizer_states` refuses a distributed kvstore).
    """
    params = net._collect_params_with_prefix()
    params = [params[name] for name in sorted(params)]
    hyper = {'learning_rate': learning_rate}
    if kvstore is None:
        return gluon.Trainer(params, 'adam', hyper)
    return gluon.Trainer(params, 'adam', hyper, kvstore=kvstore,
                         update_on_kvstore=False)


def _progress_bar(total, initial, enabled):
    from tqdm import tqdm
    return tqdm(total=total, initial=initial, unit='step', delay=2,
                disable=not enabled, file=sys.stderr, dynamic_ncols=True,
                desc='pretraining')


# ---------------------------------------------------------------------------
# What training records
# ---------------------------------------------------------------------------

class PretrainingHistory:
    """The per-step losses of `train_bert_history`, and its throughput.

    Attributes
    ----------
    mlm, nsp : list of float
        The MLM and NSP loss of each step (mean over the shards).
    num_pairs : int
        Sentence pairs seen.
    seconds : float
        Time spent in forward, backward and update (the book's timer:
        loading the data is not counted).
    devices : list of str
        The devices trained on, as MXNet names them (``'cpu(0)'``).
    """

    def __init__(self, devices=(), mlm=(), nsp=(), num_pairs=0,
                 seconds=0.0):
        self.devices = [str(d) for d in devices]
        self.mlm, self.nsp = list(mlm), list(nsp)
        self.num_pairs, self.seconds = int(num_pairs), float(seconds)

    @property
    def num_steps(self):
        return len(self.mlm)

    @property
    def mlm_loss(self):
        """The MLM loss averaged over all steps (what the book prints)."""
        return sum(self.mlm) / max(len(self.mlm), 1)

    @property
    def nsp_loss(self):
        """The NSP loss averaged over all steps (what the book prints)."""
        return sum(self.nsp) / max(len(self.nsp), 1)

    @property
    def pairs_per_sec(self):
        return self.num_pairs / self.seconds if self.seconds else 0.0

    def running_means(self):
        """Return ``(steps, mlm, nsp)``: the curves the book plots.

        The book plots, at step ``k``, the mean loss of steps 1 to ``k``.
        """
        steps = list(range(1, self.num_steps + 1))
        mlm = onp.cumsum(self.mlm) / steps if steps else onp.zeros(0)
        nsp = onp.cumsum(self.nsp) / steps if steps else onp.zeros(0)
        return steps, list(mlm), list(nsp)

    def plot(self, path=None, ax=None):
        """Plot the two running-mean loss curves.

        Parameters
        ----------
        path : str, optional
            Save the figure there as PNG (atomically).
        ax : matplotlib Axes, optional
            Draw on it instead of on a new figure.

        Returns
        -------
        matplotlib.figure.Figure
        """
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        if ax is None:
            # A `Figure` of its own: no pyplot state, no GUI backend
            fig = Figure(figsize=(3.5, 2.5))
            FigureCanvasAgg(fig)
            ax = fig.add_subplot()
        fig = ax.figure
        steps, mlm, nsp = self.running_means()
        ax.plot(steps, mlm, '-', label='mlm')
        ax.plot(steps, nsp, 'm--', label='nsp')
        ax.set_xlabel('step')
        ax.set_ylabel('loss')
        if steps:
            ax.set_xlim(1, max(steps[-1], 2))
        ax.legend()
        ax.grid(True)
        fig.tight_layout()
        if path is not None:
            atomic_write(path, lambda tmp: fig.savefig(tmp, format='png',
                                                       dpi=120))
        return fig

    def to_dict(self):
        return dict(devices=self.devices, mlm=self.mlm, nsp=self.nsp,
                    num_pairs=self.num_pairs, seconds=self.seconds)

    @classmethod
    def from_dict(cls, d):
        return cls(d['devices'], d['mlm'], d['nsp'], d['num_pairs'],
                   d['seconds'])

    def __repr__(self):
        return (f'PretrainingHistory(num_steps={self.num_steps}, '
                f'mlm_loss={self.mlm_loss:.3f}, '
                f'nsp_loss={self.nsp_loss:.3f})')


def _in_notebook():
    """Whether we run inside a Jupyter kernel (plots are drawn inline)."""
    ipython = sys.modules.get('IPython')
    if ipython is None:
        return False
    shell = ipython.get_ipython()
    return shell is not None and 'IPKernelApp' in getattr(shell, 'config',
                                                          {})


class _InlineAnimator:
    """Redraw the loss curves in the notebook after every step.

    The book's `d2l.Animator` does the same; we draw the running means
    of `PretrainingHistory` so the two cannot disagree.
    """

    def __init__(self, num_steps):
        from d2l import mxnet as d2l
        from IPython import display
        d2l.use_svg_display()
        self.display, self.num_steps = display, num_steps
        self.fig, self.ax = d2l.plt.subplots(figsize=(3.5, 2.5))

    def update(self, history):
        self.ax.cla()
        history.plot(ax=self.ax)
        self.ax.set_xlim(1, self.num_steps)
        self.display.display(self.fig)
        self.display.clear_output(wait=True)

    def close(self, show=True):
        """Show the final curves below the printed lines, then let go of
        the figure (so the inline backend does not show it twice)."""
        from d2l import mxnet as d2l
        if show:
            self.display.display(self.fig)
        d2l.plt.close(self.fig)


# ---------------------------------------------------------------------------
# Held-out accuracy
# ---------------------------------------------------------------------------

class BertAccuracy(namedtuple('BertAccuracy', [
        'mlm_accuracy', 'nsp_accuracy', 'num_pairs', 'num_masked'])):
    """Accuracies of `evaluate_bert`; printed, one line that says both.

    Parameters
    ----------
    mlm_accuracy : float
        Share of the masked tokens (real predictions only) whose most
        likely token is the right one.
    nsp_accuracy : float
        Share of the sentence pairs whose next-sentence label is right.
    num_pairs, num_masked : int
        How many pairs and masked tokens were scored.
    """
    __slots__ = ()

    def __str__(self):
        return (f'MLM accuracy {self.mlm_accuracy:.3f} ({self.num_masked} '
                f'masked tokens), NSP accuracy {self.nsp_accuracy:.3f} '
                f'({self.num_pairs} pairs)')


@interrupts.between_steps()
def evaluate_bert(net, data_iter, vocab_size, devices, progress=False):
    """Masked-token and next-sentence accuracy of `net` on `data_iter`.

    Parameters
    ----------
    net : BERTModel
        The model to evaluate (dropout is off outside training).
    data_iter : iterable of 7-tuples of ndarray
        Batches as `train_iter` of `train_bert` gives them; walked once.
    vocab_size : int
        V, the number of classes of the MLM head.
    devices : list of mxnet.Context
        Each batch is split over them.
    progress : bool, default False
        Show a progress bar (on standard error) once the evaluation has
        run for more than 2 seconds.

    Returns
    -------
    BertAccuracy
    """
    from tqdm import tqdm
    mlm_correct = nsp_correct = num_masked = num_pairs = 0.0
    total = len(data_iter) if hasattr(data_iter, '__len__') else None
    for batch in tqdm(interrupts.checked(data_iter), total=total,
                      unit='batch', delay=2,
                      disable=not progress, file=sys.stderr, leave=False,
                      dynamic_ncols=True, desc='held-out evaluation'):
        shards = [gluon.utils.split_and_load(elem, devices, even_split=False)
                  for elem in batch]
        for (tokens_X, segments_X, valid_lens_x, pred_positions_X,
             mlm_weights_X, mlm_Y, nsp_y) in zip(*shards):
            # Outside `autograd.record` dropout is off
            _, mlm_Y_hat, nsp_Y_hat = net(
                tokens_X, segments_X, valid_lens_x.reshape(-1),
                pred_positions_X)                    # (B, P, V), (B, 2)
            mlm_pred = mlm_Y_hat.argmax(axis=-1)     # (B, P)
            hits = (mlm_pred == mlm_Y.astype(mlm_pred.dtype))  # (B, P)
            mlm_correct += float((hits * mlm_weights_X).sum())
            num_masked += float(mlm_weights_X.sum())
            nsp_pred = nsp_Y_hat.argmax(axis=-1)     # (B,)
            nsp_correct += float(
                (nsp_pred == nsp_y.astype(nsp_pred.dtype)).sum())
            num_pairs += nsp_y.shape[0]
    if not num_pairs:
        raise ValueError('data_iter yielded no batch: nothing to evaluate')
    return BertAccuracy(mlm_correct / max(num_masked, 1),
                        nsp_correct / num_pairs, int(num_pairs),
                        int(num_masked))
