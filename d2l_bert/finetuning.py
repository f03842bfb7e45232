"""sec_natural-language-inference-bert: fine-tuning BERT on SNLI.

Read top to bottom in the book's order: load a pretrained BERT
(`load_pretrained_model`), pack premise/hypothesis pairs into BERT inputs
(`read_snli`, `SNLIBERTDataset`), put a small MLP on the `<cls>`
representation (`BERTClassifier`) and train the whole network
(`train_ch13`, the loop the book borrows from its image chapter).

Beyond the book, elsewhere: `d2l_bert.runs.finetuning` finds the sizes
of a pretrained model and SNLI's directory, and trains with `train_ch13`
returning the history (what ``d2l-bert finetune`` runs);
`d2l_bert.data.model_dir` reads the files of a pretrained model.

Dimension key used in the shape comments:

N: number of examples, B: batch size, T: sequence length (`max_len`),
H: num_hiddens, C: number of classes (3: entailment, contradiction,
neutral)
"""
import contextlib
import multiprocessing
import os
import re

import mxnet as mx
from mxnet import gluon, np
from mxnet.gluon import nn

from .bert import BERTModel, get_tokens_and_segments
from .checks import check_snli_dataset
from .data.hub import DATA_HUB, DATA_URL, download_extract  # noqa: F401
from .data.model_dir import load_vocab, read_config
from .presets import HUB_MODELS

# the sizes `config.json` may record; `load_pretrained_model` checks them
CONFIG_KEYS = ('num_hiddens', 'ffn_num_hiddens', 'num_heads', 'num_blks',
               'max_len')
SNLI_LABELS = {'entailment': 0, 'contradiction': 1, 'neutral': 2}


# --------------------------------------------------------------------------
# Loading pretrained BERT
# --------------------------------------------------------------------------

def _pretrained_dir(pretrained_model):
    """Return the directory holding `pretrained.params` and `vocab.json`."""
    if pretrained_model in HUB_MODELS:
        return download_extract(pretrained_model)
    if isinstance(pretrained_model, (str, os.PathLike)) and os.path.isdir(
            pretrained_model):
        return os.fspath(pretrained_model)
    raise ValueError(
        "pretrained_model must be 'bert.small' or 'bert.base' or a "
        'directory holding pretrained.params and vocab.json (such as '
        f'`d2l-bert pretrain --out DIR` writes), got {pretrained_model!r}')


def _need_file(data_dir, name):
    """Return ``data_dir/name`` or raise `FileNotFoundError` saying why."""
    path = os.path.join(data_dir, name)
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f'{path} not found: a pretrained model directory holds '
            'pretrained.params and vocab.json (the layout of bert.small; '
            '`d2l-bert pretrain --out DIR` writes it)')
    return path


def _check_config(data_dir, vocab_size, sizes):
    """Raise `ValueError` when `data_dir`'s `config.json` (if any) gives
    other `sizes` or another `vocab_size` than those asked for."""
    config = read_config(data_dir) or {}
    wrong = [f'{k}={sizes[k]} (config.json: {config[k]})'
             for k in CONFIG_KEYS if k in config and config[k] != sizes[k]]
    if wrong:
        raise ValueError(
            f'the model in {data_dir} was pretrained with other sizes: '
            f'got {", ".join(wrong)}; pass the sizes of config.json')
    if config.get('vocab_size', vocab_size) != vocab_size:
        raise ValueError(
            f'{data_dir}: vocab.json has {vocab_size} tokens but '
            f'config.json says vocab_size={config["vocab_size"]}')


