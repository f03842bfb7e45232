"""sec_natural-language-inference-bert: fine-tuning BERT on SNLI.

Read top to bottom in the book's order: load a pretrained BERT
(`load_pretrained_model`), pack premise/hypothesis pairs into BERT inputs
(`read_snli`, from sec_natural-language-inference-and-dataset, and
`SNLIBERTDataset`) and put a small MLP on the `<cls>` representation
(`BERTClassifier`).  The section trains it with d2l's `train_ch13`, the
loop the book borrows from its image chapter.

What goes beyond the book is applied from outside: offline stand-ins for
``bert.small``, ``bert.base`` and SNLI in `d2l_bert.data.stand_ins`
(which `download_extract` finds itself); reading only the first pairs
of SNLI in `d2l_bert.data.snli` (`read_snli` so hooked is
`d2l_bert.runs.finetuning.read_snli_pairs`); d2l's `train_ch13` on
fewer than five batches an epoch in `d2l_bert.runs.d2l_loops`;
checking a model directory and its sizes, and training that returns the
history (what ``d2l-bert finetune`` runs), in `d2l_bert.runs.finetuning`.

Dimension key used in the shape comments:

N: number of examples, B: batch size, T: sequence length (`max_len`),
H: num_hiddens, C: number of classes (3: entailment, contradiction,
neutral)
"""
import json
import multiprocessing
import os
import re

from d2l import mxnet as d2l
from mxnet import gluon, np
from mxnet.gluon import nn

from .bert import BERTModel, get_tokens_and_segments
from ..data.hub import DATA_HUB, DATA_URL, download_extract  # noqa: F401


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
    ``'bert.base'`` (an untrained model of their sizes,
    `d2l_bert.data.stand_ins.hub_stand_in`).
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
    """Read the SNLI dataset into premises, hypotheses, and labels.

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
    d2l 1.0.3's, line for line.  `d2l_bert.data.snli.reading_first_pairs`
    wraps it from outside: only the first pairs of a split when
    ``D2L_BERT_SNLI_PAIRS`` says so, and errors that name the file and
    the line.
    """
    def extract_text(s):
        # Remove information that will not be used by us
        s = re.sub('\\(', '', s)
        s = re.sub('\\)', '', s)
        # Substitute two or more consecutive whitespace with space
        s = re.sub('\\s{2,}', ' ', s)
        return s.strip()
    label_set = {'entailment': 0, 'contradiction': 1, 'neutral': 2}
    file_name = os.path.join(data_dir, 'snli_1.0_train.txt'
                             if is_train else 'snli_1.0_test.txt')
    with open(file_name, 'r') as f:
        rows = [row.split('\t') for row in f.readlines()[1:]]
    premises = [extract_text(row[1]) for row in rows if row[0] in label_set]
    hypotheses = [extract_text(row[2]) for row in rows if row[0] in label_set]
    labels = [label_set[row[0]] for row in rows if row[0] in label_set]
    return premises, hypotheses, labels


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
        return self.output(self.hidden(encoded_X[:, 0, :]))  # (B, 3)
