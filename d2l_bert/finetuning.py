"""sec_natural-language-inference-bert: fine-tuning BERT on SNLI.

Read top to bottom in the book's order: load a pretrained BERT
(`load_pretrained_model`), pack premise/hypothesis pairs into BERT inputs
(`read_snli`, `SNLIBERTDataset`), put a small MLP on the `<cls>`
representation (`BERTClassifier`) and train the whole network
(`train_ch13`, the loop the book borrows from its image chapter).

Dimension key used in the shape comments:

N: number of examples, B: batch size, T: sequence length (`max_len`),
H: num_hiddens, C: number of classes (3: entailment, contradiction,
neutral)
"""
import multiprocessing
import os
import re
import sys
import time

import mxnet as mx
from d2l import mxnet as d2l
from mxnet import gluon, np, npx
from mxnet.gluon import nn

from .bert import BERTModel, get_tokens_and_segments
from .files import atomic_write
from .model_files import (PARAMS_FILE, infer_config, load_vocab,
                          read_config)
from .hub import DATA_HUB, DATA_URL, data_home, download_extract  # noqa
from .snli_synthetic import make_snli_synthetic

# Constructor arguments of the two models on the d2l data hub: the book
# fine-tunes `bert.small`; its first exercise asks for `bert.base`
BERT_SMALL = dict(num_hiddens=256, ffn_num_hiddens=512, num_heads=4,
                  num_blks=2, dropout=0.1, max_len=512)
BERT_BASE = dict(num_hiddens=768, ffn_num_hiddens=3072, num_heads=12,
                 num_blks=12, dropout=0.1, max_len=512)
PRETRAINED_CONFIGS = {'bert.small': BERT_SMALL, 'bert.base': BERT_BASE}

# the sizes `config.json` may record; `load_pretrained_model` checks them
CONFIG_KEYS = ('num_hiddens', 'ffn_num_hiddens', 'num_heads', 'num_blks',
               'max_len')
SNLI_LABELS = {'entailment': 0, 'contradiction': 1, 'neutral': 2}


# --------------------------------------------------------------------------
# Loading pretrained BERT
# --------------------------------------------------------------------------

def _pretrained_dir(pretrained_model):
    """Return the directory holding `pretrained.params` and `vocab.json`."""
    if pretrained_model in PRETRAINED_CONFIGS:
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


def load_pretrained_config(pretrained_model):
    """Return the constructor arguments a pretrained model was built with.

    Parameters
    ----------
    pretrained_model : str
        ``'bert.small'``, ``'bert.base'`` (the book's values, no download)
        or a directory: its `config.json` (as `d2l-bert pretrain` writes)
        gives the sizes; without one they are read off the shapes in
        `pretrained.params`, which works for an unzipped `bert.small` or
        `bert.base` (the number of heads does not show in the shapes).

    Returns
    -------
    dict
        `num_hiddens`, `ffn_num_hiddens`, `num_heads`, `num_blks`,
        `dropout` and `max_len`.
    """
    if pretrained_model in PRETRAINED_CONFIGS:
        return dict(PRETRAINED_CONFIGS[pretrained_model])
    data_dir = _pretrained_dir(pretrained_model)
    config = read_config(data_dir)
    if config is None:
        sizes = infer_config(_need_file(data_dir, PARAMS_FILE))
        return dict({k: sizes[k] for k in CONFIG_KEYS}, dropout=0.1)
    missing = [k for k in CONFIG_KEYS if k not in config]
    if missing:
        raise ValueError(
            f'{os.path.join(data_dir, "config.json")} lacks {missing}')
    out = {k: int(config[k]) for k in CONFIG_KEYS}
    out['dropout'] = float(config.get('dropout', 0.1))
    return out


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
    params_file = _need_file(data_dir, 'pretrained.params')
    asked = dict(num_hiddens=num_hiddens, ffn_num_hiddens=ffn_num_hiddens,
                 num_heads=num_heads, num_blks=num_blks, max_len=max_len)
    config = read_config(data_dir) or {}
    wrong = [f'{k}={asked[k]} (config.json: {config[k]})'
             for k in CONFIG_KEYS if k in config and config[k] != asked[k]]
    if wrong:
        raise ValueError(
            f'the model in {data_dir} was pretrained with other sizes: '
            f'got {", ".join(wrong)}; pass the sizes of config.json')
    if config.get('vocab_size', len(vocab)) != len(vocab):
        raise ValueError(
            f'{data_dir}: vocab.json has {len(vocab)} tokens but '
            f'config.json says vocab_size={config["vocab_size"]}')
    bert = BERTModel(len(vocab), num_hiddens, ffn_num_hiddens, num_heads,
                     num_blks, dropout, max_len)
    try:
        bert.load_parameters(params_file, ctx=devices)
    except AssertionError as e:  # a missing parameter or another shape
        raise ValueError(
            f'{params_file} does not fit BERTModel(vocab_size={len(vocab)}, '
            + ', '.join(f'{k}={v}' for k, v in asked.items()) +
            f'): {e}') from e
    except (ValueError, mx.base.MXNetError) as e:
        raise ValueError(
            f'{params_file} is corrupt or truncated ({str(e).strip()[-80:]})'
            '; download it again or re-run `d2l-bert pretrain`') from e
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
            '`d2l_bert.snli_synthetic.make_snli_synthetic`)')
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


