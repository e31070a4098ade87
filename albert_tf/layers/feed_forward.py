"""The position-wise feed-forward sublayer with its residual connection and post-LayerNorm."""

import keras
import tensorflow as tf

from albert_tf.layers import common


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertFeedForward(keras.layers.Layer):
    """Feed-forward sublayer of a post-LN block: `LN(x + Dropout(W2 act(W1 x)))`.

    A layer of its own so that the paper's "ffn" sharing mode can hand one instance to every block.

    Args:
        hidden_size: H, input and output width.
        intermediate_size: I, the inner width (4H in the released models).
        hidden_act: activation name; "gelu" is the tanh approximation, as released.
        dropout_rate: dropout on the output before the residual.
        initializer_range: stddev of the truncated-normal kernel initializer.

    Example:
        >>> AlbertFeedForward(hidden_size=32, intermediate_size=128)(tf.zeros([2, 5, 32])).shape
        TensorShape([2, 5, 32])
    """

    def __init__(
        self,
        hidden_size,
        intermediate_size,
        hidden_act="gelu",
        dropout_rate=0.0,
        initializer_range=0.02,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.intermediate_size = intermediate_size
        self.hidden_act = hidden_act
        self.dropout_rate = dropout_rate
        self.initializer_range = initializer_range

        init = common.kernel_initializer(initializer_range)
        self.intermediate = common.Dense(
            intermediate_size, activation=common.activation(hidden_act), kernel_initializer=init,
            dtype=self.dtype_policy, name="intermediate",
        )
        self.output_dense = common.Dense(
            hidden_size, kernel_initializer=init, dtype=self.dtype_policy, name="output",
        )
        self.dropout = keras.layers.Dropout(dropout_rate, dtype=self.dtype_policy)
        self.layer_norm = common.layer_norm(self)

    def build(self, input_shape=None):
        self.intermediate.build((None, None, self.hidden_size))
        self.output_dense.build((None, None, self.intermediate_size))
        self.layer_norm.build((None, None, self.hidden_size))

    def call(self, x, training=None):
        output = self.dropout(self.output_dense(self.intermediate(x)), training=training)
        return tf.cast(self.layer_norm(x + output, training=training), self.compute_dtype)

    def get_config(self):
        config = super().get_config()
        config.update(
            hidden_size=self.hidden_size,
            intermediate_size=self.intermediate_size,
            hidden_act=self.hidden_act,
            dropout_rate=self.dropout_rate,
            initializer_range=self.initializer_range,
        )
        return config
