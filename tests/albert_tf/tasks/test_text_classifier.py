"""The Keras-native API: AlbertTextClassifier.from_preset, then fit / predict / export on raw
strings; its preprocessor gives the Python tokenizer's ids; save_to_preset and from_preset give the
same model back; the export answers raw text with the probabilities of predict."""

import os
import pathlib

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig, AlbertEncoder
from albert_tf.tasks.text_classifier import AlbertTextClassifier
from albert_tf.tokenizers.preprocessor import AlbertTextPreprocessor
from albert_tf.tokenizers.tokenizer import AlbertTokenizer
from tests.helpers import good_bad_sentences

TINY_VOCAB = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "data_prep" / "tiny_vocab.model"
CONFIG = AlbertConfig(vocab_size=300, embedding_size=16, hidden_size=32, num_hidden_layers=2,
                      num_attention_heads=2, intermediate_size=64, max_position_embeddings=64)
SEQ = 16


@pytest.fixture(scope="module")
def preset(tmp_path_factory):
    keras.utils.set_random_seed(0)
    encoder = AlbertEncoder(CONFIG)
    encoder.build()
    return encoder.save_to_preset(tmp_path_factory.mktemp("preset") / "tiny", TINY_VOCAB)


@pytest.fixture(scope="module")
def trained(preset):
    keras.utils.set_random_seed(1)
    classifier = AlbertTextClassifier.from_preset(preset, num_classes=2, sequence_length=SEQ)
    # XLA's compile time would dominate a CPU test of a few steps.
    classifier.compile(optimizer=keras.optimizers.Adam(3e-3), jit_compile=False)
    texts, labels = good_bad_sentences(96, seed=2)
    history = classifier.fit(texts, labels, batch_size=16, epochs=8, seed=3, verbose=0)
    return classifier, history


def test_fit_traces_its_train_step_once(preset):
    # Keras alone makes the optimizer's moments in the first trace and traces the step again.
    classifier = AlbertTextClassifier.from_preset(preset, num_classes=2, sequence_length=SEQ)
    classifier.compile(optimizer=keras.optimizers.Adam(3e-3), jit_compile=False)
    traces, train_step = [], classifier.train_step
    classifier.train_step = lambda data: traces.append(data) or train_step(data)
    texts, labels = good_bad_sentences(8, seed=4)
    history = classifier.fit(texts, labels, batch_size=4, epochs=2, verbose=0)
    assert len(traces) == 1 and len(history.history["loss"]) == 2
    assert classifier.optimizer.iterations.numpy() == 4


def test_preprocessor_gives_the_python_tokenizers_ids():
    preprocessor = AlbertTextPreprocessor(str(TINY_VOCAB), sequence_length=SEQ)
    tokenizer = AlbertTokenizer(str(TINY_VOCAB))
    texts, _ = good_bad_sentences(4, seed=5)
    seconds = ["A longer second sentence that is cut to fit the sequence."] * 4
    for packed, expected in ((preprocessor(texts), [tokenizer.pack(tokenizer.encode(t), max_seq_length=SEQ)
                                                    for t in texts]),
                             (preprocessor((texts, seconds)), [tokenizer.pack(tokenizer.encode(a), tokenizer.encode(b),
                                                                              max_seq_length=SEQ)
                                                               for a, b in zip(texts, seconds)])):
        for key in ("input_ids", "input_mask", "segment_ids"):
            np.testing.assert_array_equal(packed[key].numpy(), [row[key] for row in expected], err_msg=key)
    clone = AlbertTextPreprocessor.from_config(preprocessor.get_config())
    np.testing.assert_array_equal(clone(texts)["input_ids"], preprocessor(texts)["input_ids"])


def test_from_preset_loads_the_encoder_and_a_new_head(preset):
    classifier = AlbertTextClassifier.from_preset(preset, num_classes=3, sequence_length=SEQ)
    classifier.compile(jit_compile=False)
    encoder = AlbertEncoder.from_preset(preset)
    for ours, theirs in zip(classifier.classifier.encoder.weights, encoder.weights, strict=True):
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    assert classifier.predict(["One sentence.", "Another one."], verbose=0).shape == (2, 3)
    assert classifier.predict((["A pair"], ["of sentences."]), verbose=0).shape == (1, 3)
    with pytest.raises(ValueError, match="give num_classes"):
        AlbertTextClassifier.from_preset(preset)


