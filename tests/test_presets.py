"""The book's settings and named configurations (d2l_bert/presets.py):
the values the book writes, in the argument names its classes take."""
import inspect

from d2l_bert import BERTModel, presets


def test_book_bert_is_the_small_bert_the_pretraining_section_builds():
    # net = d2l.BERTModel(len(vocab), num_hiddens=128, ffn_num_hiddens=256,
    #                     num_heads=2, num_blks=2, dropout=0.2)
    assert presets.BOOK_BERT == dict(num_hiddens=128, ffn_num_hiddens=256,
                                     num_heads=2, num_blks=2, dropout=0.2,
                                     max_len=1000)
    # `max_len` is the default the book's signature writes
    default = inspect.signature(BERTModel).parameters['max_len'].default
    assert presets.BOOK_BERT['max_len'] == default


def test_hub_models_are_the_sizes_the_nli_section_loads_them_with():
    assert presets.HUB_MODELS == {'bert.small': presets.BERT_SMALL,
                                  'bert.base': presets.BERT_BASE}
    assert presets.BERT_SMALL == dict(num_hiddens=256, ffn_num_hiddens=512,
                                      num_heads=4, num_blks=2, dropout=0.1,
                                      max_len=512)
    assert presets.BERT_BASE == dict(num_hiddens=768, ffn_num_hiddens=3072,
                                     num_heads=12, num_blks=12, dropout=0.1,
                                     max_len=512)


def test_every_model_preset_is_bert_models_keyword_arguments():
    accepted = inspect.signature(BERTModel).parameters
    for config in (presets.BOOK_BERT, presets.BERT_SMALL,
                   presets.BERT_BASE):
        assert set(config) <= set(accepted)


def test_original_bert_is_the_original_classes_keyword_arguments():
    from d2l_bert.hf.original import OriginalBERTEncoder, OriginalBERTModel
    for cls in (OriginalBERTEncoder, OriginalBERTModel):
        parameters = inspect.signature(cls).parameters
        # their defaults: the original BERT's
        assert {name: parameters[name].default
                for name in presets.ORIGINAL_BERT} == presets.ORIGINAL_BERT


def test_training_settings_are_the_books():
    # batch_size, max_len = 512, 64; train_bert(..., 50); Adam at 0.01
    assert presets.PRETRAINING == dict(batch_size=512, max_len=64,
                                       num_steps=50, lr=0.01)
    # batch_size, max_len = 512, 128; lr, num_epochs = 1e-4, 5
    assert presets.FINETUNING == dict(batch_size=512, max_len=128,
                                      num_epochs=5, lr=1e-4)


def test_original_bert_is_public_under_the_package():
    import d2l_bert
    assert d2l_bert.ORIGINAL_BERT is presets.ORIGINAL_BERT
    assert presets.ORIGINAL_BERT == dict(activation='gelu', epsilon=1e-12)
