"""What each notebook does differently from the book, and why.

The notebooks are the book's MXNet cells; where a line differs, or a cell
is added, or something runs underneath the book's calls, `DIFFERENCES`
says what and why, and ``python -m d2l_bert.chapter.differences
--write`` writes it into the notebook as a cell headed "What differs
from the book", just before the first cell of code after the set-up
(the docs' page of the notebook shows it there too).  A test holds each
notebook's cell to this table, and, where the book's sources are at
hand, every line of code that is not the book's to an entry of it.
"""
import sys

#: The heading of the cell
HEADING = '## What differs from the book'

#: Said of every notebook: (what, why)
COMMON = (
    ('The first code cell installs d2l-bert, MXNet 1.9.1 and d2l 1.0.3 '
     'where the notebook runs alone (Colab, Kaggle, Studio Lab, Binder), '
     'adding packages and changing none; in the repository\'s `.venv` it '
     'prints nothing.',
     "the book's own install cells no longer work on today's hosted "
     'Pythons'),
    ('Lines that reshape or return an array end with a comment giving '
     'its shape (`# (B, T, H)`), and a line the book writes past 79 '
     'columns is wrapped.',
     'to read the shapes beside the code'),
    ('Small runs (`D2L_BERT_SMALL=1`: the test suite, `d2l-bert chapter '
     "--small`) replace the sizes in the cells' code before they run, "
     "from the table `SMALL_CODE` of `d2l_bert/presets.py`, and say so.",
     'for a run of seconds'),
    ("The book's `d2l.NAME` calls use the names the notebook imports from "
     '`d2l_bert`, the same code as the book\'s (or as a cell above).',
     'a `#@save` cell edited here is what the later cells call, as in '
     'the book, where `d2l` holds the saved cells'),
)

#: Said of the two notebooks that build the book's pretraining data
QUICK_ARRAYS = (
    'The imports cell calls `quick_arrays()` (`d2l_bert.fast`): from then '
    "on, `np.array` of a Python list for the CPU writes the new array's "
    "memory at once, the same arrays as MXNet's.",
    "MXNet waits on its engine before each copy, and the book's "
    '`_pad_bert_inputs` makes seven small arrays an example (193,487 for '
    'the embedded corpus): the data cell runs several times faster '
    '(`benchmarks/bench_data_wiki.py`); remove the call for MXNet\'s own')

#: Said of the three notebooks whose data go through d2l's loaders
NO_LOADER_WORKERS = (
    "In a notebook, `d2l.get_dataloader_workers()` is 0 "
    "(`d2l_bert.chapter.hosted.no_loader_workers`, called by the set-up "
    "cell): the data loaders read the batches in the kernel's own "
    "process, as `d2l-bert chapter` does.",
    "d2l's 4 worker processes each copy the pages of the dataset they read "
    "(0.85 GB more at the pretraining notebook's peak, past a 2 GB Binder "
    "runtime), and on 2 cores they take the training's; the notebook runs "
    "faster without them (`benchmarks/bench_notebooks.py`)")

#: Said of the two notebooks that train with d2l's `Animator` drawing
PACED_ANIMATOR = (
    "d2l's `Animator` shows its figure at most once every 2 s "
    "(`d2l_bert.views.animator.PacedAnimator`, set by the set-up cell); "
    "every point is drawn, and the figure the cell ends with is d2l's.",
    "d2l's shows the whole figure again after every point, about 0.1 s "
    "each in a notebook: 5 of the pretraining cell's 20 s")

