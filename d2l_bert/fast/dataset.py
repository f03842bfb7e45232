"""The dataset section's padding, fast: the same examples as stacked
arrays, applied by one visible argument::

    train_iter, vocab = load_pretraining_data(
        batch_size, max_len, pad=d2l_bert.fast.pad_bert_inputs_stacked)

(`d2l_bert.runs.wiki_data`).  The book's `_pad_bert_inputs` stays the
default and this function's test oracle (`tests/test_fast_dataset.py`).

Dimension key: N: number of examples, T: `max_len`,
P: ``round(max_len * 0.15)`` predicted positions per sequence
"""
import numpy as onp


def pad_bert_inputs_stacked(examples, max_len, vocab):
    """The book's `_pad_bert_inputs`, as seven stacked NumPy arrays.

    The book's function creates one MXNet array per example and field,
    which takes most of a dataset's build time; here each field is one
    NumPy array filled in place.  `_pad_bert_inputs` is the oracle:
    stacking its arrays gives these, dtypes included.

    Parameters
    ----------
    examples, max_len, vocab
        As for `d2l_bert.book.dataset._pad_bert_inputs`.

    Returns
    -------
    tuple of seven numpy.ndarray
        all_token_ids (N, T) int32, all_segments (N, T) int32, valid_lens
        (N,) float32, all_pred_positions (N, P) int32, all_mlm_weights
        (N, P) float32, all_mlm_labels (N, P) int32, nsp_labels (N,)
        float32.
    """
    N, T, P = len(examples), max_len, round(max_len * 0.15)
    all_token_ids = onp.full((N, T), vocab['<pad>'], dtype='int32')
    all_segments = onp.zeros((N, T), dtype='int32')
    valid_lens = onp.zeros(N, dtype='float32')
    all_pred_positions = onp.zeros((N, P), dtype='int32')
    all_mlm_weights = onp.zeros((N, P), dtype='float32')
    all_mlm_labels = onp.zeros((N, P), dtype='int32')
    nsp_labels = onp.zeros(N, dtype='float32')
    # Row `i` of each field is what `_pad_bert_inputs` makes of example `i`
    for i, (token_ids, pred_positions, mlm_pred_label_ids, segments,
            is_next) in enumerate(examples):
        all_token_ids[i, :len(token_ids)] = token_ids
        all_segments[i, :len(segments)] = segments
        valid_lens[i] = len(token_ids)
        all_pred_positions[i, :len(pred_positions)] = pred_positions
        all_mlm_weights[i, :len(mlm_pred_label_ids)] = 1
        all_mlm_labels[i, :len(mlm_pred_label_ids)] = mlm_pred_label_ids
        nsp_labels[i] = is_next
    return (all_token_ids, all_segments, valid_lens, all_pred_positions,
            all_mlm_weights, all_mlm_labels, nsp_labels)
