"""A small synthetic natural language inference corpus in SNLI's format.

The real SNLI corpus (550k pairs) has to be downloaded; this module writes
a stand-in that needs no network, so that the fine-tuning section runs
end to end offline, in class and in the tests.  The files have SNLI's
layout (a header line, then tab-separated rows whose first three columns
are the gold label and the binary parses of premise and hypothesis), so
`read_snli` reads them exactly as it reads the real ones.

Every premise describes one scene: who (`father`, `daughter`, ...), doing
what (`painting a church`, `fishing for salmon`, ...), and where (`in the
park`, `in the library`, ...).  Hypotheses are built so that most labels
follow from comparing the pair, not from the hypothesis alone:

- entailment: a more general subject (`a man is fishing for salmon`), a
  more general activity (`a father is fishing`), or the right setting
  (`a father is outside` after `in the park`);
- contradiction: an activity of another kind (`a father is climbing a
  hill` after `... is fishing ...`), the wrong setting, or a negation
  (`a father is not fishing for salmon`);
- neutral: facts the premise does not give (`... in winter`, `the father
  is popular`).

The same hypothesis (`a man is climbing a hill`) is entailment after one
premise and contradiction after another, so a model has to read both.

Every word is frequent both in WikiText-2 (the vocabulary of the d2l
hub's `bert.small`) and in the project's embedded corpus (the vocabulary
of `d2l-bert pretrain`), so neither model sees it as `<unk>`.  The data
are a deterministic function of the seed and the sizes.
"""
import os
import random

from ..checks import check_positive_int
from ..presets import SNLI_SYNTHETIC
from .atomic import atomic_write

SNLI_HEADER = ('gold_label', 'sentence1_binary_parse',
               'sentence2_binary_parse', 'sentence1_parse',
               'sentence2_parse', 'sentence1', 'sentence2', 'captionID',
               'pairID', 'label1', 'label2', 'label3', 'label4', 'label5')

# subject -> its more general word
SUBJECTS = {'father': 'man', 'mother': 'lady', 'son': 'child',
            'daughter': 'child'}
ADJECTIVES = ('young', 'old')
# activity -> a more general phrase it entails; activities of different
# general phrases cannot happen at the same time
ACTIVITIES = {
    'painting a church': 'painting a building',
    'painting a castle': 'painting a building',
    'painting a mill': 'painting a building',
    'climbing a hill': 'climbing',
    'climbing a mountain': 'climbing',
    'fishing for salmon': 'fishing',
    'fishing for trout': 'fishing',
    'building a bridge': 'building',
    'building a ship': 'building',
}
# place -> where it is
PLACES = {
    'in the park': 'outside', 'in the valley': 'outside',
    'on the shore': 'outside', 'in the garden': 'outside',
    'in the meadow': 'outside', 'in the forest': 'outside',
    'in the kitchen': 'inside', 'in the library': 'inside',
    'in the museum': 'inside', 'in the hall': 'inside',
    'in the chapel': 'inside',
}
OPPOSITE_SETTING = {'outside': 'inside', 'inside': 'outside'}
# only painting happens inside
INDOOR_ACTIVITIES = ('painting a church', 'painting a castle',
                     'painting a mill')
EXTRAS = ('for money', 'in winter', 'in summer', 'in spring',
          'for the museum')
STATES = ('ill', 'popular', 'married', 'quiet', 'powerful')

LABELS = ('entailment', 'contradiction', 'neutral')
SPLITS = {'train': 'snli_1.0_train.txt', 'dev': 'snli_1.0_dev.txt',
          'test': 'snli_1.0_test.txt'}
# the sizes the command line and the notebook use unless told otherwise
NUM_TRAIN, NUM_DEV, NUM_TEST = (SNLI_SYNTHETIC[f'num_{split}']
                                for split in ('train', 'dev', 'test'))


def _a(words):
    """Put the indefinite article `a` or `an` before `words`."""
    return f"{'an' if words[0] in 'aeiou' else 'a'} {words}"


