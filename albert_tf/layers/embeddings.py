"""Factorized embeddings: V x E word pieces plus positions and segments, projected E -> H."""

import keras
import tensorflow as tf

from albert_tf.layers import common


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertEmbeddings(keras.layers.Layer):
    """Sums word, position and token-type embeddings of width E, normalises, projects to H.

    The projection (`embedding_hidden_mapping_in` in the original checkpoints) is what makes the
    embeddings cost V*E + E*H instead of V*H; it is absent when E == H (BERT-style configs).
    Ids outside the vocabulary, segment ids outside `type_vocab_size` and sequences longer than
    `max_position_embeddings` raise an error instead of reading garbage (the checks are asserts, so
    XLA compiles them away: validate data before a compiled run).

    Args:
        vocab_size, embedding_size, hidden_size, max_position_embeddings, type_vocab_size: sizes.
        dropout_rate: dropout after LayerNorm.
        initializer_range: stddev of the truncated-normal initializer.

    Example:
        >>> layer = AlbertEmbeddings(vocab_size=100, embedding_size=16, hidden_size=32)
        >>> layer(tf.constant([[2, 5, 3]]), tf.constant([[0, 0, 0]])).shape
        TensorShape([1, 3, 32])
    """

    def __init__(
        self,
        vocab_size,
        embedding_size,
        hidden_size,
        max_position_embeddings=512,
        type_vocab_size=2,
        dropout_rate=0.0,
        initializer_range=0.02,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.vocab_size = vocab_size
        self.embedding_size = embedding_size
        self.hidden_size = hidden_size
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_size = type_vocab_size
        self.dropout_rate = dropout_rate
        self.initializer_range = initializer_range

        init = common.kernel_initializer(initializer_range)
        self.word_embeddings = keras.layers.Embedding(
            vocab_size, embedding_size, embeddings_initializer=init, dtype=self.dtype_policy,
            name="word_embeddings",
        )
        self.token_type_embeddings = keras.layers.Embedding(
            type_vocab_size, embedding_size, embeddings_initializer=init, dtype=self.dtype_policy,
            name="token_type_embeddings",
        )
        self.layer_norm = common.layer_norm(self)
        self.dropout = keras.layers.Dropout(dropout_rate, dtype=self.dtype_policy)
        self.projection = (
            common.Dense(
                hidden_size, kernel_initializer=init, dtype=self.dtype_policy,
                name="embedding_hidden_mapping_in",
            )
            if embedding_size != hidden_size
            else None
        )

    def build(self, input_shape=None):
        self.word_embeddings.build()
        self.token_type_embeddings.build()
        self.position_embeddings = self.add_weight(
            name="position_embeddings",
            shape=(self.max_position_embeddings, self.embedding_size),
            initializer=common.kernel_initializer(self.initializer_range),
        )
        self.layer_norm.build((None, None, self.embedding_size))
        if self.projection is not None:
            self.projection.build((None, None, self.embedding_size))

    @property
    def embedding_table(self):
        """The V x E word-embedding variable, which the masked-LM head reuses as its decoder."""
        return self.word_embeddings.embeddings

    def _check_inputs(self, input_ids, segment_ids):
        seq_length = input_ids.shape[1]
        if seq_length is not None and seq_length > self.max_position_embeddings:
            raise ValueError(
                f"sequence length {seq_length} exceeds max_position_embeddings "
                f"({self.max_position_embeddings})"
            )
        checks = [
            tf.debugging.assert_less_equal(
                tf.shape(input_ids)[1], self.max_position_embeddings,
                message=f"sequence length exceeds max_position_embeddings ({self.max_position_embeddings})",
            ),
            tf.debugging.assert_non_negative(input_ids, message="input_ids must be >= 0"),
            tf.debugging.assert_less(
                input_ids, tf.cast(self.vocab_size, input_ids.dtype),
                message=f"input_ids must be < vocab_size ({self.vocab_size})",
            ),
            tf.debugging.assert_non_negative(segment_ids, message="segment_ids must be >= 0"),
            tf.debugging.assert_less(
                segment_ids, tf.cast(self.type_vocab_size, segment_ids.dtype),
                message=f"segment_ids must be < type_vocab_size ({self.type_vocab_size})",
            ),
        ]
        with tf.control_dependencies(checks):
            return tf.identity(input_ids), tf.identity(segment_ids)

    def call(self, input_ids, segment_ids, training=None):
        input_ids, segment_ids = self._check_inputs(input_ids, segment_ids)
        seq_length = tf.shape(input_ids)[1]
        positions = tf.cast(self.position_embeddings[:seq_length], self.compute_dtype)
        x = self.word_embeddings(input_ids) + self.token_type_embeddings(segment_ids) + positions
        x = self.layer_norm(x, training=training)
        x = self.dropout(x, training=training)
        if self.projection is not None:
            x = self.projection(x)
        return tf.cast(x, self.compute_dtype)

    def get_config(self):
        config = super().get_config()
        config.update(
            vocab_size=self.vocab_size,
            embedding_size=self.embedding_size,
            hidden_size=self.hidden_size,
            max_position_embeddings=self.max_position_embeddings,
            type_vocab_size=self.type_vocab_size,
            dropout_rate=self.dropout_rate,
            initializer_range=self.initializer_range,
        )
        return config
