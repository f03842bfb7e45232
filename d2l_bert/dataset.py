"""sec_bert-dataset: the dataset for pretraining BERT, in the book's order.

Raw WikiText lines become paragraphs of sentences (`_read_wiki`), sentence
pairs for next sentence prediction (`_get_next_sentence`,
`_get_nsp_data_from_paragraph`), masked tokens for masked language modeling
(`_replace_mlm_tokens`, `_get_mlm_data_from_tokens`) and padded arrays
(`_pad_bert_inputs`), gathered by `_WikiTextDataset` and served in
minibatches by `load_data_wiki`.

Beyond the book, `load_data_wiki` chooses its corpus: the small corpus
shipped with the package (``'embedded'``, the default, needing no
network), WikiText-2 (``'wikitext-2'``, downloaded if need be) or a path
to files in WikiText's token format; `d2l_bert.data.wikitext` finds
them.  It also takes a `seed`, a held-out `split`, the training `vocab`
and `pad`, the padding function (`d2l_bert.fast.pad_bert_inputs_stacked`
builds the same examples as stacked arrays, faster).

Dimension key used in the shapes below:

N: number of examples, B: batch size, T: `max_len`,
P: ``round(max_len * 0.15)`` predicted positions per sequence
"""
import os
import random

from mxnet import gluon, np

from .bert import get_tokens_and_segments
from .checks import check_positive_int
from .data.wikitext import (DATA_ROOT, CorpusError,  # noqa: F401
                            CorpusNotFoundError, CorpusUnavailableError,
                            SeededRandomSampler, check_sentence_pairs,
                            download_wikitext2, locate_corpus)


def _read_wiki(data_dir, file_name='wiki.train.tokens'):
    """Read a WikiText file into shuffled paragraphs of sentences.

    Defined in :numref:`sec_bert-dataset`.

    Each line of the file is a paragraph; a line is kept when splitting it
    on ``' . '`` gives at least two pieces (as in the book, this counts the
    line's trailing ``' . '``, so one-sentence paragraphs are kept too; they
    give no sentence pair but can be drawn as random next sentences).
    Paragraphs are lower-cased, split into sentences on ``' . '`` and
    shuffled with Python's `random`.

    Parameters
    ----------
    data_dir : str
        Directory holding the file.
    file_name : str, default 'wiki.train.tokens'
        The file in WikiText's token format (``'wiki.valid.tokens'`` for
        the held-out split).

    Returns
    -------
    list of list of str
        ``paragraphs[i][j]`` is sentence `j` of paragraph `i`, tokens
        separated by spaces.
    """
    path = os.path.join(data_dir, file_name)
    if not os.path.isfile(path):
        raise CorpusNotFoundError(
            f"no corpus file {path!r} (data_dir={data_dir!r}): expected a "
            f"text file in WikiText's token format, one paragraph a line")
    with open(path, 'r', encoding='utf-8') as f:
        lines = f.readlines()
    if not any(line.strip() for line in lines):
        raise CorpusError(f'corpus file {path!r} is empty: expected text '
                          f"in WikiText's token format")
    # The book ignores case
    paragraphs = [line.strip().lower().split(' . ')
                  for line in lines if len(line.split(' . ')) >= 2]
    random.shuffle(paragraphs)
    return paragraphs


def _get_next_sentence(sentence, next_sentence, paragraphs):
    """Keep the true next sentence or draw a random one, with even odds.

    Defined in :numref:`sec_bert-dataset`.

    Parameters
    ----------
    sentence, next_sentence : list of str
        Two consecutive sentences of a paragraph.
    paragraphs : list of list of list of str
        All paragraphs (of sentences of tokens), to draw a random sentence
        from.

    Returns
    -------
    tuple
        ``(sentence, next_sentence or a random sentence, is_next)``.
    """
    if random.random() < 0.5:
        return sentence, next_sentence, True
    # A random sentence of a random paragraph
    return sentence, random.choice(random.choice(paragraphs)), False


def _get_nsp_data_from_paragraph(paragraph, paragraphs, vocab, max_len):
    """Next sentence prediction examples from the sentences of a paragraph.

    Defined in :numref:`sec_bert-dataset`.

    Parameters
    ----------
    paragraph : list of list of str
        The sentences (lists of tokens) of one paragraph.
    paragraphs : list of list of list of str
        All paragraphs, for random next sentences.
    vocab : d2l.Vocab
        Unused; kept for the book's signature.
    max_len : int
        Maximum length of a BERT input; longer pairs are dropped.

    Returns
    -------
    list of tuple
        ``(tokens, segments, is_next)`` per kept pair, `tokens` starting
        with ``'<cls>'`` and `segments` of the same length (0s then 1s).
    """
    nsp_data_from_paragraph = []
    for i in range(len(paragraph) - 1):
        tokens_a, tokens_b, is_next = _get_next_sentence(
            paragraph[i], paragraph[i + 1], paragraphs)
        # The pair plus one '<cls>' and two '<sep>' must fit in `max_len`
        if len(tokens_a) + len(tokens_b) + 3 > max_len:
            continue
        tokens, segments = get_tokens_and_segments(tokens_a, tokens_b)
        nsp_data_from_paragraph.append((tokens, segments, is_next))
    return nsp_data_from_paragraph


