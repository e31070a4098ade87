"""The ALBERT encoder: factorized embeddings, shared transformer blocks, pooler."""

from __future__ import annotations

import keras
import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.models.base import AlbertConfigModel
from albert_tf.layers import common
from albert_tf.layers.attention import AlbertAttention
from albert_tf.layers.embeddings import AlbertEmbeddings
from albert_tf.layers.feed_forward import AlbertFeedForward
from albert_tf.layers.transformer_block import AlbertTransformerBlock

# The original's additive attention mask value; exp(-10000) underflows to 0 in float32 and bf16.
MASK_BIAS = -10000.0


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertEncoder(AlbertConfigModel):
    """The ALBERT (or BERT) encoder of a config, with the config's cross-layer sharing.

    Layer `i` of `num_hidden_layers` runs, with sharing "all", the `inner_group_num` blocks of
    group `config.group_of_layer(i)`: the same block objects every time, so the variable count
    does not depend on the depth. With "attention" (or "ffn") every layer has its own block but all
    blocks hold one attention (feed-forward) sublayer; with "none" nothing is shared.

    Args:
        config: an `AlbertConfig` (or its dict).
        output_all_layers: also return `encoder_outputs`, the output of every block application
            (num_hidden_layers * inner_group_num tensors), as the original's all_encoder_layers.
        dtype: a Keras dtype policy, e.g. "mixed_bfloat16".

    Inputs: a dict with int `input_ids` [B, T] and optional `input_mask` (1 = real token; default
    all ones) and `segment_ids` (default zeros); a bare tensor is taken as `input_ids`.
    Outputs: a dict with `sequence_output` [B, T, H] and `pooled_output` [B, H] (tanh dense on the
    first token).

    Call argument `output_positions` (int [B, P], P may be 0): for a model that reads only a few
    positions of the last layer (the pretraining heads: the masked positions and the first token;
    a classifier: the first token alone). The last block then computes only those rows and the
    first token's (keys and values still see the whole sequence), and `sequence_output` is
    replaced by `gathered_output` [B, P, H], equal to `sequence_output` gathered at the
    positions; `pooled_output` is unchanged. What that saves: docs/benchmarks.md (Model).

    Example:
        >>> config = AlbertConfig(vocab_size=100, embedding_size=16, hidden_size=32,
        ...                       num_hidden_layers=2, num_attention_heads=4, intermediate_size=64)
        >>> encoder = AlbertEncoder(config)
        >>> encoder({"input_ids": tf.constant([[2, 7, 3]])})["pooled_output"].shape
        TensorShape([1, 32])
    """

    config_arguments = ("output_all_layers",)
    # What padding adds to the attention scores. Full-int8 LiteRT conversion traces with a smaller
    # one (albert_tf.serving.litert): -10000 would take the int8 range of the scores.
    attention_mask_bias = MASK_BIAS

    def __init__(self, config: AlbertConfig | dict, output_all_layers: bool = False, **kwargs):
        super().__init__(config, **kwargs)
        self.output_all_layers = output_all_layers
        c = self.config

        self.embeddings = AlbertEmbeddings(
            vocab_size=c.vocab_size,
            embedding_size=c.embedding_size,
            hidden_size=c.hidden_size,
            max_position_embeddings=c.max_position_embeddings,
            type_vocab_size=c.type_vocab_size,
            dropout_rate=c.hidden_dropout_prob,
            initializer_range=c.initializer_range,
            dtype=self.dtype_policy,
            name="embeddings",
        )
        self.blocks, self._applications = self._create_blocks()
        for block in self.blocks:
            # Keras 3 keeps layers held in a list out of tf.train.Checkpoint's object graph (its
            # TrackedList is no TF trackable): an attribute per block puts every weight in.
            setattr(self, block.name, block)
        self.pooler = common.Dense(
            c.hidden_size,
            activation="tanh",
            kernel_initializer=common.kernel_initializer(c.initializer_range),
            dtype=self.dtype_policy,
            name="pooler",
        )

    def _block(self, name, attention=None, feed_forward=None):
        c = self.config
        return AlbertTransformerBlock(
            hidden_size=c.hidden_size,
            num_heads=c.num_attention_heads,
            intermediate_size=c.intermediate_size,
            hidden_act=c.hidden_act,
            dropout_rate=c.hidden_dropout_prob,
            attention_dropout_rate=c.attention_probs_dropout_prob,
            initializer_range=c.initializer_range,
            attention=attention,
            feed_forward=feed_forward,
            dtype=self.dtype_policy,
            name=name,
        )

    def _create_blocks(self):
        """The distinct blocks, and the index of the block that each application runs, in order
        (num_hidden_layers * inner_group_num applications under "all", one per layer otherwise)."""
        c = self.config
        if c.sharing == "all":
            # Only the groups some layer runs get blocks, as in the release, whose checkpoints hold
            # no variables for the others (L = G = 22 has no group_15).
            position = {g: p for p, g in enumerate(c.used_groups)}
            blocks = [
                self._block(f"group_{g}_inner_group_{k}")
                for g in c.used_groups
                for k in range(c.inner_group_num)
            ]
            applications = tuple(
                position[c.group_of_layer(i)] * c.inner_group_num + k
                for i in range(c.num_hidden_layers)
                for k in range(c.inner_group_num)
            )
            return blocks, applications
        attention = feed_forward = None
        if c.sharing == "attention":
            attention = AlbertAttention(
                c.hidden_size, c.num_attention_heads, dropout_rate=c.hidden_dropout_prob,
                attention_dropout_rate=c.attention_probs_dropout_prob,
                initializer_range=c.initializer_range, dtype=self.dtype_policy,
                name="shared_attention",
            )
        elif c.sharing == "ffn":
            feed_forward = AlbertFeedForward(
                c.hidden_size, c.intermediate_size, hidden_act=c.hidden_act,
                dropout_rate=c.hidden_dropout_prob, initializer_range=c.initializer_range,
                dtype=self.dtype_policy, name="shared_feed_forward",
            )
        blocks = [self._block(f"layer_{i}", attention, feed_forward) for i in range(c.num_hidden_layers)]
        return blocks, tuple(range(c.num_hidden_layers))

    def build(self, input_shape=None):
        hidden_shape = (None, None, self.config.hidden_size)
        self.embeddings.build()
        for block in self.blocks:
            block.build(hidden_shape)
        self.pooler.build((None, self.config.hidden_size))
        self.built = True

    def call(self, inputs, training=None, output_positions=None):
        if output_positions is not None and self.output_all_layers:
            raise ValueError("output_positions cannot be combined with output_all_layers: the last "
                             "layer's output would be partial")
        if not isinstance(inputs, dict):
            inputs = {"input_ids": inputs}
        input_ids = tf.cast(inputs["input_ids"], tf.int32)
        input_mask = inputs.get("input_mask")
        input_mask = tf.ones_like(input_ids) if input_mask is None else tf.cast(input_mask, tf.int32)
        segment_ids = inputs.get("segment_ids")
        segment_ids = tf.zeros_like(input_ids) if segment_ids is None else tf.cast(segment_ids, tf.int32)

        attention_bias = (1.0 - tf.cast(input_mask[:, None, None, :], tf.float32)) * self.attention_mask_bias
        last_rows = None
        if output_positions is not None:
            first_token = tf.zeros_like(input_ids[:, :1])
            last_rows = tf.concat([first_token, tf.cast(output_positions, tf.int32)], axis=1)
        x = self.embeddings(input_ids, segment_ids, training=training)
        encoder_outputs = []
        last = len(self._applications) - 1
        for step, index in enumerate(self._applications):
            rows = last_rows if step == last else None
            x = self.blocks[index](x, attention_bias, training=training, query_positions=rows)
            encoder_outputs.append(x)
        outputs = {"pooled_output": self.pooler(x[:, 0])}
        if output_positions is None:
            outputs["sequence_output"] = x
        else:
            outputs["gathered_output"] = x[:, 1:]
        if self.output_all_layers:
            outputs["encoder_outputs"] = encoder_outputs
        return outputs
