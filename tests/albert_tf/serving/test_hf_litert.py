"""The LiteRT journey of issue 54: a Hub sequence classifier -> one albert-export command -> a LiteRT
model whose answers are the SavedModel's.

A tiny `AlbertForSequenceClassification` made with transformers is served as a Hub repository of
the older layout by the loopback stand-in (`release_replicas.LoopbackServer`, `hub_task_files`);
`albert-export --preset hf://... --format=litert --quantization=dynamic_int8` writes its LiteRT
model (the classifier: its head and its labels, the default for a source that holds one) and
`albert-export --preset hf://... --serving_version 1` its SavedModel. On 20 texts the int8 model's
label is the SavedModel's on every text, and its probabilities are within 0.02 of the float
SavedModel's (the stated tolerance of dynamic int8 here; measured: 0.0043).
"""

from __future__ import annotations

import json

import numpy as np
import tensorflow as tf

from albert_tf.cli import export as export_cli
from albert_tf.presets.model_source import load_saved_model
from albert_tf.serving import litert
from tests.albert_tf import release_replicas as replicas
from tests.albert_tf.presets.test_hf_heads import _hf_model, cache  # noqa: F401  (the cache fixture)
from tests.albert_tf.serving.test_hf_pipelines import CONFIG, LABELS, SPM, TEXTS
from tests.helpers import console_script

REPO, SEQ = "textattack/albert-tiny-SST-2", 32


def test_a_hub_classifier_becomes_a_litert_model_with_the_saved_models_answers(tmp_path, monkeypatch, capsys):
    # seed 2: the three labels among the float answers, none of them within 0.03 of the next best
    _hf_model("AlbertForSequenceClassification", tmp_path / "hf", seed=2, config=CONFIG, vocab=SPM, num_labels=3,
              id2label=LABELS, label2id={v: k for k, v in LABELS.items()})
    server = replicas.LoopbackServer()
    server.repos[REPO] = replicas.hub_task_files(tmp_path / "hf")
    replicas.point_the_hub_at(monkeypatch, server, tmp_path / "hub")
    printed = []
    try:
        for args in (["--format=litert", "--quantization=dynamic_int8", "--output_dir", tmp_path / "on_device"],
                     ["--serving_version", 1, "--output_dir", tmp_path / "serving"]):
            code, out, err = console_script(export_cli.run, ["albert-export", "--preset", f"hf://{REPO}",
                                                             "--max_seq_length", SEQ, *args], monkeypatch, capsys)
            assert code == 0, err
            printed.append(out)
    finally:
        server.stop()
    assert f"wrote the text classifier LiteRT model (dynamic_int8) to {tmp_path / 'on_device'}" in printed[0]
    assert (tmp_path / "serving" / "1" / "assets.extra" / "tf_serving_warmup_requests").is_file()

    description = json.loads((tmp_path / "on_device" / litert.IO_FILE).read_text())
    assert (description["task"], description["quantization"]) == ("classifier", "dynamic_int8")
    assert description["labels"] == list(LABELS.values())
    assert litert.custom_ops((tmp_path / "on_device" / litert.MODEL_FILE).read_bytes()) == []
    features = list(litert.tokenized_texts(TEXTS, tmp_path / "on_device" / "spiece.model", SEQ))
    lite = litert.LiteRTModel(tmp_path / "on_device" / litert.MODEL_FILE)(
        {k: np.array([f[k] for f in features]) for k in litert.INPUTS})

    served = load_saved_model(str(tmp_path / "serving" / "1")).signatures["serve_text"](text=tf.constant(TEXTS))
    labels = [description["labels"][i] for i in np.argmax(lite["logits"], -1)]
    assert labels == [v.decode() for v in served["label"].numpy()]
    difference = np.abs(lite["probability"] - served["probabilities"].numpy()).max()
    assert difference <= 0.02, difference
    assert set(labels) == set(LABELS.values())  # not one answer for all