#: By notebook: (what, why) pairs beyond `COMMON`
DIFFERENCES = {
    'bert.ipynb': (
        ('`MaskLM.forward` makes its batch index with `np.arange(0, '
         'batch_size, ctx=X.ctx)`; the book omits `ctx=X.ctx`.',
         "without it the index is on the CPU, and a model on a GPU fails "
         "there; on a CPU the two are the same"),
        ('`TransformerEncoderBlock` (sec_transformer) is imported from '
         '`d2l_bert.book.transformer`, the book\'s block, which the tests '
         "hold to d2l 1.0.3's.",
         'the encoder builds on the block the package tests'),
        ('One added cell calls `get_tokens_and_segments` on a pair.',
         'to see what it returns before the encoder uses it'),
    ),
    'bert-dataset.ipynb': (
        ('`download_extract` and `DATA_HUB` come from `d2l_bert.data.hub`. '
         "When WikiText-2 cannot be downloaded (the book's address no "
         "longer serves it), it returns d2l-bert's embedded corpus, "
         "generated articles in WikiText's format, and says so in one line.",
         'the book\'s download is dead, and a classroom may be offline; '
         'the vocabulary and the numbers it gives are not the book\'s '
         '(they are shown, not compared)'),
        QUICK_ARRAYS,
        NO_LOADER_WORKERS,
    ),
    'bert-pretraining.ipynb': (
        ('`load_data_wiki` reads the embedded corpus where WikiText-2 '
         'cannot be downloaded, as in the dataset section.',
         "the book's download is dead"),
        QUICK_ARRAYS,
        NO_LOADER_WORKERS,
        PACED_ANIMATOR,
        ('`try_all_gpus` is `d2l_bert.devices.try_all_gpus`.',
         "d2l 1.0.3's returns an empty list without a GPU, on which "
         '`initialize(ctx=devices)` fails; this one returns `[cpu()]`, as '
         "d2l's docstring says"),
        ('One added cell, `net, loss = accelerate(net), accelerate(loss)`, '
         "runs the book's model as d2l-bert's fast twin, with the same "
         'parameters; under `train_bert` its encoder leaves out the padded '
         'positions, which no loss reads. Its loops have been compiling '
         'since the imports cell, in two processes of their own '
         '(`d2l_bert.fast.warm`), so that this cell finds them compiled.',
         "the book's blocks are slow on a CPU; remove the cell to train "
         'them as they are. The losses are not the same numbers: the twin '
         'draws other dropout masks, and sums in another order'),
    ),
    'natural-language-inference-bert.ipynb': (
        ('`download_extract` and `DATA_HUB` come from '
         '`d2l_bert.book.finetuning` (d2l-bert\'s data hub). Where '
         '`bert.small` or SNLI cannot be downloaded, it says so in one line '
         'and returns a stand-in (`d2l_bert.data.stand_ins`): an untrained '
         "model of `bert.small`'s sizes, synthetic pairs in SNLI's format.",
         'a classroom may be offline; the accuracies are then not the '
         "book's (they are shown, not compared)"),
        ('`read_snli` is `d2l_bert.runs.finetuning.read_snli_pairs`: the '
         "book's `read_snli` (`d2l_bert.book.finetuning`) through the hook "
         '`d2l_bert.data.snli.reading_first_pairs`, which with '
         '`D2L_BERT_SNLI_PAIRS=N` reads only the first N pairs '
         'of each split. In a notebook the first 1,000 are read unless '
         '`D2L_BERT_SNLI_PAIRS` says otherwise (`all`: the book\'s 549,367).',
         'five epochs over all of SNLI take hours on a CPU'),
        ('`train_ch13` is `d2l_bert.runs.d2l_loops.train_ch13`: d2l 1.0.3\'s '
         'loop, except that an epoch of fewer than five batches is plotted '
         'too.',
         "d2l's takes the batch count's fifth modulo, which is 0 for 1,000 "
         'pairs in batches of 512'),
        ('`try_all_gpus` is `d2l_bert.devices.try_all_gpus`.',
         "d2l 1.0.3's returns an empty list without a GPU"),
        NO_LOADER_WORKERS,
        PACED_ANIMATOR,
        ('`SNLIBERTDataset._preprocess` opens its pool with `with '
         'multiprocessing.Pool(4) as pool:`; the book leaves it open.',
         'so that the four worker processes end with the cell'),
        ('One added cell, `net = accelerate(net)`, runs the classifier as '
         "d2l-bert's fast twin, with the same parameters; its loops compile "
         'in two processes from the imports cell on (`d2l_bert.fast.warm`).',
         "the book's blocks are slow on a CPU; remove the cell to train "
         'them as they are'),
    ),
}


def cell_text(name):
    """The Markdown of the notebook `name`'s cell of differences."""
    import textwrap
    items = COMMON + DIFFERENCES.get(name, ())
    lines = [HEADING, '']
    for what, why in items:
        lines += textwrap.wrap(f'* {what} Why: {why}.', 76,
                               subsequent_indent='  ',
                               break_on_hyphens=False)
    return '\n'.join(lines)


def _is_differences(cell):
    return cell['cell_type'] == 'markdown' and ''.join(
        cell['source']).startswith(HEADING)


def problems(nb, name):
    """Lines saying where the notebook `nb` lacks `cell_text`."""
    found = [''.join(c['source']) for c in nb['cells']
             if _is_differences(c)]
    if found == [cell_text(name)]:
        return []
    return [f'{name}: its "What differs from the book" cell is not '
            f'chapter.differences\' (write it: python -m '
            f'd2l_bert.chapter.differences --write)']


def write(nb, name):
    """Put `cell_text` before the notebook's first code cell after the
    set-up, in place; what to say of it, or None when unchanged."""
    import nbformat
    before = [''.join(c['source']) for c in nb['cells']]
    cells = [c for c in nb['cells'] if not _is_differences(c)]
    codes = [i for i, c in enumerate(cells) if c['cell_type'] == 'code']
    at = codes[1] if len(codes) > 1 else len(cells)
    cell = nbformat.v4.new_markdown_cell(cell_text(name))
    cell.pop('id', None)    # our notebooks are nbformat 4.4
    nb['cells'] = cells[:at] + [cell] + cells[at:]
    after = [''.join(c['source']) for c in nb['cells']]
    return 'differences from the book written' if after != before else None


def main(argv=None):
    """``python -m d2l_bert.chapter.differences [--write]``."""
    from .saved_cells import NOTEBOOKS, check_or_write
    return check_or_write(sys.argv[1:] if argv is None else argv,
                          'd2l_bert.chapter.differences', write, problems,
                          tuple(NOTEBOOKS))


if __name__ == '__main__':
    sys.exit(main())
