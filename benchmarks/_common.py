"""The settings every benchmark shares (not a test module).

- `BOOK`, `FINETUNE`: the book's pretraining and fine-tuning settings,
  from `d2l_bert/presets.py`, read by path (`read_presets`) so that a
  Python without d2l_bert (the PyTorch peer's) reads them too;
- `PRESETS`: that file, for the other settings and the names of the
  environment variables the benchmarks set;
- `TORCH_PINS`: the PyTorch peers' versions.

The other pieces of the benchmarks are grouped by what they do:
`_machine` (threads, instruction sets, the CPU), `_gemm` (the machine's
best float32 GEMM), `_batches` (random batches and their arithmetic),
`_steps` (d2l_bert's training steps), `_timing` (taking turns, medians),
`_profile` (MXNet's operator profile), `_children` (a side of a
benchmark in a child process), `_options` (the command-line options),
`_report` (what a step benchmark prints).
"""
import importlib.util
import os

_HERE = os.path.dirname(os.path.abspath(__file__))

#: The file of the book's settings, `d2l_bert.presets`
PRESETS_FILE = os.path.join(os.path.dirname(_HERE), 'd2l_bert', 'presets.py')


def read_presets(path=PRESETS_FILE):
    """Return `d2l_bert.presets`, read from `path` without importing
    `d2l_bert`: the PyTorch peer runs this module in a Python that does
    not have it (`TorchChild`).  The module imports nothing, so it runs
    alone."""
    spec = importlib.util.spec_from_file_location('_d2l_bert_presets', path)
    presets = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(presets)
    return presets


#: `d2l_bert.presets`, read by path
PRESETS = read_presets()

#: The book's pretraining settings (sec_bert-pretraining): the run's
#: batch, length and learning rate (`presets.PRETRAINING`), the small
#: BERT (`presets.BOOK_BERT`, whose `max_len` of positions is not the
#: sequences' `max_len` here), WikiText-2's vocabulary
#: (`presets.WIKI_VOCAB_SIZE`, the tokens the book prints) and the
#: ``round(0.15 * max_len)`` predictions of a sequence
BOOK = dict(
    {k: PRESETS.PRETRAINING[k] for k in ('batch_size', 'max_len', 'lr')},
    **{k: v for k, v in PRESETS.BOOK_BERT.items() if k != 'max_len'},
    vocab_size=PRESETS.WIKI_VOCAB_SIZE,
    num_preds=round(0.15 * PRESETS.PRETRAINING['max_len']))


#: The NLI section's fine-tuning settings
#: (sec_natural-language-inference-bert): the run's batch, length and
#: learning rate (`presets.FINETUNING`), `bert.small`'s sizes
#: (`presets.BERT_SMALL`, its positions as `pretrained_max_len`), its
#: vocabulary (`presets.BERT_SMALL_VOCAB_SIZE`) and SNLI's three classes
FINETUNE = dict(
    {k: PRESETS.FINETUNING[k] for k in ('batch_size', 'max_len', 'lr')},
    **{k: v for k, v in PRESETS.BERT_SMALL.items() if k != 'max_len'},
    pretrained_max_len=PRESETS.BERT_SMALL['max_len'],
    vocab_size=PRESETS.BERT_SMALL_VOCAB_SIZE,
    num_classes=PRESETS.SNLI_NUM_CLASSES)


#: The PyTorch and ONNX Runtime peers' versions (`TorchChild`): not
#: dependencies of d2l-bert
TORCH_PINS = ('torch==2.13.0 transformers==5.23.0 onnxruntime==1.32.0 '
              'onnx==1.23.2 onnxscript==0.7.2')
