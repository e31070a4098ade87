"""albert_tf: ALBERT (A Lite BERT) for TensorFlow 2 and Keras 3."""

import importlib

from albert_tf.utils.backend import use_tensorflow_backend
from albert_tf.utils.quiet import quiet_tensorflow

# Before Keras loads (it chooses its backend once): TensorFlow's, whatever KERAS_BACKEND the shell
# exported for the user's other Keras work (albert_tf.utils.backend).
use_tensorflow_backend()
# Before TensorFlow loads (it reads its log level once): its C++ start-up lines ("failed call to
# cuInit", the CPU-feature notes) kept from a user of the library, as from the CLIs', unless the
# user set TF_CPP_MIN_LOG_LEVEL to show them.
quiet_tensorflow()

# Every name is loaded on first access: `import albert_tf.tokenizers.tokenizer` or `albert_tf.data.tfrecord` (what
# the data-prep workers need) must not pull in TensorFlow, which costs each process seconds and
# hundreds of MB. `albert_tf.AlbertEncoder` and `from albert_tf import AlbertEncoder` load it on first use.
_LAZY = {
    "SIZES": "albert_tf.config",
    "AlbertConfig": "albert_tf.config",
    "convert_hf": "albert_tf.presets.convert",
    "convert_preset_to_hf": "albert_tf.presets.convert",
    "convert_tf1": "albert_tf.presets.convert",
    "pretraining_dataset": "albert_tf.data.datasets",
    "AlbertEncoder": "albert_tf.models.encoder",
    "classification_feature_spec": "albert_tf.data.features",
    "example_serializer": "albert_tf.data.features",
    "multiple_choice_feature_spec": "albert_tf.data.features",
    "pretraining_feature_spec": "albert_tf.data.features",
    "serialize_example": "albert_tf.data.features",
    "to_example": "albert_tf.data.features",
    "AlbertPretrainer": "albert_tf.models.pretrainer",
    "losses_from_sums": "albert_tf.models.pretrainer",
    "pretraining_losses": "albert_tf.models.pretrainer",
    "pretraining_sums": "albert_tf.models.pretrainer",
    "AlbertTokenizer": "albert_tf.tokenizers.tokenizer",
    "normalize_text": "albert_tf.tokenizers.tokenizer",
    "AlbertGraphTokenizer": "albert_tf.tokenizers.graph_tokenizer",
    "SavedModelLayer": "albert_tf.serving.export",
    "export_encoder": "albert_tf.serving.export",
    "export_pretrainer": "albert_tf.serving.export",
    "export_saved_model": "albert_tf.serving.export",
    "AlbertTextClassifier": "albert_tf.tasks.text_classifier",
    "AlbertEntityRecognizer": "albert_tf.tasks.entity_recognizer",
    "AlbertTextPreprocessor": "albert_tf.tokenizers.preprocessor",
}


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'albert_tf' has no attribute {name!r}")


__all__ = [
    "SIZES",
    "AlbertConfig",
    "AlbertEncoder",
    "AlbertEntityRecognizer",
    "AlbertGraphTokenizer",
    "AlbertPretrainer",
    "AlbertTextClassifier",
    "AlbertTextPreprocessor",
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
