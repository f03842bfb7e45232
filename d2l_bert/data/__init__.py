"""The data the book's sections read, and the files they are kept in.

The book's layer stands on this package as the book stands on d2l's
data hub: `dataset` downloads WikiText-2 and `finetuning` the pretrained
models and SNLI through `hub`.  It imports nothing of the package but
`checks` and `presets`, so the book's sections stay at the bottom of
the imports.

- `hub`: d2l's `DATA_HUB` and `download_extract`, with SHA-1 checks,
  timeouts and a cache that never holds half a file;
- `model_dir`: reads a pretrained model's directory (`bert.small`'s
  layout: ``pretrained.params``, ``vocab.json``, ``config.json``);
- `ndarray_bytes`: MXNet's file of named arrays (``.params``), read from
  bytes without MXNet, every size checked against the bytes there;
- `ndarray_file`: the names, shapes and dtypes of an MXNet parameter
  file, each size checked against the file's, read without MXNet;
- `bounded`: a small file read whole, if it is a regular file no
  larger than a limit;
- `corpus`: generates the small corpus shipped in ``embedded/``, in
  WikiText's token format, from the templates of `corpus_domains` (the
  eight domains of its articles);
- `wikitext`: finds the corpus `runs.wiki_data.load_pretraining_data`
  reads (the embedded one, WikiText-2 on disk or downloaded, or the
  user's files);
- `stand_ins`: the offline stand-ins `hub` gives for what cannot be
  downloaded (the embedded corpus, synthetic SNLI, an untrained
  ``bert.small`` or ``bert.base``);
- `snli`: the book's `read_snli` wrapped from outside, to read only the
  first pairs of each split (``D2L_BERT_SNLI_PAIRS``);
- `snli_synthetic`: premise/hypothesis pairs in SNLI's format, offline;
- `atomic`: files written whole or not at all.
"""
