"""The book's documented outputs, found by content, and the comparisons."""
import pytest

from d2l_bert.chapter import book_outputs


def test_documented_outputs_match_by_content_not_position():
    shuffled = 'x = 1\nnsp_l.shape  # the final expression decides'
    entry = book_outputs.documented('sec_bert', shuffled)
    assert (entry.cell, entry.prints) == (11, '(2,)')
    assert book_outputs.documented('sec_other', shuffled) is None


@pytest.mark.parametrize('mode, actual, verdict', [
    ('exact', '(2, 8, 768)\n', 'match'),
    ('exact', '(2, 8, 769)', 'mismatch'),
    ('batch', '(3, 64) (3, 64) (3,) (3, 10) (3, 10) (3, 10) (3,)', 'match'),
    ('batch', '(3, 64) (3, 64) (2,) (3, 10) (3, 10) (3, 10) (3,)',
     'mismatch'),
    ('shapes', '((1, 6, 128), (1, 128), array([0.1, 0.2, 0.3]))', 'shown'),
    ('shapes', '((1, 6, 64), (1, 64), array([0.1, 0.2, 0.3]))', 'mismatch'),
    ('shown', 'anything', 'shown'),
])
def test_compare_modes(mode, actual, verdict):
    expected = {
        'exact': '(2, 8, 768)', 'shown': 'x',
        'batch': '(512, 64) (512, 64) (512,) (512, 10) (512, 10) (512, 10) '
                 '(512,)',
        'shapes': '((1, 6, 128), (1, 128), array([-1.27, -0.79, -1.05]))'}
    assert book_outputs.compare(expected[mode], actual, mode) == verdict


def test_compare_drops_storage_manager_lines():
    noisy = ('[21:04:49] src/storage/storage.cc:196: Using Pooled (Naive) '
             'StorageManager for CPU\n(2, 2)')
    assert book_outputs.compare(noisy, '(2, 2)', 'exact') == 'match'