def _replace_mlm_tokens(tokens, candidate_pred_positions, num_mlm_preds,
                        vocab):
    """Choose the positions to predict and corrupt the input there.

    Defined in :numref:`subsec_prepare_mlm_data`.

    Each chosen position gets ``'<mask>'`` with probability 0.8, keeps its
    token with probability 0.1 and gets a random token of `vocab` (a token
    string, possibly a special one) with probability 0.1.

    Parameters
    ----------
    tokens : list of str
        A BERT input sequence.
    candidate_pred_positions : list of int
        Positions that may be predicted (not ``'<cls>'`` or ``'<sep>'``);
        shuffled in place.
    num_mlm_preds : int
        How many positions to predict.
    vocab : d2l.Vocab
        Source of the random replacement tokens (`vocab.idx_to_token`).

    Returns
    -------
    mlm_input_tokens : list of str
        A corrupted copy of `tokens`.
    pred_positions_and_labels : list of (int, str)
        The chosen positions, in the order drawn, with their original
        tokens.
    """
    mlm_input_tokens = list(tokens)
    pred_positions_and_labels = []
    # A shuffled list of candidates: its head is a random subset
    random.shuffle(candidate_pred_positions)
    for mlm_pred_position in candidate_pred_positions:
        if len(pred_positions_and_labels) >= num_mlm_preds:
            break
        if random.random() < 0.8:
            # 80%: the mask token
            masked_token = '<mask>'
        elif random.random() < 0.5:
            # 10%: the token itself
            masked_token = tokens[mlm_pred_position]
        else:
            # 10%: a random token of the vocabulary
            masked_token = random.choice(vocab.idx_to_token)
        mlm_input_tokens[mlm_pred_position] = masked_token
        pred_positions_and_labels.append(
            (mlm_pred_position, tokens[mlm_pred_position]))
    return mlm_input_tokens, pred_positions_and_labels


def _get_mlm_data_from_tokens(tokens, vocab):
    """Masked language modeling data from a BERT input sequence.

    Defined in :numref:`subsec_prepare_mlm_data`.

    Parameters
    ----------
    tokens : list of str
        A BERT input sequence (with ``'<cls>'`` and ``'<sep>'``).
    vocab : d2l.Vocab
        The vocabulary.

    Returns
    -------
    token_ids : list of int
        Ids of the corrupted input, ``len(tokens)`` of them.
    pred_positions : list of int
        The ``max(1, round(0.15 * len(tokens)))`` predicted positions, in
        increasing order (fewer if the sequence has fewer candidates).
    mlm_pred_label_ids : list of int
        Ids of the original tokens at `pred_positions`.
    """
    # Every position but the special tokens may be predicted
    candidate_pred_positions = [i for i, token in enumerate(tokens)
                                if token not in ('<cls>', '<sep>')]
    # 15% of the tokens are predicted
    num_mlm_preds = max(1, round(len(tokens) * 0.15))
    mlm_input_tokens, pred_positions_and_labels = _replace_mlm_tokens(
        tokens, candidate_pred_positions, num_mlm_preds, vocab)
    pred_positions_and_labels.sort(key=lambda x: x[0])
    pred_positions = [position for position, _ in pred_positions_and_labels]
    mlm_pred_labels = [label for _, label in pred_positions_and_labels]
    return vocab[mlm_input_tokens], pred_positions, vocab[mlm_pred_labels]


