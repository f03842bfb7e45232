"""Data parallelism over processes: a worker's side of a ``dist_sync`` job.

The book's `train_bert` splits each batch over the devices of one
machine: every device computes the loss of its shard (a mean over its
sentence pairs), the gradients of the shards are summed, and Adam takes
one step.  A job of N workers (`d2l_bert.dist.launcher`, ``d2l-bert
pretrain --workers N``) does the same over N processes, with the same
numbers:

- Every worker reads the same corpus with the same seed, so every worker
  holds the same examples and draws the same global batches, one after
  the other.  Of each global batch, a worker trains on its own rows
  (`worker_shards`): exactly the shards one process would give the same
  devices if it had all of them (``split_and_load`` over the N x D
  devices of the N workers), so the losses of the job are those of one
  process with N x D devices.
- MXNet's ``dist_sync`` kvstore sums the gradients the workers push on
  its servers, and every worker pulls that sum.  Each worker then takes
  the same Adam step on its own copy of the parameters (the `Trainer`'s
  ``update_on_kvstore=False``), so the copies stay equal, Adam's state
  stays in the workers and a checkpoint is the same file as one
  process's.
- `Workers` passes the per-shard losses around (`Workers.all_gather`),
  so that worker 0, which alone prints, plots and writes files, reports
  the losses of the whole batch.

`worker_rows` gives the book's own `train_bert` a worker's rows of each
batch; `create_kvstore` joins the job, once per process;
`share_initial_weights` makes the first step wait for worker 0's weights
(which the `Trainer`'s first step does not).

Dimension key: B: global batch size, N: workers, D: devices per worker.
"""
import atexit
import os
import sys

import mxnet as mx
from mxnet import gluon
from mxnet.base import _LIB, check_call

#: The kvstore key of `Workers.all_gather` (`Trainer` numbers the
#: parameters from 0); one key per width, from here on.  MXNet places an
#: array on a server by ``key * 9973 % num_servers`` in a 32-bit int, so
#: keys must stay below 2**31 / 9973 = 215326 (``1 << 24`` crashed a job
#: of two servers: "Check failed: ps_key < krs[server].end()")
GATHER_KEY = 100000

# This process's kvstore of its job, once `create_kvstore` made it
_job_kvstore = None


def create_kvstore(kind='dist_sync'):
    """Join the job: return this process's kvstore of it.

    The first call creates it (``mx.kv.create``), which waits until every
    process of the job has started; later calls return the same kvstore.
    A process can join a job only once (a second ``mx.kv.create`` of a
    distributed kvstore waits forever), so
    `d2l_bert.runs.pretraining.train_bert_history` turns the name
    'dist_sync' into this kvstore too.

    The kvstore is shut down when Python exits, before MXNet is (in MXNet
    1.9.1 a worker whose distributed kvstore is still alive then, which a
    model trained with it keeps alive, ends in "terminate called without
    an active exception", SIGABRT).  That shutdown waits at a barrier for
    every process of the job, so a worker that fails must not take it:
    an exception nobody catches ends the worker at once (after its
    traceback), ``sys.exit(N)`` with N not 0 ends it at once with that
    status, and `leave_job` ends it with a status.

    Raises
    ------
    ValueError
        If `kind` is not a distributed kvstore, this process is not a
        worker of a job (``DMLC_ROLE`` is not 'worker'), or this MXNet has
        no parameter server.
    """
    if not isinstance(kind, str) or not kind.startswith('dist_'):
        raise ValueError(f"kvstore must be 'dist_sync' (or another "
                         f"'dist_...' type of MXNet), got {kind!r}")
    if not has_parameter_server():
        raise ValueError('this MXNet was built without the parameter server '
                         '(its runtime feature DIST_KVSTORE is off); the '
                         'Linux wheels of MXNet 1.9.1 have it')
    role = os.environ.get('DMLC_ROLE')
    if role != 'worker':
        raise ValueError(
            f'kvstore {kind!r} needs a worker of a job started by '
            "`d2l-bert pretrain --workers N` or `d2l-bert launch`, but "
            f'DMLC_ROLE is {role!r}')
    global _job_kvstore
    if _job_kvstore is not None:
        if _job_kvstore.type != kind:
            raise ValueError(f'this process joined its job with kvstore '
                             f'{_job_kvstore.type!r}; it cannot join again '
                             f'with {kind!r}')
        return _job_kvstore
    from ..processes import exit_with_parent
    exit_with_parent()
    _job_kvstore = mx.kv.create(kind)
    # Registered after MXNet's own exit handler, so run before it
    atexit.register(_shut_down, _job_kvstore)
    sys.excepthook = _leave_on_exception(sys.excepthook)
    sys.exit = _leave_on_exit(sys.exit)
    return _job_kvstore


