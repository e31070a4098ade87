"""A run folder remembers its inputs (issue 20, item 4): albert-pretrain reads the records' lengths
from their pretraining_data.json and keeps its vocabulary; albert-export of the run needs neither."""

import json

import pytest

from albert_tf.cli import pretrain
from albert_tf.utils.errors import FlagError
from tests.helpers import console_script
from tests.pretrained_runs import TINY, pretraining_flags, process_output, tiny_corpus_pretraining



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
def test_pretrain_then_export_without_repeating_anything(tmp_path, tmp_path_factory, monkeypatch, capsys):
    from albert_tf.cli import export

    # albert-pretrain on the tiny corpus's records given its vocabulary, not their lengths: the
    # session's run (tests/pretrained_runs.py), as test_quiet_cli.py's checks of its output see it.
    shared = tiny_corpus_pretraining(tmp_path_factory)
    ran = process_output(shared, "albert-pretrain")
    assert ran.returncode == 0, ran.stderr[-3000:]
    given = pretraining_flags(shared)
    assert not any(arg.startswith(("--max_seq_length", "--max_predictions_per_seq")) for arg in given)
    run = shared / "run"
    assert (run / "spiece.model").exists() and (run / "export" / "saved_model.pb").exists()
    code, _, err = console_script(export.run, [
        "albert-export", f"--init_checkpoint={run}", "--model=pretrainer", f"--output_dir={tmp_path / 'saved'}",
        "--max_seq_length=64", "--max_predictions_per_seq=10"], monkeypatch, capsys)
    assert code == 0, err[-3000:]
    assert (tmp_path / "saved" / "assets" / "spiece.model").read_bytes() == (TINY / "tiny_vocab.model").read_bytes()
