"""The task heads beside the encoder: parameter counts, each head computing what it says on a tiny
model, `.backbone`. (Config, .keras, bfloat16, preset and SavedModel round trips: test_model_harness.py.)"""

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertEncoder
from albert_tf.models import AlbertClassifier, AlbertMultipleChoice, AlbertSpanLabeler, classifier_sums
from tests.albert_tf.tiny import TINY, pretraining_batch

BATCH = {k: v for k, v in pretraining_batch(batch=6, length=10).items()
         if k in ("input_ids", "input_mask", "segment_ids")}
CHOICES = {k: v.reshape(2, 3, 10) for k, v in BATCH.items()}  # 2 questions of 3 choices

HEADS = {
    "classifier": (lambda dtype: AlbertClassifier(TINY, 3, dropout=0.2, dtype=dtype), BATCH),
    "span_labeler": (lambda dtype: AlbertSpanLabeler(TINY, dtype=dtype), BATCH),
    "multiple_choice": (lambda dtype: AlbertMultipleChoice(TINY, num_choices=3, dtype=dtype), CHOICES),
}


def test_parameter_counts_are_the_encoders_plus_the_head():
    encoder = AlbertEncoder(TINY)
    encoder.build()
    hidden = TINY.hidden_size
    counts = {}
    for name, (make, _) in HEADS.items():
        model = make("float32")
        model.build()
        counts[name] = model.count_params() - encoder.count_params()
    assert counts == {"classifier": hidden * 3 + 3, "span_labeler": hidden * 2 + 2, "multiple_choice": hidden + 1}


def test_span_labeler_scores_every_position_with_one_dense_layer():
    keras.utils.set_random_seed(1)
    model = AlbertSpanLabeler(TINY)
    outputs = model(BATCH)
    assert outputs["start_logits"].shape == (6, 10) and outputs["end_logits"].shape == (6, 10)
    sequence = model.encoder(BATCH)["sequence_output"].numpy()
    kernel, bias = model.span.kernel.numpy(), model.span.bias.numpy()
    np.testing.assert_allclose(outputs["start_logits"], sequence @ kernel[:, 0] + bias[0], atol=1e-5)
    np.testing.assert_allclose(outputs["end_logits"], sequence @ kernel[:, 1] + bias[1], atol=1e-5)


def test_multiple_choice_scores_each_row_alone():
    keras.utils.set_random_seed(2)
    model = AlbertMultipleChoice(TINY, num_choices=3)
    logits = model(CHOICES).numpy()
    assert logits.shape == (2, 3)
    # Each choice's logit is the dense output of its own row's pooled state, whatever its neighbours.
    pooled = model.encoder(BATCH)["pooled_output"].numpy()
    expected = pooled @ model.classifier.kernel.numpy()[:, 0] + model.classifier.bias.numpy()[0]
    np.testing.assert_allclose(logits.reshape(-1), expected, atol=1e-5)
    # Its softmax cross-entropy is the classifier's: the sums take [B, choices] logits unchanged.
    sums = classifier_sums(logits, [2, 0], [1.0, 1.0], regression=False)
    log_probabilities = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    assert float(sums["loss"]) == pytest.approx(-(log_probabilities[0, 2] + log_probabilities[1, 0]), abs=1e-5)


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="num_choices"):
        AlbertMultipleChoice(TINY, num_choices=0)
    with pytest.raises(ValueError, match=r"dropout must be in \[0, 1\)"):
        AlbertClassifier(TINY, 2, dropout=1.0)


def test_backbone_is_the_encoder_under_keras_hubs_name(tmp_path):
    """`.backbone` (keras-hub's name) is the encoder itself, not a second tracked attribute: the
    weights keep their names and a `.keras` file holds them once, under `encoder`."""
    import zipfile

    import h5py

    for make, _ in HEADS.values():
        model = make("float32")
        model.build()
        assert model.backbone is model.encoder
        assert not any("backbone" in w.path for w in model.weights)
        assert len(model.weights) == len({id(w) for w in model.weights})
    model.save(tmp_path / "model.keras")
    with zipfile.ZipFile(tmp_path / "model.keras") as archive:
        archive.extract("model.weights.h5", tmp_path)
    paths = []
    with h5py.File(tmp_path / "model.weights.h5") as weights:
        weights.visit(paths.append)
    assert "encoder" in {p.split("/")[0] for p in paths}, paths
    assert not any("backbone" in p for p in paths), paths
    with pytest.raises(AttributeError, match="has no backbone"):
        AlbertEncoder(TINY).backbone
