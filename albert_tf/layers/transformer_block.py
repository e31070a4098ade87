"""The post-LayerNorm transformer block: attention sublayer, then feed-forward sublayer."""

import keras

from albert_tf.layers.attention import AlbertAttention
from albert_tf.layers.feed_forward import AlbertFeedForward


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertTransformerBlock(keras.layers.Layer):
    """One BERT/ALBERT block: `x = LN(x + Attn(x)); x = LN(x + FFN(x))`.

    Sharing is the reuse of layer objects: the encoder reuses whole blocks for ALBERT's all-shared
    groups, and passes one `attention` (or one `feed_forward`) instance to every block for the
    paper's attention-only (FFN-only) sharing. Shared sublayers are not part of `get_config`: the
    model that shares them (the encoder) rebuilds the sharing from its own config.

    Args:
        hidden_size, num_heads, intermediate_size, hidden_act: block shape.
        dropout_rate, attention_dropout_rate, initializer_range: as in the sublayers.
        attention: an existing `AlbertAttention` to use instead of a new one (shared).
        feed_forward: an existing `AlbertFeedForward` to use instead of a new one (shared).

    Example:
        >>> block = AlbertTransformerBlock(hidden_size=32, num_heads=4, intermediate_size=128)
        >>> block(tf.zeros([2, 5, 32]), tf.zeros([2, 1, 1, 5])).shape
        TensorShape([2, 5, 32])
    """

    def __init__(
        self,
        hidden_size,
        num_heads,
        intermediate_size,
        hidden_act="gelu",
        dropout_rate=0.0,
        attention_dropout_rate=0.0,
        initializer_range=0.02,
        attention=None,
        feed_forward=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.num_heads = num_heads
        self.intermediate_size = intermediate_size
        self.hidden_act = hidden_act
        self.dropout_rate = dropout_rate
        self.attention_dropout_rate = attention_dropout_rate
        self.initializer_range = initializer_range

        self.attention = attention or AlbertAttention(
            hidden_size, num_heads, dropout_rate=dropout_rate,
            attention_dropout_rate=attention_dropout_rate, initializer_range=initializer_range,
            dtype=self.dtype_policy, name="attention",
        )
        self.feed_forward = feed_forward or AlbertFeedForward(
            hidden_size, intermediate_size, hidden_act=hidden_act, dropout_rate=dropout_rate,
            initializer_range=initializer_range, dtype=self.dtype_policy, name="feed_forward",
        )

    def build(self, input_shape=None):
        for sublayer in (self.attention, self.feed_forward):
            if not sublayer.built:
                sublayer.build(input_shape)

    def call(self, x, attention_bias, training=None, query_positions=None):
        """`query_positions` [B, Q]: only those rows are computed (see `AlbertAttention`)."""
        x = self.attention(x, attention_bias, training=training, query_positions=query_positions)
        return self.feed_forward(x, training=training)

    def get_config(self):
        config = super().get_config()
        config.update(
            hidden_size=self.hidden_size,
            num_heads=self.num_heads,
            intermediate_size=self.intermediate_size,
            hidden_act=self.hidden_act,
            dropout_rate=self.dropout_rate,
            attention_dropout_rate=self.attention_dropout_rate,
            initializer_range=self.initializer_range,
        )
        return config
