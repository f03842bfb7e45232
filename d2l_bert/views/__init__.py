"""Drawings of what a model computes, beyond the book's own plots.

- `attention`: `show_bert_attention`, the attention weights the book's
  `MultiHeadAttention` keeps, from one forward pass of a `BERTModel`, a
  `BERTEncoder` or a pretrained checkpoint loaded into them, drawn by
  d2l's `show_heatmaps` as a grid of layers by heads.
- `animator`: `PacedAnimator`, d2l's `Animator` showing its figure at
  most once every 2 s, which the chapter's notebooks use.
"""
from .attention import bert_attention, show_bert_attention  # noqa: F401
