"""Every model class passes the harness (tests/albert_tf/layer_harness.py), as keras-hub's
TestCase.run_*_test: config round trip, `.keras` file, float32 outputs under mixed bfloat16,
preset round trip, SavedModel; and each task model's `.backbone` is its encoder."""

import pathlib

import keras
import pytest

from albert_tf import AlbertEncoder, AlbertPretrainer
from albert_tf.models import AlbertClassifier, AlbertMultipleChoice, AlbertSpanLabeler, AlbertTokenClassifier
from albert_tf.tasks.entity_recognizer import AlbertEntityRecognizer
from albert_tf.tasks.text_classifier import AlbertTextClassifier
from albert_tf.tokenizers.preprocessor import AlbertTextPreprocessor
from finetune.squad.model import AlbertSquadV2
from tests.albert_tf import layer_harness as harness
from tests.albert_tf.tiny import TINY, pretraining_batch

VOCAB = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "data_prep" / "tiny_vocab.model"  # 300 pieces
CONFIG = TINY.replace(vocab_size=300)
LENGTH = 12
BATCH = pretraining_batch(CONFIG, batch=4, length=LENGTH)
ENCODER_INPUTS = {k: BATCH[k] for k in ("input_ids", "input_mask", "segment_ids")}
CHOICES = {k: v.reshape(2, 2, LENGTH) for k, v in ENCODER_INPUTS.items()}  # 2 questions of 2 choices
SQUAD_INPUTS = {**ENCODER_INPUTS, "p_mask": 1 - ENCODER_INPUTS["segment_ids"]}


def _text_classifier(dtype):
    classifier = AlbertClassifier(CONFIG, 2, dtype=dtype)
    return AlbertTextClassifier(classifier, AlbertTextPreprocessor(str(VOCAB), LENGTH), labels=["no", "yes"])


def _entity_recognizer(dtype):
    tagger = AlbertTokenClassifier(CONFIG, 5, dtype=dtype)
    return AlbertEntityRecognizer(tagger, AlbertTextPreprocessor(str(VOCAB), LENGTH), labels=["PER", "LOC"],
                                  doc_stride=3)


# name: (make(dtype), inputs, constructor arguments from_preset must be given back)
MODELS = {
    "AlbertEncoder": (lambda dtype: AlbertEncoder(CONFIG.replace(num_hidden_groups=2), output_all_layers=True,
                                                  dtype=dtype), ENCODER_INPUTS, {"output_all_layers": True}),
    "AlbertPretrainer": (lambda dtype: AlbertPretrainer(CONFIG.replace(sharing="attention"), dtype=dtype), BATCH, {}),
    "AlbertClassifier": (lambda dtype: AlbertClassifier(CONFIG, 3, dropout=0.2, dtype=dtype), ENCODER_INPUTS, {}),
    "AlbertSpanLabeler": (lambda dtype: AlbertSpanLabeler(CONFIG, dtype=dtype), ENCODER_INPUTS, {}),
    "AlbertTokenClassifier": (lambda dtype: AlbertTokenClassifier(CONFIG, 5, dropout=0.2, dtype=dtype),
                              ENCODER_INPUTS, {}),
    "AlbertMultipleChoice": (lambda dtype: AlbertMultipleChoice(CONFIG, num_choices=2, dtype=dtype), CHOICES, {}),
    "AlbertSquadV2": (lambda dtype: AlbertSquadV2(CONFIG, start_n_top=2, end_n_top=3, dtype=dtype), SQUAD_INPUTS, {}),
    "AlbertTextClassifier": (_text_classifier, ENCODER_INPUTS, {}),
    "AlbertEntityRecognizer": (_entity_recognizer, ENCODER_INPUTS, {}),
}
RAW_TEXT_TASKS = ("AlbertTextClassifier", "AlbertEntityRecognizer")  # their vocabulary is their preprocessor's
NAMES = sorted(MODELS)


_BUILT = {}


def _model(name, dtype="float32"):
    """The model of `name` and its inputs, made once for the module (seeded) and called once, which
    builds it: each check below reads it and changes nothing in it, so they share it instead of
    building and calling a model of their own."""
    if (name, dtype) not in _BUILT:
        keras.utils.set_random_seed(0)
        make, inputs, _ = MODELS[name]
        model = make(dtype)
        model(inputs, training=False)
        _BUILT[name, dtype] = model, inputs
    return _BUILT[name, dtype]


def _call(inputs):
    return lambda model: model(inputs, training=False)


def test_every_model_class_is_checked():
    from albert_tf.models.base import AlbertConfigModel

    classes = {cls.__name__ for cls in AlbertConfigModel.__subclasses__()} | set(RAW_TEXT_TASKS)
    assert classes <= set(MODELS), classes - set(MODELS)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("dtype", ["float32", "mixed_bfloat16"])
def test_config_round_trip_and_float32_outputs(name, dtype):
    model, inputs = _model(name, dtype)
    clone = harness.assert_config_round_trip(model, _call(inputs))
    if name != "AlbertEncoder":  # a backbone gives its compute dtype; task models give float32
        harness.assert_float32_outputs(clone(inputs, training=False))


@pytest.mark.parametrize("name", NAMES)
def test_keras_file_round_trip(name, tmp_path):
    model, inputs = _model(name)
    harness.assert_keras_file_round_trip(model, _call(inputs), tmp_path / f"{name}.keras")


@pytest.mark.parametrize("name", NAMES)
def test_preset_round_trip(name, tmp_path):
    model, inputs = _model(name)
    arguments = MODELS[name][2]
    if name in RAW_TEXT_TASKS:
        save = lambda m: m.save_to_preset(tmp_path / "preset")  # noqa: E731
    else:
        save = lambda m: m.save_to_preset(tmp_path / "preset", VOCAB)  # noqa: E731
    harness.assert_preset_round_trip(model, _call(inputs), save, lambda folder: type(model).from_preset(folder, **arguments))


@pytest.mark.parametrize("name", NAMES)
def test_saved_model_round_trip(name, tmp_path):
    model, inputs = _model(name)
    harness.assert_saved_model_round_trip(model, inputs, tmp_path / "saved_model")


@pytest.mark.parametrize("name", [n for n in NAMES if n != "AlbertEncoder"])
def test_a_task_models_backbone_is_its_encoder(name):
    model, inputs = _model(name)  # called once: built
    inner = {"AlbertTextClassifier": "classifier", "AlbertEntityRecognizer": "tagger"}.get(name)
    encoder = getattr(model, inner).encoder if inner else model.encoder
    assert model.backbone is encoder
    assert not any("backbone" in w.path for w in model.weights)
