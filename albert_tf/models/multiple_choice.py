"""A multiple-choice model: each choice is one encoded row; its pooled output, dropout and one dense
output give the choice's logit, and the choices of a question compete in one softmax (the
released RACE head, `race_utils.create_model`)."""

from __future__ import annotations

import keras
import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.models.classifier import add_encoder_and_head
from albert_tf.models.base import AlbertConfigModel
from albert_tf.utils.validation import require_positive_ints


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertMultipleChoice(AlbertConfigModel):
    """An ALBERT encoder with a multiple-choice head.

    Args:
        config: the encoder's `AlbertConfig` (or its dict).
        num_choices: choices per question (4 for RACE).
        dropout: dropout on the pooled output while training (0.1 as released).
        dtype: a Keras dtype policy; the outputs are float32 under any policy.

    Inputs: `input_ids`, `input_mask`, `segment_ids` of shape [B, num_choices, T], one row a choice.
    Outputs: logits [B, num_choices] in float32; their softmax is the choices' probabilities.

    Example:
        >>> model = AlbertMultipleChoice(config, num_choices=4)
        >>> logits = model({"input_ids": ids, "input_mask": mask, "segment_ids": segments})  # [B, 4]
    """

    config_arguments = ("num_choices", "dropout")

    def __init__(self, config: AlbertConfig | dict, num_choices: int = 4, dropout: float = 0.1, **kwargs):
        super().__init__(config, **kwargs)
        require_positive_ints({"num_choices": num_choices})
        self.num_choices = num_choices
        add_encoder_and_head(self, 1, dropout)  # one logit a choice

    def build(self, input_shape=None):
        self.encoder.build()
        self.classifier.build((None, self.config.hidden_size))
        self.built = True

    def call(self, inputs, training=None):
        length = tf.shape(inputs["input_ids"])[-1]
        rows = {k: tf.reshape(v, [-1, length]) for k, v in inputs.items()}
        no_positions = tf.zeros_like(rows["input_ids"][:, :0])
        pooled = self.encoder(rows, training=training, output_positions=no_positions)["pooled_output"]
        logits = self.classifier(self.output_dropout(pooled, training=training))
        return tf.cast(tf.reshape(logits, [-1, self.num_choices]), tf.float32)
