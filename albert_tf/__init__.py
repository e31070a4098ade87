"""albert_tf: ALBERT (A Lite BERT) for TensorFlow 2 and Keras 3."""

import importlib

from albert_tf.config import PRESETS, AlbertConfig
from albert_tf.datasets import pretraining_dataset
from albert_tf.encoder import AlbertEncoder
from albert_tf.features import (
    classification_feature_spec,
    example_serializer,
    pretraining_feature_spec,
    serialize_example,
    to_example,
)
from albert_tf.pretrainer import AlbertPretrainer, losses_from_sums, pretraining_losses, pretraining_sums
from albert_tf.tokenizer import AlbertTokenizer, normalize_text

# Names whose modules import tensorflow_text (a slow import that most uses never need): loaded on
# first access.
_LAZY = {"AlbertGraphTokenizer": "albert_tf.graph_tokenizer"}


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
    "classification_feature_spec",
    "example_serializer",
    "losses_from_sums",
    "normalize_text",
    "pretraining_dataset",
    "pretraining_feature_spec",
    "pretraining_losses",
    "pretraining_sums",
    "serialize_example",
    "to_example",
]
