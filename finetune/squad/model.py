"""The release's SQuAD losses: v2.0's (the answerability head's) and v1.1's.

v2.0's model, `albert_tf.models.AlbertSquadV2` (`squad_utils.create_v2_model`), lives beside the
other heads so that albert-export loads and serves it too; its name is kept here for the callers
that import it from the task. v1.1's is `albert_tf.models.AlbertSpanLabeler`.

The v2.0 loss is the release's: mean of the start and end cross-entropies plus half the sigmoid
cross-entropy of the answer class against `is_impossible`.
"""

from __future__ import annotations

import tensorflow as tf

from albert_tf.models.squad_v2 import AlbertSquadV2

__all__ = ["AlbertSquadV2", "v1_loss_sums", "v2_loss_sums"]


def v2_loss_sums(outputs, features, weights) -> dict[str, tf.Tensor]:
    """Weighted sums over the batch of the release's v2.0 loss and its parts (float32)."""
    def picked(log_probs, positions):
        return -tf.gather(log_probs, tf.reshape(tf.cast(positions, tf.int32), [-1, 1]), batch_dims=1)[:, 0]

    start_loss = picked(outputs["start_log_probs"], features["start_positions"])
    end_loss = picked(outputs["end_log_probs"], features["end_positions"])
    labels = tf.cast(tf.reshape(features["is_impossible"], [-1]), tf.float32)
    class_loss = tf.nn.sigmoid_cross_entropy_with_logits(labels=labels, logits=outputs["cls_logits"])
    weights = tf.cast(weights, tf.float32)
    per_row = 0.5 * (start_loss + end_loss) + 0.5 * class_loss
    return {
        "loss": tf.reduce_sum(per_row * weights),
        "span_loss": tf.reduce_sum(0.5 * (start_loss + end_loss) * weights),
        "answer_class_loss": tf.reduce_sum(class_loss * weights),
    }


def v1_loss_sums(start_logits, end_logits, features, weights) -> dict[str, tf.Tensor]:
    """Weighted sums of the release's v1.1 loss: the mean of the start and end cross-entropies."""
    start = tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=tf.cast(tf.reshape(features["start_positions"], [-1]), tf.int32), logits=start_logits)
    end = tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=tf.cast(tf.reshape(features["end_positions"], [-1]), tf.int32), logits=end_logits)
    return {"loss": tf.reduce_sum(0.5 * (start + end) * tf.cast(weights, tf.float32))}