def _pad_bert_inputs(examples, max_len, vocab):
    """Pad every example to `max_len` tokens and P predictions.

    Defined in :numref:`subsec_prepare_mlm_data`.

    Parameters
    ----------
    examples : list of tuple
        ``(token_ids, pred_positions, mlm_pred_label_ids, segments,
        is_next)`` per example.
    max_len : int
        T, the padded length of token ids and segments.
    vocab : d2l.Vocab
        Gives the id of ``'<pad>'``.

    Returns
    -------
    tuple of seven lists of N arrays
        all_token_ids : (T,) int32, padded with the id of ``'<pad>'``
        all_segments : (T,) int32, padded with 0
        valid_lens : () float32, the number of tokens before padding
        all_pred_positions : (P,) int32, padded with 0
        all_mlm_weights : (P,) float32, 1 per real prediction, 0 padding
        all_mlm_labels : (P,) int32, padded with 0
        nsp_labels : () float32 (MXNet's type for a Python bool), 1 if
        the second sentence is the true next one
    """
    max_num_mlm_preds = round(max_len * 0.15)
    all_token_ids, all_segments, valid_lens = [], [], []
    all_pred_positions, all_mlm_weights, all_mlm_labels = [], [], []
    nsp_labels = []
    pad = vocab['<pad>']
    for (token_ids, pred_positions, mlm_pred_label_ids, segments,
         is_next) in examples:
        num_pads = max_len - len(token_ids)
        num_pred_pads = max_num_mlm_preds - len(pred_positions)
        all_token_ids.append(np.array(
            token_ids + [pad] * num_pads, dtype='int32'))        # (T,)
        all_segments.append(np.array(
            segments + [0] * num_pads, dtype='int32'))           # (T,)
        # `valid_lens` counts the tokens that are not '<pad>'
        valid_lens.append(np.array(len(token_ids), dtype='float32'))  # ()
        all_pred_positions.append(np.array(
            pred_positions + [0] * num_pred_pads, dtype='int32'))  # (P,)
        # A weight of 0 removes a padded prediction from the loss
        all_mlm_weights.append(np.array(
            [1.0] * len(mlm_pred_label_ids) + [0.0] * num_pred_pads,
            dtype='float32'))                                    # (P,)
        all_mlm_labels.append(np.array(
            mlm_pred_label_ids + [0] * num_pred_pads, dtype='int32'))  # (P,)
        nsp_labels.append(np.array(is_next))                     # ()
    return (all_token_ids, all_segments, valid_lens, all_pred_positions,
            all_mlm_weights, all_mlm_labels, nsp_labels)


def _build_vocab(paragraphs):
    """The vocabulary of tokenized `paragraphs`, as the book builds it.

    Tokens seen fewer than 5 times become ``'<unk>'``; d2l 1.0's `Vocab`
    sorts its tokens alphabetically, so ids depend on the whole corpus.
    """
    from d2l import mxnet as d2l    # imported on use: it takes seconds
    sentences = [sentence for paragraph in paragraphs
                 for sentence in paragraph]
    return d2l.Vocab(sentences, min_freq=5, reserved_tokens=[
        '<pad>', '<mask>', '<cls>', '<sep>'])


class _WikiTextDataset(gluon.data.Dataset):
    """BERT pretraining examples from WikiText paragraphs.

    Defined in :numref:`subsec_prepare_mlm_data`.

    Parameters
    ----------
    paragraphs : list of list of str
        Paragraphs of sentence strings, as `_read_wiki` returns them.
    max_len : int
        T, the padded length of a BERT input.
    vocab : d2l.Vocab, optional
        The vocabulary to use (that of the training split, when building a
        held-out split); by default built from `paragraphs` with
        ``min_freq=5`` and the reserved tokens ``'<pad>'``, ``'<mask>'``,
        ``'<cls>'`` and ``'<sep>'``.
    pad : callable, keyword-only, default `_pad_bert_inputs`
        Pads the examples into the seven fields; the book's makes a list
        of N MXNet arrays per field (``pad(examples, max_len, vocab)``).
        `d2l_bert.fast.pad_bert_inputs_stacked` makes the same arrays
        stacked, (N, ...) each, in a fraction of the time.

    Attributes
    ----------
    vocab : d2l.Vocab
    all_token_ids, all_segments, valid_lens, all_pred_positions, \
    all_mlm_weights, all_mlm_labels, nsp_labels : list or array
        The seven fields of all N examples (see `_pad_bert_inputs`).

    Notes
    -----
    ``dataset[i]`` is a tuple of seven arrays, item `i` of each field:
    token ids (T,), segments (T,), valid length (), predicted positions
    (P,), prediction weights (P,), prediction labels (P,) and the next
    sentence label ().  Randomness (pairs and masks) comes from Python's
    `random`: seed it for a reproducible dataset.
    """
    def __init__(self, paragraphs, max_len, vocab=None, *,
                 pad=_pad_bert_inputs):
        from d2l import mxnet as d2l
        # Input `paragraphs[i]` is a list of sentence strings representing
        # a paragraph; while output `paragraphs[i]` is a list of sentences
        # representing a paragraph, where each sentence is a list of tokens
        paragraphs = [d2l.tokenize(paragraph, token='word')
                      for paragraph in paragraphs]
        check_sentence_pairs(paragraphs, max_len)
        self.vocab = _build_vocab(paragraphs) if vocab is None else vocab
        # Get data for the next sentence prediction task
        examples = []
        for paragraph in paragraphs:
            examples.extend(_get_nsp_data_from_paragraph(
                paragraph, paragraphs, self.vocab, max_len))
        # Get data for the masked language model task
        examples = [(_get_mlm_data_from_tokens(tokens, self.vocab)
                     + (segments, is_next))
                    for tokens, segments, is_next in examples]
        # Pad inputs
        (self.all_token_ids, self.all_segments, self.valid_lens,
         self.all_pred_positions, self.all_mlm_weights,
         self.all_mlm_labels, self.nsp_labels) = pad(
            examples, max_len, self.vocab)

    def __getitem__(self, idx):
        return (self.all_token_ids[idx], self.all_segments[idx],
                self.valid_lens[idx], self.all_pred_positions[idx],
                self.all_mlm_weights[idx], self.all_mlm_labels[idx],
                self.nsp_labels[idx])

    def __len__(self):
        return len(self.all_token_ids)


