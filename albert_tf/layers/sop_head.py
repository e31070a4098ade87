"""The sentence-order (SOP) / next-sentence (NSP) classifier on the pooled output."""

import keras
import tensorflow as tf

from albert_tf.layers import common


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertSentenceOrderHead(keras.layers.Layer):
    """Two-way classifier on the pooled [CLS] output (`cls/seq_relationship` in the checkpoints).

    For SOP label 0 means the segments are in their original order and 1 that they are swapped;
    the same head serves BERT's NSP (0 = actual next, 1 = random document) for ablations.

    Args:
        num_classes: 2 for SOP/NSP.
        dropout_rate: dropout on the pooled output (0 in the released pretraining).
        initializer_range: stddev of the truncated-normal kernel initializer.
    Returns float32 logits [B, num_classes].

    Example:
        >>> AlbertSentenceOrderHead()(tf.zeros([3, 32])).shape
        TensorShape([3, 2])
    """

    def __init__(self, num_classes=2, dropout_rate=0.0, initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.num_classes = num_classes
        self.dropout_rate = dropout_rate
        self.initializer_range = initializer_range
        self.dropout = keras.layers.Dropout(dropout_rate, dtype=self.dtype_policy)
        self.classifier = common.Dense(
            num_classes,
            kernel_initializer=common.kernel_initializer(initializer_range),
            dtype=self.dtype_policy,
            name="seq_relationship",
        )

    def build(self, pooled_output_shape=None):
        self.classifier.build((None, pooled_output_shape[-1]))

    def call(self, pooled_output, training=None):
        return tf.cast(self.classifier(self.dropout(pooled_output, training=training)), tf.float32)

    def get_config(self):
        config = super().get_config()
        config.update(
            num_classes=self.num_classes,
            dropout_rate=self.dropout_rate,
            initializer_range=self.initializer_range,
        )
        return config
