"""Keras 3 layers that build the ALBERT encoder and its pretraining heads."""

from albert_tf.layers.attention import AlbertAttention
from albert_tf.layers.embeddings import AlbertEmbeddings
from albert_tf.layers.feed_forward import AlbertFeedForward
from albert_tf.layers.mlm_head import AlbertMaskedLMHead
from albert_tf.layers.sop_head import AlbertSentenceOrderHead
from albert_tf.layers.transformer_block import AlbertTransformerBlock

__all__ = [
    "AlbertAttention",
    "AlbertEmbeddings",
    "AlbertFeedForward",
    "AlbertMaskedLMHead",
    "AlbertSentenceOrderHead",
    "AlbertTransformerBlock",
]
