"""Running the chapter: the cells of a notebook or of a book edition.

- `runner`: runs a chapter's code cells in one namespace, as a notebook
  would, putting together the modules below;
- `d2l_shim`, `names_0_17`: the cells' `d2l`, resolved to this package
  first, then to d2l 1.0.3, in the names of both generations;
- `data_hooks`, `batches`: how the cells' data and training run here
  (the embedded corpus, no loader processes, batches d2l's
  ``train_ch13`` can take);
- `small_sizes`: the one rewriting of the cells to small sizes, in the
  runner and in a Jupyter kernel (the table is `presets.SMALL_CODE`);
- `output`, `display_capture`: a cell's printed output, its figures and
  IPython displays;
- `gluon2`, `own_definitions`, `edition_data`: what the runner does for
  editions written their own way (MXNet 2.0's Gluon, their own
  ``#@save`` definitions and downloads);
- `book_outputs`: what the book prints for each cell, to check outputs
  against;
- `saved_cells`: the notebooks' ``#@save`` cells and the package, one
  source (``python -m d2l_bert.chapter.saved_cells --write``);
- `lengths`: each notebook's code lines against its section's in the
  book (``python -m d2l_bert.chapter.lengths ../shared/book/en``);
- `editions`: reads the book's editions (Markdown, reST, notebooks),
  places our cells in their layout and checks them
  (``d2l-bert check-text``);
- `notebooks`: what the notebooks run beyond the book's cells, and where
  it is applied (underneath the cells, or by the runner);
- `execute`, `pages`: the chapter's pages in the docs, each notebook
  executed in a kernel (cached by its contents) and shown with its
  outputs and figures beside the book's values;
- `differences`: what each notebook does differently from the book,
  and why, written into it (``python -m d2l_bert.chapter.differences
  --write``);
- `hosted`: the badges and the first cell of every notebook, which set
  it up where it is opened alone (``python -m d2l_bert.chapter.hosted
  --write``).
"""
