"""Tests of d2l_bert/runs/memory.py: what a model and its batch need,
before anything is allocated."""
import pytest
from mxnet import np

from d2l_bert.book.bert import BERTModel
from d2l_bert.runs import memory


def test_the_parameter_estimate_is_at_most_the_models():
    sizes = dict(vocab_size=50, num_hiddens=16, ffn_num_hiddens=24,
                 num_blks=2, max_len=20)
    net = BERTModel(sizes['vocab_size'], sizes['num_hiddens'],
                    sizes['ffn_num_hiddens'], 2, sizes['num_blks'], 0.1,
                    max_len=sizes['max_len'])
    net.initialize()
    tokens = np.zeros((1, 4), dtype='int32')
    net(tokens, tokens, np.array([4]), np.zeros((1, 1), dtype='int32'))
    count = sum(p.data().size for p in net.collect_params().values())
    # Never more than the model's (a refusal must be sure)
    estimate = memory.bert_parameters(**sizes)
    assert 0.9 * count <= estimate <= count


def test_sizes_beyond_the_machine_are_refused_in_one_line(tmp_path,
                                                          monkeypatch):
    meminfo = tmp_path / 'meminfo'
    meminfo.write_text('MemTotal: 2048 kB\nMemAvailable: 1024 kB\n')
    assert memory.available_bytes(str(meminfo)) == 1 << 20
    monkeypatch.setattr(memory, 'available_bytes', lambda: 1 << 20)
    with pytest.raises(ValueError) as e:
        memory.check_fits(3 << 20, '--num-hiddens 9')
    assert str(e.value) == ('--num-hiddens 9: the model and one batch need '
                            'at least 3.0 MB of memory, and this machine '
                            'has 1.0 MB available; use smaller sizes')
    memory.check_fits(1 << 19, '--num-hiddens 9')


def test_files_too_large_to_read_are_refused_before_reading(tmp_path,
                                                            monkeypatch):
    # a 6 GB file of nothing (sparse): its size, never its bytes
    big = tmp_path / 'big.txt'
    with open(big, 'wb') as f:
        f.truncate(6 << 30)
    small = tmp_path / 'small.txt'
    small.write_bytes(b'x' * 1000)
    monkeypatch.setattr(memory, 'available_bytes', lambda: 1 << 30)
    memory.check_files_fit([str(small), str(tmp_path / 'gone')], 40,
                           'the files')
    with pytest.raises(ValueError) as e:
        memory.check_files_fit([str(big), str(small)], 10, 'the SNLI files')
    assert str(e.value) == (
        'the SNLI files (6.0 GB) would take some 10 times that in memory '
        'once read and prepared (60.0 GB), and this machine has 1.0 GB '
        'available; give smaller files')
