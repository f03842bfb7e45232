"""Every setting of d2l-bert, in one place: the book's settings, the
named configurations, the sizes and counts of the chapter's, the data's
and the benchmarks' runs, and every ``D2L_BERT_*`` environment variable.

Plain constants, at the bottom of the package (this module imports
nothing): the book's sections read them where they have a default, and
so do the command line (its options' defaults and help texts), the runs
and the benchmarks (``benchmarks/_common.py`` runs this file by path,
in Pythons without d2l_bert, one more reason to import nothing).  The
book's own cells and signatures keep the values as the book writes them
(``batch_size, max_len = 512, 64``, ``BERTModel(..., max_len=1000)``);
`tests/test_presets.py` checks that these constants are those values.

The models, `BERTModel`'s keyword arguments:

- `BOOK_BERT`: the small BERT that sec_bert-pretraining pretrains;
- `BERT_SMALL`, `BERT_BASE`: the models on d2l's data hub
  (`HUB_MODELS`), with the sizes and the dropout that
  sec_natural-language-inference-bert loads them with;
- `ORIGINAL_BERT`: the options of the original BERT's architecture,
  `d2l_bert.hf.original.OriginalBERTModel`'s defaults.

The training settings, in the book's names: `PRETRAINING`
(sec_bert-pretraining) and `FINETUNING`
(sec_natural-language-inference-bert).
"""

#: The small BERT of sec_bert-pretraining (`max_len`: `BERTModel`'s
#: default, the positions it learns)
BOOK_BERT = dict(num_hiddens=128, ffn_num_hiddens=256, num_heads=2,
                 num_blks=2, dropout=0.2, max_len=1000)

#: d2l's `bert.small`, as sec_natural-language-inference-bert loads it
BERT_SMALL = dict(num_hiddens=256, ffn_num_hiddens=512, num_heads=4,
                  num_blks=2, dropout=0.1, max_len=512)
#: d2l's `bert.base`, which the section's first exercise asks for
BERT_BASE = dict(num_hiddens=768, ffn_num_hiddens=3072, num_heads=12,
                 num_blks=12, dropout=0.1, max_len=512)
#: The pretrained models of d2l's data hub, by name
HUB_MODELS = {'bert.small': BERT_SMALL, 'bert.base': BERT_BASE}

#: The original BERT's options of `d2l_bert.hf.original`'s subclasses of
#: the book's classes (which add the LayerNorm after the embeddings)
ORIGINAL_BERT = dict(activation='gelu', epsilon=1e-12)

#: sec_bert-pretraining's run; `lr` is Adam's in d2l 1.0.3 (0.17.0 used
#: 1e-3)
PRETRAINING = dict(batch_size=512, max_len=64, num_steps=50, lr=0.01)

#: sec_natural-language-inference-bert's run on SNLI
FINETUNING = dict(batch_size=512, max_len=128, num_epochs=5, lr=1e-4)

# Environment variables: every ``D2L_BERT_*`` name is defined here and
# only here; each comment says what reads it.

