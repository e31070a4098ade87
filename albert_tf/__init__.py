"""albert_tf: ALBERT (A Lite BERT) for TensorFlow 2 and Keras 3."""

import importlib

from albert_tf.config import PRESETS, AlbertConfig
from albert_tf.convert import convert_hf, convert_preset_to_hf, convert_tf1, load_preset_model
from albert_tf.datasets import pretraining_dataset
from albert_tf.encoder import AlbertEncoder
from albert_tf.features import (
    classification_feature_spec,
    example_serializer,
    multiple_choice_feature_spec,
    pretraining_feature_spec,
    serialize_example,
    to_example,
)
from albert_tf.pretrainer import AlbertPretrainer, losses_from_sums, pretraining_losses, pretraining_sums
from albert_tf.tokenizer import AlbertTokenizer, normalize_text

# Names whose modules import tensorflow_text (a slow import that most uses never need): loaded on
# first access.
_LAZY = {
    "AlbertGraphTokenizer": "albert_tf.graph_tokenizer",
    "SavedModelLayer": "albert_tf.export",
    "export_encoder": "albert_tf.export",
    "export_pretrainer": "albert_tf.export",
    "export_saved_model": "albert_tf.export",
}


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'albert_tf' has no attribute {name!r}")


__all__ = [
    "PRESETS",
    "AlbertConfig",
    "AlbertEncoder",
    "AlbertGraphTokenizer",
    "AlbertPretrainer",
    "AlbertTokenizer",
    "SavedModelLayer",
    "classification_feature_spec",
    "convert_hf",
    "convert_preset_to_hf",
    "convert_tf1",
    "example_serializer",
    "export_encoder",
    "export_pretrainer",
    "export_saved_model",
    "load_preset_model",
    "losses_from_sums",
    "multiple_choice_feature_spec",
    "normalize_text",
    "pretraining_dataset",
    "pretraining_feature_spec",
    "pretraining_losses",
    "pretraining_sums",
    "serialize_example",
    "to_example",
]
