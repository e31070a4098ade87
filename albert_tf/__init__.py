"""albert_tf: ALBERT (A Lite BERT) for TensorFlow 2 and Keras 3."""

from albert_tf.config import PRESETS, AlbertConfig
from albert_tf.encoder import AlbertEncoder
from albert_tf.pretrainer import AlbertPretrainer, losses_from_sums, pretraining_losses, pretraining_sums

__all__ = [
    "PRESETS",
    "AlbertConfig",
    "AlbertEncoder",
    "AlbertPretrainer",
    "losses_from_sums",
    "pretraining_losses",
    "pretraining_sums",
]
