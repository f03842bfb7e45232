"""The offline stand-ins `data.hub` finds itself: an untrained BERT in
the book's layout and names, on the book's vocabulary of the embedded
corpus, and SNLI's synthetic pairs."""
import mxnet as mx
from d2l import mxnet as d2l
from mxnet import np

from d2l_bert import BERTModel
from d2l_bert.book.dataset import _read_wiki
from d2l_bert.book.finetuning import load_pretrained_model, read_snli
from d2l_bert.data import corpus, hub, stand_ins
from d2l_bert.presets import BERT_SMALL, SNLI_STAND_IN


def test_the_hub_finds_every_stand_in_itself():
    assert set(hub.STAND_INS) == {'wikitext-2', 'SNLI', 'bert.small',
                                  'bert.base'}
    assert hub.STAND_INS['SNLI'] is stand_ins.snli_stand_in


def test_the_vocabulary_is_the_books_of_the_embedded_corpus():
    # as the book's `_WikiTextDataset` builds it
    paragraphs = [d2l.tokenize(paragraph, token='word')
                  for paragraph in _read_wiki(corpus.DATA_DIR)]
    sentences = [sentence for paragraph in paragraphs
                 for sentence in paragraph]
    book = d2l.Vocab(sentences, min_freq=5,
                     reserved_tokens=stand_ins.RESERVED_TOKENS)
    assert stand_ins.embedded_vocab().idx_to_token == book.idx_to_token


def test_parameter_names_and_shapes_are_the_books():
    sizes = dict(BERT_SMALL, max_len=16, num_blks=2)
    net = BERTModel(50, **sizes)
    net.initialize()
    tokens = np.zeros((1, 4), dtype='int32')
    net(tokens, tokens, np.array([4.0]), np.zeros((1, 1), dtype='int32'))
    book = {name: p.shape for name, p in
            net._collect_params_with_prefix().items()}
    assert stand_ins.bert_parameter_shapes(50, **sizes) == book


def test_the_books_load_pretrained_model_loads_the_bert_stand_in(tmp_path):
    folder, what = stand_ins.hub_stand_in('bert.small',
                                          str(tmp_path / 'bert.small'))
    assert what.startswith("an untrained BERT of bert.small's sizes")
    params = {name: array.asnumpy() for name, array in
              mx.nd.load(f'{folder}/pretrained.params').items()}
    assert (params['encoder.blks.0.addnorm1.ln.gamma'] == 1).all()
    assert (params['hidden.bias'] == 0).all()
    # Xavier's bound for (1, 512, 256): sqrt(3 / ((512 * 256 + 256) / 2))
    assert 0.006 < abs(params['encoder.pos_embedding']).max() < 0.0068
    # a directory on disk is loaded as it is
    bert, vocab = load_pretrained_model(folder, devices=[mx.cpu()],
                                        **BERT_SMALL)
    assert len(vocab) == params['encoder.token_embedding.weight'].shape[0]
    tokens = np.array([[vocab['<cls>'], vocab['the'], vocab['<sep>']]],
                      dtype='int32')
    encoded, _, _ = bert(tokens, np.zeros((1, 3), dtype='int32'))
    assert encoded.shape == (1, 3, 256)


def test_snli_stand_in_is_read_by_the_book(tmp_path):
    data_dir, what = stand_ins.snli_stand_in(str(tmp_path))
    assert what == f"{SNLI_STAND_IN['num_train']} synthetic pairs in " \
                   "SNLI's format"
    assert 0 < len(read_snli(data_dir, False)[2]) <= SNLI_STAND_IN[
        'num_test']
