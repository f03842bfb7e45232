"""Offline stand-ins for the files the book's cells download.

Where ``download_extract(name)`` cannot download `name`, `data.hub`
returns the directory that ``MAKERS[name](folder)`` fills (or finds) in
`folder` instead, and prints one line naming what stands in:

- ``wikitext-2``: the corpus shipped with the package (`corpus`);
- ``SNLI``: synthetic pairs in SNLI's layout (`snli_synthetic`, of the
  sizes `presets.SNLI_STAND_IN`);
- ``bert.small``, ``bert.base``: an untrained BERT of the sizes the book
  loads them with (`presets.HUB_MODELS`), on the embedded corpus's
  vocabulary, in d2l's layout (``pretrained.params``, ``vocab.json``).
  The book's cells run and their shapes can be checked, but numbers
  trained from it mean nothing.

`data.hub` reads this table itself; importing either registers nothing
anywhere else.  Each maker returns ``(directory, what)``.
"""
import json
import os

from ..presets import HUB_MODELS, SNLI_STAND_IN
from .atomic import atomic_write
from .corpus import DATA_DIR, FILE_NAMES
from .snli_synthetic import make_snli_synthetic

#: The book's reserved tokens of a BERT vocabulary (sec_bert-dataset)
RESERVED_TOKENS = ['<pad>', '<mask>', '<cls>', '<sep>']


def embedded_wikitext(folder):
    """WikiText-2's stand-in: the corpus shipped with the package."""
    return DATA_DIR, ("d2l-bert's embedded corpus (generated articles in "
                      "WikiText's format)")


def snli_stand_in(folder):
    """Fill `folder` with SNLI's stand-in: synthetic pairs in SNLI's
    layout (`snli_synthetic`); return ``(directory, what)``."""
    data_dir = os.path.join(folder, 'snli_1.0')
    if not os.path.isfile(os.path.join(data_dir, 'snli_1.0_test.txt')):
        data_dir = make_snli_synthetic(folder, **SNLI_STAND_IN)
    return data_dir, (f'{SNLI_STAND_IN["num_train"]} synthetic pairs in '
                      "SNLI's format")


def hub_stand_in(name, folder):
    """Fill `folder` with the stand-in of hub model `name`.

    Parameters
    ----------
    name : str
        ``'bert.small'`` or ``'bert.base'`` (a key of
        `presets.HUB_MODELS`).
    folder : str
        Where to write ``pretrained.params`` and ``vocab.json`` (kept if
        already there).

    Returns
    -------
    directory : str
    what : str
        What stands in, for `download_extract`'s line.
    """
    import mxnet as mx
    params = os.path.join(folder, 'pretrained.params')
    if not os.path.isfile(params):
        vocab = embedded_vocab()
        shapes = bert_parameter_shapes(len(vocab), **HUB_MODELS[name])
        arrays = {key: _initialized(key, shape)
                  for key, shape in shapes.items()}
        atomic_write(os.path.join(folder, 'vocab.json'),
                     json.dumps(vocab.idx_to_token))
        # written last: the file that says the stand-in is whole
        atomic_write(params, lambda tmp: mx.nd.save(tmp, arrays))
    return folder, (f'an untrained BERT of {name}\'s sizes with the '
                    'embedded corpus\'s vocabulary')


def bert_parameter_shapes(vocab_size, num_hiddens, ffn_num_hiddens,
                          num_heads, num_blks, dropout, max_len):
    """The names and shapes of a `BERTModel`'s parameters, as
    ``save_parameters`` writes them (a test holds them to the book's
    class).

    Returns
    -------
    dict of str to tuple of int
    """
    V, H, F = vocab_size, num_hiddens, ffn_num_hiddens
    shapes = {'encoder.pos_embedding': (1, max_len, H),
              'encoder.token_embedding.weight': (V, H),
              'encoder.segment_embedding.weight': (2, H)}
    for i in range(num_blks):
        blk = f'encoder.blks.{i}.'
        for dense in ('W_q', 'W_k', 'W_v', 'W_o'):
            shapes.update(_dense(f'{blk}attention.{dense}', H, H))
        shapes.update(_layer_norm(f'{blk}addnorm1.ln', H))
        shapes.update(_dense(f'{blk}ffn.dense1', F, H))
        shapes.update(_dense(f'{blk}ffn.dense2', H, F))
        shapes.update(_layer_norm(f'{blk}addnorm2.ln', H))
    shapes.update(_dense('hidden', H, H))
    shapes.update(_dense('mlm.mlp.0', H, H))
    shapes.update(_layer_norm('mlm.mlp.1', H))
    shapes.update(_dense('mlm.mlp.2', V, H))
    shapes.update(_dense('nsp.output', 2, H))
    return shapes


def _dense(prefix, units, in_units):
    return {f'{prefix}.weight': (units, in_units), f'{prefix}.bias': (units,)}


def _layer_norm(prefix, units):
    return {f'{prefix}.gamma': (units,), f'{prefix}.beta': (units,)}


def _initialized(name, shape):
    """A parameter as ``net.initialize(init.Xavier())`` makes it: biases
    and LayerNorm shifts 0, LayerNorm scales 1, the rest uniform in
    Xavier's ``[-s, s]``, ``s = sqrt(3 / ((fan_in + fan_out) / 2))``
    (MXNet's operators of either semantics, `npx.set_np` or not)."""
    import math

    import mxnet as mx
    if name.endswith(('bias', 'beta')):
        return mx.nd.zeros(shape)
    if name.endswith('gamma'):
        return mx.nd.ones(shape)
    receptive = math.prod(shape[2:])
    fan_in, fan_out = shape[1] * receptive, shape[0] * receptive
    scale = math.sqrt(3 / ((fan_in + fan_out) / 2))
    return mx.nd.random.uniform(-scale, scale, shape=shape)


def embedded_vocab():
    """The vocabulary the book's `_WikiTextDataset` builds from the
    embedded corpus: the paragraphs `_read_wiki` keeps, in file order (a
    vocabulary does not depend on it, and Python's random state is left
    alone), their sentences' words, ``min_freq=5`` and `RESERVED_TOKENS`
    (a test holds it to the book's)."""
    from d2l import mxnet as d2l
    with open(os.path.join(DATA_DIR, FILE_NAMES['train']),
              encoding='utf-8') as f:
        paragraphs = [d2l.tokenize(line.strip().lower().split(' . '),
                                   token='word')
                      for line in f if len(line.split(' . ')) >= 2]
    return d2l.Vocab([sentence for paragraph in paragraphs
                      for sentence in paragraph], min_freq=5,
                     reserved_tokens=RESERVED_TOKENS)


#: The stand-in of each name `download_extract` may fail to download
MAKERS = {'wikitext-2': embedded_wikitext,
          'SNLI': snli_stand_in,
          **{name: (lambda folder, name=name: hub_stand_in(name, folder))
             for name in HUB_MODELS}}
