"""Tests of d2l_bert.runs.finetuning: what the command line fine-tunes.

Where the user named a hub file, no offline stand-in replaces it: the
book's cells get one, the command line gets the download's error and
what to do instead."""
import pytest

from d2l_bert.data import hub
from d2l_bert.runs import finetuning as F
from d2l_bert.presets import DATA_ENV


@pytest.fixture
def offline(tmp_path, monkeypatch):
    def no_network(name, *args, **kwargs):
        raise hub.DownloadError(f'could not download {name!r}: no network')
    monkeypatch.setenv(DATA_ENV, str(tmp_path))
    monkeypatch.setattr(hub, '_download', no_network)


def test_named_snli_offline_is_the_download_error_not_a_stand_in(offline):
    assert 'SNLI' in hub.STAND_INS
    with pytest.raises(hub.DownloadError, match="'SNLI': no network"):
        F.snli_data_dir('snli')


def test_named_hub_model_offline_is_the_download_error(offline):
    assert 'bert.small' in hub.STAND_INS
    with pytest.raises(hub.DownloadError, match="'bert.small'"):
        F._pretrained_dir('bert.small')