def test_save_to_preset_into_a_file_or_a_full_folder_names_the_argument(preset, tmp_path):
    """Issue 52 item 5: the message named `--output_dir`, a flag the Python caller never gave."""
    (tmp_path / "a_file").write_text("x")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "kept.txt").write_text("x")
    classifier = AlbertTextClassifier.from_preset(preset, num_classes=2, sequence_length=SEQ)
    for model, save in ((classifier, classifier.save_to_preset),
                        (classifier.classifier.encoder, lambda path: classifier.classifier.encoder.save_to_preset(
                            path, TINY_VOCAB))):
        for path, reason in ((tmp_path / "a_file", "is a file, not a folder"), (tmp_path / "full", "is not empty")):
            with pytest.raises(ValueError) as error:
                save(path)
            assert str(error.value) == f"preset_dir {path} {reason}", type(model).__name__
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file", "full"]
    assert os.listdir(tmp_path / "full") == ["kept.txt"]


def test_fit_on_raw_text_learns(trained):
    classifier, history = trained
    assert history.history["loss"][-1] < history.history["loss"][0]
    texts, labels = good_bad_sentences(64, seed=9)  # sentences not trained on
    logits = classifier.predict(texts, batch_size=16, verbose=0)
    assert np.mean(logits.argmax(axis=1) == labels) >= 0.9
    loss, accuracy = classifier.evaluate(texts, labels, batch_size=16, verbose=0)
    assert accuracy == pytest.approx(np.mean(logits.argmax(axis=1) == labels))
    # predict is the model on the preprocessor's packed ids.
    direct = classifier(classifier.preprocessor(texts[:8]), training=False).numpy()
    np.testing.assert_allclose(logits[:8], direct, atol=1e-5, rtol=0)


@pytest.mark.slow
def test_save_to_preset_and_export_on_raw_text(trained, tmp_path):
    classifier, _ = trained
    texts, _ = good_bad_sentences(6, seed=11)
    logits = classifier.predict(texts, verbose=0)
    saved = classifier.save_to_preset(tmp_path / "fine_tuned")
    again = AlbertTextClassifier.from_preset(saved)
    again.compile(jit_compile=False)
    assert (again.num_classes, again.preprocessor.sequence_length) == (2, SEQ)
    np.testing.assert_allclose(again.predict(texts, verbose=0), logits, atol=1e-6, rtol=0)
    # Its encoder is a preset's encoder: any model loads it (issue 28: this raised FileNotFoundError).
    encoder = AlbertEncoder.from_preset(saved)
    for ours, theirs in zip(encoder.weights, classifier.classifier.encoder.weights, strict=True):
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())

    classifier.export(tmp_path / "export", labels=["negative", "positive"])
    served = tf.saved_model.load(str(tmp_path / "export")).signatures["serve_text"](text=tf.constant([[t] for t in texts]))
    probabilities = tf.nn.softmax(logits).numpy()
    np.testing.assert_allclose(served["probabilities"].numpy(), probabilities, atol=1e-5, rtol=0)
    assert [label.decode() for label in served["label"].numpy()] == [
        ("negative", "positive")[i] for i in probabilities.argmax(axis=1)]


@pytest.mark.slow
def test_a_fine_tuned_classifier_converts_to_hugging_face(trained, tmp_path):
    import torch
    import transformers

    from albert_tf.presets.convert import convert_preset_to_hf

    classifier, _ = trained
    named = AlbertTextClassifier(classifier.classifier, classifier.preprocessor, labels=["negative", "positive"])
    hf_dir = convert_preset_to_hf(named.save_to_preset(tmp_path / "preset"), tmp_path / "hf")
    hf = transformers.AlbertForSequenceClassification.from_pretrained(hf_dir).eval()
    assert hf.config.id2label == {0: "negative", 1: "positive"}
    texts, _ = good_bad_sentences(8, seed=13)
    packed = classifier.preprocessor(texts)
    with torch.no_grad():
        logits = hf(input_ids=torch.tensor(packed["input_ids"].numpy(), dtype=torch.long),
                    attention_mask=torch.tensor(packed["input_mask"].numpy(), dtype=torch.long),
                    token_type_ids=torch.tensor(packed["segment_ids"].numpy(), dtype=torch.long)).logits.numpy()
    np.testing.assert_allclose(logits, classifier.predict(texts, verbose=0), atol=1e-5, rtol=0)