def load_data_wiki(batch_size, max_len, corpus='embedded', split='train',
                   vocab=None, seed=None, num_workers=0, root=DATA_ROOT, *,
                   pad=_pad_bert_inputs):
    """Load a WikiText corpus as minibatches of BERT pretraining examples.

    Defined in :numref:`subsec_prepare_mlm_data`.

    Parameters
    ----------
    batch_size : int
        B, examples per minibatch (the book: 512).
    max_len : int
        T, the padded length of a BERT input (the book: 64).
    corpus : str or path, default 'embedded'
        ``'embedded'``: the small corpus shipped with d2l_bert (see
        `d2l_bert.data.corpus`); ``'wikitext-2'``: WikiText-2, the book's
        corpus, from ``root/wikitext-2`` or downloaded (see
        `d2l_bert.data.wikitext.download_wikitext2`); otherwise a
        directory holding ``wiki.train.tokens`` (and
        ``wiki.valid.tokens``) or a file in WikiText's token format.
    split : {'train', 'valid'}
        ``'valid'`` reads ``wiki.valid.tokens``, the held-out split on which
        to measure masked-token and next-sentence accuracy, in order.
    vocab : d2l.Vocab, optional
        Vocabulary to encode with; by default built from the training
        split (so that the held-out split uses the training ids).
    seed : int, optional
        Seeds Python's `random` (paragraph order, sentence pairs, masks)
        and the minibatch order, for reproducible runs; None keeps the
        current random state, as the book does.
    num_workers : int, default 0
        Worker processes of the `DataLoader` (the book uses
        `d2l.get_dataloader_workers()`; the arrays are already in memory).
    root : str, default '../data'
        Where WikiText-2 is looked for and downloaded to.
    pad : callable, keyword-only, default `_pad_bert_inputs`
        The padding function of `_WikiTextDataset`
        (`d2l_bert.fast.pad_bert_inputs_stacked`: the same examples,
        faster).

    Returns
    -------
    data_iter : gluon.data.DataLoader
        Minibatches of seven arrays: tokens_X (B, T) int32, segments_X
        (B, T) int32, valid_lens_x (B,) float32, pred_positions_X (B, P)
        int32, mlm_weights_X (B, P) float32, mlm_Y (B, P) int32 and nsp_y
        (B,) float32; shuffled for ``split='train'``.
    vocab : d2l.Vocab
    """
    check_positive_int('batch_size', batch_size)
    check_positive_int('max_len', max_len)
    if split not in ('train', 'valid'):
        raise ValueError(f"split must be 'train' or 'valid', got {split!r}")
    if seed is not None:
        random.seed(seed)
    if vocab is None and split != 'train':
        # The held-out split speaks the training split's ids
        from d2l import mxnet as d2l
        data_dir, file_name = locate_corpus(corpus, 'train', root)
        vocab = _build_vocab([d2l.tokenize(paragraph, token='word')
                              for paragraph in _read_wiki(data_dir,
                                                          file_name)])
    data_dir, file_name = locate_corpus(corpus, split, root)
    paragraphs = _read_wiki(data_dir, file_name)
    try:
        dataset = _WikiTextDataset(paragraphs, max_len, vocab, pad=pad)
    except CorpusError as e:
        path = os.path.join(data_dir, file_name)
        raise CorpusError(f'corpus={corpus!r} ({path}): {e}') from None
    if split == 'train' and seed is not None:
        data_iter = gluon.data.DataLoader(
            dataset, batch_size, num_workers=num_workers,
            sampler=SeededRandomSampler(len(dataset), seed))
    else:
        data_iter = gluon.data.DataLoader(
            dataset, batch_size, shuffle=split == 'train',
            num_workers=num_workers)
    return data_iter, dataset.vocab
