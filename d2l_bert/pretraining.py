"""sec_bert-pretraining: pretrain BERT and encode text with it.

The section in the book's order:

1. `_get_batch_loss_bert`: the masked language modeling (MLM) loss plus
   the next sentence prediction (NSP) loss of one batch split into shards,
   one shard per device;
2. `train_bert`: Adam for `num_steps` steps, printing the two lines the
   book prints and plotting the loss curves;
3. `get_bert_encoding`: the representation of one text or a text pair.

Beyond the book, elsewhere: `d2l_bert.runs.pretraining` holds the same
loop with checkpoints that resume exactly, the per-step losses and
held-out accuracy (what ``d2l-bert pretrain`` runs);
`d2l_bert.runs.model_files` saves a pretrained model in the layout of
d2l's ``bert.small`` and reads it back.

Dimension key used in the shape comments:

B: batch size, T: sequence length, H: num_hiddens, V: vocab_size,
P: predicted positions per sequence (``round(0.15 * max_len)``)
"""
from mxnet import autograd, gluon, np, npx

from d2l import mxnet as d2l

from .bert import get_tokens_and_segments
from .checks import check_kvstore, check_positive_int


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
    The book calls `npx.waitall()` after each shard.  We leave it out so
    that the shards of a batch run on their devices at the same time; the
    losses are read back (and so waited for) once per step in
    `train_bert`.
    """
    mlm_ls, nsp_ls, ls = [], [], []
    for (tokens_X, segments_X, valid_lens_x, pred_positions_X,
         mlm_weights_X, mlm_Y, nsp_y) in zip(
            tokens_X_shards, segments_X_shards, valid_lens_x_shards,
            pred_positions_X_shards, mlm_weights_X_shards, mlm_Y_shards,
            nsp_y_shards):
        # Forward pass
        _, mlm_Y_hat, nsp_Y_hat = net(
            tokens_X, segments_X, valid_lens_x.reshape(-1),
            pred_positions_X)                        # (B, P, V), (B, 2)
        # Masked language modeling: padded predictions get weight 0
        mlm_l = loss(mlm_Y_hat.reshape((-1, vocab_size)),  # (B*P, V)
                     mlm_Y.reshape(-1),                    # (B*P,)
                     mlm_weights_X.reshape((-1, 1)))       # (B*P, 1)
        mlm_l = mlm_l.sum() / (mlm_weights_X.sum() + 1e-8)  # ()
        # Next sentence prediction
        nsp_l = loss(nsp_Y_hat, nsp_y).mean()               # ()
        mlm_ls.append(mlm_l)
        nsp_ls.append(nsp_l)
        ls.append(mlm_l + nsp_l)
    return mlm_ls, nsp_ls, ls


def train_bert(train_iter, net, loss, vocab_size, devices, num_steps,
               kvstore='device'):
    """Pretrain BERT on its two tasks for `num_steps` steps.

    The tasks are masked language modeling and next sentence prediction;
    each batch is split over `devices`.

    Defined in :numref:`sec_bert-pretraining`.

    Prints the mean losses and the throughput, plots both losses
    (`d2l.Animator`) and returns None, as the book's does
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
    kvstore : str or mxnet.kvstore.KVStore, default 'device'
        Beyond the book: where `Trainer` sums the gradients.  A worker
        of a ``dist_sync`` job passes the job's kvstore
        (`d2l_bert.dist.workers.create_kvstore`) and its own rows of
        every batch (`d2l_bert.dist.workers.worker_rows`).
    """
    check_positive_int('num_steps', num_steps)
    check_kvstore(kvstore)
    trainer = gluon.Trainer(net.collect_params(), 'adam',
                            {'learning_rate': 0.01}, kvstore=kvstore)
    step, timer = 0, d2l.Timer()
    animator = d2l.Animator(xlabel='step', ylabel='loss',
                            xlim=[1, num_steps], legend=['mlm', 'nsp'])
    # MLM loss sum, NSP loss sum, sentence pairs, steps
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
            # Beyond the book: wait for the backward pass and the update,
            # which the losses read above do not, so the throughput is
            # that of whole steps
            npx.waitall()
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

# ---------------------------------------------------------------------------
# Representing text
# ---------------------------------------------------------------------------

def _net_context(net):
    for param in net.collect_params().values():
        try:
            return param.list_ctx()[0]
        except RuntimeError:  # not initialized yet
            continue
    raise ValueError('net has no initialized parameter: initialize it or '
                     'load parameters first')


def _check_vocab(net, vocab):
    """Raise when `vocab` is missing or not the size of `net`'s token
    embedding."""
    if vocab is None:
        raise TypeError('get_bert_encoding needs vocab=, the vocabulary '
                        'the net was trained with')
    embedded = net.encoder.token_embedding.weight.shape[0]
    if len(vocab) != embedded:
        raise ValueError(f'vocab has {len(vocab)} tokens but the net embeds '
                         f'{embedded}: pass the vocabulary the net was '
                         'trained with')


def get_bert_encoding(net, tokens_a, tokens_b=None, *, vocab=None,
                      devices=None):
    """Return BERT's representation of every token of a text (pair).

    Defined in :numref:`sec_bert-pretraining`.

    The book's function reads `vocab` and `devices` from the notebook's
    globals; ours takes them as keyword arguments.

    Parameters
    ----------
    net : BERTModel
        A pretrained model.
    tokens_a : list of str
        Tokens of the first text.
    tokens_b : list of str, optional
        Tokens of the second text of a pair.
    vocab : Vocab, keyword-only
        The vocabulary `net` was trained with (required).
    devices : list of mxnet.Context, keyword-only, optional
        The input goes to ``devices[0]``; by default the context of
        `net`'s parameters.

    Returns
    -------
    ndarray, float32, shape (1, T, H)
        ``T = len(tokens_a) + 2``, plus ``len(tokens_b) + 1`` for a pair;
        position 0 is `<cls>`.
    """
    _check_vocab(net, vocab)
    ctx = devices[0] if devices else _net_context(net)
    tokens, segments = get_tokens_and_segments(tokens_a, tokens_b)
    token_ids = np.expand_dims(np.array(vocab[tokens], ctx=ctx),
                               axis=0)                          # (1, T)
    segments = np.expand_dims(np.array(segments, ctx=ctx), axis=0)  # (1, T)
    valid_len = np.expand_dims(np.array(len(tokens), ctx=ctx),
                               axis=0)                          # (1,)
    encoded_X, _, _ = net(token_ids, segments, valid_len)       # (1, T, H)
    return encoded_X
