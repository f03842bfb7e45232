"""Files an edition's own definitions download: the cells' DATA_HUB and
the parquet stand-in of WikiText-2."""
import pytest

from d2l_bert import presets
from d2l_bert.chapter import edition_data
from d2l_bert.data import hub


def test_hub_entry_is_the_name_unless_the_cells_changed_it():
    cells = dict(hub.DATA_HUB)
    assert edition_data.hub_entry(cells, 'SNLI') == ('SNLI', None)
    cells['SNLI'] = ('https://example.invalid/snli.zip', 'ab' * 20)
    cells['mine.parquet'] = (['https://a.invalid/m.parquet',
                              'https://b.invalid/m.parquet'], 'cd' * 20)
    assert edition_data.hub_entry(cells, 'SNLI') == (
        'https://example.invalid/snli.zip', 'ab' * 20)
    assert edition_data.hub_entry(cells, 'mine.parquet') == (
        ('https://a.invalid/m.parquet', 'https://b.invalid/m.parquet'),
        'cd' * 20)


def test_a_file_that_is_not_wikitext_in_parquet_gets_no_stand_in(
        tmp_path, monkeypatch):
    monkeypatch.setenv(presets.DATA_ENV, str(tmp_path))
    monkeypatch.setenv(presets.OFFLINE_ENV, '1')
    cells, used = {'other': ('https://example.invalid/o.parquet', None)}, \
        set()
    with pytest.raises(hub.DownloadError, match='D2L_BERT_OFFLINE=1 asks '
                       'for no network. Nothing was saved$'):
        edition_data.download(cells, used, 'other')
    assert used == set() and list(tmp_path.iterdir()) == []


def test_the_wikitext_parquet_stand_in_holds_the_corpus_lines(
        tmp_path, monkeypatch):
    if edition_data.parquet_engine() is None:
        pytest.skip('pandas has no parquet engine here')
    import pandas as pd
    from d2l_bert.data import corpus
    monkeypatch.setenv(presets.DATA_ENV, str(tmp_path))
    path, what = edition_data.wikitext_parquet('valid.parquet')
    with open(f'{corpus.DATA_DIR}/wiki.valid.tokens', encoding='utf-8') as f:
        lines = f.read().splitlines(keepends=True)
    assert list(pd.read_parquet(path)['text']) == lines
    assert what.startswith("the valid lines of d2l-bert's embedded corpus")
