"""Tests of d2l_bert/runs/out_dir.py: one run per output directory, and
nothing finished replaced unasked."""
import os

import pytest

from d2l_bert.runs.out_dir import (FINETUNED_FILES, LOCK_FILE, OutDirError,
                                   OutDirLock, claim, remove_other_model)


def test_a_directory_with_a_finished_model_is_refused_unless_asked(
        tmp_path):
    (tmp_path / 'model.params').write_bytes(b'x')
    with pytest.raises(OutDirError) as e:
        claim(str(tmp_path), ('model.params', 'other'), resume=False)
    assert str(e.value) == (
        f'--out {tmp_path} holds a model (model.params) that this run '
        'would replace: give --resume to go on from it, --overwrite to '
        'start over, or another --out')
    with pytest.raises(OutDirError, match='give --overwrite to replace '
                                          'it, or another --out$'):
        claim(str(tmp_path), ('model.params',))
    assert os.listdir(tmp_path) == ['model.params']
    for asked in (dict(resume=True), dict(overwrite=True)):
        claim(str(tmp_path), ('model.params',), **asked).release()


def test_a_directory_with_the_other_kind_of_model_needs_overwrite(
        tmp_path):
    # --resume is no answer: the directory would hold two models' files
    for name in FINETUNED_FILES + ('config.json',):
        (tmp_path / name).write_bytes(b'x')
    other = (FINETUNED_FILES[:1], 'a fine-tuned model')
    for asked in (dict(), dict(resume=True)):
        with pytest.raises(OutDirError) as e:
            claim(str(tmp_path), ('pretrained.params',),
                  what='a pretrained model', other=other, **asked)
        assert str(e.value) == (
            f'--out {tmp_path} holds a fine-tuned model (finetuned.params), '
            'not a pretrained model: give another --out, or --overwrite to '
            'replace it with a pretrained model')
    claim(str(tmp_path), ('pretrained.params',), overwrite=True,
          other=other).release()
    remove_other_model(str(tmp_path), FINETUNED_FILES)
    assert os.listdir(tmp_path) == ['config.json']


def test_a_second_run_is_refused_while_the_first_holds_the_lock(tmp_path):
    out = str(tmp_path / 'out')
    with OutDirLock(out):
        assert os.path.isfile(os.path.join(out, LOCK_FILE))
        with pytest.raises(OutDirError, match='another run is using this '
                                              'directory'):
            OutDirLock(out)
    # The lock file goes, and the directory made for it, left empty
    assert not os.path.exists(out)
    OutDirLock(out).release()


def test_a_lock_file_without_a_holder_and_partial_files_are_cleared(
        tmp_path):
    (tmp_path / LOCK_FILE).write_bytes(b'')   # a killed run's
    (tmp_path / '.checkpoint.zip.0badc0de.tmp').write_bytes(b'PK')
    (tmp_path / 'keep.txt').write_text('x')
    lock = claim(str(tmp_path), ())
    assert sorted(os.listdir(tmp_path)) == [LOCK_FILE, 'keep.txt']
    lock.release()
    assert os.listdir(tmp_path) == ['keep.txt']
