"""The inference twin of a pretrained BERT: encoder and pooler, one graph::

    twin = d2l_bert.fast.inference(encoder, hidden)
    encoded_X, pooled = twin(tokens, segments, valid_lens)

`load_pretrained_bert` makes this call (``fast=True``, its default), so
``bert(tokens, segments, valid_lens)`` and ``bert.encode_batch(texts)``
run it; ``bert.encoder`` and ``bert.hidden`` stay the book's blocks, and
``load_pretrained_bert(..., fast=False)`` calls them instead.

The twin holds the book blocks' own layers and parameters (nothing is
copied) and computes what they compute, with dropout off:

- one hybridized graph with static memory, from the token ids to the
  pooled vector;
- the queries, keys and values of all heads by one matrix product
  (`FastSelfAttention.qkv_weight`, as the training twin);
- on the CPU, the attention of each (example, head) pair by a compiled
  loop (`_inference_ops.self_attention`, the path 'compiled_inference'
  of `attention_path`): BLAS products with the scores
  kept in the cache, no attention weights written out, and the keys
  past each valid length left out of both products;
- AddNorm by a compiled loop without dropout
  (`_inference_ops.add_norm`): no dropout seed drawn in the graph;
- the original BERT's three embeddings, summed, and their LayerNorm by
  one compiled loop (`_inference_ops.embed_norm`).

The book's blocks are the test oracle (`tests/test_fast_inference.py`):
outputs agree within float32 rounding, with and without `valid_lens`,
for single texts and pairs.

Dimension key used in the shape comments:

B: batch size, T: sequence length, H: num_hiddens, h: num_heads,
d: H / h, D: the input size of the projections
"""
import mxnet as mx
from mxnet import autograd
from mxnet.gluon import nn

from . import _inference_ops
from ._build import (contexts, hybridize_twin, parameter, tiny_batch,
                     warn_late_import)
from .attention_path import use_kernels
from .blocks import (FastAddNorm, FastBERTEncoder,
                     FastTransformerEncoderBlock, _Checked)


class InferenceAddNorm(FastAddNorm):
    """`FastAddNorm` without dropout: on the CPU one compiled operator
    with no dropout seed drawn in the graph (`_inference_ops.add_norm`).

    Parameters
    ----------
    addnorm : AddNorm
        The book's block, whose LayerNorm the twin holds.
    kernels : bool
        Use the compiled loop (else MXNet's operators).
    """

    def hybrid_forward(self, F, X, Y):
        """`X`, `Y` (B, T, H) -> (B, T, H)."""
        if self.kernels:
            return _inference_ops.add_norm(
                F, X, Y, parameter(F, self.ln.gamma, X),
                parameter(F, self.ln.beta, X),
                self.ln.epsilon)                             # (B, T, H)
        return self.ln(self.dropout(Y) + X)                  # (B, T, H)


class InferenceEncoderBlock(FastTransformerEncoderBlock):
    """`TransformerEncoderBlock` at inference: the training twin's block
    with the inference AddNorm, its attention built for inference (on
    the CPU the compiled inference loop, `attention_path`)."""
    addnorm_block, inference = InferenceAddNorm, True


class InferenceBERTEncoder(FastBERTEncoder):
    """`FastBERTEncoder` with inference blocks."""

    def __init__(self, encoder, kernels):
        super().__init__(encoder, kernels)
        self.blks = nn.HybridSequential()
        for blk in encoder.blks:
            self.blks.add(InferenceEncoderBlock(blk, kernels))
        # The original BERT's embeddings and their LayerNorm by one
        # compiled operator (`_inference_ops.embed_norm`)
        self.embed_kernel = (kernels and self.embedding_norm is not None
                             and self.embedding_norm.kernels)

    def hybrid_forward(self, F, tokens, segments, valid_lens=None,
                       pos_embedding=None):
        """`tokens`, `segments` (B, T), `valid_lens` (B,) -> (B, T, H)."""
        if not self.embed_kernel:
            return super().hybrid_forward(F, tokens, segments, valid_lens,
                                          pos_embedding)     # (B, T, H)
        norm = self.embedding_norm
        X = _inference_ops.embed_norm(
            F, tokens, segments,
            parameter(F, self.token_embedding.weight, tokens),  # (V, H)
            parameter(F, self.segment_embedding.weight, tokens),  # (S, H)
            pos_embedding,                                   # (1, L, H)
            parameter(F, norm.gamma, tokens), parameter(F, norm.beta, tokens),
            norm.epsilon)                                    # (B, T, H)
        for blk in self.blks:
            X = blk(X, valid_lens)                           # (B, T, H)
        return X


