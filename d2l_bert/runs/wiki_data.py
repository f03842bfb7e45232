"""Pretraining data beyond the book's `load_data_wiki`: which corpus, which
split, which seed, which padding, checked.

The book's `d2l_bert.book.dataset.load_data_wiki(batch_size, max_len)` reads
WikiText-2 (or the embedded corpus standing in for it).  ``d2l-bert
pretrain``, the runs and the benchmarks need more, applied here from
outside the book's code and built from its functions::

    train_iter, vocab = load_pretraining_data(
        batch_size, max_len, corpus='embedded', seed=0,
        pad=d2l_bert.fast.pad_bert_inputs_stacked)
    valid_iter, _ = load_pretraining_data(
        batch_size, max_len, split='valid', vocab=vocab)

With a `seed`, the same batches as the book's code after
``random.seed(seed)``, in a reproducible order.

Dimension key: B: batch size, T: `max_len`,
P: ``round(max_len * 0.15)`` predicted positions per sequence
"""
import os
import random

from d2l import mxnet as d2l
from mxnet import gluon

from ..checks import check_positive_int
from ..data.wikitext import (CorpusError, CorpusNotFoundError,
                             SeededRandomSampler, check_sentence_pairs,
                             locate_corpus)
from ..book.dataset import (_get_mlm_data_from_tokens,
                       _get_nsp_data_from_paragraph, _pad_bert_inputs,
                       _WikiTextDataset)
from .memory import check_files_fit

SPLITS = ('train', 'valid')


#: Bytes of memory a byte of a corpus takes once read and prepared into
#: examples (the embedded corpus: 2.9 MB of text, 93 MB more memory)
CORPUS_BYTES = 40


def read_paragraphs(data_dir, file_name):
    """The book's `_read_wiki` for any file of a corpus, checked.

    Parameters
    ----------
    data_dir : str
        The corpus's directory.
    file_name : str
        ``'wiki.train.tokens'``, ``'wiki.valid.tokens'`` or another file
        in WikiText's token format.

    Returns
    -------
    list of list of str
        Shuffled paragraphs of lower-cased sentence strings.

    Raises
    ------
    CorpusNotFoundError, CorpusError
        When the file is missing, empty or not UTF-8.
    ValueError
        When it would need more memory than this process can take
        (`CORPUS_BYTES` a byte).
    """
    path = os.path.join(data_dir, file_name)
    if not os.path.isfile(path):
        raise CorpusNotFoundError(
            f"no corpus file {path!r} (data_dir={data_dir!r}): expected a "
            f"text file in WikiText's token format, one paragraph a line")
    check_files_fit([path], CORPUS_BYTES, f'corpus file {path!r}')
    try:
        with open(path, 'r', encoding='utf-8') as f:
            lines = f.readlines()
    except UnicodeDecodeError as e:
        raise CorpusError(f'corpus file {path!r} is not UTF-8 text (byte '
                          f'{e.object[e.start]:#04x}); expected text in '
                          "WikiText's token format") from None
    if not any(line.strip() for line in lines):
        raise CorpusError(f'corpus file {path!r} is empty: expected text '
                          f"in WikiText's token format")
    paragraphs = [line.strip().lower().split(' . ')
                  for line in lines if len(line.split(' . ')) >= 2]
    random.shuffle(paragraphs)
    return paragraphs


#: How often a word must occur to be in the vocabulary (the book's
#: `_WikiTextDataset`, ``min_freq=5``)
MIN_FREQ = 5


def build_vocab(paragraphs):
    """The vocabulary `_WikiTextDataset` builds, from tokenized
    `paragraphs` (lists of sentences of tokens)."""
    sentences = [sentence for paragraph in paragraphs
                 for sentence in paragraph]
    return d2l.Vocab(sentences, min_freq=MIN_FREQ, reserved_tokens=[
        '<pad>', '<mask>', '<cls>', '<sep>'])


