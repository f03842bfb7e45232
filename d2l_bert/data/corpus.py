"""The embedded corpus: a small WikiText-style corpus written by this project.

WikiText-2, the corpus of :numref:`sec_bert-dataset`, is no longer served
at the book's address, and a classroom may have no network at all.  This
module generates a stand-in from our own templates, in WikiText's token
format, so that `_read_wiki` reads it exactly like the real thing::

     = Harrowmere River =
    <blank line>
     The Harrowmere River is a long river in Ostmark . It is 212 ...
    <blank line>
     = = Course = =

Every line starts with a space and ends with ``' \\n'``; tokens are
separated by spaces, hyphens and digit groups are split as ``' @-@ '``,
``' @,@ '`` and ``' @.@ '``, rare scientific names appear as ``<unk>`` and
every sentence ends with ``' . '``.

The text is invented, but it is built to carry the two signals that BERT's
pretraining tasks look for:

* next sentence prediction: each article is about one entity (a river, a
  ship, a person, ...) from one of eight domains, and each paragraph tells
  its section in a fixed narrative order (a ship is laid down, then
  launched, then commissioned), repeating the entity's name and the
  domain's vocabulary.  A random sentence from another paragraph usually
  comes from another domain and always from another point of the story;
* masked language modeling: pronouns agree with the person's name and the
  ship's "she", units follow numbers, each profession has its own verbs
  and works, and names are repeated across neighbouring sentences.

The generator only calls `random.Random.random`, whose stream is the same
on every supported Python version, so ``python -m d2l_bert.data.corpus``
always writes the same bytes (a test checks the shipped files against
it).
"""
import os
import random
import re
import sys

from .atomic import atomic_write
from .corpus_domains import DOMAINS, WORDS

# Sizes and seeds of the shipped splits; changing any of them changes the
# files under `d2l_bert/data/embedded`
TRAIN_ARTICLES, VALID_ARTICLES = 3200, 320
TRAIN_SEED, VALID_SEED = 20240, 20241
# The pools of names are shared by both splits, so that names seen in
# training are also those of the held-out split
NAMES_SEED = 1

DATA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'embedded')
FILE_NAMES = {'train': 'wiki.train.tokens', 'valid': 'wiki.valid.tokens'}


class _Rng:
    """Random choices drawn only from `random.Random.random`.

    `random.Random.choice` and `shuffle` have changed their algorithms
    between Python versions; `random()` for an integer seed has not.
    """

    def __init__(self, seed):
        self._random = random.Random(seed)

    def random(self):
        return self._random.random()

    def randint(self, low, high):
        """An integer in ``[low, high]``, both included."""
        return low + int(self._random.random() * (high - low + 1))

    def choice(self, seq):
        return seq[int(self._random.random() * len(seq))]

    def sample(self, seq, k):
        """`k` distinct elements of `seq`, in random order."""
        pool = list(seq)
        picked = []
        for _ in range(k):
            picked.append(pool.pop(int(self._random.random() * len(pool))))
        return picked

    def chance(self, p):
        return self._random.random() < p


# -------------------------------------------------------------------------
# Pools of invented names, shared by both splits

_ONSETS = ['b', 'br', 'c', 'd', 'dr', 'f', 'g', 'gr', 'h', 'k', 'l', 'm',
           'n', 'p', 'r', 's', 'st', 't', 'th', 'v', 'w', 'z']
_VOWELS = ['a', 'e', 'i', 'o', 'u', 'ai', 'ea', 'ou', 'y']
_CODAS = ['', 'n', 'r', 'l', 'm', 'rn', 'th', 'nd', 'rk', 'x', 's', 'lt']
_PLACE_ENDINGS = ['ford', 'holm', 'wick', 'by', 'ton', 'mere', 'dale',
                  'stead', 'burg', 'ley', 'mouth', 'bridge']
_MALE_ENDINGS = ['o', 'an', 'ert', 'ric', 'us', 'in']
_FEMALE_ENDINGS = ['a', 'ine', 'elle', 'ia', 'wen', 'ette']
_SURNAME_ENDINGS = ['son', 'er', 'ey', 'ard', 'ing', 'man', 'ell', 'ow']
_LATIN_ENDINGS = ['us', 'is', 'ax', 'ops', 'ura']


# Syllables can meet by chance into words nobody wants in a textbook
_AVOID = ('sex', 'fuk', 'shit', 'cunt', 'dick', 'cock', 'nazi', 'rape',
          'piss', 'slut', 'fag', 'nig', 'porn', 'tit', 'kill')


