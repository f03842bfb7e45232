"""sec_natural-language-inference-bert: fine-tuning BERT on SNLI.

Read top to bottom in the book's order: load a pretrained BERT
(`load_pretrained_model`), pack premise/hypothesis pairs into BERT inputs
(`read_snli`, `SNLIBERTDataset`), put a small MLP on the `<cls>`
representation (`BERTClassifier`) and train the whole network
(`train_ch13`, the loop the book borrows from its image chapter).

Beyond the book, here: `read_snli` reads only the first pairs of a split
when `SNLI_PAIRS_ENV` says so; `train_ch13` is d2l's loop, which also
runs on fewer than five batches an epoch; and offline, `download_extract`
gives stand-ins for ``bert.small``, ``bert.base`` and ``SNLI``
(registered in `data.hub.STAND_INS` at import).  Elsewhere:
`d2l_bert.runs.finetuning` checks a model directory and its sizes, and
trains returning the history (what ``d2l-bert finetune`` runs).

Dimension key used in the shape comments:

N: number of examples, B: batch size, T: sequence length (`max_len`),
H: num_hiddens, C: number of classes (3: entailment, contradiction,
neutral)
"""
import json
import multiprocessing
import os
import re
import sys

from d2l import mxnet as d2l
from mxnet import gluon, np
from mxnet.gluon import nn

from .bert import BERTModel, get_tokens_and_segments
from ..data import snli_synthetic
from ..data.hub import (DATA_HUB, DATA_URL, STAND_INS,  # noqa: F401
                       download_extract)
from ..presets import HUB_MODELS

SNLI_LABELS = {'entailment': 0, 'contradiction': 1, 'neutral': 2}

#: Environment variable that makes `read_snli` read only the first pairs
#: of a split: a number, or 0 or ``all`` for every pair (the chapter's
#: notebooks set it, `d2l_bert.chapter.notebooks.SNLI_PAIRS_ENV`)
SNLI_PAIRS_ENV = 'D2L_BERT_SNLI_PAIRS'


# --------------------------------------------------------------------------
# Loading pretrained BERT
# --------------------------------------------------------------------------

def load_pretrained_model(pretrained_model, num_hiddens, ffn_num_hiddens,
                          num_heads, num_blks, dropout, max_len, devices):
    """Build a `BERTModel` and load pretrained parameters into it.

    Defined in :numref:`sec_natural-language-inference-bert`.

    Parameters
    ----------
    pretrained_model : str
        ``'bert.small'`` or ``'bert.base'`` (downloaded from the d2l data
        hub and checked against `DATA_HUB`'s SHA-1), or a local directory
        in the same layout: `pretrained.params` and `vocab.json` (a JSON
        list of tokens).
    num_hiddens, ffn_num_hiddens, num_heads, num_blks : int
        Sizes the model was pretrained with (`bert.small`: 256, 512, 4,
        2).
    dropout : float
        Dropout used while fine-tuning.
    max_len : int
        Number of learned positions (512 for the hub models).
    devices : mxnet.Context or list of mxnet.Context
        Where to put the parameters.

    Returns
    -------
    bert : BERTModel
    vocab : d2l.Vocab
        The vocabulary the model was pretrained with.

    Notes
    -----
    Offline, `download_extract` gives a stand-in for ``'bert.small'`` and
    ``'bert.base'`` (an untrained model of their sizes, `hub_stand_in`).
    The arguments are not checked here: `d2l_bert.runs.finetuning.
    load_checked_model`, which the command line calls, says what is wrong
    with a model directory in one line.
    """
    data_dir = download_extract(pretrained_model)
    # Define an empty vocabulary to load the predefined vocabulary
    vocab = d2l.Vocab()
    vocab.idx_to_token = json.load(open(os.path.join(data_dir, 'vocab.json')))
    vocab.token_to_idx = {token: idx for idx, token in enumerate(
        vocab.idx_to_token)}
    bert = BERTModel(len(vocab), num_hiddens, ffn_num_hiddens, num_heads,
                     num_blks, dropout, max_len)
    # Load pretrained BERT parameters
    bert.load_parameters(os.path.join(data_dir, 'pretrained.params'),
                         ctx=devices)
    return bert, vocab


# --------------------------------------------------------------------------
# The dataset for fine-tuning BERT
# --------------------------------------------------------------------------

