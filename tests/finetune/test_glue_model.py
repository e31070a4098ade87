"""The GLUE classifier: serialization, its loss and metrics on real GLUE rows against hand-computed
values, and every way its encoder is initialised (pretraining checkpoint, SavedModel, preset),
including the refusal of another vocabulary."""

import json
import pathlib

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig, AlbertEncoder, AlbertPretrainer
from albert_tf.tokenizers.tokenizer import AlbertTokenizer
from albert_tf.checkpoints.run_folder import CONFIG_FILE
from albert_tf.checkpoints.weights import model_weights
from finetune.glue import metrics
from albert_tf.models import AlbertClassifier as GlueClassifier, classifier_sums
from albert_tf.presets.loader import WORD_EMBEDDINGS, init_vocab_size, initialize_encoder
from albert_tf.presets.model_source import saved_model_key, split_tensors
from finetune.glue.readers import read_examples

TINY_VOCAB = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "data_prep" / "tiny_vocab.model"
CONFIG = AlbertConfig(
    vocab_size=300,  # the tiny vocabulary's pieces
    embedding_size=16,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=2,
    intermediate_size=64,
    max_position_embeddings=64,
)
SEQ = 48


@pytest.fixture(scope="module")
def tokenizer():
    return AlbertTokenizer(TINY_VOCAB)


def _batch(tokenizer, task, small_data_dir, split, n):
    examples = read_examples(task, small_data_dir / "glue", split).examples[:n]
    rows = [tokenizer.pack(tokenizer.encode(e.text_a), tokenizer.encode(e.text_b) if e.text_b else None,
                           max_seq_length=SEQ) for e in examples]
    inputs = {k: np.array([r[k] for r in rows], np.int32) for k in ("input_ids", "input_mask", "segment_ids")}
    return inputs, [e.label for e in examples]


def _classifier(num_labels=2, seed=0, **kwargs):
    keras.utils.set_random_seed(seed)
    model = GlueClassifier(CONFIG, num_labels, **kwargs)
    model.build()
    return model


def test_config_round_trip_and_keras_file(tmp_path, tokenizer, small_data_dir):
    model = _classifier(3)
    inputs, _ = _batch(tokenizer, "MRPC", small_data_dir, "dev", 4)
    expected = model(inputs, training=False).numpy()
    assert expected.shape == (4, 3) and expected.dtype == np.float32
    clone = GlueClassifier.from_config(model.get_config())
    clone.build()
    clone.set_weights(model.get_weights())
    np.testing.assert_array_equal(clone(inputs, training=False), expected)
    path = tmp_path / "classifier.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert isinstance(loaded, GlueClassifier) and loaded.num_classes == 3 and loaded.dropout == 0.1
    np.testing.assert_array_equal(loaded(inputs, training=False), expected)
    # The head adds exactly a [H, labels] kernel and a bias to the encoder.
    encoder = AlbertEncoder(CONFIG)
    encoder.build()
    assert model.count_params() == encoder.count_params() + 32 * 3 + 3


def test_dropout_only_in_training(tokenizer, small_data_dir):
    inputs, _ = _batch(tokenizer, "MRPC", small_data_dir, "dev", 8)
    model = _classifier()
    assert not np.allclose(model(inputs, training=True), model(inputs, training=False))
    np.testing.assert_array_equal(model(inputs, training=False), model(inputs, training=False))
    still = _classifier(dropout=0.0)
    np.testing.assert_allclose(still(inputs, training=True), still(inputs, training=False), atol=1e-6)


def test_classification_loss_and_metrics_on_real_mrpc_rows(tokenizer, small_data_dir):
    inputs, labels = _batch(tokenizer, "MRPC", small_data_dir, "dev", 16)
    label_ids = np.array([int(label) for label in labels])
    model = _classifier()
    # Random weights give near-uniform logits; scale the head so that the numbers are not trivial.
    model.classifier.kernel.assign(model.classifier.kernel * 50.0)
    logits = model(inputs, training=False).numpy().astype(np.float64)
    weights = np.ones(16, np.float32)
    weights[-3:] = 0.0  # padding rows of an evaluation batch count for nothing
    sums = classifier_sums(logits, label_ids, weights, regression=False)

    log_probs = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    cross_entropy = -log_probs[np.arange(16), label_ids]
    predicted = logits.argmax(axis=1)
    assert float(sums["loss"]) == pytest.approx(cross_entropy[:13].sum(), rel=1e-5)
    assert float(sums["hits"]) == (predicted[:13] == label_ids[:13]).sum()
    assert float(sums["examples"]) == 13.0
    results = metrics.task_metrics("MRPC", label_ids, logits, weights)
    from sklearn.metrics import accuracy_score, f1_score

    assert results["accuracy"] == pytest.approx(accuracy_score(label_ids[:13], predicted[:13]))
    assert results["f1"] == pytest.approx(f1_score(label_ids[:13], predicted[:13]))