def has_parameter_server():
    """Whether this MXNet has the distributed kvstore (the runtime
    feature ``DIST_KVSTORE``)."""
    return mx.runtime.Features().is_enabled('DIST_KVSTORE')


def leave_job(status):
    """End this worker now with exit `status`, skipping the kvstore's last
    barrier.

    A worker that fails and then waits there would wait forever: the
    other workers wait for its gradients at their next step.  Ending at
    once lets the launcher see the failure and stop the job.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def _leave_on_exception(hook):
    """`sys.excepthook` that prints as `hook` does, then `leave_job(1)`."""
    def leave(*exc_info):
        hook(*exc_info)
        leave_job(1)
    return leave


def _leave_on_exit(exit):
    """`sys.exit` that ends this worker at once when the status is not 0
    (printing a message status to stderr, as `sys.exit` does), and
    otherwise is `exit`, which takes the kvstore's last barrier."""
    def leave(status=None):
        if status is None or status == 0:
            exit(status)
        if not isinstance(status, int):
            print(status, file=sys.stderr)
            status = 1
        leave_job(status)
    return leave


def _shut_down(kvstore):
    """Free the C++ kvstore, which leaves the job (ps-lite's last barrier);
    its Python object keeps a null handle, which `KVStore.__del__` may
    free again harmlessly."""
    if kvstore.handle:
        check_call(_LIB.MXKVStoreFree(kvstore.handle))
        kvstore.handle = None


def worker_shards(batch, devices, rank=0, num_workers=1):
    """This worker's shards of a global batch, one per device.

    The global batch is split over the ``N x D`` devices of all workers as
    `gluon.utils.split_and_load` splits it over the devices of one
    process (``even_split=False``: the first shards get one more pair
    when ``N x D`` does not divide ``B``); worker `rank` takes shards
    ``rank x D`` to ``rank x D + D - 1``.  With one worker these are
    ``split_and_load(elem, devices)``.

    Parameters
    ----------
    batch : sequence of ndarray
        The seven arrays of a global batch, each of shape ``(B, ...)``.
    devices : list of mxnet.Context
        This worker's D devices.
    rank, num_workers : int
        This worker's index and the number of workers.

    Returns
    -------
    list of list of ndarray
        For each array of `batch`, its D shards, shard ``d`` on
        ``devices[d]``.
    """
    num_shards = len(devices) * num_workers
    first = rank * len(devices)
    shards = []
    for elem in batch:
        slices = gluon.utils.split_data(elem, num_shards, even_split=False)
        shards.append([s.as_in_context(ctx) for s, ctx in
                       zip(slices[first:first + len(devices)], devices)])
    return shards