def read_snli(data_dir, is_train):
    """Read SNLI's premises, hypotheses and labels.

    Defined in :numref:`sec_natural-language-inference-and-dataset`.

    Reads ``snli_1.0_train.txt`` or ``snli_1.0_test.txt``: a header line,
    then tab-separated rows whose columns 1 to 3 are the gold label and the
    binary parses of premise and hypothesis.  Parentheses of the parses are
    dropped; rows whose gold label is not one of the three (``-``:
    annotators disagreed) are skipped.

    Parameters
    ----------
    data_dir : str
        Directory of the files (``snli_1.0`` in SNLI's archive).
    is_train : bool
        The training split if true, else the test split.

    Returns
    -------
    premises, hypotheses : list of str
    labels : list of int
        0 entailment, 1 contradiction, 2 neutral.

    Notes
    -----
    Beyond the book: with `SNLI_PAIRS_ENV` set to a number N, only the
    first N pairs of the split are returned, and one line says so.  Five
    epochs over all 549,367 training pairs take hours on a CPU; the
    chapter's notebooks read the first 1,000 unless told ``all``.
    """
    def extract_text(s):
        # Drop the parse's parentheses, then squeeze the spaces they leave
        s = re.sub('\\(', '', s)
        s = re.sub('\\)', '', s)
        s = re.sub('\\s{2,}', ' ', s)
        return s.strip()

    file_name = os.path.join(data_dir, 'snli_1.0_train.txt'
                             if is_train else 'snli_1.0_test.txt')
    if not os.path.isfile(file_name):
        raise FileNotFoundError(
            f'{file_name} not found: the SNLI directory must hold '
            'snli_1.0_train.txt and snli_1.0_test.txt (the snli_1.0 folder '
            'of snli_1.0.zip, or the synthetic data of '
            '`d2l_bert.data.snli_synthetic.make_snli_synthetic`)')
    premises, hypotheses, labels = [], [], []
    with open(file_name, encoding='utf-8') as f:
        for line_no, line in enumerate(f, 1):
            row = line.split('\t')
            if line_no == 1 or row[0] not in SNLI_LABELS:
                continue
            if len(row) < 3:
                raise ValueError(
                    f'{file_name}, line {line_no}: expected tab-separated '
                    f'label, premise and hypothesis, got {line[:60]!r}')
            premises.append(extract_text(row[1]))
            hypotheses.append(extract_text(row[2]))
            labels.append(SNLI_LABELS[row[0]])
    if not labels:
        raise ValueError(f'{file_name} holds no labelled example')
    first = snli_pairs()
    if first and first < len(labels):
        print(f'read_snli: the first {first:,} of {len(labels):,} pairs of '
              f'{os.path.basename(file_name)} ({SNLI_PAIRS_ENV}={first}; '
              f'all reads every pair)', file=sys.stderr, flush=True)
        premises, hypotheses, labels = (premises[:first],
                                        hypotheses[:first], labels[:first])
    return premises, hypotheses, labels


def snli_pairs(environ=None):
    """The pairs of each split `read_snli` reads: `SNLI_PAIRS_ENV` of
    `environ` (default `os.environ`) as a number, 0 for every pair (not
    set, empty, 0 or ``all``).

    Raises
    ------
    ValueError
        If the variable is neither a whole number nor ``all``.
    """
    environ = os.environ if environ is None else environ
    value = environ.get(SNLI_PAIRS_ENV, '').strip().lower()
    if value in ('', 'all'):
        return 0
    if not value.isdigit():
        raise ValueError(f'{SNLI_PAIRS_ENV} must be a number of pairs or '
                         f'all, got {environ[SNLI_PAIRS_ENV]!r}')
    return int(value)


