"""The release's SQuAD v2.0 model: an ALBERT encoder with the answerability head.

`squad_utils.create_v2_model` of the release, as a Keras model:

- start logits: one dense unit per position, masked by `p_mask` (question, [SEP] and padding get
  -1e30; [CLS] stays open: it is where "no answer" points).
- end logits conditioned on the start: each position's state concatenated with the start's state,
  dense (H, tanh), LayerNorm, dense (1). In training the gold start is used; in prediction a beam
  takes the `start_n_top` best starts and, for each, the `end_n_top` best ends.
- an answer class: [CLS]'s state and the start-probability-weighted state, dense (H, tanh),
  dropout, dense (1, no bias): the logit that the question has no answer in the window.

It lives beside the other heads (not in finetune/squad) so that every door loads and exports it:
albert-export of a SQuAD v2.0 run's output_dir (`albert_tf.serving.question_answering`) as the
fine-tuning tool does. Its loss is the task's (`finetune.squad.model.v2_loss_sums`).
"""

from __future__ import annotations

import keras
import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.models.encoder import AlbertEncoder
from albert_tf.layers import common
from albert_tf.models.base import AlbertConfigModel

_NEG = -1e30


def _masked(logits: tf.Tensor, p_mask: tf.Tensor) -> tf.Tensor:
    return logits * (1.0 - p_mask) + _NEG * p_mask


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertSquadV2(AlbertConfigModel):
    """An ALBERT encoder with the release's SQuAD v2.0 answerability head.

    Args:
        config: the encoder's `AlbertConfig` (or its dict).
        start_n_top: starts kept by the prediction beam (the release's 5).
        end_n_top: ends kept for each start (the release's 5).
        dropout: the answer-class dropout (the release's 0.1).
        dtype: a Keras dtype policy; outputs are float32 under any policy.

    Inputs: a dict of `input_ids`, `input_mask`, `segment_ids`, `p_mask` [B, T] and, to train,
    `start_positions` [B] (the end logits are then conditioned on the gold start).
    Outputs: `cls_logits` [B] and, when `start_positions` is given, `start_log_probs` and
    `end_log_probs` [B, T]; otherwise the beam: `start_top_log_probs`, `start_top_index`
    [B, start_n_top], `end_top_log_probs`, `end_top_index` [B, start_n_top * end_n_top].

    Example:
        >>> model = AlbertSquadV2(config)
        >>> beam = model({"input_ids": ids, "input_mask": mask, "segment_ids": seg, "p_mask": p})
        >>> beam["end_top_index"].shape
        TensorShape([8, 25])
    """

    config_arguments = ("start_n_top", "end_n_top", "dropout")

    def __init__(self, config: AlbertConfig | dict, start_n_top: int = 5, end_n_top: int = 5,
                 dropout: float = 0.1, **kwargs):
        super().__init__(config, **kwargs)
        if start_n_top < 1 or end_n_top < 1:
            raise ValueError(f"start_n_top and end_n_top must be positive, got {start_n_top}, {end_n_top}")
        self.start_n_top, self.end_n_top, self.dropout = start_n_top, end_n_top, dropout
        hidden = self.config.hidden_size
        init = lambda: common.kernel_initializer(self.config.initializer_range)  # noqa: E731
        policy = self.dtype_policy
        self.encoder = AlbertEncoder(self.config, dtype=policy, name="encoder")
        self.start_dense = common.Dense(1, kernel_initializer=init(), dtype=policy, name="start_logits")
        self.end_dense_0 = common.Dense(hidden, activation="tanh", kernel_initializer=init(), dtype=policy,
                                      name="end_logits_dense_0")
        self.end_layer_norm = common.layer_norm(self, name="end_logits_layer_norm")
        self.end_dense_1 = common.Dense(1, kernel_initializer=init(), dtype=policy, name="end_logits_dense_1")
        self.answer_dense_0 = common.Dense(hidden, activation="tanh", kernel_initializer=init(), dtype=policy,
                                      name="answer_class_dense_0")
        self.answer_dropout = keras.layers.Dropout(dropout, dtype=policy)
        self.answer_dense_1 = common.Dense(1, use_bias=False, kernel_initializer=init(), dtype=policy,
                                      name="answer_class_dense_1")

    def build(self, input_shape=None):
        hidden = self.config.hidden_size
        self.encoder.build()
        self.start_dense.build((None, None, hidden))
        self.end_dense_0.build((None, None, 2 * hidden))
        self.end_layer_norm.build((None, None, hidden))
        self.end_dense_1.build((None, None, hidden))
        self.answer_dense_0.build((None, 2 * hidden))
        self.answer_dense_1.build((None, hidden))
        self.built = True

    def _end_logits(self, sequence, start_states):
        """End logits [..., T] for `start_states` [B, K, H] against `sequence` [B, T, H]."""
        length = tf.shape(sequence)[1]
        k = tf.shape(start_states)[1]
        tiled_sequence = tf.tile(sequence[:, None], [1, k, 1, 1])
        tiled_starts = tf.tile(start_states[:, :, None], [1, 1, length, 1])
        hidden = self.end_dense_0(tf.concat([tiled_sequence, tiled_starts], axis=-1))
        hidden = self.end_layer_norm(hidden)
        return tf.cast(tf.squeeze(self.end_dense_1(hidden), -1), tf.float32)  # [B, K, T]

    def call(self, inputs, training=None):
        sequence = self.encoder(
            {name: inputs[name] for name in ("input_ids", "input_mask", "segment_ids")}, training=training
        )["sequence_output"]
        p_mask = tf.cast(inputs["p_mask"], tf.float32)
        start_logits = _masked(tf.cast(tf.squeeze(self.start_dense(sequence), -1), tf.float32), p_mask)
        start_log_probs = tf.nn.log_softmax(start_logits, axis=-1)
        outputs = {}
        if "start_positions" in inputs:
            positions = tf.reshape(tf.cast(inputs["start_positions"], tf.int32), [-1, 1])
            start_states = tf.gather(sequence, positions, batch_dims=1)  # [B, 1, H]
            end_logits = _masked(self._end_logits(sequence, start_states)[:, 0], p_mask)
            outputs["start_log_probs"] = start_log_probs
            outputs["end_log_probs"] = tf.nn.log_softmax(end_logits, axis=-1)
        else:
            top_log_probs, top_index = tf.math.top_k(start_log_probs, k=self.start_n_top)
            start_states = tf.gather(sequence, top_index, batch_dims=1)  # [B, K, H]
            end_logits = _masked(self._end_logits(sequence, start_states), p_mask[:, None])
            end_top_log_probs, end_top_index = tf.math.top_k(tf.nn.log_softmax(end_logits, -1), k=self.end_n_top)
            outputs["start_top_log_probs"] = top_log_probs
            outputs["start_top_index"] = top_index
            outputs["end_top_log_probs"] = tf.reshape(end_top_log_probs, [-1, self.start_n_top * self.end_n_top])
            outputs["end_top_index"] = tf.reshape(end_top_index, [-1, self.start_n_top * self.end_n_top])
        # The answer class sees [CLS] and the start-weighted state only (one logit per window).
        start_probs = tf.nn.softmax(start_logits, axis=-1)
        start_feature = tf.einsum("bth,bt->bh", tf.cast(sequence, tf.float32), start_probs)
        cls_feature = tf.cast(sequence[:, 0], tf.float32)
        features = tf.cast(tf.concat([start_feature, cls_feature], axis=-1), sequence.dtype)
        hidden = self.answer_dropout(self.answer_dense_0(features), training=training)
        outputs["cls_logits"] = tf.cast(tf.squeeze(self.answer_dense_1(hidden), -1), tf.float32)
        return outputs
