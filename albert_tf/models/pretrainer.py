"""The ALBERT pretraining model: encoder, masked-LM head, sentence-order head, their losses."""

from __future__ import annotations

import keras
import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.models.base import AlbertConfigModel
from albert_tf.models.encoder import AlbertEncoder
from albert_tf.data.features import EXAMPLE_WEIGHT
from albert_tf.layers.mlm_head import AlbertMaskedLMHead
from albert_tf.layers.sop_head import AlbertSentenceOrderHead

LABEL_FEATURES = ("masked_lm_ids", "masked_lm_weights", "next_sentence_labels")


def pretraining_sums(features, mlm_logits, sop_logits):
    """Sums over a batch of the released losses and hits, in float32.

    Sums rather than means, so that a global batch split across replicas (or micro-batches) can be
    combined exactly: `mlm_ce` and `mlm_hits` are weighted by `masked_lm_weights`, whose sum is
    `mlm_weight`; `sop_ce` and `sop_hits` are summed over the `examples`, each weighted by its
    `example_weight` where the batch has one (0 for the rows filling up an evaluation batch).
    """
    mlm_logits = tf.cast(mlm_logits, tf.float32)
    sop_logits = tf.cast(sop_logits, tf.float32)
    ids = tf.cast(features["masked_lm_ids"], tf.int32)
    weights = tf.cast(features["masked_lm_weights"], tf.float32)
    labels = tf.reshape(tf.cast(features["next_sentence_labels"], tf.int32), [-1])

    mlm_ce = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=ids, logits=mlm_logits)
    mlm_hits = tf.cast(tf.equal(tf.argmax(mlm_logits, axis=-1, output_type=tf.int32), ids), tf.float32)
    sop_ce = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=sop_logits)
    sop_hits = tf.cast(tf.equal(tf.argmax(sop_logits, axis=-1, output_type=tf.int32), labels), tf.float32)
    if EXAMPLE_WEIGHT in features:
        examples = tf.reshape(tf.cast(features[EXAMPLE_WEIGHT], tf.float32), [-1])
    else:
        examples = tf.ones_like(sop_ce)
    return {
        "mlm_ce": tf.reduce_sum(mlm_ce * weights),
        "mlm_hits": tf.reduce_sum(mlm_hits * weights),
        "mlm_weight": tf.reduce_sum(weights),
        "sop_ce": tf.reduce_sum(sop_ce * examples),
        "sop_hits": tf.reduce_sum(sop_hits * examples),
        "examples": tf.reduce_sum(examples),
    }


# The release adds this to the sum of masked_lm_weights, so a batch without predictions gives 0.
WEIGHT_EPSILON = 1e-5


def losses_from_sums(sums, mlm_weight=None, examples=None):
    """The released losses and metrics from `pretraining_sums` (of one batch, or added up).

    MLM: the weighted cross-entropy divided by the sum of the weights (+1e-5, as released, so a
    batch without predictions gives 0); SOP: the mean cross-entropy; total loss = MLM + SOP.
    `mlm_weight` and `examples` replace the sums' own normalisers: a replica's share of a global
    batch is divided by the whole batch's, so that the replicas' shares add up to its losses.
    """
    weight = (sums["mlm_weight"] if mlm_weight is None else mlm_weight) + WEIGHT_EPSILON
    examples = sums["examples"] if examples is None else examples
    mlm_loss = sums["mlm_ce"] / weight
    sop_loss = sums["sop_ce"] / examples
    return {
        "mlm_loss": mlm_loss,
        "sop_loss": sop_loss,
        "loss": mlm_loss + sop_loss,
        "mlm_accuracy": sums["mlm_hits"] / weight,
        "sop_accuracy": sums["sop_hits"] / examples,
    }


def pretraining_losses(features, mlm_logits, sop_logits):
    """The released losses and metrics of one batch (see `losses_from_sums`)."""
    return losses_from_sums(pretraining_sums(features, mlm_logits, sop_logits))


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertPretrainer(AlbertConfigModel):
    """ALBERT with its two pretraining heads, taking the pretraining TFRecord features.

    Args:
        config: an `AlbertConfig` (or its dict).
        dtype: a Keras dtype policy; logits and losses are float32 under any policy.

    Inputs: a dict with `input_ids`, `input_mask`, `segment_ids` [B, T] and `masked_lm_positions`
    [B, P]; when `masked_lm_ids`, `masked_lm_weights` and `next_sentence_labels` are present too
    (a full pretraining record), the losses and accuracies of `pretraining_losses` are added.
    Outputs: a dict with `mlm_logits` [B, P, V] and `sop_logits` [B, 2] (and the losses).

    Example:
        >>> pretrainer = AlbertPretrainer(AlbertConfig.named("albert_base_v2"))
        >>> outputs = pretrainer(features, training=True)   # features: a batch of records
        >>> outputs["loss"], outputs["mlm_accuracy"]
    """

    preset_heads_required = True

    def __init__(self, config: AlbertConfig | dict, **kwargs):
        super().__init__(config, **kwargs)
        c = self.config
        self.encoder = AlbertEncoder(c, dtype=self.dtype_policy, name="encoder")
        self.mlm_head = AlbertMaskedLMHead(
            vocab_size=c.vocab_size,
            embedding_size=c.embedding_size,
            hidden_act=c.hidden_act,
            initializer_range=c.initializer_range,
            dtype=self.dtype_policy,
            name="predictions",
        )
        self.sop_head = AlbertSentenceOrderHead(
            initializer_range=c.initializer_range, dtype=self.dtype_policy, name="seq_relationship"
        )

    def build(self, input_shape=None):
        self.encoder.build()
        self.mlm_head.build((None, None, self.config.hidden_size))
        self.sop_head.build((None, self.config.hidden_size))
        self.built = True

    def call(self, features, training=None):
        # The heads read the last layer at the masked positions and the first token only, so the
        # encoder computes no other rows of it.
        encoded = self.encoder(
            {k: features[k] for k in ("input_ids", "input_mask", "segment_ids") if k in features},
            training=training,
            output_positions=features["masked_lm_positions"],
        )
        mlm_logits = self.mlm_head(encoded["gathered_output"], self.encoder.embeddings.embedding_table)
        sop_logits = self.sop_head(encoded["pooled_output"], training=training)
        outputs = {"mlm_logits": mlm_logits, "sop_logits": sop_logits}
        if all(k in features for k in LABEL_FEATURES):
            outputs.update(pretraining_losses(features, mlm_logits, sop_logits))
        return outputs