class SNLIBERTDataset(gluon.data.Dataset):
    """SNLI pairs packed into BERT inputs of length `max_len`.

    Defined in :numref:`sec_natural-language-inference-bert`.

    Each premise/hypothesis pair becomes ``<cls> premise <sep> hypothesis
    <sep>`` with segment ids 0 then 1, padded with `<pad>` to `max_len`.
    While the pair is too long, the last token of the longer text (of the
    hypothesis on a tie) is dropped.

    Parameters
    ----------
    dataset : tuple of lists
        ``(premises, hypotheses, labels)`` as `read_snli` returns.
    max_len : int
        Length of every BERT input, at least 3 (`<cls>` and two `<sep>`).
    vocab : d2l.Vocab
        The pretrained model's vocabulary (it must hold `<pad>`).

    Notes
    -----
    As in the book, four worker processes pack the pairs
    (`multiprocessing.Pool`); unlike the book's, the pool is closed once
    they are packed (the book's four processes, and the pool's temporary
    folder, stay until the kernel ends).  The arguments are checked where the
    command line and `d2l_bert.runs.finetuning` build the data set
    (`d2l_bert.checks.check_snli_dataset`), not here.

    Item ``i`` is ``((token_ids, segments, valid_len), label)``:
    ``(T,) int32``, ``(T,) int32``, ``() float32`` and ``() float32``.
    """
    def __init__(self, dataset, max_len, vocab=None):
        all_premise_hypothesis_tokens = [[
            p_tokens, h_tokens] for p_tokens, h_tokens in zip(
            *[d2l.tokenize([s.lower() for s in sentences])
              for sentences in dataset[:2]])]

        self.labels = np.array(dataset[2])                    # (N,)
        self.vocab = vocab
        self.max_len = max_len
        (self.all_token_ids, self.all_segments,
         self.valid_lens) = self._preprocess(all_premise_hypothesis_tokens)
        print('read ' + str(len(self.all_token_ids)) + ' examples')

    def _preprocess(self, all_premise_hypothesis_tokens):
        with multiprocessing.Pool(4) as pool:  # Use 4 worker processes
            out = pool.map(self._mp_worker, all_premise_hypothesis_tokens)
        all_token_ids = [
            token_ids for token_ids, segments, valid_len in out]
        all_segments = [segments for token_ids, segments, valid_len in out]
        valid_lens = [valid_len for token_ids, segments, valid_len in out]
        return (np.array(all_token_ids, dtype='int32'),  # (N, T)
                np.array(all_segments, dtype='int32'),   # (N, T)
                np.array(valid_lens))                    # (N,)

    def _mp_worker(self, premise_hypothesis_tokens):
        p_tokens, h_tokens = premise_hypothesis_tokens
        self._truncate_pair_of_tokens(p_tokens, h_tokens)
        tokens, segments = get_tokens_and_segments(p_tokens, h_tokens)
        token_ids = self.vocab[tokens] + [self.vocab['<pad>']] \
                             * (self.max_len - len(tokens))
        segments = segments + [0] * (self.max_len - len(segments))
        valid_len = len(tokens)
        return token_ids, segments, valid_len

    def _truncate_pair_of_tokens(self, p_tokens, h_tokens):
        # Reserve slots for '<CLS>', '<SEP>', and '<SEP>' tokens for the BERT
        # input
        while len(p_tokens) + len(h_tokens) > self.max_len - 3:
            if len(p_tokens) > len(h_tokens):
                p_tokens.pop()
            else:
                h_tokens.pop()

    def __getitem__(self, idx):
        return (self.all_token_ids[idx], self.all_segments[idx],
                self.valid_lens[idx]), self.labels[idx]

    def __len__(self):
        return len(self.all_token_ids)


# --------------------------------------------------------------------------
# Fine-tuning BERT
# --------------------------------------------------------------------------

class BERTClassifier(nn.Block):
    """Pretrained BERT with an MLP that classifies the `<cls>` token.

    Defined in :numref:`sec_natural-language-inference-bert`.

    `encoder` and `hidden` are the pretrained model's blocks (fine-tuned);
    `output` is a new ``Dense(3)`` that must be initialized before use.

    Parameters
    ----------
    bert : BERTModel
        Pretrained, as `load_pretrained_model` returns it.

    Notes
    -----
    Called on ``inputs = (tokens_X, segments_X, valid_lens_x)`` of
    shapes ``(B, T)``, ``(B, T)`` and ``(B,)``, it returns the ``(B, 3)``
    scores of entailment, contradiction and neutral.
    """
    def __init__(self, bert):
        super(BERTClassifier, self).__init__()
        self.encoder = bert.encoder
        self.hidden = bert.hidden
        self.output = nn.Dense(3)

    def forward(self, inputs):
        tokens_X, segments_X, valid_lens_x = inputs
        encoded_X = self.encoder(tokens_X, segments_X,
                                 valid_lens_x)               # (B, T, H)
        # `<cls>` is at position 0
        return self.output(self.hidden(encoded_X[:, 0, :]))  # (B, 3)


