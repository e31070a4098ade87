"""Every layer and model round-trips through its config (the models through `.keras` files, presets and
SavedModels: test_model_harness.py)."""

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertEncoder, AlbertPretrainer
from albert_tf.layers import (
    AlbertAttention,
    AlbertEmbeddings,
    AlbertFeedForward,
    AlbertMaskedLMHead,
    AlbertSentenceOrderHead,
    AlbertTransformerBlock,
)
from tests.albert_tf.layer_harness import assert_config_round_trip
from tests.albert_tf.tiny import TINY, pretraining_batch

X = tf.random.stateless_normal([2, 5, 16], seed=[1, 2])
BIAS = tf.constant([[[[0.0] * 5]], [[[0.0] * 3 + [-10000.0] * 2]]])
IDS = tf.constant([[2, 7, 9, 3, 0], [2, 11, 3, 0, 0]])

LAYERS = {
    "embeddings": (
        lambda dtype: AlbertEmbeddings(97, 8, 16, max_position_embeddings=32, dropout_rate=0.1, dtype=dtype),
        lambda layer: layer(IDS, tf.zeros_like(IDS)),
    ),
    "embeddings_without_projection": (
        lambda dtype: AlbertEmbeddings(97, 16, 16, max_position_embeddings=32, dtype=dtype),
        lambda layer: layer(IDS, tf.ones_like(IDS)),
    ),
    "attention": (
        lambda dtype: AlbertAttention(16, 2, dropout_rate=0.1, attention_dropout_rate=0.1, dtype=dtype),
        lambda layer: layer(X, BIAS),
    ),
    "feed_forward": (
        lambda dtype: AlbertFeedForward(16, 32, hidden_act="relu", dtype=dtype),
        lambda layer: layer(X),
    ),
    "transformer_block": (
        lambda dtype: AlbertTransformerBlock(16, 2, 32, dtype=dtype),
        lambda layer: layer(X, BIAS),
    ),
    "mlm_head": (
        lambda dtype: AlbertMaskedLMHead(97, 8, dtype=dtype),
        lambda layer: layer(X, tf.random.stateless_normal([97, 8], seed=[3, 4])),
    ),
    "sop_head": (
        lambda dtype: AlbertSentenceOrderHead(dropout_rate=0.1, dtype=dtype),
        lambda layer: layer(X[:, 0]),
    ),
    "encoder_all_layers": (
        lambda dtype: AlbertEncoder(TINY.replace(num_hidden_groups=2), output_all_layers=True, dtype=dtype),
        lambda layer: layer({"input_ids": IDS, "input_mask": tf.cast(IDS > 0, tf.int32)}),
    ),
    "pretrainer": (
        lambda dtype: AlbertPretrainer(TINY.replace(sharing="attention"), dtype=dtype),
        lambda layer: layer(pretraining_batch()),
    ),
}


@pytest.mark.parametrize("name", sorted(LAYERS))
@pytest.mark.parametrize("dtype", ["float32", "mixed_bfloat16"])
def test_config_round_trip(name, dtype):
    make, call = LAYERS[name]
    layer = make(dtype)
    clone = assert_config_round_trip(layer, call)
    # Variables stay float32 under a mixed policy; LayerNorms compute in float32.
    assert {v.dtype for v in clone.weights} == {"float32"}
    norms = [l for l in clone._flatten_layers() if "layer_norm" in l.name]
    assert all(l.compute_dtype == "float32" for l in norms)


def test_encoder_outputs_every_block_application():
    config = TINY.replace(num_hidden_layers=4, num_hidden_groups=2, inner_group_num=3)
    outputs = AlbertEncoder(config, output_all_layers=True)({"input_ids": IDS})
    assert len(outputs["encoder_outputs"]) == 4 * 3
    np.testing.assert_array_equal(outputs["encoder_outputs"][-1], outputs["sequence_output"])


@pytest.mark.parametrize("sharing", ["all", "attention"])
def test_tf_checkpoint_holds_every_weight(sharing, tmp_path):
    config = TINY.replace(num_hidden_groups=2) if sharing == "all" else TINY.replace(sharing=sharing)
    model = AlbertPretrainer(config)
    model.build()
    path = tf.train.Checkpoint(model=model).save(str(tmp_path / "ckpt"))
    restored = AlbertPretrainer(config)
    restored.build()
    tf.train.Checkpoint(model=restored).restore(path).assert_existing_objects_matched()
    for saved, loaded in zip(model.weights, restored.weights):
        np.testing.assert_array_equal(saved.numpy(), loaded.numpy(), err_msg=saved.path)
