"""Tests of d2l_bert/data/model_dir.py: the files of a d2l BERT directory
read, and refused in one line naming the file when damaged or lying."""
import json
import os
import struct

import mxnet as mx
import pytest
from mxnet import init

from d2l_bert import BERTModel
from d2l_bert.data import model_dir as D

from helpers import TINY

SIZES = {k: TINY[k] for k in ('num_hiddens', 'ffn_num_hiddens',
                              'num_heads', 'num_blks', 'max_len')}


def tiny_bert(**changes):
    """The tiny BERT of `changes`, its shapes known (one batch through)."""
    net = BERTModel(**dict(TINY, **changes))
    net.initialize(init.Normal(0.02))
    tokens = mx.np.ones((1, 4), dtype='int32')
    net(tokens, mx.np.zeros((1, 4), dtype='int32'),
        mx.np.array([4.0]), mx.np.array([[1, 2]], dtype='int32'))
    return net


@pytest.fixture(scope='module')
def params_file(tmp_path_factory):
    """The parameters of the tiny BERT, as `save_parameters` saves them."""
    path = str(tmp_path_factory.mktemp('model') / D.PARAMS_FILE)
    tiny_bert().save_parameters(path)
    return path


def resaved(params_file, tmp_path, change):
    """`params_file` saved again after `change(dict of arrays)`."""
    arrays = mx.npx.load(params_file)
    arrays = change(arrays)
    path = str(tmp_path / D.PARAMS_FILE)
    mx.npx.save(path, arrays)
    return path


# --- The sizes, off the parameters' shapes ----------------------------------

def test_sizes_are_read_off_the_shapes(params_file):
    assert D.infer_config(params_file) == dict(
        TINY, num_heads=1, dropout=0.0)   # 32 // HEAD_SIZE, at least 1


def test_heads_divide_num_hiddens(tmp_path):
    # 192 // 64 = 3 heads do not divide 200: the next divisor below
    path = str(tmp_path / D.PARAMS_FILE)
    tiny_bert(num_hiddens=200, num_heads=2, num_blks=1).save_parameters(
        path)
    assert D.infer_config(path)['num_heads'] == 2


@pytest.mark.parametrize('change, message', [
    (lambda a: dict(a, **{'encoder.pos_embedding': mx.np.zeros((16, 32))}),
     r": encoder\.pos_embedding has shape \(16, 32\); a BERTModel's is "
     r'\(1, max_len, num_hiddens\)$'),
    (lambda a: dict(a, **{'encoder.pos_embedding': mx.np.zeros((512,))}),
     r": encoder\.pos_embedding has shape \(512,\); a BERTModel's is "
     r'\(1, max_len, num_hiddens\)$'),
    (lambda a: dict(a, **{'encoder.token_embedding.weight':
                          mx.np.zeros((99, 32, 1))}),
     r": encoder\.token_embedding\.weight has shape \(99, 32, 1\); a "
     r"BERTModel's is \(vocab_size, num_hiddens\)$"),
    (lambda a: dict(a, **{'encoder.pos_embedding': mx.np.zeros((3, 16,
                                                                32))}),
     r': the shapes of encoder\.token_embedding\.weight \(99, 32\), '
     r'encoder\.pos_embedding \(3, 16, 32\), encoder\.blks\.0\.ffn\.dense1'
     r'\.weight \(48, 32\) are not those of one BERTModel'),
    (lambda a: {k: v for k, v in a.items() if '.ffn.' not in k},
     r" holds no BERTModel parameter 'encoder\.blks\.0\.ffn\.dense1\."
     r"weight'; is it the file of a BERTModel\?$"),
    (lambda a: list(a.values()),
     r' holds 45 arrays without names \(saved from a list, as '
     r'`mx\.nd\.save\(file, \[\.\.\.\]\)` does\), not the named parameters'
     r' of a model \(`net\.save_parameters`\)$'),
], ids=['2-D positions', '1-D positions', '3-D tokens', 'positions (3, L, H)', 'no FFN',
        'a list'])
