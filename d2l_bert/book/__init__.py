"""The book's sections, and nothing but the book's definitions.

One module per section of the chapter, in the order the book builds
them: `attention` (sec_attention-scoring-functions,
sec_multihead-attention), `transformer` (sec_transformer), `bert`
(sec_bert), `dataset` (sec_bert-dataset), `pretraining`
(sec_bert-pretraining) and `finetuning`
(sec_natural-language-inference-bert).  Each holds the book's names,
signatures and comments; the notebooks' ``#@save`` cells are copied from
them (`d2l_bert.chapter.saved_cells`).

What goes beyond the book lives outside this folder and is applied from
outside: argument checks in `d2l_bert.checks`, the offline stand-ins in
`d2l_bert.data` (with reading only the first pairs of SNLI), the
fix of d2l's `train_ch13` for few batches in `d2l_bert.runs.d2l_loops`,
the original BERT's options in `d2l_bert.hf.original`,
the fast twins in `d2l_bert.fast`, checkpoints and histories in
`d2l_bert.runs`.
"""