def test_regression_loss_and_correlations_on_real_stsb_rows(tokenizer, small_data_dir):
    inputs, labels = _batch(tokenizer, "STS-B", small_data_dir, "dev", 12)
    scores = np.array(labels, np.float64)
    model = _classifier(num_labels=1)
    model.classifier.kernel.assign(model.classifier.kernel * 50.0)
    outputs = model(inputs, training=False).numpy()
    assert outputs.shape == (12, 1)
    sums = classifier_sums(outputs, scores, np.ones(12), regression=True)
    assert float(sums["loss"]) == pytest.approx(((outputs[:, 0] - scores) ** 2).sum(), rel=1e-5)
    assert float(sums["hits"]) == 0.0
    from scipy.stats import pearsonr, spearmanr

    results = metrics.task_metrics("STS-B", scores, outputs)
    assert results["pearson"] == pytest.approx(pearsonr(scores, outputs[:, 0])[0], abs=1e-6)
    assert results["spearman"] == pytest.approx(spearmanr(scores, outputs[:, 0])[0], abs=1e-6)


def test_mixed_precision_outputs_float32(tokenizer, small_data_dir):
    inputs, _ = _batch(tokenizer, "MRPC", small_data_dir, "dev", 2)
    model = GlueClassifier(CONFIG, 2, dtype="mixed_bfloat16")
    model.build()
    assert model.classifier.compute_dtype == "bfloat16"
    assert model(inputs).dtype == tf.float32


def _pretrainer(config=CONFIG, seed=7):
    keras.utils.set_random_seed(seed)
    pretrainer = AlbertPretrainer(config)
    pretrainer.build()
    return pretrainer


def _pretraining_run_dir(tmp_path, pretrainer, name="pretrain"):
    """A folder as albert-pretrain leaves it: albert_config.json and a checkpoint of named weights."""
    folder = tmp_path / name
    folder.mkdir()
    (folder / CONFIG_FILE).write_text(json.dumps(pretrainer.config.to_dict()))
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(model=model_weights(pretrainer)), str(folder), 2,
                                         checkpoint_name="ckpt")
    manager.save(checkpoint_number=5)
    return folder


def _assert_encoder_equal(classifier, encoder):
    assert len(classifier.encoder.weights) == len(encoder.weights)
    for ours, theirs in zip(classifier.encoder.weights, encoder.weights):
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy(), err_msg=ours.path)


def test_initialise_from_pretraining_checkpoint(tmp_path):
    pretrainer = _pretrainer()
    folder = _pretraining_run_dir(tmp_path, pretrainer)
    for init in (str(folder), str(folder / "ckpt-5")):
        classifier = _classifier(seed=1)
        head = classifier.classifier.kernel.numpy().copy()
        assert initialize_encoder(classifier, init) == str(folder / "ckpt-5")
        _assert_encoder_equal(classifier, pretrainer.encoder)
        np.testing.assert_array_equal(classifier.classifier.kernel.numpy(), head)  # the head stays new


def test_initialise_from_preset(tmp_path):
    encoder = AlbertEncoder(CONFIG)
    encoder.build()
    for v in encoder.weights:
        v.assign(np.random.default_rng(len(v.path)).normal(0, 0.1, v.shape).astype(np.float32))
    encoder.save_to_preset(tmp_path / "preset", TINY_VOCAB)
    classifier = _classifier(seed=1)
    initialize_encoder(classifier, preset=str(tmp_path / "preset"))
    _assert_encoder_equal(classifier, encoder)
    # (Initialisation from a SavedModel: tests/finetune/test_glue_cli.py, on the exported classifier.)


def test_saved_model_variables_map_to_encoder_paths():
    # An encoder's, a pretrainer's and a classifier's SavedModel name the same weight three ways.
    for name in ("albert_encoder/embeddings/word_embeddings/embeddings:0",
                 "albert_pretrainer/encoder/embeddings/word_embeddings/embeddings:0",
                 "glue_classifier/encoder/embeddings/word_embeddings/embeddings:0"):
        encoder, heads = split_tensors({saved_model_key(name): np.zeros(1)})
        assert (list(encoder), heads) == ([WORD_EMBEDDINGS], {})


def test_init_checkpoint_of_another_vocabulary_is_refused(tmp_path):
    other = _pretrainer(CONFIG.replace(vocab_size=500))
    folder = _pretraining_run_dir(tmp_path, other, "other_vocab")
    assert init_vocab_size(str(folder)) == 500
    with pytest.raises(ValueError, match=r"holds an encoder with vocab_size=500, the model has vocab_size=300"):
        initialize_encoder(_classifier(), str(folder))


def test_init_checkpoint_missing(tmp_path):
    with pytest.raises(ValueError, match="holds no model: not a preset folder, a run's output_dir \\(no checkpoint\\)"):
        initialize_encoder(_classifier(), str(tmp_path))
    with pytest.raises(ValueError, match="ckpt-3: no such folder or file"):
        initialize_encoder(_classifier(), str(tmp_path / "ckpt-3"))