def test_shapes_that_are_not_a_bertmodels_are_named(params_file, tmp_path,
                                                     change, message):
    path = resaved(params_file, tmp_path, change)
    with pytest.raises(ValueError, match='^' + path + message):
        D.infer_config(path)


@pytest.mark.parametrize('cut, cause', [
    (5, r'5 bytes, too few for the header of an MXNet file of arrays'),
    (3000, r'array 2 of 45, of shape \(99, 32\) and dtype float32, needs '
           r'12,672 bytes at offset 2,160, and the file ends at 3,000'),
], ids=['header', 'array'])
def test_a_truncated_file_is_named_with_the_cause(params_file, tmp_path,
                                                  cut, cause):
    path = tmp_path / D.PARAMS_FILE
    with open(params_file, 'rb') as f:
        path.write_bytes(f.read()[:cut])
    with pytest.raises(ValueError, match=(
            f'^{path} is corrupt or truncated \\({cause}\\); download it '
            'again or re-run `d2l-bert pretrain`$')):
        D.infer_config(str(path))


# --- The parameters against the model ---------------------------------------

@pytest.mark.parametrize('changes, message', [
    (dict(num_blks=3), r'it lacks encoder\.blks\.2\.addnorm1\.ln\.beta, '
                       r'encoder\.blks\.2\.addnorm1\.ln\.gamma, encoder\.'
                       r'blks\.2\.addnorm2\.ln\.beta and 13 more, which the '
                       r'model has'),
    (dict(num_blks=1), r'it holds encoder\.blks\.1\.addnorm1\.ln\.beta, '
                       r'encoder\.blks\.1\.addnorm1\.ln\.gamma, encoder\.'
                       r'blks\.1\.addnorm2\.ln\.beta and 13 more, which the '
                       r'model does not have'),
    (dict(max_len=40), r"its encoder\.pos_embedding has shape \(1, 16, 32\),"
                       r" the model's \(1, 40, 32\)"),
    (dict(ffn_num_hiddens=36), r'its encoder\.blks\.0\.ffn\.dense1\.weight '
                               r"has shape \(48, 32\), the model's "
                               r'\(36, \?\)'),
], ids=['more blocks', 'fewer blocks', 'positions', 'FFN'])
def test_parameters_of_other_sizes_are_refused_before_mxnet_reads_them(
        params_file, changes, message, monkeypatch):
    net = BERTModel(**dict(TINY, **changes))
    monkeypatch.setattr(net, 'load_parameters', None)  # never called
    with pytest.raises(ValueError, match=(
            f'^{params_file} does not fit the sizes asked: {message}; '
            'correct them, or re-run `d2l-bert pretrain`$')):
        D.load_parameters(net, params_file, mx.cpu(), 'the sizes asked')


def test_parameters_of_another_dtype_are_refused(params_file, tmp_path):
    path = resaved(params_file, tmp_path, lambda a: {
        k: v.astype('float16') for k, v in a.items()})
    with pytest.raises(ValueError, match=(
            r"its encoder\.pos_embedding is float16, the model's float32")):
        D.load_parameters(BERTModel(**TINY), path, mx.cpu(), 'its sizes')


def test_a_damaged_file_never_reaches_mxnet(params_file, tmp_path,
                                            monkeypatch):
    path = tmp_path / D.PARAMS_FILE
    with open(params_file, 'rb') as f:
        data = bytearray(f.read())
    struct.pack_into('<Q', data, 16, 1 << 40)   # the number of arrays
    path.write_bytes(bytes(data))
    net = BERTModel(**TINY)
    monkeypatch.setattr(net, 'load_parameters', None)  # never called
    with pytest.raises(ValueError, match=(
            r'is corrupt or truncated \(it declares 1,099,511,627,776 '
            r'arrays, more than its [\d,]+ bytes can hold\)')):
        D.load_parameters(net, str(path), mx.cpu(), 'its sizes')


def test_a_parameter_named_twice_is_refused(tmp_path):
    path = tmp_path / D.PARAMS_FILE
    mx.npx.save(str(path), {'a': mx.np.zeros(2), 'b': mx.np.zeros(2)})
    path.write_bytes(path.read_bytes()[:-1] + b'a')   # 'b' -> 'a'
    with pytest.raises(ValueError, match='it names a parameter twice'):
        D.read_params(str(path))


