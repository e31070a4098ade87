"""A sentence (pair) classifier: the ALBERT encoder, its pooled output, dropout, a dense layer.

The head is the released `run_classifier.py`'s: dropout 0.1 on the pooled output, then a dense
layer of `num_classes` outputs initialised N(0, initializer_range) truncated, biases 0. With
`num_classes=1` it is a regressor (STS-B): its one output is the score, trained with the mean
squared error as released.
"""

from __future__ import annotations

import keras
import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.models.encoder import AlbertEncoder
from albert_tf.layers import common
from albert_tf.models.base import AlbertConfigModel
from albert_tf.utils.validation import require_positive_ints


def check_dropout(dropout: float):
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"dropout must be in [0, 1), got {dropout!r}")


def add_encoder_and_head(model: AlbertConfigModel, outputs: int, dropout: float) -> None:
    """The encoder and the released head on `model` (dropout checked): `encoder`, `output_dropout`
    (dropout on what the head reads) and `classifier`, a dense layer of `outputs` outputs
    initialised N(0, initializer_range) truncated, biases 0; the classifiers of sentences, of tokens
    and of choices (one output each) differ only in what they feed it."""
    check_dropout(dropout)
    model.dropout = dropout
    model.encoder = AlbertEncoder(model.config, dtype=model.dtype_policy, name="encoder")
    model.output_dropout = keras.layers.Dropout(dropout, dtype=model.dtype_policy, name="dropout")
    model.classifier = common.Dense(
        outputs,
        kernel_initializer=common.kernel_initializer(model.config.initializer_range),
        dtype=model.dtype_policy,
        name="classifier",
    )


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertClassifier(AlbertConfigModel):
    """An ALBERT encoder with a classification head: pooled output -> dropout -> dense.

    Args:
        config: the encoder's `AlbertConfig` (or its dict).
        num_classes: classes of the task; 1 for a regression task (STS-B), whose output is the score.
        dropout: dropout on the pooled output while training (0.1 as released).
        dtype: a Keras dtype policy; the outputs are float32 under any policy.

    Inputs: the encoder's dict of `input_ids`, `input_mask`, `segment_ids` [B, T].
    Outputs: logits [B, num_classes] in float32 (the score in [B, 1] for regression).

    Example:
        >>> classifier = AlbertClassifier(AlbertConfig.named("albert_base_v2"), num_classes=2)
        >>> logits = classifier({"input_ids": ids, "input_mask": mask, "segment_ids": segments})
    """

    config_arguments = ("num_classes", "dropout")

    def __init__(self, config: AlbertConfig | dict, num_classes: int, dropout: float = 0.1, **kwargs):
        super().__init__(config, **kwargs)
        require_positive_ints({"num_classes": num_classes})
        self.num_classes = num_classes
        add_encoder_and_head(self, num_classes, dropout)

    @property
    def is_regression(self) -> bool:
        return self.num_classes == 1

    def build(self, input_shape=None):
        self.encoder.build()
        self.classifier.build((None, self.config.hidden_size))
        self.built = True

    def call(self, inputs, training=None):
        # Only the first token of the last layer is read: the encoder computes no other row of it.
        no_positions = tf.zeros_like(inputs["input_ids"][:, :0])
        pooled = self.encoder(inputs, training=training, output_positions=no_positions)["pooled_output"]
        logits = self.classifier(self.output_dropout(pooled, training=training))
        return tf.cast(logits, tf.float32)


def classifier_sums(logits, label_ids, weights, regression: bool) -> dict[str, tf.Tensor]:
    """Sums over a batch, in float32, of the released loss and of the hits.

    Sums rather than means, so that replicas' shares of a global batch add up exactly. `loss` is
    the cross-entropy (the squared error of the score for regression) weighted by `weights`
    (the filler rows of the last evaluation batch count 0); `hits` counts correct argmaxes (0 for
    regression); `examples` is the sum of the weights. Any logits [B, K] with labels [B] fit, the
    multiple-choice head's too.
    """
    logits = tf.cast(logits, tf.float32)
    weights = tf.reshape(tf.cast(weights, tf.float32), [-1])
    if regression:
        scores = tf.reshape(logits, [-1])
        per_example = tf.square(scores - tf.reshape(tf.cast(label_ids, tf.float32), [-1]))
        hits = tf.zeros_like(per_example)
    else:
        labels = tf.reshape(tf.cast(label_ids, tf.int32), [-1])
        per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
        hits = tf.cast(tf.equal(tf.argmax(logits, axis=-1, output_type=tf.int32), labels), tf.float32)
    return {
        "loss": tf.reduce_sum(per_example * weights),
        "hits": tf.reduce_sum(hits * weights),
        "examples": tf.reduce_sum(weights),
    }