#: The data folder (default ``~/.cache/d2l_bert``): `data.hub.data_home`;
#: set by `chapter.execute` and the benchmarks for a fresh runtime
DATA_ENV = 'D2L_BERT_DATA'
#: ``1``: download nothing, serve the offline stand-ins (`data.hub`,
#: `chapter.execute`)
OFFLINE_ENV = 'D2L_BERT_OFFLINE'
#: Not empty and not ``0``: the notebooks' small sizes (`chapter`'s
#: runner, kernels and editions' children, ``bench_notebooks --small``)
SMALL_ENV = 'D2L_BERT_SMALL'
#: How many pairs of each SNLI split the fine-tuning notebook reads: a
#: number, or ``0`` or ``all`` for the book's run (`data.snli_subset`,
#: `chapter.hosted`, ``d2l-bert chapter``)
SNLI_PAIRS_ENV = 'D2L_BERT_SNLI_PAIRS'
#: ``0``: the fast layer's compiled kernels off, MXNet's operators only
#: (`fast`, and the jobs `dist.launcher` starts)
KERNELS_ENV = 'D2L_BERT_KERNELS'
#: The ssh program and its options that `dist.launcher` logs in with
#: (default ``ssh``; ``benchmarks/cluster.py`` sets it)
SSH_ENV = 'D2L_BERT_SSH'
#: What a notebook's hosted set-up cell installs d2l-bert from (default:
#: the repository's archive; `chapter.hosted`, ``benchmarks/_platform.py``)
SOURCE_ENV = 'D2L_BERT_SOURCE'
#: Where ``d2l-bert chapter`` finds the notebooks (`cli.chapter`)
NOTEBOOKS_ENV = 'D2L_BERT_NOTEBOOKS'
#: The MXNet build ``run.py setup`` installs (``mxnet``, ``mxnet-cu112``)
MXNET_ENV = 'D2L_BERT_MXNET'
#: Set by ``run.py`` while it re-runs itself under another Python
REEXEC_ENV = 'D2L_BERT_RUN_PY_REEXEC'
#: Rows of the square GEMM the benchmarks measure their best against
#: (``benchmarks/_gemm.py``)
BENCH_GEMM_ROWS_ENV = 'D2L_BERT_BENCH_GEMM_ROWS'
#: The Python of a PyTorch environment for the benchmarks' peers
#: (``bench_minilm.py``, ``bench_torch.py``, their test)
TORCH_PYTHON_ENV = 'D2L_BERT_TORCH_PYTHON'
#: ``all``: the hosted tests run every simulated platform
#: (``tests/test_chapter_hosted.py``)
HOSTED_ENV = 'D2L_BERT_HOSTED'
#: A mark the tests put in a child's environment to find its processes
#: (``tests/``)
TEST_MARK_ENV = 'D2L_BERT_TEST_MARK'
#: Where the docs build keeps its executed chapter (``docs/conf.py``)
DOCS_CACHE_ENV = 'D2L_BERT_DOCS_CACHE'
#: The Debian mirror of ``.ci/debian`` (a shell script, which reads the
#: name itself)
DEBIAN_MIRROR_ENV = 'D2L_BERT_DEBIAN_MIRROR'

# The book's data and its offline stand-ins: sizes and counts read by
# `data/` and the runs of the book's sections (`runs.finetuning`)

#: Pairs of each split of SNLI's offline stand-in, synthetic pairs in
#: SNLI's layout (`data.stand_ins.snli_stand_in`)
SNLI_STAND_IN = dict(num_train=512, num_dev=16, num_test=128)
#: Pairs of each split of the synthetic SNLI that ``d2l-bert finetune
#: --data synthetic`` writes (`data.snli_synthetic`'s defaults)
SNLI_SYNTHETIC = dict(num_train=5000, num_dev=500, num_test=1000)
#: ``d2l-bert finetune --data synthetic``'s run, minutes on a CPU
#: (`cli.finetune`; the book's run is `FINETUNING`)
FINETUNING_SYNTHETIC = dict(num_epochs=3, batch_size=64, max_len=32,
                            lr=1e-3)
#: Fewer batches an epoch than this and d2l 1.0.3's ``train_ch13``, which
#: plots every ``num_batches // POINTS_PER_EPOCH``-th, divides by zero
#: (`runs.d2l_loops.batches_per_point`)
POINTS_PER_EPOCH = 5

# The chapter's sizes (`d2l_bert.chapter`): the small sizes of a quick
# run and the SNLI pairs the fine-tuning notebook reads.