@contextlib.contextmanager
def _explain_load_errors(params_file, vocab_size, sizes):
    """Turn the errors of loading `params_file` into a `ValueError` that
    says whether the sizes differ or the file is damaged."""
    try:
        yield
    except AssertionError as e:  # a missing parameter or another shape
        raise ValueError(
            f'{params_file} does not fit BERTModel(vocab_size={vocab_size}, '
            + ', '.join(f'{k}={v}' for k, v in sizes.items()) +
            f'): {e}') from e
    except (ValueError, mx.base.MXNetError) as e:
        raise ValueError(
            f'{params_file} is corrupt or truncated ({str(e).strip()[-80:]})'
            '; download it again or re-run `d2l-bert pretrain`') from e


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
        list of tokens), optionally `config.json` with the sizes.
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

    Raises
    ------
    FileNotFoundError
        A file of the layout is missing.
    ValueError
        The sizes differ from `config.json` or from the saved parameters,
        or a file is corrupt.
    """
    data_dir = _pretrained_dir(pretrained_model)
    vocab = load_vocab(_need_file(data_dir, 'vocab.json'))
    sizes = dict(num_hiddens=num_hiddens, ffn_num_hiddens=ffn_num_hiddens,
                 num_heads=num_heads, num_blks=num_blks, max_len=max_len)
    _check_config(data_dir, len(vocab), sizes)
    bert = BERTModel(len(vocab), num_hiddens, ffn_num_hiddens, num_heads,
                     num_blks, dropout, max_len)
    # Load pretrained BERT parameters
    params_file = _need_file(data_dir, 'pretrained.params')
    with _explain_load_errors(params_file, len(vocab), sizes):
        bert.load_parameters(params_file, ctx=devices)
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
    num_workers : int, optional
        Worker processes that pack the pairs (the book uses 4); 0 packs
        them in this process.

    Notes
    -----
    Item ``i`` is ``((token_ids, segments, valid_len), label)``:
    ``(T,) int32``, ``(T,) int32``, ``() float32`` and ``() float32``.
    """
    def __init__(self, dataset, max_len, vocab=None, num_workers=4):
        check_snli_dataset(dataset, max_len, vocab)
        self.num_workers = num_workers
        all_premise_hypothesis_tokens = [
            [p_tokens, h_tokens] for p_tokens, h_tokens in zip(
                *[[s.lower().split() for s in sentences]
                  for sentences in dataset[:2]])]
        self.labels = np.array(dataset[2])                    # (N,)
        self.vocab = vocab
        self.max_len = max_len
        (self.all_token_ids, self.all_segments,
         self.valid_lens) = self._preprocess(all_premise_hypothesis_tokens)
        print(f'read {len(self.all_token_ids)} examples')

    def _preprocess(self, all_premise_hypothesis_tokens):
        if self.num_workers:
            with multiprocessing.Pool(self.num_workers) as pool:
                out = pool.map(self._mp_worker,
                               all_premise_hypothesis_tokens, chunksize=256)
        else:
            out = [self._mp_worker(pair)
                   for pair in all_premise_hypothesis_tokens]
        all_token_ids = [token_ids for token_ids, _, _ in out]
        all_segments = [segments for _, segments, _ in out]
        valid_lens = [valid_len for _, _, valid_len in out]
        return (np.array(all_token_ids, dtype='int32'),  # (N, T)
                np.array(all_segments, dtype='int32'),   # (N, T)
                np.array(valid_lens))                    # (N,)

    def _mp_worker(self, premise_hypothesis_tokens):
        p_tokens, h_tokens = premise_hypothesis_tokens
        self._truncate_pair_of_tokens(p_tokens, h_tokens)
        tokens, segments = get_tokens_and_segments(p_tokens, h_tokens)
        pad = self.max_len - len(tokens)
        token_ids = self.vocab[tokens] + [self.vocab['<pad>']] * pad
        segments = segments + [0] * pad
        return token_ids, segments, len(tokens)

    def _truncate_pair_of_tokens(self, p_tokens, h_tokens):
        # Keep 3 slots for the `<cls>` token and the two `<sep>` tokens
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
        super().__init__()
        self.encoder = bert.encoder
        self.hidden = bert.hidden
        self.output = nn.Dense(3)

    def forward(self, inputs):
        tokens_X, segments_X, valid_lens_x = inputs
        encoded_X = self.encoder(tokens_X, segments_X,
                                 valid_lens_x)               # (B, T, H)
        # `<cls>` is at position 0
        return self.output(self.hidden(encoded_X[:, 0, :]))  # (B, 3)
