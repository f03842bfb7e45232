"""Placing an excerpt in its section: every cut of the shared editions.

The excerpts are cut from the four sections in ``../shared/book/en`` and
from the Portuguese editions of sec_bert at every pair of cell
boundaries, with and without the section's label line and the import
cell; placing one reads no code but the file's, so all of them are
checked here (a few seconds).  Running them is `test_editions_check`'s.
"""
import functools

import pytest

from d2l_bert.chapter.editions import (Cell, Edition, layout, locate,
                                       parse_markdown)
from d2l_bert.chapter.editions.place import (CellShape, Place, _cells,
                                             needed_names)

import excerpts
from excerpts import EDITIONS, Cuts


@pytest.fixture
def sections():
    return excerpts.sections()


def _setup_positions(sections, label):
    return [p for p, c in enumerate(sections[label].cells, 1)
            if CellShape.of(c.code).setup]


@pytest.mark.parametrize('relative', EDITIONS)
def test_every_excerpt_is_placed_where_its_cells_are(sections, relative,
                                                      monkeypatch):
    # the excerpts of a one-line rendering rebuild the same cells' line
    # breaks again and again: once is enough
    monkeypatch.setattr(layout, 'relayout',
                        functools.lru_cache()(layout.relayout))
    cuts = Cuts(relative)
    whole = locate(cuts.edition, sections)
    # a whole section is no excerpt: nothing is taken or said
    assert (whole.label, whole.taken, whole.lines()) == (cuts.label, [], [])
    assert None not in whole.positions
    setup = _setup_positions(sections, cuts.label)
    n = len(cuts)
    whole_plans = {}  # (start, imports, label) -> plan to the end
    for start in range(n):
        for stop in reversed(range(start, n)):
            for imports in (False, True):
                indices = cuts.indices(start, stop, imports)
                if not indices:
                    continue
                for label in (True, False):
                    excerpt = cuts.read(indices, label)
                    place = locate(excerpt, sections)
                    where = (relative, start, stop, imports, label)
                    assert len(excerpt.mxnet_cells()) == len(indices), where
                    assert place.found, where
                    assert place.positions == [whole.positions[k]
                                               for k in indices], where
                    if place.label != cuts.label:
                        # the import cell alone: every section starts so
                        assert (indices, label) == ([0], False), where
                        assert place.label == 'sec_bert'
                        assert place.why.endswith(
                            "the first in the book's order is taken")
                        continue
                    _check_taken(place, excerpt, indices, setup, where)
                    assert (place.why is None) == label, where
                    # an excerpt that stops early runs what the one from
                    # the same cell to the end runs, up to its last cell
                    plan = [(kind, number) for kind, number, _ in
                            place.plan(excerpt.mxnet_cells())]
                    whole_plan = whole_plans.setdefault(
                        (start, imports, label), plan)
                    if place.taken:
                        assert plan == whole_plan[:len(plan)], where


def _check_taken(place, excerpt, indices, setup, where):
    """What an excerpt takes from d2l-bert's edition: nothing when its
    cells use no name they do not define (as from the section's first
    cell on); else every cell before its first one that it does not hold,
    and d2l-bert's own set-up cell."""
    shapes = [CellShape.of(c.code) for c in excerpt.mxnet_cells()]
    if not needed_names(shapes):
        assert place.taken == [], where
        return
    assert indices != list(range(len(indices))), where
    first = next(p for p in place.positions if p not in setup)
    held = set(place.positions)
    assert [p for p, _ in place.taken] == [
        p for p in range(1, first) if p not in held or p in setup], where


