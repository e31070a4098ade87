"""TF Serving's layout and warmup file (albert_tf.serving.tf_serving, `albert-export --serving_version`).

`albert-export --serving_version N` writes `<output_dir>/<N>/` beside the versions there, never over
one, with `assets.extra/tf_serving_warmup_requests`: TFRecords that parse as the official
`tensorflow.serving.PredictionLog` protos (tensorflow-serving-api), `serve_text` requests of raw
strings, which replayed through the loaded signatures give the encoder's outputs on the same texts.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the SavedModel's SentencePiece op)

from albert_tf import AlbertConfig, AlbertEncoder
from albert_tf.cli import export as export_cli
from albert_tf.serving import tf_serving
from albert_tf.tokenizers.preprocessor import AlbertTextPreprocessor
from tests.helpers import console_script
from tests.albert_tf.presets.test_hf_heads import TINY_SPM

prediction_log_pb2 = pytest.importorskip("tensorflow_serving.apis.prediction_log_pb2")

CONFIG = AlbertConfig(vocab_size=120, embedding_size=8, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                      intermediate_size=32, max_position_embeddings=128)


@pytest.fixture(scope="module")
def preset(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tf_serving") / "preset"
    return str(AlbertEncoder(CONFIG).save_to_preset(folder, TINY_SPM))


def _export(preset, base, version, monkeypatch, capsys, *extra):
    return console_script(export_cli.run, ["albert-export", "--preset", preset, "--output_dir", base,
                                           "--serving_version", version, "--max_seq_length", 128, *extra],
                          monkeypatch, capsys)


def test_versions_are_written_beside_each_other_with_replayable_warmup(preset, tmp_path, monkeypatch, capsys):
    base = tmp_path / "serving" / "albert"
    code, out, err = _export(preset, base, 1, monkeypatch, capsys)
    assert code == 0, err
    assert out.strip().endswith(str(base / "1"))
    version = base / "1"
    assert (version / "saved_model.pb").is_file()
    stamp = (version / "saved_model.pb").stat().st_mtime_ns

    # The records are TF Serving's own protos, read back by the official classes.
    raw = [r.numpy() for r in tf.data.TFRecordDataset(str(version / "assets.extra" / "tf_serving_warmup_requests"))]
    logs = [prediction_log_pb2.PredictionLog.FromString(r) for r in raw]
    assert len(logs) == len(tf_serving.WARMUP_TEXTS) + 1
    assert all(log.WhichOneof("log_type") == "predict_log" for log in logs)
    requests = [log.predict_log.request for log in logs]
    assert {r.model_spec.signature_name for r in requests} == {"serve_text"}
    assert {r.model_spec.name for r in requests} == {"albert"}
    texts = [t.decode() for t in tf.make_ndarray(requests[-1].inputs["text"])]
    assert texts == list(tf_serving.WARMUP_TEXTS)
    assert [tuple(tf.make_ndarray(r.inputs["text"]).shape) for r in requests] == [(1,)] * 3 + [(3,)]

    # Replayed through the loaded signatures: the encoder's outputs on the same texts.
    replies = tf_serving.replay(tf.saved_model.load(str(version)), tf_serving.read_warmup(version))
    encoder = AlbertEncoder.from_preset(preset)
    packed = AlbertTextPreprocessor(str(TINY_SPM), 128)(list(tf_serving.WARMUP_TEXTS))
    expected = encoder(packed)
    lengths = packed["input_mask"].numpy().sum(axis=1)
    for row, reply in enumerate(replies[:-1]):
        np.testing.assert_allclose(reply["pooled_output"][0], expected["pooled_output"][row], atol=1e-5, rtol=0)
        n = lengths[row]
        np.testing.assert_allclose(reply["sequence_output"][0, :n], expected["sequence_output"][row, :n], atol=1e-5,
                                   rtol=0)
        np.testing.assert_allclose(replies[-1]["sequence_output"][row, :n], expected["sequence_output"][row, :n],
                                   atol=1e-5, rtol=0)
    assert np.std(expected["sequence_output"]) > 0.1  # the outputs vary: not a comparison of constants

    # Version 2 goes beside version 1; version 1 is never written over.
    code, _, err = _export(preset, base, 2, monkeypatch, capsys)
    assert code == 0, err
    assert tf_serving.versions(base) == [1, 2]
    code, out, err = _export(preset, base, 1, monkeypatch, capsys)
    assert code == 2
    assert f"--serving_version 1: {base / '1'} exists: version 1 is there already" in err
    assert "e.g. 3" in err
    assert (version / "saved_model.pb").stat().st_mtime_ns == stamp
    assert sorted(p.name for p in base.iterdir() if not p.name.startswith(".")) == ["1", "2"]


@pytest.mark.parametrize("flags,message", [
    (["--serving_version", 0], "--serving_version 0: a TF Serving version is a positive integer"),
    (["--serving_version", 1, "--format", "litert"], "--serving_version writes TF Serving's layout of a SavedModel"),
    (["--model", "text_classifier", "--precision", "bfloat16"], "--model=text_classifier exports the classifier as it is"),
])
def test_bad_export_flags_are_one_line(preset, tmp_path, monkeypatch, capsys, flags, message):
    code, _, err = console_script(export_cli.run, ["albert-export", "--preset", preset, "--output_dir",
                                                   tmp_path / "base", *flags], monkeypatch, capsys)
    assert code == 2 and message in err
    assert not (tmp_path / "base").exists()


def test_a_pretrainers_warmup_gives_its_extra_inputs(tmp_path):
    """serve_text of the pretrainer takes masked_lm_positions beside the text: the records carry them."""
    from albert_tf import AlbertPretrainer
    from albert_tf.serving.export import export_pretrainer

    pretrainer = AlbertPretrainer(CONFIG)
    pretrainer.build()
    path = tf_serving.write_version(tmp_path / "base", 7, lambda folder: export_pretrainer(
        pretrainer, folder, str(TINY_SPM), 32, 2), texts=("one text", "two texts here"))
    logs = tf_serving.read_warmup(path)
    assert sorted(logs[0].predict_log.request.inputs) == ["masked_lm_positions", "text"]
    replies = tf_serving.replay(tf.saved_model.load(path), logs)
    assert replies[-1]["mlm_logits"].shape[:2] == (2, 1)


def test_warmup_requests_fill_every_input_of_a_tasks_serve_text():
    """SQuAD's (question, context), RACE's (article, question, options [B, 4]), a pair model's text
    [B, 2], the pretrainer's positions: each request holds every input, one row a text."""
    string = lambda *shape: tf.TensorSpec(shape or None, tf.string)  # noqa: E731
    texts = ["one", "two words"]
    cases = {"race": {"article": string(None), "question": string(None), "options": string(None, 4)},
             "squad": {"question": string(None), "context": string(None)},
             "pretrainer": {"text": string(), "masked_lm_positions": tf.TensorSpec([None, None], tf.int32)}}
    for name, specs in cases.items():
        request = tf_serving.warmup_requests(texts, specs=specs)[-1].predict_log.request
        inputs = {k: tf.make_ndarray(v) for k, v in request.inputs.items()}
        assert sorted(inputs) == sorted(specs), name
        expected = {"options": (2, 4), "masked_lm_positions": (2, 1)}
        assert {k: v.shape for k, v in inputs.items()} == {k: expected.get(k, (2,)) for k in specs}, name
    assert inputs["text"].tolist() == [t.encode() for t in texts]
    pairs = tf_serving.warmup_requests(texts, pairs=True)[-1].predict_log.request.inputs["text"]
    assert tf.make_ndarray(pairs).tolist() == [[t.encode()] * 2 for t in texts]
