"""A span labeler: the ALBERT encoder and one dense layer giving each position a start and an end
logit, the released SQuAD v1.1 head (`squad_utils.create_v1_model`: no dropout, weights
N(0, initializer_range) truncated, biases 0)."""

from __future__ import annotations

import keras
import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.models.encoder import AlbertEncoder
from albert_tf.layers import common
from albert_tf.models.base import AlbertConfigModel


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertSpanLabeler(AlbertConfigModel):
    """An ALBERT encoder with a start/end span head.

    Args:
        config: the encoder's `AlbertConfig` (or its dict).
        dtype: a Keras dtype policy; the outputs are float32 under any policy.

    Inputs: the encoder's dict of `input_ids`, `input_mask`, `segment_ids` [B, T].
    Outputs: `start_logits` and `end_logits` [B, T] in float32. Padding positions are not masked:
    post-processing picks spans among the context's pieces only, as the release does.

    Example:
        >>> labeler = AlbertSpanLabeler(config)
        >>> outputs = labeler({"input_ids": ids, "input_mask": mask, "segment_ids": segments})
        >>> outputs["start_logits"].shape
        TensorShape([8, 384])
    """

    def __init__(self, config: AlbertConfig | dict, **kwargs):
        super().__init__(config, **kwargs)
        self.encoder = AlbertEncoder(self.config, dtype=self.dtype_policy, name="encoder")
        self.span = common.Dense(
            2,
            kernel_initializer=common.kernel_initializer(self.config.initializer_range),
            dtype=self.dtype_policy,
            name="span",
        )

    def build(self, input_shape=None):
        self.encoder.build()
        self.span.build((None, None, self.config.hidden_size))
        self.built = True

    def call(self, inputs, training=None):
        sequence = self.encoder(inputs, training=training)["sequence_output"]
        logits = tf.cast(self.span(sequence), tf.float32)
        return {"start_logits": logits[:, :, 0], "end_logits": logits[:, :, 1]}
