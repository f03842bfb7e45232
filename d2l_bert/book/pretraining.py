"""sec_bert-pretraining: pretrain BERT and encode text with it.

The section in the book's order:

1. `_get_batch_loss_bert`: the masked language modeling (MLM) loss plus
   the next sentence prediction (NSP) loss of one batch split into shards,
   one shard per device;
2. `train_bert`: Adam for `num_steps` steps, printing the two lines the
   book prints and plotting the loss curves.

The section's `get_bert_encoding` reads the notebook's `vocab` and
`devices`, so it stays in the notebook; the package's function for the
same representation, which takes them as arguments, is
`d2l_bert.runs.model_files.encode_tokens`.

Beyond the book, elsewhere: `d2l_bert.runs.pretraining` holds the same
loop with checkpoints that resume exactly, the per-step losses and
held-out accuracy (what ``d2l-bert pretrain`` runs);
`d2l_bert.runs.model_files` saves a pretrained model in the layout of
d2l's ``bert.small`` and reads it back.

Dimension key used in the shape comments:

B: batch size, T: sequence length, H: num_hiddens, V: vocab_size,
P: predicted positions per sequence (``round(0.15 * max_len)``)
"""
from d2l import mxnet as d2l
from mxnet import autograd, gluon, npx

npx.set_np()


# ---------------------------------------------------------------------------
# The loss of one batch
# ---------------------------------------------------------------------------

def _get_batch_loss_bert(net, loss, vocab_size, tokens_X_shards,
                         segments_X_shards, valid_lens_x_shards,
                         pred_positions_X_shards, mlm_weights_X_shards,
                         mlm_Y_shards, nsp_y_shards):
    """Compute the MLM loss and the NSP loss of each shard of a batch.

    Defined in :numref:`sec_bert-pretraining`.

    Each argument ending in ``_shards`` is a list with one array per
    device (what `gluon.utils.split_and_load` returns); ``B`` below is
    the size of one shard.

    Parameters
    ----------
    net : BERTModel
    loss : gluon.loss.SoftmaxCELoss
    vocab_size : int
    tokens_X_shards : list of ndarray, int32, shape (B, T)
    segments_X_shards : list of ndarray, int32, shape (B, T)
    valid_lens_x_shards : list of ndarray, float32, shape (B,)
    pred_positions_X_shards : list of ndarray, int32, shape (B, P)
    mlm_weights_X_shards : list of ndarray, float32, shape (B, P)
        1 for a real prediction, 0 for padding.
    mlm_Y_shards : list of ndarray, int32, shape (B, P)
    nsp_y_shards : list of ndarray, shape (B,)

    Returns
    -------
    mlm_ls, nsp_ls, ls : list of ndarray, each of shape ()
        Per shard: the MLM loss averaged over the real predictions, the
        NSP loss averaged over the pairs, and their sum.

    Notes
    -----
    As in the book, `npx.waitall()` after each shard waits for its
    forward pass, so the timer of `train_bert` times whole computations.
    """
    mlm_ls, nsp_ls, ls = [], [], []
    for (tokens_X_shard, segments_X_shard, valid_lens_x_shard,
         pred_positions_X_shard, mlm_weights_X_shard, mlm_Y_shard,
         nsp_y_shard) in zip(
        tokens_X_shards, segments_X_shards, valid_lens_x_shards,
        pred_positions_X_shards, mlm_weights_X_shards, mlm_Y_shards,
        nsp_y_shards):
        # Forward pass
        _, mlm_Y_hat, nsp_Y_hat = net(
            tokens_X_shard, segments_X_shard, valid_lens_x_shard.reshape(-1),
            pred_positions_X_shard)                   # (B, P, V), (B, 2)
        # Compute masked language model loss
        mlm_l = loss(
            mlm_Y_hat.reshape((-1, vocab_size)), mlm_Y_shard.reshape(-1),
            mlm_weights_X_shard.reshape((-1, 1)))     # (B*P,)
        mlm_l = mlm_l.sum() / (mlm_weights_X_shard.sum() + 1e-8)  # ()
        # Compute next sentence prediction loss
        nsp_l = loss(nsp_Y_hat, nsp_y_shard)          # (B,)
        nsp_l = nsp_l.mean()                          # ()
        mlm_ls.append(mlm_l)
        nsp_ls.append(nsp_l)
        ls.append(mlm_l + nsp_l)
        npx.waitall()
    return mlm_ls, nsp_ls, ls