def train_ch13(net, train_iter, test_iter, loss, trainer, num_epochs,
               devices=d2l.try_all_gpus(), split_f=None):
    """Train a model on several devices, plotting loss and accuracies.

    d2l 1.0.3's `train_ch13` (the loop the book's image chapter defines
    and this section borrows), line for line, except that an epoch of
    fewer than five batches is plotted too: d2l's takes the batch count's
    fifth modulo, which is 0 then (1,000 SNLI pairs in batches of 512).

    Parameters
    ----------
    net : gluon.Block
        Called on the shards `split_f` gives.
    train_iter, test_iter : iterable of (features, labels)
        Minibatches; `len(train_iter)` is the batch count of an epoch.
    loss : gluon.loss.Loss
        Per-example loss of the predictions and the labels.
    trainer : gluon.Trainer
        Steps with ``ignore_stale_grad=True``: parameters that get no
        gradient (BERT's pretraining heads) are left as they are.
    num_epochs : int
        Passes over `train_iter`.
    devices : list of mxnet.Context
        Where `net` is; each batch is split over them.
    split_f : callable, optional
        ``split_f(features, labels, devices)`` -> shards
        (`d2l.split_batch_multi_inputs` for BERT's three inputs); None,
        d2l's default, `d2l.split_batch`.

    Notes
    -----
    Prints the last epoch's loss and accuracies, and the throughput.
    """
    split_f = d2l.split_batch if split_f is None else split_f
    timer, num_batches = d2l.Timer(), len(train_iter)
    animator = d2l.Animator(xlabel='epoch', xlim=[1, num_epochs], ylim=[0, 1],
                            legend=['train loss', 'train acc', 'test acc'])
    for epoch in range(num_epochs):
        # Sum of training loss, sum of training accuracy, no. of examples,
        # no. of predictions
        metric = d2l.Accumulator(4)
        for i, (features, labels) in enumerate(train_iter):
            timer.start()
            l, acc = d2l.train_batch_ch13(
                net, features, labels, loss, trainer, devices, split_f)
            metric.add(l, acc, labels.shape[0], labels.size)
            timer.stop()
            if (i + 1) % max(num_batches // 5, 1) == 0 or \
                    i == num_batches - 1:
                animator.add(epoch + (i + 1) / num_batches,
                             (metric[0] / metric[2], metric[1] / metric[3],
                              None))
        test_acc = d2l.evaluate_accuracy_gpus(net, test_iter, split_f)
        animator.add(epoch + 1, (None, None, test_acc))
    print(f'loss {metric[0] / metric[2]:.3f}, train acc '
          f'{metric[1] / metric[3]:.3f}, test acc {test_acc:.3f}')
    print(f'{metric[2] * num_epochs / timer.sum():.1f} examples/sec on '
          f'{str(devices)}')


# --------------------------------------------------------------------------
# Offline stand-ins of the files this section downloads
# --------------------------------------------------------------------------

#: Pairs of each split of SNLI's offline stand-in (synthetic pairs)
SNLI_STAND_IN = dict(num_train=512, num_dev=16, num_test=128)


def hub_stand_in(name, folder):
    """Fill `folder` with the offline stand-in of hub model `name`.

    An untrained `BERTModel` of the sizes the book loads `name` with
    (`presets.HUB_MODELS`), on the vocabulary of d2l-bert's embedded
    corpus, saved in d2l's layout (``pretrained.params``, ``vocab.json``):
    the book's cells run and their shapes can be checked, but numbers
    trained from it mean nothing.

    Returns
    -------
    directory : str
    what : str
        What stands in, for `download_extract`'s line.
    """
    from mxnet import init
    params = os.path.join(folder, 'pretrained.params')
    if not os.path.isfile(params):
        sizes = HUB_MODELS[name]
        vocab = _embedded_vocab()
        net = BERTModel(len(vocab), **sizes)
        net.initialize(init.Xavier())
        # One call gives the deferred parameters their shapes
        tokens = np.zeros((1, 4), dtype='int32')
        net(tokens, tokens, np.array([4.0]), np.zeros((1, 1), dtype='int32'))
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, 'vocab.json'), 'w',
                  encoding='utf-8') as f:
            json.dump(vocab.idx_to_token, f)
        net.save_parameters(params + '.tmp')
        os.replace(params + '.tmp', params)
    return folder, (f'an untrained BERT of {name}\'s sizes with the '
                    'embedded corpus\'s vocabulary')


def _embedded_vocab():
    """The vocabulary `_WikiTextDataset` builds from the embedded corpus
    (the file read in order: a vocabulary does not depend on it, and
    Python's random state is left alone)."""
    from ..data.corpus import DATA_DIR
    with open(os.path.join(DATA_DIR, 'wiki.train.tokens'),
              encoding='utf-8') as f:
        paragraphs = [d2l.tokenize(line.strip().lower().split(' . '),
                                   token='word')
                      for line in f if len(line.split(' . ')) >= 2]
    return d2l.Vocab([sentence for paragraph in paragraphs
                      for sentence in paragraph], min_freq=5,
                     reserved_tokens=['<pad>', '<mask>', '<cls>', '<sep>'])


def snli_stand_in(folder):
    """Fill `folder` with SNLI's offline stand-in: synthetic pairs in
    SNLI's layout (`data.snli_synthetic`); return ``(directory, what)``.
    """
    data_dir = os.path.join(folder, 'snli_1.0')
    if not os.path.isfile(os.path.join(data_dir, 'snli_1.0_test.txt')):
        data_dir = snli_synthetic.make_snli_synthetic(folder, **SNLI_STAND_IN)
    return data_dir, (f'{SNLI_STAND_IN["num_train"]} synthetic pairs in '
                      "SNLI's format")


for _name in HUB_MODELS:
    STAND_INS.setdefault(
        _name, lambda folder, name=_name: hub_stand_in(name, folder))
STAND_INS.setdefault('SNLI', snli_stand_in)
del _name