def share_initial_weights(trainer):
    """Give every worker worker 0's parameters, and wait until they are
    here, before the first gradient is pushed.

    Gluon does this inside the first `Trainer.step`: worker 0 stores its
    parameters on the servers and each worker pulls them (`broadcast`),
    then the step pushes the gradients under the same keys.  MXNet's
    dist kvstore does not order that push after the pull on the CPU (the
    comment on ``comm_buf = merged`` in ``kvstore_dist.h``: "Start of a
    push doesn't guarantee that the previous pushes are completed").
    With ``update_on_kvstore=False`` the servers keep the sum of the
    gradients in place of the weights, so a pull that reached its server
    after both workers' pushes gave that worker the gradient sum as its
    weights: a job parted from one process at step 1 or 2, now and then,
    under load.  Waiting here orders them.

    Parameters
    ----------
    trainer : mxnet.gluon.Trainer
        The trainer of a job's worker, with its parameters initialized
        (none deferred) and, when resuming, its states loaded.
    """
    # Gluon 1.9's own first steps of `Trainer.step` (MXNet is pinned)
    if not trainer._kv_initialized:
        trainer._init_kvstore()
    if trainer._params_to_init:
        trainer._init_params()
    mx.nd.waitall()


class worker_rows:
    """A worker's rows of every batch of `data_iter`, for the book's
    `train_bert` (which splits them further over its devices).

    Walked again from the start each time it is iterated, as a
    `DataLoader` is.  Every worker must make `data_iter` the same way
    (same corpus, same seed), so that all see the same global batches.

    Parameters
    ----------
    data_iter : iterable of tuples of ndarray
        Global batches, the same in every worker.
    kvstore : mxnet.kvstore.KVStore, optional
        The job's kvstore, which knows this worker's rank; default
        `create_kvstore()`.
    """

    def __init__(self, data_iter, kvstore=None):
        kvstore = kvstore if kvstore is not None else create_kvstore()
        self.data_iter = data_iter
        self.rank, self.num_workers = kvstore.rank, kvstore.num_workers

    def __iter__(self):
        for batch in self.data_iter:
            yield tuple(gluon.utils.split_data(elem, self.num_workers,
                                               even_split=False)[self.rank]
                        for elem in batch)

    def __len__(self):
        return len(self.data_iter)


class Workers:
    """The workers of a job, seen from one of them.

    Parameters
    ----------
    kvstore : mxnet.kvstore.KVStore or None
        The job's kvstore; None for one process alone (rank 0 of 1).

    Attributes
    ----------
    rank, num_workers : int
        This worker's index and the number of workers.
    leader : bool
        Whether this is worker 0, the one that prints and writes files.
    """

    def __init__(self, kvstore=None):
        self.kvstore = kvstore
        self.rank = kvstore.rank if kvstore is not None else 0
        self.num_workers = kvstore.num_workers if kvstore is not None else 1
        self.leader = self.rank == 0
        self._initialized = set()

    def all_gather(self, values):
        """Return every worker's `values`, worker 0's first.

        Each worker must call this at the same point with as many values;
        float32 values come back exactly (the kvstore adds zeros to them).

        Parameters
        ----------
        values : list of float
            This worker's values.

        Returns
        -------
        list of list of float
            ``num_workers`` lists of ``len(values)`` values.
        """
        width = len(values)
        if self.kvstore is None:
            return [[float(v) for v in values]]
        key = GATHER_KEY + width
        if key not in self._initialized:
            self.kvstore.init(key, mx.nd.zeros((self.num_workers, width)))
            self._initialized.add(key)
        mine = mx.nd.zeros((self.num_workers, width))          # (N, width)
        mine[self.rank] = mx.nd.array(values)
        every = mx.nd.zeros((self.num_workers, width))         # (N, width)
        # The kvstore sums the arrays of the workers, each zero but for
        # its own row
        self.kvstore.pushpull(key, mine, out=every)
        return every.asnumpy().astype(float).tolist()

    def check_same(self, what, value):
        """Raise a ValueError unless every worker has the same `value`.

        `what` names it in the message (``'step'``).
        """
        values = [row[0] for row in self.all_gather([value])]
        if any(v != values[0] for v in values):
            listed = ', '.join(f'worker {rank}: {v:g}'
                               for rank, v in enumerate(values))
            raise ValueError(f'the workers do not agree on the {what} '
                             f'({listed})')
