"""sec_bert-dataset: the dataset for pretraining BERT, in the book's order.

Raw WikiText lines become paragraphs of sentences (`_read_wiki`), sentence
pairs for next sentence prediction (`_get_next_sentence`,
`_get_nsp_data_from_paragraph`), masked tokens for masked language modeling
(`_replace_mlm_tokens`, `_get_mlm_data_from_tokens`) and padded arrays
(`_pad_bert_inputs`), gathered by `_WikiTextDataset` and served in
minibatches by `load_data_wiki`.  The code is the book's.

Underneath, where the book's own calls land: `download_extract` is
`d2l_bert.data.hub`'s, which gives the embedded corpus (generated articles
in WikiText's format, shipped with the package) when WikiText-2 cannot be
downloaded, as the book's address no longer serves it.  Beyond the book,
and applied from outside, `d2l_bert.runs.wiki_data.load_pretraining_data`
chooses a corpus, a held-out split, a seed and a faster padding, with the
checks the command line needs.

Dimension key used in the shapes below:

N: number of examples, B: batch size, T: `max_len`,
P: ``round(max_len * 0.15)`` predicted positions per sequence
"""
import os
import random

from d2l import mxnet as d2l
from mxnet import gluon, np

from .bert import get_tokens_and_segments
from ..data.hub import DATA_HUB, download_extract

DATA_HUB['wikitext-2'] = (
    'https://s3.amazonaws.com/research.metamind.io/wikitext/'
    'wikitext-2-v1.zip', '3c914d17d80b1459be871a5039ac23e752a53cbe')


