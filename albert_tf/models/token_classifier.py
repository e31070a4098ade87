"""A token classifier: the ALBERT encoder's sequence output, dropout, one dense layer per token.

The head of Hugging Face's `AlbertForTokenClassification` (dropout `classifier_dropout_prob`, then
a linear layer over every position), initialised as the release's heads are: weights
N(0, initializer_range) truncated, biases 0. Named-entity recognition (finetune/ner) trains it
with the label of each word on the word's first piece.
"""

from __future__ import annotations

import keras
import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.models.base import AlbertConfigModel
from albert_tf.models.classifier import add_encoder_and_head
from albert_tf.utils.validation import require_positive_ints


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertTokenClassifier(AlbertConfigModel):
    """An ALBERT encoder with a per-token classification head: sequence output -> dropout -> dense.

    Args:
        config: the encoder's `AlbertConfig` (or its dict).
        num_classes: the tags (for named entities in BIO: "O" and a B- and I- tag per type).
        dropout: dropout on the sequence output while training (0.1, Hugging Face's
            `classifier_dropout_prob`).
        dtype: a Keras dtype policy; the logits are float32 under any policy.

    Inputs: the encoder's dict of `input_ids`, `input_mask`, `segment_ids` [B, T].
    Outputs: logits [B, T, num_classes] in float32 (padding positions are not masked: the loss
    and the readers of the tags skip them).

    Example:
        >>> tagger = AlbertTokenClassifier(AlbertConfig.named("albert_base_v2"), num_classes=13)
        >>> logits = tagger({"input_ids": ids, "input_mask": mask, "segment_ids": segments})
    """

    config_arguments = ("num_classes", "dropout")

    def __init__(self, config: AlbertConfig | dict, num_classes: int, dropout: float = 0.1, **kwargs):
        super().__init__(config, **kwargs)
        require_positive_ints({"num_classes": num_classes})
        self.num_classes = num_classes
        add_encoder_and_head(self, num_classes, dropout)
        # The head reads the sequence output: the pooler gets no gradient (Keras would warn at every
        # step). Frozen, it is still saved and exported (Hugging Face's token classifier has none).
        self.encoder.pooler.trainable = False

    def build(self, input_shape=None):
        self.encoder.build()
        self.classifier.build((None, None, self.config.hidden_size))
        self.built = True

    def call(self, inputs, training=None):
        sequence = self.encoder(inputs, training=training)["sequence_output"]
        logits = self.classifier(self.output_dropout(sequence, training=training))
        return tf.cast(logits, tf.float32)


def token_classifier_sums(logits, label_ids, weights) -> dict[str, tf.Tensor]:
    """Sums over a batch, in float32, of each row's mean cross-entropy over its labelled positions
    (`label_ids` >= 0; -1: not scored, the pieces after a word's first, [CLS], [SEP], padding) and
    of each row's token accuracy there, weighted by `weights` (0 for filler rows); a row without a
    labelled position counts 0. Sums, so that replicas' shares of a global batch add up exactly."""
    logits = tf.cast(logits, tf.float32)
    labels = tf.cast(label_ids, tf.int32)
    scored = tf.cast(labels >= 0, tf.float32)
    safe = tf.maximum(labels, 0)
    loss = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=safe, logits=logits) * scored
    hits = tf.cast(tf.equal(tf.argmax(logits, axis=-1, output_type=tf.int32), safe), tf.float32) * scored
    count = tf.reduce_sum(scored, axis=1)
    denominator = tf.maximum(count, 1.0)
    weights = tf.reshape(tf.cast(weights, tf.float32), [-1])
    return {
        "loss": tf.reduce_sum(tf.reduce_sum(loss, axis=1) / denominator * weights),
        "hits": tf.reduce_sum(tf.reduce_sum(hits, axis=1) / denominator * weights),
    }