def train_bert(train_iter, net, loss, vocab_size, devices, num_steps):
    """Pretrain BERT on its two tasks for `num_steps` steps.

    The tasks are masked language modeling and next sentence prediction;
    each batch is split over `devices`.

    Defined in :numref:`sec_bert-pretraining`.

    Prints the mean losses and the throughput, plots both losses
    (`d2l.Animator`) and returns None
    (`d2l_bert.runs.pretraining.train_bert_history` adds checkpoints).

    Parameters
    ----------
    train_iter : iterable of 7-tuples of ndarray
        ``(tokens_X, segments_X, valid_lens_x, pred_positions_X,
        mlm_weights_X, mlm_Y, nsp_y)``, as `load_data_wiki` serves them;
        walked again from the start when exhausted.
    net : BERTModel
        Initialized on every context of `devices` (or its fast twin,
        `d2l_bert.fast.accelerate(net)`).
    loss : gluon.loss.SoftmaxCELoss
        The loss of both tasks, the book's ``gluon.loss.SoftmaxCELoss()``.
    vocab_size : int
        V, the number of classes of the MLM loss.
    devices : list of mxnet.Context
        Where `net` is initialized; each batch is split over them.
    num_steps : int
        Number of batches to train on (the book: 50).

    Notes
    -----
    Arguments are not checked here: `d2l_bert.runs.pretraining` and the
    command line check them before they call the loop, and a worker of a
    ``dist_sync`` job trains with `train_bert_history`, which takes the
    job's kvstore.
    """
    trainer = gluon.Trainer(net.collect_params(), 'adam',
                            {'learning_rate': 0.01})
    step, timer = 0, d2l.Timer()
    animator = d2l.Animator(xlabel='step', ylabel='loss',
                            xlim=[1, num_steps], legend=['mlm', 'nsp'])
    # Sum of masked language modeling losses, sum of next sentence prediction
    # losses, no. of sentence pairs, count
    metric = d2l.Accumulator(4)
    num_steps_reached = False
    while step < num_steps and not num_steps_reached:
        for batch in train_iter:
            (tokens_X_shards, segments_X_shards, valid_lens_x_shards,
             pred_positions_X_shards, mlm_weights_X_shards,
             mlm_Y_shards, nsp_y_shards) = [gluon.utils.split_and_load(
                elem, devices, even_split=False) for elem in batch]
            timer.start()
            with autograd.record():
                mlm_ls, nsp_ls, ls = _get_batch_loss_bert(
                    net, loss, vocab_size, tokens_X_shards, segments_X_shards,
                    valid_lens_x_shards, pred_positions_X_shards,
                    mlm_weights_X_shards, mlm_Y_shards, nsp_y_shards)
            for l in ls:
                l.backward()
            trainer.step(1)
            mlm_l_mean = sum([float(l) for l in mlm_ls]) / len(mlm_ls)
            nsp_l_mean = sum([float(l) for l in nsp_ls]) / len(nsp_ls)
            metric.add(mlm_l_mean, nsp_l_mean, batch[0].shape[0], 1)
            timer.stop()
            animator.add(step + 1,
                         (metric[0] / metric[3], metric[1] / metric[3]))
            step += 1
            if step == num_steps:
                num_steps_reached = True
                break

    print(f'MLM loss {metric[0] / metric[3]:.3f}, '
          f'NSP loss {metric[1] / metric[3]:.3f}')
    print(f'{metric[2] / timer.sum():.1f} sentence pairs/sec on '
          f'{str(devices)}')