def snli_data_dir(data='snli'):
    """Return a directory for `read_snli`: real, synthetic or local SNLI.

    Parameters
    ----------
    data : str
        ``'snli'`` downloads SNLI (checked against its SHA-1);
        ``'synthetic'`` writes `d2l_bert.snli_synthetic`'s corpus into the
        cache, no network needed; anything else is a directory holding
        ``snli_1.0_train.txt`` and ``snli_1.0_test.txt`` (or their
        ``snli_1.0`` folder).
    """
    if data == 'snli':
        return download_extract('SNLI')
    if data == 'synthetic':
        return make_snli_synthetic(os.path.join(data_home(),
                                                'snli-synthetic'))
    if not os.path.isdir(data):
        raise ValueError(
            f"data must be 'snli', 'synthetic' or a directory holding "
            f'snli_1.0_train.txt and snli_1.0_test.txt, got {data!r}')
    nested = os.path.join(data, 'snli_1.0')
    if not os.path.isfile(os.path.join(data, 'snli_1.0_train.txt')) and \
            os.path.isdir(nested):
        return nested
    return data


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
        if vocab is None:
            raise ValueError(
                'vocab is required: pass the vocabulary the BERT model was '
                'pretrained with (load_pretrained_model returns it)')
        if not isinstance(max_len, int) or max_len < 3:
            raise ValueError(
                'max_len must be an int of at least 3 (<cls> and two '
                f'<sep>), got {max_len!r}')
        if len(dataset) != 3 or not (
                len(dataset[0]) == len(dataset[1]) == len(dataset[2])):
            raise ValueError(
                'dataset must be (premises, hypotheses, labels) of equal '
                'lengths, as read_snli returns')
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


def cls_spread(bert, dataset, num_examples=64):
    """Measure how much the `<cls>` encoding varies across inputs.

    A pretraining that collapsed gives every input the same encoding; the
    classifier then starts from no information about the pair, and
    fine-tuning may stay at chance.  This returns the mean over hidden
    units of the standard deviation across the first `num_examples`
    examples of `dataset`: about 0.1 for a randomly initialised model,
    near 0 (below 1e-3) for a collapsed one.

    Parameters
    ----------
    bert : BERTModel
        The pretrained model to check.
    dataset : SNLIBERTDataset
        Pairs to encode.
    num_examples : int
        How many of its first examples to encode.

    Returns
    -------
    float
    """
    ctx = bert.encoder.token_embedding.weight.list_ctx()[0]
    n = min(num_examples, len(dataset))
    (tokens, segments, valid_lens), _ = dataset[0:n]
    encoded_X = bert.encoder(tokens.as_in_context(ctx),
                             segments.as_in_context(ctx),
                             valid_lens.as_in_context(ctx))  # (n, T, H)
    return float(encoded_X[:, 0, :].std(axis=0).mean())


