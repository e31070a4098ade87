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
    return sorted(str(p.relative_to(directory)) for p in directory.rglob("*"))


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