# --- config.json and vocab.json ---------------------------------------------

def write_config(tmp_path, content):
    text = content if isinstance(content, str) else json.dumps(content)
    (tmp_path / D.CONFIG_FILE).write_text(text)
    return str(tmp_path / D.CONFIG_FILE)


def test_heads_that_do_not_divide_the_hiddens_name_config_json(tmp_path):
    path = write_config(tmp_path, dict(SIZES, num_hiddens=48, num_heads=5))
    with pytest.raises(ValueError, match=(
            f'^{path}: num_heads=5 does not divide num_hiddens=48 \\(each '
            r'head takes num_hiddens / num_heads of them\); correct it, or '
            r're-run `d2l-bert pretrain`$')):
        D.read_config(str(tmp_path))


@pytest.mark.parametrize('content, message', [
    ('["num_hiddens", 32]', r'must hold a JSON object, got a list'),
    ('{"num_blks": ' * 3000 + '1' + '}' * 3000,
     r'is not valid JSON \(nested too deeply\)'),
    (dict(SIZES, max_len=-8), 'max_len must be a positive integer, got -8'),
    (dict(SIZES, num_blks=False), 'num_blks must be a positive integer, '
                                  'got False'),
    (' ' * (D.MAX_CONFIG_BYTES + 1),
     r'holds 1,048,577 bytes, more than the 1,048,576 such a file may hold'),
], ids=['list', 'nested', 'negative', 'bool', 'large'])
def test_a_config_json_of_another_kind_is_named(tmp_path, content,
                                                message):
    path = write_config(tmp_path, content)
    with pytest.raises(ValueError, match=f'^{path}:? {message}'):
        D.read_config(str(tmp_path))


def test_a_config_json_that_is_a_device_is_not_read(tmp_path):
    os.symlink('/dev/zero', tmp_path / D.CONFIG_FILE)
    with pytest.raises(ValueError, match='is not a regular file'):
        D.read_config(str(tmp_path))


@pytest.mark.parametrize('tokens, message', [
    (['<unk>', '<pad>', '<cls>', '<sep>', 'bank', 'bank'],
     "lists the token 'bank' twice; each token has one index"),
    ({'<unk>': 0}, 'must hold a JSON list of token strings in index order, '
                   'got a dict'),
    (['<unk>', ['bank'], '<pad>'], r"must hold a JSON list of token "
                                   r"strings in index order; token 1 is "
                                   r"\['bank'\]"),
], ids=['twice', 'a dict', 'a list'])
def test_a_vocab_json_that_is_not_unique_strings_is_named(tmp_path, tokens,
                                                          message):
    path = tmp_path / D.VOCAB_FILE
    path.write_text(json.dumps(tokens))
    with pytest.raises(ValueError, match=f'^{path} {message}$'):
        D.load_vocab(str(path))


def test_a_path_mxnet_cannot_open_is_named_in_one_line(params_file,
                                                       tmp_path):
    folder = os.fsdecode(bytes(tmp_path) + b'/bert\xff')
    os.mkdir(folder)
    path = os.path.join(folder, D.PARAMS_FILE)
    with open(params_file, 'rb') as src, open(path, 'wb') as dst:
        dst.write(src.read())
    with pytest.raises(ValueError, match=(
            f'^{tmp_path}/bert\\\\xff/pretrained.params: its path is not '
            'valid UTF-8, and MXNet opens files by UTF-8 names; rename the '
            'folder that holds it$')):
        D.load_parameters(BERTModel(**TINY), path, mx.cpu(), 'its sizes')


def test_a_vocab_json_over_its_limit_is_refused_unread(tmp_path):
    path = tmp_path / D.VOCAB_FILE
    with open(path, 'wb') as f:
        f.truncate(D.MAX_VOCAB_BYTES + 5)   # sparse
    with pytest.raises(ValueError, match=(
            f'^{path} holds 67,108,869 bytes, more than the 67,108,864 such '
            'a file may hold')):
        D.load_vocab(str(path))
