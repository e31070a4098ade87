"""Tiny configs and batches for fast tests."""

import numpy as np

from albert_tf import AlbertConfig

TINY = AlbertConfig(
    vocab_size=97,
    embedding_size=8,
    hidden_size=16,
    num_hidden_layers=2,
    num_attention_heads=2,
    intermediate_size=32,
    max_position_embeddings=32,
)


def pretraining_batch(config=TINY, batch=4, length=12, predictions=3, seed=0):
    rng = np.random.default_rng(seed)
    input_mask = np.ones((batch, length), np.int32)
    input_mask[1:, length - 3 :] = 0
    return {
        "input_ids": (rng.integers(5, config.vocab_size, (batch, length)) * input_mask).astype(np.int32),
        "input_mask": input_mask,
        "segment_ids": (np.arange(length)[None, :] >= length // 2).astype(np.int32) * input_mask,
        "masked_lm_positions": np.tile(np.arange(1, predictions + 1, dtype=np.int32), (batch, 1)),
        "masked_lm_ids": rng.integers(5, config.vocab_size, (batch, predictions)).astype(np.int32),
        "masked_lm_weights": np.ones((batch, predictions), np.float32),
        "next_sentence_labels": rng.integers(0, 2, (batch, 1)).astype(np.int32),
    }