def _hypothesis(rng, label, subj, act, place):
    """Return the hypothesis for a premise and a label."""
    setting = PLACES[place]
    if label == 'entailment':
        kind = rng.randrange(3)
        if kind == 0:
            return f'{_a(SUBJECTS[subj])} is {act}'
        if kind == 1:
            return f'{_a(subj)} is {ACTIVITIES[act]}'
        return f'{_a(subj)} is {setting}'
    if label == 'contradiction':
        kind = rng.randrange(4)
        if kind in (0, 1):
            # an activity that cannot happen at the same time
            others = [a for a in sorted(ACTIVITIES)
                      if ACTIVITIES[a] != ACTIVITIES[act]]
            who = subj if kind == 0 else SUBJECTS[subj]
            return f'{_a(who)} is {rng.choice(others)}'
        if kind == 2:
            return f'{_a(subj)} is {OPPOSITE_SETTING[setting]}'
        return f'{_a(subj)} is not {act}'
    kind = rng.randrange(2)
    if kind == 0:
        return f'{_a(subj)} is {act} {place} {rng.choice(EXTRAS)}'
    return f'the {subj} is {rng.choice(STATES)}'


def _binary_parse(words):
    """Return a right-branching binary parse like SNLI's columns 2 and 3."""
    if len(words) == 1:
        return words[0]
    return f'( {words[0]} {_binary_parse(words[1:])} )'


def generate_snli_rows(num_examples, seed=0):
    """Generate synthetic SNLI rows.

    Parameters
    ----------
    num_examples : int
        Number of rows with a gold label; about one row in a hundred more
        has the gold label ``-`` (annotators disagreed), as in SNLI, and is
        skipped by `read_snli`.
    seed : int
        Seed of the private random generator; the rows depend on nothing
        else.

    Returns
    -------
    list of tuple of str
        One tuple of 14 columns per row, in the order of `SNLI_HEADER`.
    """
    check_positive_int('num_examples', num_examples)
    rng = random.Random(seed)
    rows, labelled = [], 0
    while labelled < num_examples:
        subj = rng.choice(sorted(SUBJECTS))
        act = rng.choice(sorted(ACTIVITIES))
        place = rng.choice(sorted(
            p for p in PLACES
            if PLACES[p] == 'outside' or act in INDOOR_ACTIVITIES))
        adj = rng.choice(ADJECTIVES + ('',) * 4)
        who = _a(f'{adj} {subj}' if adj else subj)
        premise = f'{who} is {act} {place} .'
        label = rng.choice(LABELS)
        hypothesis = _hypothesis(rng, label, subj, act, place) + ' .'
        gold = '-' if rng.random() < 0.01 else label
        labelled += gold != '-'
        p_words, h_words = premise.split(), hypothesis.split()
        n = len(rows)
        rows.append((
            gold, _binary_parse(p_words), _binary_parse(h_words),
            f'(ROOT (S {premise}))', f'(ROOT (S {hypothesis}))',
            premise.capitalize(), hypothesis.capitalize(),
            f'{n}.jpg#0', f'{n}.jpg#0r1{label[0]}', label, label,
            label, label, label if gold != '-' else 'neutral'))
    return rows


def _write_rows(file_name, rows):
    """Write rows to `file_name`, whole or not at all."""
    lines = ['\t'.join(SNLI_HEADER)] + ['\t'.join(row) for row in rows]
    atomic_write(file_name, '\n'.join(lines) + '\n')


def make_snli_synthetic(folder, num_train=NUM_TRAIN, num_dev=NUM_DEV,
                        num_test=NUM_TEST, seed=0):
    """Write a synthetic corpus in SNLI's layout and return its directory.

    Parameters
    ----------
    folder : str
        Where to write; the files go to ``folder/snli_1.0/`` as in the
        real archive.  Existing files are replaced whole (each one is
        written with `atomic_write`), never left half-written.
    num_train, num_dev, num_test : int
        Labelled rows in ``snli_1.0_train.txt``, ``snli_1.0_dev.txt`` and
        ``snli_1.0_test.txt``.
    seed : int
        Seed; each split draws from its own generator seeded from it, so a
        split does not change when another one's size does.

    Returns
    -------
    str
        The data directory, to pass to `read_snli`.
    """
    data_dir = os.path.join(folder, 'snli_1.0')
    os.makedirs(data_dir, exist_ok=True)
    sizes = {'train': num_train, 'dev': num_dev, 'test': num_test}
    for offset, (split, file_name) in enumerate(SPLITS.items()):
        rows = generate_snli_rows(sizes[split], seed=seed * 3 + offset)
        _write_rows(os.path.join(data_dir, file_name), rows)
    return data_dir