def test_the_masked_language_model_excerpt_says_what_it_took(sections):
    # the excerpt of the issue: sec_bert from MaskLM on, without the
    # section's label line
    cuts = Cuts('en/bert.md')
    place = locate(cuts.read(cuts.indices(5, 11)), sections)
    assert place.lines() == [
        "section sec_bert inferred from the code: the file's label "
        "subsec_nsp is not a section's; 7 of its 7 MXNet cells match "
        "d2l-bert's edition of it (next: sec_bert-dataset, 0)",
        "excerpt of sec_bert: cells 7-13 of 13; cells 1-6 taken from "
        "d2l-bert's edition"]


def test_an_excerpt_that_stops_early_takes_nothing(sections):
    cuts = Cuts('en/bert.md')
    place = locate(cuts.read(cuts.indices(0, 4, imports=True), True),
                   sections)
    assert (place.taken, place.lines()) == (
        [], ['excerpt of sec_bert: cells 1-6 of 13'])


def test_a_subsection_label_is_no_section_label(sections):
    cuts = Cuts('pt/bert.md')
    excerpt = cuts.read(cuts.indices(5, 7))
    assert excerpt.label == 'subsec_nsp'
    place = locate(excerpt, sections)
    assert place.label == 'sec_bert'
    assert place.why.startswith("the file's label subsec_nsp is not a "
                                "section's; 3 of its 3 MXNet cells match")


def _edition(label, *codes):
    return Edition('x.md', 'markdown', label,
                   [Cell(code, ('mxnet',), label=label) for code in codes])


def test_cells_no_section_holds_are_not_placed_and_say_the_closest(
        sections):
    place = locate(_edition(None, 'tally = {}', 'tally["a"] = 1'),
                   sections)
    assert not place.found
    assert place.lines() == [
        "place not found: the file has no section label, and no section "
        "of d2l-bert's holds its cells; closest section: sec_bert (0 of 2 "
        "cells match); the cells run as the file has them"]
    assert place.taken == [] and list(place.plan([None, None])) == [
        ('file', 1, None), ('file', 2, None)]


def test_a_section_label_d2l_bert_does_not_know_is_kept(sections):
    # a section of another chapter: its import cell alone is no evidence
    place = locate(_edition('sec_transformer', 'from mxnet import np',
                            'X = np.ones((2, 3))'), sections)
    assert (place.label, place.found) == ('sec_transformer', False)
    assert place.lines()[0].startswith(
        'place not found: d2l-bert has no edition of sec_transformer, and '
        'no other section of its holds these cells; closest section: '
        'sec_bert (1 of 2 cells match)')


def test_a_file_with_no_cell_to_run_has_no_place(sections):
    edition = parse_markdown(':label:`sec_bert`\n\nText only.\n')
    assert locate(edition, sections) is None


def test_plan_runs_each_taken_cell_before_the_first_cell_after_it():
    a, b, c, d, e = (Cell(x) for x in 'abcde')
    # the file: its import cell (1), a cell of its own, then cell 5
    place = Place('sec_x', 6, positions=[1, None, 5],
                  taken=[(1, a), (2, b), (3, c), (4, d)])
    assert [(kind, n) for kind, n, _ in place.plan([e, e, e])] == [
        ('file', 1), ('taken', 1), ('taken', 2), ('taken', 3),
        ('taken', 4), ('file', 2), ('file', 3)]
    with pytest.raises(ValueError, match='cells must be the 3 cells the '
                                         'place was found for, got 2'):
        list(place.plan([e, e]))


def test_needed_names_are_those_no_cell_binds():
    shapes = [CellShape.of('import os\ndef f(x):\n    return x + y'),
              CellShape.of('z = [w for w in range(3)]\nprint(f(z), d2l)')]
    assert needed_names(shapes + [None]) == ['y']


@pytest.mark.parametrize('numbers, words', [
    ([4], 'cell 4'), ([1, 2, 3], 'cells 1-3'),
    ([1, 2, 3, 7], 'cells 1-3 and 7'), ([1, 3, 5, 6], 'cells 1, 3 and 5-6'),
])
def test_cell_numbers_read_as_ranges(numbers, words):
    assert _cells(numbers) == words
