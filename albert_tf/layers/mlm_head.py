"""The masked-LM head, whose decoder is the transposed input word-embedding table."""

import keras
import tensorflow as tf

from albert_tf.layers import common


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertMaskedLMHead(keras.layers.Layer):
    """Predicts the vocabulary at masked positions: dense H -> E, activation, LayerNorm, then
    logits = h . word_embeddings^T + bias (`cls/predictions` in the original checkpoints).

    The decoder weights are not owned here: the embedding table is passed at call time, so the
    tie to the input embeddings cannot be lost when the layer is serialized or rebuilt.

    Args:
        vocab_size: V, the width of the output bias.
        embedding_size: E, the width of the transform (the embedding table's second dimension).
        hidden_act: activation of the transform; "gelu" is the tanh approximation, as released.
        initializer_range: stddev of the truncated-normal kernel initializer.

    Call arguments:
        masked_output: [B, P, H] the encoder's output at the P positions to predict (its
            `gathered_output` for `output_positions=masked_lm_positions`).
        embedding_table: [V, E] the input word embeddings.
    Returns float32 logits [B, P, V].

    Example:
        >>> head = AlbertMaskedLMHead(vocab_size=100, embedding_size=16)
        >>> head(tf.zeros([2, 3, 32]), tf.zeros([100, 16])).shape
        TensorShape([2, 3, 100])
    """

    def __init__(self, vocab_size, embedding_size, hidden_act="gelu", initializer_range=0.02, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.embedding_size = embedding_size
        self.hidden_act = hidden_act
        self.initializer_range = initializer_range
        self.transform = common.Dense(
            embedding_size,
            activation=common.activation(hidden_act),
            kernel_initializer=common.kernel_initializer(initializer_range),
            dtype=self.dtype_policy,
            name="transform",
        )
        self.layer_norm = common.layer_norm(self)

    def build(self, masked_output_shape=None, *args):
        self.transform.build((None, None, masked_output_shape[-1]))
        self.layer_norm.build((None, None, self.embedding_size))
        self.output_bias = self.add_weight(name="output_bias", shape=(self.vocab_size,), initializer="zeros")

    def call(self, masked_output, embedding_table):
        hidden = self.layer_norm(self.transform(masked_output))
        logits = tf.einsum(
            "bpe,ve->bpv",
            tf.cast(hidden, self.compute_dtype),
            tf.cast(embedding_table, self.compute_dtype),
        )
        return tf.cast(logits, tf.float32) + tf.cast(self.output_bias, tf.float32)

    def get_config(self):
        config = super().get_config()
        config.update(
            vocab_size=self.vocab_size,
            embedding_size=self.embedding_size,
            hidden_act=self.hidden_act,
            initializer_range=self.initializer_range,
        )
        return config