#: Step count that ``train_bert(...)`` calls are capped to at small sizes
#: (`chapter.small_sizes`, in the runner and in a kernel;
#: `chapter.editions.child`)
SMALL_STEPS = 2
#: Batches an epoch below which d2l 1.0.3's ``train_ch13`` fails (it
#: takes the batch count's fifth modulo); fewer are cut again into this
#: many (`runs.d2l_loops.with_min_batches`, `chapter.data_hooks`)
MIN_BATCHES = POINTS_PER_EPOCH
#: At small sizes, ``d2l.train_ch13`` trains one epoch on this many
#: batches of at most `SMALL_BATCH` examples, and tests on one batch
#: (`chapter.data_hooks`)
SMALL_BATCHES, SMALL_BATCH = 5, 8
#: The seed of every random generator at small sizes
#: (`chapter.small_sizes`)
SMALL_SEED = 0
#: The generated articles (count, seed) of each split of the corpus that
#: stands in for WikiText-2 at small sizes: about 860 sentence pairs of at
#: most 64 tokens, so that the book's batch of 512 fills, built in seconds
#: where the embedded corpus's 27,641 take a minute in the book's padding
#: (`chapter.small_sizes`)
SMALL_WIKITEXT = {'train': (100, 1), 'valid': (10, 2)}
#: At small sizes, the code of the notebooks' cells that sets the book's
#: sizes, and what runs in its place, by notebook: each pair is (the code
#: as the cell writes it, the small run's code), one statement or one
#: expression each, and each must be found exactly once among all the
#: notebooks, in its own (a test holds them to that, so a cell that
#: drifts from the table fails).  The pretraining notebook keeps its
#: batches of 512 (sec_bert-dataset prints their shapes from the same
#: line): its steps are capped (`SMALL_STEPS`, as any ``train_bert(...)``
#: call is).  Applied by `chapter.small_sizes.SmallSizes`, in the chapter
#: runner and in a kernel
SMALL_CODE = {
    'bert-pretraining.ipynb': [
        ('train_bert(train_iter, net, loss, len(vocab), devices, 50)',
         'train_bert(train_iter, net, loss, len(vocab), devices, 2)'),
    ],
    'natural-language-inference-bert.ipynb': [
        ('batch_size, max_len, num_workers = 512, 128, '
         'd2l.get_dataloader_workers()',
         # no loader processes: a kernel ending leaves their shared
         # memory's temporary folder behind
         'batch_size, max_len, num_workers = 32, 64, 0'),
        ('lr, num_epochs = 1e-4, 5', 'lr, num_epochs = 1e-4, 1'),
    ],
    'what-bert-learned.ipynb': [
        ('batch_size, max_len, num_steps = 128, 64, 100',
         'batch_size, max_len, num_steps = 32, 64, 2'),
    ],
}
#: The pairs of each SNLI split the fine-tuning notebook reads unless
#: `SNLI_PAIRS_ENV` asks for the book's run: five epochs over all of SNLI
#: take hours on a CPU (``d2l-bert chapter``, `chapter.hosted.in_kernel`)
CHAPTER_SNLI_PAIRS = 1000
#: The labelled pairs of each of SNLI's splits, as the real archive holds
#: them: ``benchmarks/bench_chapter.py`` serves a synthetic archive of
#: these sizes
SNLI_SPLITS = dict(train=549367, dev=9842, test=9824)
#: The pairs of the book's run, SNLI's training split
#: (`chapter.data_hooks.fine_tuning_note`)
BOOK_SNLI_PAIRS = SNLI_SPLITS['train']

# The benchmarks' sizes (benchmarks/, which read this file by path)

#: WikiText-2's vocabulary at the book's settings, the 20256 tokens
#: sec_bert-pretraining prints: the benchmarks' pretraining batches and
#: the rows of their GEMM (``benchmarks/_common.py``'s `BOOK`)
WIKI_VOCAB_SIZE = 20256
#: `bert.small`'s vocabulary, 60005 tokens: the benchmarks' fine-tuning
#: batches (``benchmarks/_common.py``'s `FINETUNE`)
BERT_SMALL_VOCAB_SIZE = 60005
#: SNLI's classes: entailment, contradiction, neutral (the benchmarks'
#: fine-tuning batches)
SNLI_NUM_CLASSES = 3