def _read_wiki(data_dir):
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
        Directory holding ``wiki.train.tokens``, in WikiText's token
        format.

    Returns
    -------
    list of list of str
        ``paragraphs[i][j]`` is sentence `j` of paragraph `i`, tokens
        separated by spaces.
    """
    file_name = os.path.join(data_dir, 'wiki.train.tokens')
    with open(file_name, 'r') as f:
        lines = f.readlines()
    # Uppercase letters are converted to lowercase ones
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
        is_next = True
    else:
        # `paragraphs` is a list of lists of lists
        next_sentence = random.choice(random.choice(paragraphs))
        is_next = False
    return sentence, next_sentence, is_next


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
        # Consider 1 '<cls>' token and 2 '<sep>' tokens
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
    # For the input of a masked language model, make a new copy of tokens and
    # replace some of them by '<mask>' or random tokens
    mlm_input_tokens = [token for token in tokens]
    pred_positions_and_labels = []
    # Shuffle for getting 15% random tokens for prediction in the masked
    # language modeling task
    random.shuffle(candidate_pred_positions)
    for mlm_pred_position in candidate_pred_positions:
        if len(pred_positions_and_labels) >= num_mlm_preds:
            break
        masked_token = None
        # 80% of the time: replace the word with the '<mask>' token
        if random.random() < 0.8:
            masked_token = '<mask>'
        else:
            # 10% of the time: keep the word unchanged
            if random.random() < 0.5:
                masked_token = tokens[mlm_pred_position]
            # 10% of the time: replace the word with a random word
            else:
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
    candidate_pred_positions = []
    # `tokens` is a list of strings
    for i, token in enumerate(tokens):
        # Special tokens are not predicted in the masked language modeling
        # task
        if token in ['<cls>', '<sep>']:
            continue
        candidate_pred_positions.append(i)
    # 15% of random tokens are predicted in the masked language modeling task
    num_mlm_preds = max(1, round(len(tokens) * 0.15))
    mlm_input_tokens, pred_positions_and_labels = _replace_mlm_tokens(
        tokens, candidate_pred_positions, num_mlm_preds, vocab)
    pred_positions_and_labels = sorted(pred_positions_and_labels,
                                       key=lambda x: x[0])
    pred_positions = [v[0] for v in pred_positions_and_labels]
    mlm_pred_labels = [v[1] for v in pred_positions_and_labels]
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
    all_token_ids, all_segments, valid_lens,  = [], [], []
    all_pred_positions, all_mlm_weights, all_mlm_labels = [], [], []
    nsp_labels = []
    for (token_ids, pred_positions, mlm_pred_label_ids, segments,
         is_next) in examples:
        all_token_ids.append(np.array(token_ids + [vocab['<pad>']] * (
            max_len - len(token_ids)), dtype='int32'))           # (T,)
        all_segments.append(np.array(segments + [0] * (
            max_len - len(segments)), dtype='int32'))            # (T,)
        # `valid_lens` excludes count of '<pad>' tokens
        valid_lens.append(np.array(len(token_ids), dtype='float32'))  # ()
        all_pred_positions.append(np.array(pred_positions + [0] * (
            max_num_mlm_preds - len(pred_positions)), dtype='int32'))  # (P,)
        # Predictions of padded tokens will be filtered out in the loss via
        # multiplication of 0 weights
        all_mlm_weights.append(
            np.array([1.0] * len(mlm_pred_label_ids) + [0.0] * (
                max_num_mlm_preds - len(pred_positions)),
                dtype='float32'))                                # (P,)
        all_mlm_labels.append(np.array(mlm_pred_label_ids + [0] * (
            max_num_mlm_preds - len(mlm_pred_label_ids)),
            dtype='int32'))                                      # (P,)
        nsp_labels.append(np.array(is_next))                     # ()
    return (all_token_ids, all_segments, valid_lens, all_pred_positions,
            all_mlm_weights, all_mlm_labels, nsp_labels)


class _WikiTextDataset(gluon.data.Dataset):
    """BERT pretraining examples from WikiText paragraphs.

    Defined in :numref:`subsec_prepare_mlm_data`.

    Parameters
    ----------
    paragraphs : list of list of str
        Paragraphs of sentence strings, as `_read_wiki` returns them.
    max_len : int
        T, the padded length of a BERT input.

    Attributes
    ----------
    vocab : d2l.Vocab
        Built from `paragraphs`: tokens seen at least 5 times, and the
        reserved tokens ``'<pad>'``, ``'<mask>'``, ``'<cls>'`` and
        ``'<sep>'`` (d2l 1.0's `Vocab` sorts its tokens, so ids depend on
        the whole corpus).
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
    def __init__(self, paragraphs, max_len):
        # Input `paragraphs[i]` is a list of sentence strings representing a
        # paragraph; while output `paragraphs[i]` is a list of sentences
        # representing a paragraph, where each sentence is a list of tokens
        paragraphs = [d2l.tokenize(
            paragraph, token='word') for paragraph in paragraphs]
        sentences = [sentence for paragraph in paragraphs
                     for sentence in paragraph]
        self.vocab = d2l.Vocab(sentences, min_freq=5, reserved_tokens=[
            '<pad>', '<mask>', '<cls>', '<sep>'])
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
         self.all_mlm_labels, self.nsp_labels) = _pad_bert_inputs(
            examples, max_len, self.vocab)

    def __getitem__(self, idx):
        return (self.all_token_ids[idx], self.all_segments[idx],
                self.valid_lens[idx], self.all_pred_positions[idx],
                self.all_mlm_weights[idx], self.all_mlm_labels[idx],
                self.nsp_labels[idx])

    def __len__(self):
        return len(self.all_token_ids)


def load_data_wiki(batch_size, max_len):
    """Load the WikiText-2 dataset.

    Defined in :numref:`subsec_prepare_mlm_data`.

    WikiText-2 comes from the data hub (``d2l_bert.data.hub``): from its
    cache, downloaded, or, where it cannot be downloaded, the embedded
    corpus standing in, which one printed line announces.

    Parameters
    ----------
    batch_size : int
        B, examples per minibatch (the book: 512).
    max_len : int
        T, the padded length of a BERT input (the book: 64).

    Returns
    -------
    train_iter : gluon.data.DataLoader
        Shuffled minibatches of seven arrays: tokens_X (B, T) int32,
        segments_X (B, T) int32, valid_lens_x (B,) float32,
        pred_positions_X (B, P) int32, mlm_weights_X (B, P) float32, mlm_Y
        (B, P) int32 and nsp_y (B,) float32.
    vocab : d2l.Vocab
    """
    num_workers = d2l.get_dataloader_workers()
    data_dir = download_extract('wikitext-2', 'wikitext-2')
    paragraphs = _read_wiki(data_dir)
    train_set = _WikiTextDataset(paragraphs, max_len)
    train_iter = gluon.data.DataLoader(train_set, batch_size, shuffle=True,
                                       num_workers=num_workers)
    return train_iter, train_set.vocab
