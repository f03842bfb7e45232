"""d2l_bert: the BERT chapter of *Dive into Deep Learning* in MXNet/Gluon.

The public names are the book's.  Each object says in its docstring which
section of the book defines it.
"""
# MXNet fixes its CPU thread count when it is imported, to half the
# processors unless told otherwise, and importing it loads OpenMP and
# OpenBLAS, which fix their settings then; before that, ask for every
# core, for idle OpenMP threads that soon sleep and, on a CPU with
# AVX-512, for OpenBLAS's AVX-512 kernels
from ._threads import shorten_openmp_spin as _shorten_openmp_spin
from ._threads import use_all_cores as _use_all_cores
from ._threads import use_avx512_blas as _use_avx512_blas
#: What MXNet uses for its CPU operators, in words (see `_threads`)
CPU_THREADS = _use_all_cores()
#: How long MXNet's idle OpenMP threads spin, in words (see `_threads`)
OPENMP_SPIN = _shorten_openmp_spin()
#: Which kernels OpenBLAS was asked for, in words (see `_threads`)
BLAS_KERNELS = _use_avx512_blas()

from mxnet import npx as _npx  # noqa: E402

# The book runs every cell under NumPy semantics (`npx.set_np()`); our
# blocks are written for it, so importing the package turns it on
_npx.set_np()

__version__ = '0.1.0'

from .bert import get_tokens_and_segments  # noqa: E402,F401
from .attention import (  # noqa: E402,F401
    masked_softmax, DotProductAttention, MultiHeadAttention)
from .transformer import (  # noqa: E402,F401
    PositionWiseFFN, AddNorm, TransformerEncoderBlock, EncoderBlock)
from .bert import (  # noqa: E402,F401
    BERTEncoder, MaskLM, NextSentencePred, BERTModel, ORIGINAL_BERT)
from .dataset import (  # noqa: E402,F401
    _read_wiki, _get_next_sentence, _get_nsp_data_from_paragraph,
    _replace_mlm_tokens, _get_mlm_data_from_tokens, _pad_bert_inputs,
    _WikiTextDataset, load_data_wiki)
from .hf import load_pretrained_bert, PretrainedBERT  # noqa: E402,F401
from .finetuning import (  # noqa: E402,F401
    DATA_HUB, DATA_URL, load_pretrained_model, read_snli, SNLIBERTDataset,
    BERTClassifier)
from .pretraining import (  # noqa: E402,F401
    _get_batch_loss_bert, train_bert, get_bert_encoding)
from .training import evaluate_bert  # noqa: E402,F401
from .model_files import save_pretrained, load_pretrained  # noqa: E402,F401
from . import fast  # noqa: E402,F401