def test_class_names_are_kept_and_reach_hugging_faces_id2label(preset, tmp_path):
    """labels= (keras-hub's habit) stays in the config and the preset and names HF's classes
    (issue 30 item 6; LABEL_0/LABEL_1 before); a reload may rename them."""
    import json

    from albert_tf.presets.convert import convert_preset_to_hf

    named = AlbertTextClassifier.from_preset(preset, labels=["negative", "positive"], sequence_length=SEQ)
    assert (named.num_classes, named.labels) == (2, ["negative", "positive"])
    assert named.backbone is named.classifier.encoder
    assert AlbertTextClassifier.from_config(named.get_config()).labels == ["negative", "positive"]
    saved = named.save_to_preset(tmp_path / "named")
    assert AlbertTextClassifier.from_preset(saved).labels == ["negative", "positive"]
    hf_dir = pathlib.Path(convert_preset_to_hf(saved, tmp_path / "hf"))
    hf = json.loads((hf_dir / "config.json").read_text())
    assert hf["id2label"] == {"0": "negative", "1": "positive"}
    assert hf["label2id"] == {"negative": 0, "positive": 1}
    renamed = AlbertTextClassifier.from_preset(saved, labels=["bad", "good"])
    assert renamed.labels == ["bad", "good"]
    with pytest.raises(ValueError, match="3 labels for 2 classes"):
        AlbertTextClassifier.from_preset(saved, labels=["a", "b", "c"])


@pytest.mark.faults
def test_wrong_input_from_python_is_one_clear_error(preset, tmp_path):
    """Issue 40 item 6 and the Python API's poor items: export(labels=) of the wrong count served
    until an unnamed class came up; [None, 1] was classified as the texts "None" and "1"; a label
    0.5 was read as 0; a lone string and fit([], []) gave TensorFlow's internals."""
    from albert_tf.utils.errors import UserError

    classifier = AlbertTextClassifier.from_preset(preset, num_classes=2, sequence_length=SEQ)
    classifier.compile(jit_compile=False)
    with pytest.raises(UserError) as error:
        classifier.export(tmp_path / "export", labels=["bad", "good", "neutral"])
    assert str(error.value) == "3 labels for 2 classes: give one name a class, in class-id order"
    assert not (tmp_path / "export").exists()
    with pytest.raises(UserError) as error:
        classifier.predict([None, 1], verbose=0)
    assert str(error.value) == "x[0] is None (NoneType), not a string: AlbertTextClassifier reads texts (str)"
    with pytest.raises(UserError) as error:
        classifier.predict((["a"], [b"b"]), verbose=0)
    assert str(error.value) == "x[1][0] is b'b' (bytes), not a string: AlbertTextClassifier reads texts (str)"
    with pytest.raises(UserError) as error:
        classifier.fit(["A gem.", "Dull."], [1, 0.5], epochs=1, verbose=0)
    assert str(error.value) == "y[1] is 0.5: a classifier's labels are class ids, the integers 0 to 1"
    with pytest.raises(UserError) as error:
        classifier.fit(["A gem.", "Dull."], [1, 2], epochs=1, verbose=0)
    assert str(error.value) == "y[1] is 2: a classifier's labels are class ids, the integers 0 to 1"
    with pytest.raises(UserError) as error:
        classifier.fit(["A gem.", "Dull."], [1], epochs=1, verbose=0)
    assert str(error.value) == "y holds 1 labels (shape [1]) for 2 texts: give one label a text"
    with pytest.raises(UserError) as error:
        classifier.fit([], [], epochs=1, verbose=0)
    assert str(error.value) == "x holds no text: nothing to train or evaluate on"
    # A lone string is a batch of one (keras-hub's preprocessors take one unbatched string); no text, no rows.
    one = classifier.predict("What a delight.", verbose=0)
    assert one.shape == (1, 2)
    np.testing.assert_allclose(one, classifier.predict(["What a delight."], verbose=0), atol=1e-6, rtol=0)
    assert classifier.predict([], verbose=0).shape == (0, 2)
    history = classifier.fit("A gem.", 1.0, epochs=1, verbose=0)  # a whole float is a class id
    assert len(history.history["loss"]) == 1