class InferenceBERT(_Checked):
    """A `BERTEncoder` and the pooler (`BERTModel.hidden`) as one graph,
    for inference: called as ``PretrainedBERT`` is, it returns
    ``(encoded_X, pooled)``.

    Parameters
    ----------
    encoder : BERTEncoder
        The pretrained encoder, whose layers the twin holds.
    hidden : nn.Dense
        The pooler, applied to the encoding of ``<cls>`` (position 0).
    kernels : bool
        Attend and normalize with the compiled loops (CPU, numba).
    """

    def __init__(self, encoder, hidden, kernels):
        super().__init__()
        self.kernels = kernels
        self.encoder = InferenceBERTEncoder(encoder, kernels)
        self.hidden = hidden

    def forward(self, tokens, segments, valid_lens=None):
        """Check the inputs as `BERTEncoder` does, then run the graph."""
        if not isinstance(tokens, mx.sym.Symbol):
            self._prepare(self.encoder, tokens, segments, valid_lens,
                          [valid_lens])
        return super().forward(tokens, segments, valid_lens)

    def hybrid_forward(self, F, tokens, segments, valid_lens=None):
        """`tokens`, `segments` (B, T), `valid_lens` (B,) or None ->
        ``encoded_X`` (B, T, H), ``pooled`` (B, H)."""
        encoded_X = self.encoder(tokens, segments, valid_lens)  # (B, T, H)
        pooled = self.hidden(encoded_X[:, 0, :])             # (B, H)
        return encoded_X, pooled


def inference(encoder, hidden, kernels=None, check=True):
    """Return the inference twin of a book `BERTEncoder` and its pooler.

    Parameters
    ----------
    encoder : BERTEncoder
        Initialized (or loaded).
    hidden : nn.Dense
        The pooler, initialized: ``BERTModel.hidden``.
    kernels : bool, optional
        Use the compiled loops.  Default: when numba works here, the
        parameters are on the CPU and ``D2L_BERT_KERNELS`` is not '0'
        (`attention_path.use_kernels`).
    check : bool, default True
        Run the twin and the book's blocks on a small batch and raise if
        they differ (a `forward` edited in a notebook is caught here).

    Returns
    -------
    InferenceBERT
        Hybridized with static memory.
    """
    warn_late_import()
    for name, block in (('encoder', encoder), ('hidden', hidden)):
        if not isinstance(block, nn.Block):
            raise TypeError(f'{name} must be a Gluon block, got '
                            f'{type(block).__name__}')
    if not all(hasattr(encoder, child) for child in (
            'token_embedding', 'segment_embedding', 'blks',
            'pos_embedding')):
        raise TypeError(f'encoder must be a BERTEncoder (or a block with '
                        f'its children), got {type(encoder).__name__}')
    ctxs = contexts(encoder)
    twin = InferenceBERT(encoder, hidden,
                         use_kernels(ctxs, kernels, inference=True))
    # With oneDNN, its inference passes: each FFN's GELU runs inside its
    # first matrix product (`_sg_mkldnn_fully_connected`); the book's
    # blocks stay imperative
    hybridize_twin(twin, encoder, hidden,
                   backend='MKLDNN' if _onednn(ctxs) else None)
    if check:
        batch = tiny_batch('BERTEncoder', ctxs[0],
                           encoder.pos_embedding.shape[1])
        with autograd.predict_mode():
            book_X = encoder(*batch)                         # (2, T, H)
            book = (book_X, hidden(book_X[:, 0, :]))
            ours = twin(*batch)
        for name, a, b in zip(('encoded_X', 'pooled'), ours, book):
            if a.shape != b.shape or float(abs(a - b).max()) > 1e-4 + \
                    1e-3 * float(abs(b).max()):
                raise ValueError(
                    f'fast.inference: the twin and the book blocks give '
                    f'different {name} on a test batch; the fast layer '
                    "computes what the book's classes compute, so if you "
                    'edited a forward method, use them directly '
                    '(load_pretrained_bert(..., fast=False))')
    return twin


def _onednn(contexts):
    """Whether oneDNN's graph passes apply: MXNet built with it, every
    context a CPU."""
    return (all(c.device_type == 'cpu' for c in contexts)
            and mx.runtime.Features().is_enabled('MKLDNN'))
