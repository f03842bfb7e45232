"""Random batches shaped and typed like the book's, and the arithmetic of
a step on them.

- `book_batch`, `finetune_batch`: a pretraining batch (lengths spread
  like real data) and an SNLI one;
- `pretrain_step_flops`, `encode_flops`, `finetune_step_flops`: the
  floating-point operations of a step (its matrix products).
"""
from _common import BOOK, FINETUNE


def book_batch(batch_size=BOOK['batch_size'], max_len=BOOK['max_len'],
               vocab_size=BOOK['vocab_size'], num_preds=BOOK['num_preds'],
               seed=0):
    """A random pretraining batch typed and shaped like the book's.

    Returns numpy arrays ``(tokens_X, segments_X, valid_lens_x,
    pred_positions_X, mlm_weights_X, mlm_Y, nsp_y)``: int32 (B, T), int32
    (B, T), float32 (B,), int32 (B, P), float32 (B, P), int32 (B, P),
    int32 (B,).  Valid lengths are spread between 12 and T, as WikiText
    sentence pairs are; about 15% of a sequence is predicted, so short
    sequences pad `pred_positions` with 0 and weight 0, as the book does.
    """
    import numpy as onp
    rng = onp.random.RandomState(seed)
    B, T, P = batch_size, max_len, num_preds
    valid_lens = rng.randint(min(12, T), T + 1, size=B)
    tokens = rng.randint(5, vocab_size, size=(B, T)).astype('int32')
    segments = onp.zeros((B, T), 'int32')
    pred_positions = onp.zeros((B, P), 'int32')
    mlm_weights = onp.zeros((B, P), 'float32')
    mlm_Y = onp.zeros((B, P), 'int32')
    for i, n in enumerate(valid_lens):
        tokens[i, 0], tokens[i, n - 1] = 2, 3            # <cls>, last <sep>
        tokens[i, n:] = 1                                # <pad>
        first_sep = max(1, n // 2)
        tokens[i, first_sep] = 3
        segments[i, first_sep + 1:n] = 1
        num = min(P, max(1, round(n * 0.15)))
        candidates = [j for j in range(1, n - 1) if j != first_sep]
        pos = onp.sort(rng.choice(candidates, num, replace=False))
        pred_positions[i, :num] = pos
        mlm_weights[i, :num] = 1
        mlm_Y[i, :num] = tokens[i, pos]
    nsp_y = rng.randint(0, 2, size=B).astype('int32')
    return (tokens, segments, valid_lens.astype('float32'), pred_positions,
            mlm_weights, mlm_Y, nsp_y)


def finetune_batch(batch_size=FINETUNE['batch_size'],
                   max_len=FINETUNE['max_len'],
                   vocab_size=FINETUNE['vocab_size'],
                   num_classes=FINETUNE['num_classes'], seed=0):
    """A random batch shaped and typed like `SNLIBERTDataset`'s.

    Returns numpy arrays ``(tokens_X, segments_X, valid_lens_x, y)``:
    int32 (B, T), int32 (B, T), float32 (B,), float32 (B,).  Each row is
    ``<cls> premise <sep> hypothesis <sep>`` padded with `<pad>`, with a
    valid length between 12 and T as in `book_batch`.
    """
    import numpy as onp
    rng = onp.random.RandomState(seed)
    B, T = batch_size, max_len
    valid_lens = rng.randint(min(12, T), T + 1, size=B)
    tokens = rng.randint(5, vocab_size, size=(B, T)).astype('int32')
    segments = onp.zeros((B, T), 'int32')
    for i, n in enumerate(valid_lens):
        first_sep = max(1, n // 2)
        tokens[i, 0], tokens[i, first_sep], tokens[i, n - 1] = 2, 3, 3
        tokens[i, n:] = 1                                # <pad>
        segments[i, first_sep + 1:n] = 1
    y = rng.randint(0, num_classes, size=B).astype('float32')
    return tokens, segments, valid_lens.astype('float32'), y


def pretrain_step_flops(batch_size=BOOK['batch_size'], max_len=BOOK['max_len'],
                        num_hiddens=BOOK['num_hiddens'],
                        ffn_num_hiddens=BOOK['ffn_num_hiddens'],
                        num_blks=BOOK['num_blks'],
                        vocab_size=BOOK['vocab_size'],
                        num_preds=BOOK['num_preds'], **_):
    """Floating-point operations of one training step (matrix products).

    Forward: per block, the four projections, the FFN and the two batched
    products of attention; then the MLM head on B*P rows and the NSP head.
    Backward costs twice the forward (gradients of inputs and weights).
    """
    N, H, F = batch_size * max_len, num_hiddens, ffn_num_hiddens
    block = (2 * N * H * 4 * H + 2 * N * H * F * 2
             + 2 * 2 * batch_size * max_len * max_len * H)
    M = batch_size * num_preds
    heads = 2 * M * H * H + 2 * M * H * vocab_size + 2 * batch_size * H * H
    return 3 * (num_blks * block + heads)


def encode_flops(batch_size=64, max_len=128, num_hiddens=128,
                 ffn_num_hiddens=256, num_blks=2, **_):
    """Floating-point operations of encoding a batch (forward only)."""
    N, H, F = batch_size * max_len, num_hiddens, ffn_num_hiddens
    block = (2 * N * H * 4 * H + 2 * N * H * F * 2
             + 2 * 2 * batch_size * max_len * max_len * H)
    return num_blks * block


def finetune_step_flops(batch_size=FINETUNE['batch_size'],
                        max_len=FINETUNE['max_len'],
                        num_hiddens=FINETUNE['num_hiddens'],
                        ffn_num_hiddens=FINETUNE['ffn_num_hiddens'],
                        num_blks=FINETUNE['num_blks'],
                        num_classes=FINETUNE['num_classes'], **_):
    """Floating-point operations of one fine-tuning step (matrix
    products): the encoder's blocks as in `pretrain_step_flops`, then the
    `hidden` layer and the classifier on the `<cls>` rows; backward costs
    twice the forward."""
    N, H, F = batch_size * max_len, num_hiddens, ffn_num_hiddens
    block = (2 * N * H * 4 * H + 2 * N * H * F * 2
             + 2 * 2 * batch_size * max_len * max_len * H)
    heads = 2 * batch_size * H * H + 2 * batch_size * H * num_classes
    return 3 * (num_blks * block + heads)