def _syllable(rng):
    return rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS)


def _names(rng, count, endings, syllables=1):
    """`count` distinct capitalised names made of syllables and an ending."""
    names = []
    while len(names) < count:
        name = ''.join(_syllable(rng) for _ in range(syllables))
        name = (name + rng.choice(endings)).capitalize()
        if (name not in names and 3 < len(name) < 11
                and not any(bad in name.lower() for bad in _AVOID)):
            names.append(name)
    return names


class _Pools:
    """The invented names every article draws from."""

    def __init__(self, seed=NAMES_SEED):
        rng = _Rng(seed)
        self.towns = _names(rng, 140, _PLACE_ENDINGS)
        self.rivers = _names(rng, 50, ['', 'a', 'e', 'en', 'el'], 2)
        self.regions = _names(rng, 10, ['land', 'mark', 'ia', 'wold'])
        self.male = _names(rng, 40, _MALE_ENDINGS)
        self.female = _names(rng, 40, _FEMALE_ENDINGS)
        self.surnames = _names(rng, 120, _SURNAME_ENDINGS)
        self.mountains = _names(rng, 40, ['', 'a', 'or', 'un'], 2)
        self.genera = _names(rng, 40, _LATIN_ENDINGS, 2)
        self.families = [name + 'idae' for name in
                         _names(rng, 12, [''], 2)]


# -------------------------------------------------------------------------
# Filling templates and writing articles

_ALTERNATIVES = re.compile(r'\[([^\[\]]*)\]')
_SLOT = re.compile(r'\{(\w+)\}')


def _fill(template, context, rng):
    """Fill the `{key}` slots and `[a|b]` choices of one template."""
    text = _ALTERNATIVES.sub(
        lambda m: rng.choice(m.group(1).split('|')), template)

    def slot(match):
        key = match.group(1)
        if key in context:
            return context[key]
        return rng.choice(WORDS[key])
    return _SLOT.sub(slot, text)


def _paragraph(stages, context, rng):
    """The sentences of one section, in narrative order."""
    sentences = []
    for stage in stages:
        template = stage if isinstance(stage, str) else rng.choice(stage)
        if template.startswith('?'):
            if rng.chance(0.25):
                continue
            template = template[1:]
        sentences.append(_fill(template, context, rng))
    return ' '.join(sentences)


def _article(rng, pools):
    """The lines of one article: title, lead paragraph and sections."""
    domain = rng.choice(DOMAINS)
    context = domain['context'](rng, pools)
    title = _fill(domain['title'], context, rng)
    title = title[0].upper() + title[1:]
    lines = ['', f'= {title} =', '']
    for i, (heading, stages) in enumerate(domain['sections']):
        # The lead paragraph is always there; a section may be missing
        if i > 0 and rng.chance(0.1):
            continue
        if heading is not None:
            lines += [f'= = {heading} = =', '']
        lines += [_paragraph(stages, context, rng), '']
    return lines


def generate(num_articles, seed):
    """Return the text of a corpus of `num_articles` articles.

    Parameters
    ----------
    num_articles : int
        Number of articles (each has a title and one to four sections).
    seed : int
        Seed of the article draws; the pools of names do not depend on it.

    Returns
    -------
    str
        The corpus in WikiText's token format, ready to be written as a
        ``wiki.*.tokens`` file.
    """
    rng, pools = _Rng(seed), _Pools()
    lines = []
    for _ in range(num_articles):
        lines += _article(rng, pools)
    return ''.join(f' {line} \n' if line else ' \n' for line in lines)


def write_corpus(data_dir=None):
    """Write ``wiki.train.tokens`` and ``wiki.valid.tokens`` to `data_dir`.

    Parameters
    ----------
    data_dir : str, optional
        Where to write them; by default `DATA_DIR`, the package's
        ``data/embedded`` folder.

    Returns
    -------
    dict
        Split name -> path of the written file.
    """
    data_dir = DATA_DIR if data_dir is None else data_dir
    os.makedirs(data_dir, exist_ok=True)
    sizes = {'train': (TRAIN_ARTICLES, TRAIN_SEED),
             'valid': (VALID_ARTICLES, VALID_SEED)}
    paths = {}
    for split, (num_articles, seed) in sizes.items():
        path = os.path.join(data_dir, FILE_NAMES[split])
        paths[split] = atomic_write(path, generate(num_articles, seed))
    return paths


if __name__ == '__main__':
    for split, path in write_corpus(*sys.argv[1:2]).items():
        print(f'{split}: {path} ({os.path.getsize(path)} bytes)')
