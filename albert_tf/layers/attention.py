"""Multi-head self-attention with its residual connection and post-LayerNorm."""

import keras
import tensorflow as tf

from albert_tf.layers import common

# The query-key scores [B, heads, T, S] of queries [B, T, heads, d] and keys [B, S, heads, d].
SCORES = "btnd,bsnd->bnts"


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertAttention(keras.layers.Layer):
    """Self-attention sublayer of a post-LN block: `LN(x + Dropout(Attention(x)))`.

    It is a layer of its own (not a part of the block) so that the "attention" sharing mode of
    the paper can hand one instance to every block. Scores and softmax are computed in float32
    whatever the dtype policy.

    Args:
        hidden_size: H, the width of queries, keys, values and output.
        num_heads: attention heads; H must be divisible by it.
        dropout_rate: dropout on the output before the residual.
        attention_dropout_rate: dropout on the attention probabilities.
        initializer_range: stddev of the truncated-normal kernel initializer.

    Call arguments:
        x: [B, T, H].
        attention_bias: [B, 1, 1, T] additive float32 bias, 0 on real keys and -10000 on padding.
        query_positions: optional int [B, Q]: compute only these rows of the output ([B, Q, H],
            the rows of the full output at those positions); keys and values still come from
            every row of `x`. A model that reads a few positions of its last layer (the masked-LM
            and sentence-order heads, a classifier on the first token) skips the rest's work.

    Example:
        >>> layer = AlbertAttention(hidden_size=32, num_heads=4)
        >>> layer(tf.zeros([2, 5, 32]), tf.zeros([2, 1, 1, 5])).shape
        TensorShape([2, 5, 32])
    """

    def __init__(
        self,
        hidden_size,
        num_heads,
        dropout_rate=0.0,
        attention_dropout_rate=0.0,
        initializer_range=0.02,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if hidden_size % num_heads:
            raise ValueError(f"hidden_size ({hidden_size}) must be divisible by num_heads ({num_heads})")
        self.hidden_size = hidden_size
        self.num_heads = num_heads
        self.dropout_rate = dropout_rate
        self.attention_dropout_rate = attention_dropout_rate
        self.initializer_range = initializer_range
        self.head_size = hidden_size // num_heads

        def dense(name):
            return common.Dense(
                hidden_size,
                kernel_initializer=common.kernel_initializer(initializer_range),
                dtype=self.dtype_policy,
                name=name,
            )

        self.query = dense("query")
        self.key = dense("key")
        self.value = dense("value")
        self.output_dense = dense("output")
        self.attention_dropout = keras.layers.Dropout(attention_dropout_rate, dtype=self.dtype_policy)
        self.output_dropout = keras.layers.Dropout(dropout_rate, dtype=self.dtype_policy)
        self.layer_norm = common.layer_norm(self)

    def build(self, input_shape=None):
        shape = (None, None, self.hidden_size)
        for layer in (self.query, self.key, self.value, self.output_dense):
            layer.build(shape)
        self.layer_norm.build(shape)

    def _query_key_value(self, x, rows):
        """q of `rows` [B, Q, H], k and v of `x` [B, T, H], split into heads: [B, Q or T, N, D]."""
        def heads(t):
            return tf.reshape(t, [tf.shape(t)[0], tf.shape(t)[1], self.num_heads, self.head_size])

        return heads(self.query(rows)), heads(self.key(x)), heads(self.value(x))

    def call(self, x, attention_bias, training=None, query_positions=None):
        rows = x if query_positions is None else tf.gather(x, tf.cast(query_positions, tf.int32), batch_dims=1)
        q, k, v = self._query_key_value(x, rows)
        # Scaling q before the product, not the scores after: one [B,T,H] multiply instead of [B,N,T,T].
        q = q * tf.cast(self.head_size**-0.5, q.dtype)
        scores = tf.einsum(SCORES, q, k)
        scores = tf.cast(scores, tf.float32) + tf.cast(attention_bias, tf.float32)
        probs = tf.nn.softmax(scores, axis=-1)
        probs = self.attention_dropout(tf.cast(probs, self.compute_dtype), training=training)
        context = tf.einsum("bnts,bsnd->btnd", probs, v)
        context = tf.reshape(context, tf.shape(rows))
        output = self.output_dropout(self.output_dense(context), training=training)
        return tf.cast(self.layer_norm(rows + output, training=training), self.compute_dtype)

    def get_config(self):
        config = super().get_config()
        config.update(
            hidden_size=self.hidden_size,
            num_heads=self.num_heads,
            dropout_rate=self.dropout_rate,
            attention_dropout_rate=self.attention_dropout_rate,
            initializer_range=self.initializer_range,
        )
        return config
