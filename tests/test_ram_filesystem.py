"""A TPU pod reads and writes only gs:// (issue 51): data prep, pretraining, its evaluation and
export, fine-tuning initialised from that run, its evaluation and export, every input and output on
TensorFlow's in-memory ram:// filesystem, which like an object store has no folder rename and no
flock. ram:// lives in one process, so every tool runs here, in-process, as its console script
would; nothing is written to the local disk but temporary files, and fine-tuning writes none of
those either: its feature cache is on the run's filesystem (in a host's temporary folder a pod's
other workers could not read it)."""

from __future__ import annotations

import json
import os
import tempfile
import uuid

import numpy as np
import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.data.datasets import count_records
from finetune.cache import CachedFeatures
from tests.conftest import REPO_ROOT
from tests.helpers import console_script

TINY_VOCAB = REPO_ROOT / "tests" / "fixtures" / "data_prep" / "tiny_vocab.model"
TINY_CORPUS = REPO_ROOT / "tests" / "fixtures" / "data_prep" / "tiny_corpus.txt"
CONFIG = AlbertConfig(vocab_size=300, embedding_size=8, hidden_size=16, num_hidden_layers=2,
                      num_attention_heads=2, intermediate_size=32, max_position_embeddings=64)
SEQ = 32
ROOT = f"ram://issue51-{uuid.uuid4().hex[:8]}"  # ram:// outlives a test in its process: a name of its own


def _put(local, url):
    tf.io.gfile.makedirs(os.path.dirname(url))
    tf.io.gfile.copy(str(local), url, overwrite=True)
    return url


def _files(folder):
    """Every file below a ram:// folder, relative to it."""
    found = []
    for parent, _, names in tf.io.gfile.walk(folder):
        found += [os.path.join(parent, name)[len(folder) + 1:] for name in names]
    return sorted(found)


def _written_by_us(files):
    """`files` but the sources of converted functions that TensorFlow's autograph writes to the
    temporary folder (and removes when the process exits)."""
    return {path for path in files if not os.path.basename(path).startswith("__autograph_generated_file")}


def _local_files(*folders):
    """The files below local `folders`, Python's bytecode caches left out (a module first imported
    during the run writes its own)."""
    return {os.path.join(parent, name) for folder in folders for parent, _, names in os.walk(folder)
            if "__pycache__" not in parent for name in names}


