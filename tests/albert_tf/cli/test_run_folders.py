"""A run folder remembers its inputs (issue 20, item 4): albert-pretrain reads the records' lengths
from their pretraining_data.json and keeps its vocabulary; albert-export of the run needs neither."""

import json

import pytest

from albert_tf.cli import pretrain
from albert_tf.utils.errors import FlagError
from tests.conftest import REPO_ROOT
from tests.helpers import console_script, run_create_pretraining_data

TINY = REPO_ROOT / "tests" / "fixtures" / "data_prep"
CONFIG = {"vocab_size": 300, "embedding_size": 16, "hidden_size": 32, "num_hidden_layers": 2,
          "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 64}


def _flags(*args):
    pretrain.FLAGS.unparse_flags()
    pretrain.FLAGS(["albert-pretrain", *args])


@pytest.fixture
def records(tmp_path):
    folder = tmp_path / "records"
    folder.mkdir()
    (folder / "pretrain-00000-of-00001.tfrecord").write_bytes(b"")
    settings = {"max_seq_length": 64, "max_predictions_per_seq": 10}
    (folder / "pretraining_data.json").write_text(json.dumps({"settings": settings}))
    return folder


def test_lengths_come_from_the_records_unless_given(records, tmp_path):
    try:
        _flags(f"--input_file={records}/*.tfrecord")
        assert pretrain.record_lengths() == (64, 10)
        _flags(f"--input_file={records}/*.tfrecord", "--max_seq_length=128")
        assert pretrain.record_lengths() == (128, 10)  # the reader then names both values
        (tmp_path / "bare").mkdir()
        (tmp_path / "bare" / "a.tfrecord").write_bytes(b"")
        _flags(f"--input_file={tmp_path / 'bare'}/*.tfrecord", "--max_seq_length=128")
        with pytest.raises(FlagError, match=r"^give --max_predictions_per_seq: no pretraining_data.json beside"):
            pretrain.record_lengths()
    finally:
        pretrain.FLAGS.unparse_flags()


def test_the_run_folder_keeps_its_vocabulary(tmp_path):
    from albert_tf.checkpoints.run_folder import keep_run_vocabulary

    try:
        _flags(f"--output_dir={tmp_path / 'run'}", f"--spm_model_file={TINY / 'tiny_vocab.model'}")
        given = pretrain.run_vocabulary()
        assert given == str(TINY / "tiny_vocab.model")
        assert not (tmp_path / "run").exists()  # copied by the run, once the folder is checked
        kept = keep_run_vocabulary(given, str(tmp_path / "run"))
        assert kept == str(tmp_path / "run" / "spiece.model")
        assert (tmp_path / "run" / "spiece.model").read_bytes() == (TINY / "tiny_vocab.model").read_bytes()
        _flags(f"--output_dir={tmp_path / 'run'}")  # a rerun without it
        assert pretrain.run_vocabulary() == kept
        _flags(f"--output_dir={tmp_path / 'other'}")
        assert pretrain.run_vocabulary() is None
    finally:
        pretrain.FLAGS.unparse_flags()


@pytest.mark.slow
def test_pretrain_then_export_without_repeating_anything(tmp_path, monkeypatch, capsys):
    from albert_tf.cli import export

    records = tmp_path / "records"
    made = run_create_pretraining_data([f"--input_file={TINY / 'tiny_corpus.txt'}", f"--output_dir={records}",
                                        f"--spm_model_file={TINY / 'tiny_vocab.model'}", "--max_seq_length=64",
                                        "--max_predictions_per_seq=10", "--dupe_factor=2"])
    assert made == 0, capsys.readouterr().err[-2000:]
    (tmp_path / "config.json").write_text(json.dumps(CONFIG))
    run = tmp_path / "run"
    code, _, err = console_script(pretrain.run, [
        "albert-pretrain", f"--input_file={records}/*.tfrecord", f"--output_dir={run}",
        f"--albert_config_file={tmp_path / 'config.json'}", f"--spm_model_file={TINY / 'tiny_vocab.model'}",
        "--train_batch_size=8", "--num_train_steps=2", "--save_checkpoints_steps=2", "--nojit_compile"],
        monkeypatch, capsys)
    assert code == 0, err[-3000:]
    assert (run / "spiece.model").exists() and (run / "export" / "saved_model.pb").exists()
    code, _, err = console_script(export.run, [
        "albert-export", f"--init_checkpoint={run}", "--model=pretrainer", f"--output_dir={tmp_path / 'saved'}",
        "--max_seq_length=64", "--max_predictions_per_seq=10"], monkeypatch, capsys)
    assert code == 0, err[-3000:]
    assert (tmp_path / "saved" / "assets" / "spiece.model").read_bytes() == (TINY / "tiny_vocab.model").read_bytes()
