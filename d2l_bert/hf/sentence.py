"""Sentence vectors as sentence-transformers makes them from a checkpoint.

A sentence-transformers checkpoint (all-MiniLM-L6-v2, say) adds to the
Hugging Face files a few settings that decide its sentence embedding:

- ``modules.json``: the modules applied after the encoder, in order, such
  as ``Pooling`` (its directory holds ``config.json``) and ``Normalize``
  (L2 normalization);
- ``1_Pooling/config.json``: how token vectors become one vector: the mean
  over the valid tokens, the ``[CLS]`` token's vector, or the maximum of
  each dimension;
- ``sentence_bert_config.json``: ``max_seq_length``, the number of tokens
  a text is cut to (256 for all-MiniLM-L6-v2), and ``do_lower_case``.

`read_sentence_settings` reads them (without them: ``model_max_length``
of ``tokenizer_config.json``, the mean, L2-normalized); `sentence_vectors`
applies them.

Dimension key used in the shape comments:

B: batch size, T: sequence length, H: num_hiddens
"""
import collections
import os

import numpy as onp

from .errors import CheckpointError
from .files import read_json

#: The pooling modes of ``1_Pooling/config.json`` that are read
POOLING_MODES = {'pooling_mode_mean_tokens': 'mean',
                 'pooling_mode_cls_token': 'cls',
                 'pooling_mode_max_tokens': 'max'}

#: What a checkpoint's settings say about its sentence vectors.
#: `max_len`: tokens a text is cut to; `pooling`: 'mean', 'cls' or 'max';
#: `normalize`: L2-normalize; `lower_case`: lower-case the text first;
#: `source`: the files that said so
SentenceSettings = collections.namedtuple(
    'SentenceSettings', 'max_len pooling normalize lower_case source')


def read_sentence_settings(model_dir, num_positions):
    """Read how a checkpoint turns a text into one vector.

    Parameters
    ----------
    model_dir : str
        The checkpoint directory, which may hold sentence-transformers' files.
    num_positions : int
        ``max_position_embeddings``: no text is cut to more tokens.

    Returns
    -------
    SentenceSettings
        Without sentence-transformers files: cut at ``model_max_length``
        of ``tokenizer_config.json`` (or at `num_positions`), the mean of
        the token vectors, L2-normalized.

    Raises
    ------
    CheckpointError
        A file is not valid JSON, or asks for a pooling mode other than
        mean, CLS or max (the message names the field).
    """
    max_len, sources = num_positions, []
    path = os.path.join(model_dir, 'tokenizer_config.json')
    if os.path.isfile(path):
        limit = read_json(path).get('model_max_length')
        if _is_int(limit) and 0 < limit < max_len:
            max_len = limit
            sources.append('tokenizer_config.json')
    path = os.path.join(model_dir, 'sentence_bert_config.json')
    lower_case = False
    if os.path.isfile(path):
        config = read_json(path)
        limit = config.get('max_seq_length')
        if _is_int(limit) and limit > 0:
            max_len = min(limit, num_positions)
            sources.append('sentence_bert_config.json')
        lower_case = config.get('do_lower_case', False)
        if not isinstance(lower_case, bool):
            raise CheckpointError(f'{path}: do_lower_case must be true or '
                                  f'false, got {lower_case!r:.60}')
    pooling, normalize = 'mean', True
    path = os.path.join(model_dir, 'modules.json')
    if os.path.isfile(path):
        pooling, normalize = read_modules(model_dir)
        sources.append('modules.json')
    return SentenceSettings(max_len, pooling, normalize, lower_case,
                            ', '.join(sources) or 'defaults')


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def read_modules(model_dir):
    """Read ``modules.json`` and its Pooling module's ``config.json``.

    Returns
    -------
    pooling : str
        'mean', 'cls' or 'max'; 'mean' without a Pooling module.
    normalize : bool
        Whether a Normalize module follows.
    """
    path = os.path.join(model_dir, 'modules.json')
    modules = read_json(path, list)
    if not all(isinstance(m, dict) for m in modules):
        raise CheckpointError(f'{path} must hold a list of modules')
    types = [str(m.get('type', '')).rsplit('.', 1)[-1] for m in modules]
    pooling = 'mean'
    if 'Pooling' in types:
        folder = modules[types.index('Pooling')].get('path', '')
        if not isinstance(folder, str) or os.path.isabs(folder) or \
                '..' in folder.replace('\\', '/').split('/'):
            raise CheckpointError(
                f'{path}: the Pooling module\'s path {folder!r:.60} is not '
                f'a folder inside {model_dir}')
        pooling = read_pooling(os.path.join(model_dir, folder,
                                            'config.json'))
    return pooling, 'Normalize' in types


def read_pooling(path):
    """The pooling mode a sentence-transformers Pooling config sets."""
    if not os.path.isfile(path):
        return 'mean'  # sentence-transformers' default
    config = read_json(path)
    modes = [key for key, value in config.items()
             if key.startswith('pooling_mode') and value]
    if len(modes) != 1 or modes[0] not in POOLING_MODES:
        shown = ', '.join(f'{key}=true' for key in modes) or 'no mode'
        raise CheckpointError(
            f'{path}: {shown}: the pooling read is one of '
            f'{", ".join(POOLING_MODES)} (mean, CLS or max), alone')
    return POOLING_MODES[modes[0]]


def sentence_vectors(encoded, valid_lens, pooling='mean', normalize=True):
    """Pool each sequence's token vectors into one, as sentence-transformers
    does.

    Parameters
    ----------
    encoded : float32 numpy array, shape (B, T, H)
        The last block's output for a batch of B sequences.
    valid_lens : int numpy array, shape (B,)
        How many of each sequence's T positions are tokens.
    pooling : {'mean', 'cls', 'max'}
        The mean over the valid tokens, the first token (``[CLS]``), or
        the maximum of each dimension over the valid tokens.
    normalize : bool
        Divide each vector by its L2 norm.

    Returns
    -------
    float32 numpy array, shape (B, H)
    """
    T = encoded.shape[1]
    mask = (onp.arange(T)[None, :] < valid_lens[:, None])    # (B, T)
    if pooling == 'cls':
        vectors = encoded[:, 0, :]                           # (B, H)
    elif pooling == 'max':
        vectors = onp.where(mask[:, :, None], encoded,
                            -1e9).max(axis=1)                # (B, H)
    elif pooling == 'mean':
        summed = (encoded * mask[:, :, None]).sum(axis=1)    # (B, H)
        vectors = summed / onp.maximum(valid_lens, 1)[:, None]  # (B, H)
    else:
        raise ValueError(f"pooling must be 'mean', 'cls' or 'max', got "
                         f'{pooling!r}')
    if normalize:
        norm = onp.linalg.norm(vectors, axis=1, keepdims=True)  # (B, 1)
        vectors = vectors / onp.maximum(norm, 1e-12)         # (B, H)
    return vectors.astype(onp.float32)
