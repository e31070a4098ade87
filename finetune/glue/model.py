"""The GLUE classifier and where its encoder weights come from, under their GLUE names.

The classifier is `albert_tf.heads.AlbertClassifier` (the released `run_classifier.py` head);
the encoder's initialisation is `albert_tf.presets.loader`, shared by every task.
"""

from __future__ import annotations

from albert_tf.heads.classifier import AlbertClassifier, classifier_sums
from albert_tf.presets.loader import (
    WORD_EMBEDDINGS,
    _encoder_key,
    check_vocab_size,
    init_config,
    init_vocab_size,
    initialize_encoder,
    is_saved_model,
    load_encoder_saved_model,
    saved_model_vocab_file,
)

# The GLUE classifier is the shared classifier head.
GlueClassifier = AlbertClassifier

__all__ = [
    "WORD_EMBEDDINGS",
    "GlueClassifier",
    "_encoder_key",
    "check_vocab_size",
    "classifier_sums",
    "init_config",
    "init_vocab_size",
    "initialize_encoder",
    "is_saved_model",
    "load_encoder_saved_model",
    "saved_model_vocab_file",
]
