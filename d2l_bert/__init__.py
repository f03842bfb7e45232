"""d2l_bert: the BERT chapter of *Dive into Deep Learning* in MXNet/Gluon.

The book is `d2l_bert.book`: one module per section, holding only the
book's definitions.  The public names here are the book's, imported from
there; each object says in its docstring which section defines it.
Everything else stands on the book: `fast` (the same parameters,
compiled), `data` (the files the book downloads, offline), `runs`,
`hf`, `views`, `dist`, `chapter` and `cli`; the settings are in
`presets`.

Importing the package loads nothing else and sets no environment
variable: a name is imported from its section module when it is first
used (``d2l_bert.BERTEncoder``, ``from d2l_bert import BERTEncoder``).
That leaves room for the one choice that must come before `mxnet` is
imported, the threads and kernels of `d2l_bert.threads`: made quietly
when `mxnet` is first imported in the project's ``.venv``, or by an
explicit call elsewhere::

    from d2l_bert.threads import set_threads
    print(set_threads())
    import d2l_bert
"""
import importlib
import importlib.util

__version__ = '0.1.0'

#: The public names, by the module that defines them
_MODULE_OF = {}
for _module, _names in (
        ('book.bert', ('get_tokens_and_segments', 'BERTEncoder', 'MaskLM',
                  'NextSentencePred', 'BERTModel')),
        ('presets', ('ORIGINAL_BERT',)),
        ('book.attention', ('masked_softmax', 'DotProductAttention',
                       'MultiHeadAttention')),
        ('book.transformer', ('PositionWiseFFN', 'AddNorm',
                         'TransformerEncoderBlock', 'EncoderBlock')),
        ('book.dataset', ('_read_wiki', '_get_next_sentence',
                     '_get_nsp_data_from_paragraph', '_replace_mlm_tokens',
                     '_get_mlm_data_from_tokens', '_pad_bert_inputs',
                     '_WikiTextDataset', 'load_data_wiki')),
        ('book.pretraining', ('_get_batch_loss_bert', 'train_bert')),
        ('runs.pretraining', ('evaluate_bert',)),
        ('runs.model_files', ('save_pretrained', 'load_pretrained',
                               'encode_tokens')),
        ('book.finetuning', ('DATA_HUB', 'DATA_URL', 'load_pretrained_model',
                        'read_snli', 'SNLIBERTDataset', 'BERTClassifier')),
        ('hf', ('load_pretrained_bert', 'PretrainedBERT'))):
    for _name in _names:
        _MODULE_OF[_name] = _module
del _module, _names, _name

__all__ = sorted(_MODULE_OF) + ['fast', 'threads']


def __getattr__(name):
    """Import `name` from its module on first use (PEP 562).

    The model modules, once imported, turn on MXNet's NumPy semantics
    (`npx.set_np()`) as the book's first cell does: every block here is
    written for them.
    """
    if name in _MODULE_OF:
        module = importlib.import_module(f'.{_MODULE_OF[name]}', __name__)
        value = getattr(module, name)
        globals()[name] = value
        return value
    if not name.startswith('__') and importlib.util.find_spec(
            f'{__name__}.{name}') is not None:  # a module: d2l_bert.fast
        return importlib.import_module(f'.{name}', __name__)
    raise AttributeError(f"module 'd2l_bert' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