def train_ch13_history(net, train_iter, test_iter, loss, trainer,
                       num_epochs, devices,
                       split_f=d2l.split_batch_multi_inputs, progress=False):
    """d2l's `train_ch13` with a progress bar, returning the history.

    The same steps as `d2l.train_ch13` (`d2l.train_batch_ch13` for each
    minibatch, `d2l.evaluate_accuracy_gpus` after each epoch) and the
    same two closing lines; the history takes the place of the book's
    animated plot (`plot_history` draws it, ``d2l-bert finetune`` saves
    it).  Apply `d2l_bert.fast.accelerate` to `net` first for speed.

    Parameters
    ----------
    net : BERTClassifier
        Initialized on every context of `devices`.
    train_iter, test_iter : gluon.data.DataLoader
        Batches of ``(inputs, labels)`` for training and for the test
        accuracy after each epoch.
    loss : gluon.loss.Loss
        Per-example loss, as `d2l.train_ch13` takes it.
    trainer : gluon.Trainer
        The optimizer of `net`'s parameters.
    num_epochs : int
        Passes over `train_iter`.
    devices : list of mxnet.Context
        Each batch is split over them.
    split_f : callable
        Splits a minibatch over `devices`.
    progress : bool
        Show a progress bar per epoch (on standard error).

    Returns
    -------
    dict
        ``'epoch'`` (fractional epochs at which the training figures were
        taken, five per epoch as in the book's plot), ``'train loss'``,
        ``'train acc'``, then ``'test epoch'`` and ``'test acc'`` once per
        epoch, and ``'examples/sec'``.
    """
    from tqdm import tqdm
    num_batches = len(train_iter)
    every = max(num_batches // 5, 1)
    history = {'epoch': [], 'train loss': [], 'train acc': [],
               'test epoch': [], 'test acc': []}
    seconds = 0.0
    for epoch in range(num_epochs):
        # Sum of losses, correct predictions, examples, predictions
        loss_sum, correct, examples, predictions = 0.0, 0.0, 0, 0
        bar = tqdm(train_iter, total=num_batches, disable=not progress,
                   desc=f'epoch {epoch + 1}/{num_epochs}', leave=False,
                   file=sys.stderr)
        for i, (features, labels) in enumerate(bar):
            start = time.time()
            l, acc = d2l.train_batch_ch13(
                net, features, labels, loss, trainer, devices, split_f)
            # The losses are read after the forward pass; the timer waits
            # for the backward pass and the update too (the book's does
            # not, which overstates the throughput)
            npx.waitall()
            loss_sum, correct = loss_sum + l, correct + acc
            examples += labels.shape[0]
            predictions += labels.size
            seconds += time.time() - start
            if (i + 1) % every == 0 or i == num_batches - 1:
                history['epoch'].append(epoch + (i + 1) / num_batches)
                history['train loss'].append(loss_sum / examples)
                history['train acc'].append(correct / predictions)
                bar.set_postfix(loss=f'{loss_sum / examples:.3f}',
                                acc=f'{correct / predictions:.3f}')
        bar.close()
        test_acc = d2l.evaluate_accuracy_gpus(net, test_iter, split_f)
        history['test epoch'].append(epoch + 1)
        history['test acc'].append(test_acc)
        if progress:
            print(f'epoch {epoch + 1}: loss {loss_sum / examples:.3f}, '
                  f'train acc {correct / predictions:.3f}, '
                  f'test acc {test_acc:.3f}', file=sys.stderr)
    history['examples/sec'] = examples * num_epochs / seconds
    print(f'loss {loss_sum / examples:.3f}, train acc '
          f'{correct / predictions:.3f}, test acc {test_acc:.3f}')
    print(f'{history["examples/sec"]:.1f} examples/sec on {devices}')
    return history


def plot_history(history, file_name):
    """Plot training loss and accuracies against epochs into a PNG file.

    The file is written whole or not at all (`atomic_write`).
    """
    import matplotlib
    matplotlib.use('Agg')
    from matplotlib import pyplot as plt
    fig, ax = plt.subplots(figsize=(4.5, 3.2))
    ax.plot(history['epoch'], history['train loss'], label='train loss')
    ax.plot(history['epoch'], history['train acc'], '--',
            label='train acc')
    ax.plot(history['test epoch'], history['test acc'], 'o-',
            label='test acc')
    ax.set_xlabel('epoch')
    ax.set_xlim(0, max(history['test epoch']))
    ax.set_ylim(0, max(1.0, max(history['train loss']) * 1.05))
    ax.grid(True)
    ax.legend()
    fig.tight_layout()
    try:
        atomic_write(file_name,
                     lambda tmp: fig.savefig(tmp, format='png', dpi=120))
    finally:
        plt.close(fig)
