"""Tiny BERT checkpoints in the formats transformers saves, made by tests.

`make_checkpoint(directory, variant)` writes the tiny random BERT of
``tests/fixtures/tiny_bert`` (vocabulary 64, hidden size 16, 2 blocks) as
one variant of a Hugging Face directory, with numpy, `safetensors` and
`tokenizers` only (no torch), so the suite stays offline.
``tests/fixtures/make_hf_formats_reference.py`` makes the same
directories in a scratch environment and stores what transformers and
sentence-transformers compute on them.
"""
import io
import json
import os
import pickle
import shutil
import sys
import types
import zipfile

import numpy as onp

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                        'fixtures')
TINY_DIR = os.path.join(FIXTURES, 'tiny_bert')

#: The token that the 'added_token' variant adds to tokenizer.json
ADDED_TOKEN = 'cranebird'

#: Each variant: what it changes in the tiny checkpoint
VARIANTS = {
    'float16': 'model.safetensors in float16',
    'bfloat16': 'model.safetensors in bfloat16',
    'sharded': 'two safetensors shards and model.safetensors.index.json',
    'sharded_bin': 'pytorch_model.bin behind pytorch_model.bin.index.json',
    'no_pooler': 'no pooler.dense weights',
    'tokenizer_json': 'tokenizer.json and no vocab.txt',
    'added_token': f'tokenizer.json with the added token {ADDED_TOKEN!r} '
                   f'(id 62; config and embedding grown to 65 rows)',
    'gelu_new': "hidden_act 'gelu_new'",
    'gelu_pytorch_tanh': "hidden_act 'gelu_pytorch_tanh'",
    'attention_dropout': 'attention_probs_dropout_prob 0.3 (hidden 0.1)',
    'st_mean': 'sentence-transformers: mean pooling, Normalize',
    'st_cls': 'sentence-transformers: CLS pooling, no Normalize',
    'st_max': 'sentence-transformers: max pooling, Normalize, '
              'max_seq_length 8',
}


def read_weights():
    """The tiny BERT's weights (transformers' `BertModel` names)."""
    from safetensors.numpy import load_file
    return load_file(os.path.join(TINY_DIR, 'model.safetensors'))


def read_config():
    with open(os.path.join(TINY_DIR, 'config.json')) as f:
        return json.load(f)


def to_bfloat16_bits(array):
    """float32 -> the uint16 bits of bfloat16, rounded to nearest even."""
    bits = onp.ascontiguousarray(array, dtype='<f4').view('<u4')
    rounded = bits + 0x7FFF + ((bits >> 16) & 1)
    return (rounded >> 16).astype('<u2')