def test_every_tool_runs_on_an_object_store_filesystem(small_data_dir, tmp_path, tmp_path_factory, monkeypatch,
                                                       capsys):
    from albert_tf.cli import export as export_cli
    from albert_tf.cli import pretrain
    from data_prep import create_pretraining_data
    from finetune.glue import cli as glue_cli

    monkeypatch.chdir(tmp_path)  # a URL taken for a relative path ("ram:/...") would land here
    local_temp = tmp_path_factory.mktemp("local_temp")  # Python's temporary folder during the run
    monkeypatch.setattr(tempfile, "tempdir", str(local_temp))
    watched = [REPO_ROOT / name for name in ("albert_tf", "data_prep", "finetune", "tests")]
    local_before = _local_files(*watched), sorted(os.listdir(REPO_ROOT))

    vocab = _put(TINY_VOCAB, f"{ROOT}/in/tiny_vocab.model")
    corpus = _put(TINY_CORPUS, f"{ROOT}/in/corpus.txt")
    config_file = f"{ROOT}/in/albert_config.json"
    CONFIG.to_json_file(config_file)
    for split in ("train", "dev"):
        _put(small_data_dir / "glue" / "RTE" / f"{split}.tsv", f"{ROOT}/glue/RTE/{split}.tsv")

    # Data prep: the pretraining records.
    records = f"{ROOT}/records"
    create_pretraining_data.FLAGS.unparse_flags()
    create_pretraining_data.FLAGS([
        "albert-create-pretraining-data", f"--input_file={corpus}", f"--output_dir={records}",
        f"--spm_model_file={vocab}", f"--max_seq_length={SEQ}", "--max_predictions_per_seq=4", "--dupe_factor=2",
        "--noprogress"])
    try:
        assert create_pretraining_data.main(["albert-create-pretraining-data"]) == 0
    finally:
        create_pretraining_data.FLAGS.unparse_flags()
    assert "pretraining_data.json" in _files(records)
    shards = tf.io.gfile.glob(f"{records}/pretrain-*.tfrecord")
    assert len(shards) == 1 and sum(1 for _ in tf.data.TFRecordDataset(shards)) > 8

    # Pretraining, evaluated, its encoder exported.
    pretrained = f"{ROOT}/pretrain"
    code, out, err = console_script(pretrain.run, [
        "albert-pretrain", f"--input_file={shards[0]}", f"--eval_input_file={shards[0]}", f"--output_dir={pretrained}",
        f"--albert_config_file={config_file}", f"--spm_model_file={vocab}", "--train_batch_size=4",
        "--eval_batch_size=4", "--max_eval_steps=1", "--num_train_steps=2", "--num_warmup_steps=1",
        "--save_checkpoints_steps=2", "--progress_bar=false", "--nojit_compile"], monkeypatch, capsys)
    assert code == 0, err
    assert "finished at step 2" in out
    made = _files(pretrained)
    assert {"albert_config.json", "checkpoint", "export/saved_model.pb"} <= set(made), made
    for events in ("train/events.out.tfevents", "eval/events.out.tfevents"):
        assert any(name.startswith(events) for name in made), made
    assert "curves.png" in made, made
    encoder = tf.saved_model.load(f"{pretrained}/export")
    assert encoder.signatures["serve_text"](text=tf.constant(["a tiny text"]))["pooled_output"].shape == (1, 16)

    # albert-export of the run, to ram:// too.
    code, out, err = console_script(export_cli.run, [
        "albert-export", f"--preset={pretrained}", "--model=encoder", f"--output_dir={ROOT}/encoder",
        f"--max_seq_length={SEQ}"], monkeypatch, capsys)
    assert code == 0, err
    assert "saved_model.pb" in _files(f"{ROOT}/encoder")

    # Fine-tuning on GLUE's RTE from the ram:// run, evaluated and exported.
    rte = f"{ROOT}/rte"
    summary = glue_cli.finetune([
        "albert-finetune-glue", "--task=RTE", f"--data_dir={ROOT}/glue", f"--output_dir={rte}",
        f"--init_checkpoint={pretrained}", f"--max_seq_length={SEQ}", "--train_batch_size=8", "--num_train_steps=2",
        "--num_warmup_steps=1", "--max_train_examples=16", "--max_eval_examples=8", "--progress_bar=false",
        "--nojit_compile", "--do_train", "--do_eval"])
    assert summary["export_dir"] == f"{rte}/export"
    made = _files(rte)
    assert {"eval_results.json", "best_checkpoint.json", "task.json", "dev_predictions.tsv", "spiece.model",
            "curves.png", "model.ckpt-best.index", "export/saved_model.pb"} <= set(made), made
    assert summary["train"]["curves"] == f"{rte}/curves.png"
    for events in ("train/events.out.tfevents", "eval/events.out.tfevents"):
        assert any(name.startswith(events) for name in made), made
    with tf.io.gfile.GFile(f"{rte}/eval_results.json") as f:
        assert json.load(f)["dev"]["examples"] == 8
    # Its feature cache is on the run's filesystem, the record files described and whole, and
    # nothing of it, or of any tool before it, left in the local temporary folder (a pod's other
    # workers could not read it there; data prep left its copy of the vocabulary once).
    assert _written_by_us(_local_files(local_temp)) == set()
    cache = sorted(name for name in made if name.startswith("features/"))
    assert [name.rsplit("-", 1)[0] for name in cache] == ["features/RTE-dev-len32"] * 2 + [
        "features/RTE-train-len32"] * 2
    for description in cache[0::2]:
        cached = CachedFeatures.from_json_file(f"{rte}/{description}")
        assert cached.path == f"{rte}/{description[:-len('.json')]}.tfrecord"
        assert count_records(cached.path) == cached.num_records == {"dev": 8, "train": 300}[cached.split]
    classifier = tf.saved_model.load(f"{rte}/export")
    pairs = tf.constant([["The cat sat.", "A cat sat."]])
    probabilities = classifier.signatures["serve_text"](text=pairs)["probabilities"].numpy()
    np.testing.assert_allclose(probabilities.sum(axis=-1), 1.0, rtol=1e-5)

    # Nothing on the local disk: the working folder stays empty, the repository as it was.
    assert sorted(os.listdir(tmp_path)) == []
    assert (_local_files(*watched), sorted(os.listdir(REPO_ROOT))) == local_before
