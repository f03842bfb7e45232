"""Training runs beyond the book's loops: what ``d2l-bert pretrain`` and
``d2l-bert finetune`` run.

- `pretraining`: the book's `train_bert` loop with a progress bar,
  checkpoints that resume exactly, the per-step history and held-out
  accuracy (`train_bert_history`, `evaluate_bert`);
- `checkpoints`: the checkpoints of pretraining, written atomically and
  read without running code, every size checked before it is read
  (`save_checkpoint`, `load_checkpoint`); `checkpoint_meta` checks
  their ``meta.json`` and keeps the random states and the position in
  the data, `checkpoint_pickle` reads Adam's pickled state of the
  checkpoints of version 1;
- `wiki_data`: the pretraining data of a chosen corpus, split, seed and
  padding, checked, built from the book's dataset functions;
- `finetuning`: a pretrained model's sizes, SNLI's directory, the
  book's `train_ch13` returning its history, and its plot;
- `model_files`: saves a pretrained model in d2l's `bert.small` layout
  and loads it back whole; encodes text with it;
- `out_dir`: the output directory of a run, locked for it, never
  replacing a finished model unasked;
- `memory`: whether a model and its batch fit in this machine's memory,
  estimated before anything is allocated;
- `seeding`: one seed for Python's, NumPy's and MXNet's generators.
- `interrupts`: Ctrl-C at the end of a training step, not inside
  MXNet's callbacks.

These modules import the book's sections; the sections never import
them.
"""