def save_safetensors(path, weights, dtype='float32'):
    """Write `weights` as safetensors in `dtype` (bfloat16 by hand: numpy
    has no such type, and safetensors.numpy cannot write it)."""
    if dtype != 'bfloat16':
        from safetensors.numpy import save_file
        save_file({k: onp.ascontiguousarray(v, dtype=dtype)
                   for k, v in weights.items()}, path)
        return
    header, chunks, offset = {}, [], 0
    for name in sorted(weights):
        data = to_bfloat16_bits(weights[name]).tobytes()
        header[name] = {'dtype': 'BF16', 'shape': list(weights[name].shape),
                        'data_offsets': [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b' ' * (-len(text) % 8)
    with open(path, 'wb') as f:
        f.write(len(text).to_bytes(8, 'little') + text + b''.join(chunks))


def tokenizer_json(added_token=False):
    """The tiny vocabulary's BERT tokenizer as a `tokenizers.Tokenizer`."""
    from tokenizers import (AddedToken, Tokenizer, decoders, models,
                            normalizers, pre_tokenizers, processors)
    with open(os.path.join(TINY_DIR, 'vocab.txt')) as f:
        vocab = {t: i for i, t in enumerate(f.read().split('\n')) if t}
    tokenizer = Tokenizer(models.WordPiece(vocab, unk_token='[UNK]'))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.post_processor = processors.TemplateProcessing(
        single='[CLS] $A [SEP]', pair='[CLS] $A [SEP] $B:1 [SEP]:1',
        special_tokens=[('[CLS]', vocab['[CLS]']),
                        ('[SEP]', vocab['[SEP]'])])
    tokenizer.decoder = decoders.WordPiece()
    tokenizer.add_special_tokens([AddedToken(t, special=True) for t in (
        '[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]')])
    if added_token:
        tokenizer.add_tokens([AddedToken(ADDED_TOKEN, single_word=True)])
    return tokenizer


def make_checkpoint(directory, variant):
    """Write the tiny BERT as `variant` (see `VARIANTS`) into `directory`.

    Returns
    -------
    str
        `directory`.
    """
    if variant not in VARIANTS:
        raise ValueError(f'variant must be one of {sorted(VARIANTS)}, got '
                         f'{variant!r}')
    os.makedirs(directory, exist_ok=True)
    weights, config = read_weights(), read_config()
    vocab = os.path.join(TINY_DIR, 'vocab.txt')
    tokenizer_files = {'vocab.txt'}
    if variant in ('float16', 'bfloat16'):
        save_safetensors(os.path.join(directory, 'model.safetensors'),
                         weights, variant)
    elif variant == 'sharded':
        _save_shards(directory, weights)
    elif variant == 'sharded_bin':
        _save_bin_shard(directory)
    else:
        if variant == 'no_pooler':
            weights = {k: v for k, v in weights.items()
                       if not k.startswith('pooler.')}
        if variant == 'added_token':
            table = weights['embeddings.word_embeddings.weight']
            row = onp.random.RandomState(0).normal(0, 0.3, (1, 16))
            weights['embeddings.word_embeddings.weight'] = onp.concatenate(
                [table, row.astype('float32')])              # (65, 16)
            config['vocab_size'] = 65
        save_safetensors(os.path.join(directory, 'model.safetensors'),
                         weights)
    if variant in ('tokenizer_json', 'added_token'):
        tokenizer_files = {'tokenizer.json'}
        tokenizer_json(variant == 'added_token').save(
            os.path.join(directory, 'tokenizer.json'))
    if 'vocab.txt' in tokenizer_files:
        shutil.copy(vocab, directory)
    if variant in ('gelu_new', 'gelu_pytorch_tanh'):
        config['hidden_act'] = variant
    if variant == 'attention_dropout':
        config['attention_probs_dropout_prob'] = 0.3
    if variant.startswith('st_'):
        _sentence_transformers_files(directory, variant[3:])
    with open(os.path.join(directory, 'config.json'), 'w') as f:
        json.dump(config, f, indent=2)
    return directory


def _save_shards(directory, weights):
    """Two safetensors shards: the embeddings and block 0, then the rest."""
    first = {k: v for k, v in weights.items()
             if k.startswith(('embeddings.', 'encoder.layer.0.'))}
    second = {k: v for k, v in weights.items() if k not in first}
    weight_map = {}
    for i, part in enumerate((first, second), 1):
        name = f'model-0000{i}-of-00002.safetensors'
        save_safetensors(os.path.join(directory, name), part)
        weight_map.update({k: name for k in part})
    with open(os.path.join(directory, 'model.safetensors.index.json'),
              'w') as f:
        json.dump({'metadata': {'total_size': 0}, 'weight_map': weight_map},
                  f, indent=2)


def _save_bin_shard(directory):
    """``pytorch_model.bin`` as the one shard of an index."""
    name = 'pytorch_model-00001-of-00001.bin'
    shutil.copy(os.path.join(TINY_DIR, 'pytorch_model.bin'),
                os.path.join(directory, name))
    with open(os.path.join(FIXTURES, 'tiny_bert_bin_names.json')) as f:
        names = json.load(f)
    with open(os.path.join(directory, 'pytorch_model.bin.index.json'),
              'w') as f:
        json.dump({'metadata': {}, 'weight_map': {k: name for k in names}},
                  f, indent=2)


def _sentence_transformers_files(directory, mode):
    """modules.json, 1_Pooling/config.json, sentence_bert_config.json."""
    modules = [
        {'idx': 0, 'name': '0', 'path': '',
         'type': 'sentence_transformers.models.Transformer'},
        {'idx': 1, 'name': '1', 'path': '1_Pooling',
         'type': 'sentence_transformers.models.Pooling'}]
    if mode != 'cls':
        modules.append({'idx': 2, 'name': '2', 'path': '2_Normalize',
                        'type': 'sentence_transformers.models.Normalize'})
    with open(os.path.join(directory, 'modules.json'), 'w') as f:
        json.dump(modules, f, indent=2)
    os.makedirs(os.path.join(directory, '1_Pooling'), exist_ok=True)
    pooling = {'word_embedding_dimension': 16,
               'pooling_mode_cls_token': mode == 'cls',
               'pooling_mode_mean_tokens': mode == 'mean',
               'pooling_mode_max_tokens': mode == 'max',
               'pooling_mode_mean_sqrt_len_tokens': False}
    with open(os.path.join(directory, '1_Pooling', 'config.json'),
              'w') as f:
        json.dump(pooling, f, indent=2)
    with open(os.path.join(directory, 'sentence_bert_config.json'),
              'w') as f:
        json.dump({'max_seq_length': 8 if mode == 'max' else 24,
                   'do_lower_case': False}, f)


# --- pytorch_model.bin files written by hand ---------------------------------

def _torch_pickle(tensors, monkeypatch, numels=None):
    """The pickle of the state dict `tensors` ({name: (storage values,
    offset, size, stride)}) as `torch.save` writes it, with stand-ins for
    torch's pickled names; and its storages' (key, values), in order.
    `numels`: the element counts the pickle gives the storages, if not
    their lengths."""
    torch, utils = types.ModuleType('torch'), types.ModuleType('torch._utils')

    class FloatStorage:
        pass

    def _rebuild_tensor_v2(*args):
        pass

    FloatStorage.__module__, torch.FloatStorage = 'torch', FloatStorage
    FloatStorage.__qualname__ = 'FloatStorage'
    _rebuild_tensor_v2.__module__ = 'torch._utils'
    _rebuild_tensor_v2.__qualname__ = '_rebuild_tensor_v2'
    utils._rebuild_tensor_v2 = _rebuild_tensor_v2
    monkeypatch.setitem(sys.modules, 'torch', torch)
    monkeypatch.setitem(sys.modules, 'torch._utils', utils)

    class Storage:
        def __init__(self, key, values, numel):
            self.key, self.values, self.numel = key, values, numel

    class Tensor:
        def __init__(self, storage, offset, size, stride):
            self.args = (storage, offset, size, stride, False, {})

        def __reduce__(self):
            return (_rebuild_tensor_v2, self.args)

    class Pickler(pickle.Pickler):
        def persistent_id(self, obj):
            if isinstance(obj, Storage):
                return ('storage', FloatStorage, obj.key, 'cpu', obj.numel)
            return None

    state, storages = {}, []
    for i, (name, (values, offset, size, stride)) in enumerate(
            tensors.items()):
        numel = len(values) if numels is None else numels[i]
        storages.append(Storage(str(i), values, numel))
        state[name] = Tensor(storages[-1], offset, size, stride)
    buffer = io.BytesIO()
    Pickler(buffer, protocol=2).dump(state)
    return buffer.getvalue(), [(s.key, s.values, s.numel)
                               for s in storages]


def write_torch_zip(path, tensors, monkeypatch, numels=None):
    """Write `tensors` (see `_torch_pickle`) as `torch.save` does since
    torch 1.6: a zip archive of the pickle and one file per storage."""
    data, storages = _torch_pickle(tensors, monkeypatch, numels)
    with zipfile.ZipFile(path, 'w') as archive:
        archive.writestr('archive/data.pkl', data)
        for key, values, _ in storages:
            archive.writestr(f'archive/data/{key}',
                             onp.asarray(values, '<f4').tobytes())


#: The number torch's format before 1.6 starts with
LEGACY_MAGIC = 0x1950a86a20f9469cfc6c


def write_torch_legacy(path, tensors, monkeypatch, numels=None):
    """Write `tensors` (see `_torch_pickle`) in torch's format before
    1.6: pickles of its magic number, version and system information, of
    the state dict and of its storage keys; then each storage as its
    int64 element count (`numels`' if given) and its bytes."""
    data, storages = _torch_pickle(tensors, monkeypatch)
    with open(path, 'wb') as f:
        for header in (LEGACY_MAGIC, 1001, {'little_endian': True}):
            pickle.dump(header, f, protocol=2)
        f.write(data)
        pickle.dump([key for key, _, _ in storages], f, protocol=2)
        for i, (_, values, numel) in enumerate(storages):
            numel = numel if numels is None else numels[i]
            f.write(int(numel).to_bytes(8, 'little'))
            f.write(onp.asarray(values, '<f4').tobytes())
