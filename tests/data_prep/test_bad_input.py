"""Data prep given bad input or faults: one clear error, nothing half-written, no silent empty output."""

import json
import re

import pytest

from data_prep.documents import BadInputError
from data_prep.instances import InstanceOptions
from data_prep.shards import METADATA_FILE, GenerationConfig, run_generation

OPTIONS = InstanceOptions(max_seq_length=64, max_predictions_per_seq=5)


@pytest.fixture(scope="module")
def spm_model(data_dir):
    return str(data_dir / "albert" / "30k-clean.model")


def _config(path, spm_model, **overrides):
    return GenerationConfig(input_files=(str(path),), spm_model_file=spm_model, options=OPTIONS,
                            dupe_factor=1, **overrides)


def _files(directory):
    return sorted(str(p.relative_to(directory)) for p in directory.rglob("*") if p.is_file())


def test_an_input_that_makes_no_instance_is_an_error_not_empty_shards(tmp_path, spm_model):
    (tmp_path / "one.txt").write_text("hi\n")
    out = tmp_path / "out"
    with pytest.raises(BadInputError) as error:
        run_generation(_config(tmp_path / "one.txt", spm_model), str(out), progress=False)
    assert str(error.value) == (
        "the input's 1 document (1 line) made no instance: too little text for --max_seq_length=64, or the "
        f"wrong --input_format (now sentence_per_line); nothing was written to {out}"
    )
    assert _files(out) == []


def test_more_shards_than_documents_is_an_error_not_zero_byte_shards(tmp_path, spm_model):
    text = ("the cat sat on the mat. it was a fine day.\nthe dog barked at the cat all day long.\n\n"
            "another document here.\nwith two lines of text.\n")
    (tmp_path / "two.txt").write_text(text)
    out = tmp_path / "out"
    with pytest.raises(BadInputError) as error:
        run_generation(_config(tmp_path / "two.txt", spm_model, num_output_shards=4), str(out), progress=False)
    assert re.fullmatch(
        r"[23] of 4 shards got no instance \(pretrain-0000[0-3]-of-00004\.tfrecord, \.\.\.\): the input's 2 documents "
        r"are too few for --num_output_shards=4 \(documents are dealt to shards by a hash of their text\); give "
        rf"fewer shards; nothing was written to {re.escape(str(out))}",
        str(error.value),
    )
    assert _files(out) == []
    result = run_generation(_config(tmp_path / "two.txt", spm_model, num_output_shards=1), str(out), progress=False)
    assert all(n > 0 for n in result["shards"].values())
    assert json.loads((out / METADATA_FILE).read_text())["complete"] is True


def test_a_huge_line_read_as_one_sentence_is_an_error(tmp_path, spm_model):
    from data_prep.documents import MAX_SENTENCE_CHARS

    (tmp_path / "a.txt").write_text("a first sentence.\n")
    (tmp_path / "book.txt").write_text("one short line.\n" + "word " * (MAX_SENTENCE_CHARS // 5 + 1) + "\n")
    config = GenerationConfig(input_files=(str(tmp_path / "a.txt"), str(tmp_path / "book.txt")),
                              spm_model_file=spm_model, options=OPTIONS, dupe_factor=1)
    with pytest.raises(BadInputError) as error:
        run_generation(config, str(tmp_path / "out"), progress=False)
    assert str(error.value) == (
        f"{tmp_path / 'book.txt'}:2: a line of 1,000,004 characters read as one sentence "
        "(--input_format=sentence_per_line allows 1,000,000); is the file one document a line "
        "(--input_format=document_per_line)?"
    )
    assert _files(tmp_path / "out") == []


def test_an_absurd_max_seq_length_is_refused():
    with pytest.raises(ValueError, match=r"^max_seq_length must be at most 8192 \(the released models read 512 "
                                         r"positions\), got 100000$"):
        InstanceOptions(max_seq_length=100000)