class WikiTextExamples(_WikiTextDataset):
    """The book's `_WikiTextDataset`, with a given vocabulary and padding.

    Parameters
    ----------
    paragraphs : list of list of str
        As `read_paragraphs` returns them.
    max_len : int
        T, the padded length of a BERT input.
    vocab : d2l.Vocab, optional
        The training split's, for a held-out split; by default built from
        `paragraphs` as the book does.
    pad : callable, default the book's `_pad_bert_inputs`
        ``pad(examples, max_len, vocab)``;
        `d2l_bert.fast.pad_bert_inputs_stacked` gives the same arrays
        stacked, (N, ...) each, in a fraction of the time.
    """

    def __init__(self, paragraphs, max_len, vocab=None,
                 pad=_pad_bert_inputs):
        paragraphs = [d2l.tokenize(paragraph, token='word')
                      for paragraph in paragraphs]
        check_sentence_pairs(paragraphs, max_len)
        self.vocab = build_vocab(paragraphs) if vocab is None else vocab
        examples = []
        for paragraph in paragraphs:
            examples.extend(_get_nsp_data_from_paragraph(
                paragraph, paragraphs, self.vocab, max_len))
        examples = [(_get_mlm_data_from_tokens(tokens, self.vocab)
                     + (segments, is_next))
                    for tokens, segments, is_next in examples]
        (self.all_token_ids, self.all_segments, self.valid_lens,
         self.all_pred_positions, self.all_mlm_weights,
         self.all_mlm_labels, self.nsp_labels) = pad(
            examples, max_len, self.vocab)


def load_pretraining_data(batch_size, max_len, corpus='embedded',
                          split='train', vocab=None, seed=None,
                          num_workers=0, root=None, *,
                          pad=_pad_bert_inputs):
    """Minibatches of BERT pretraining examples from a chosen corpus.

    Parameters
    ----------
    batch_size : int
        B, examples per minibatch (the book: 512).
    max_len : int
        T, the padded length of a BERT input (the book: 64).
    corpus : str or path, default 'embedded'
        ``'embedded'``: the corpus shipped with d2l_bert
        (`d2l_bert.data.corpus`); ``'wikitext-2'``: the book's, from
        ``root/wikitext-2`` or downloaded
        (`d2l_bert.data.wikitext.download_wikitext2`); otherwise a
        directory holding ``wiki.train.tokens`` (and
        ``wiki.valid.tokens``) or a file in WikiText's token format.
    split : {'train', 'valid'}
        ``'valid'``: ``wiki.valid.tokens``, served in order.
    vocab : d2l.Vocab, optional
        Ids to encode with; by default the training split's.
    seed : int, optional
        Seeds Python's `random` (paragraph order, pairs, masks) and the
        minibatch order; None keeps the current state, as the book does.
    num_workers : int, default 0
        Worker processes of the `DataLoader`.
    root : str, optional
        Where WikiText-2 is looked for and downloaded to; default the
        data folder, ``$D2L_BERT_DATA`` (`download_wikitext2`).
    pad : callable, keyword-only
        The padding (`WikiTextExamples`).

    Returns
    -------
    data_iter : gluon.data.DataLoader
        Minibatches of tokens_X (B, T) int32, segments_X (B, T) int32,
        valid_lens_x (B,) float32, pred_positions_X (B, P) int32,
        mlm_weights_X (B, P) float32, mlm_Y (B, P) int32, nsp_y (B,)
        float32; shuffled for ``split='train'``.
    vocab : d2l.Vocab
    """
    check_positive_int('batch_size', batch_size)
    check_positive_int('max_len', max_len)
    if split not in SPLITS:
        raise ValueError(f"split must be 'train' or 'valid', got {split!r}")
    if seed is not None:
        random.seed(seed)
    if vocab is None and split != 'train':
        # The held-out split speaks the training split's ids
        data_dir, file_name = locate_corpus(corpus, 'train', root)
        vocab = build_vocab([d2l.tokenize(paragraph, token='word')
                             for paragraph in read_paragraphs(
                                 data_dir, file_name)])
    data_dir, file_name = locate_corpus(corpus, split, root)
    paragraphs = read_paragraphs(data_dir, file_name)
    try:
        dataset = WikiTextExamples(paragraphs, max_len, vocab, pad=pad)
    except CorpusError as e:
        path = os.path.join(data_dir, file_name)
        raise CorpusError(f'corpus={corpus!r} ({path}): {e}') from None
    return _loader(dataset, batch_size, split, seed, num_workers), \
        dataset.vocab


def _loader(dataset, batch_size, split, seed, num_workers):
    """The `DataLoader` of `load_pretraining_data`: shuffled for training,
    by a generator of its own when seeded."""
    if split == 'train' and seed is not None:
        return gluon.data.DataLoader(
            dataset, batch_size, num_workers=num_workers,
            sampler=SeededRandomSampler(len(dataset), seed))
    return gluon.data.DataLoader(dataset, batch_size,
                                 shuffle=split == 'train',
                                 num_workers=num_workers)
