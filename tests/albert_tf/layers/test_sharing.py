"""Cross-layer sharing is the reuse of layer objects: variables do not grow with depth, and a
shared kernel's gradient is the sum of the gradients of its uses."""

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertEncoder
from tests.albert_tf.tiny import TINY


def n_trainable(config):
    encoder = AlbertEncoder(config)
    encoder.build()
    return len(encoder.trainable_variables), encoder.count_params()


@pytest.mark.parametrize("groups, inner", [(1, 1), (2, 1), (2, 3)])
def test_all_shared_variables_do_not_depend_on_depth(groups, inner):
    counts = {n_trainable(TINY.replace(num_hidden_layers=layers, num_hidden_groups=groups, inner_group_num=inner))
              for layers in (2, 4, 8)}
    assert len(counts) == 1
    # ... and groups and inner groups do add blocks: 16 variables per block.
    base_vars, _ = n_trainable(TINY)
    assert counts.pop()[0] == base_vars + 16 * (groups * inner - 1)


def test_partial_sharing_counts():
    variables = {s: n_trainable(TINY.replace(num_hidden_layers=6, sharing=s))[0]
                 for s in ("all", "attention", "ffn", "none")}
    # A block = attention (8 dense + 2 LN variables) + feed-forward (4 dense + 2 LN variables).
    assert variables["none"] - variables["all"] == 5 * 16
    assert variables["attention"] - variables["all"] == 5 * 6
    assert variables["ffn"] - variables["all"] == 5 * 10


def test_shared_kernel_gradient_is_the_sum_of_its_uses():
    layers = 3
    # A wide initializer, so that attention is far from uniform and each use's gradient is large.
    config = TINY.replace(num_hidden_layers=layers, initializer_range=0.5)
    shared = AlbertEncoder(config)
    unshared = AlbertEncoder(config.replace(sharing="none"))
    shared.build()
    unshared.build()
    unshared.embeddings.set_weights(shared.embeddings.get_weights())
    unshared.pooler.set_weights(shared.pooler.get_weights())
    for block in unshared.blocks:
        block.set_weights(shared.blocks[0].get_weights())

    ids = tf.constant([[2, 9, 14, 3, 40, 3], [2, 8, 3, 21, 0, 0]])
    inputs = {"input_ids": ids, "input_mask": tf.cast(ids > 0, tf.int32)}
    probe = tf.random.stateless_normal([2, 6, 16], seed=[7, 7])

    def grads(encoder, variables):
        with tf.GradientTape() as tape:
            outputs = encoder(inputs)
            loss = tf.reduce_sum(outputs["sequence_output"] * probe) + tf.reduce_sum(outputs["pooled_output"])
        return loss, tape.gradient(loss, variables)

    loss_shared, (g_shared,) = grads(shared, [shared.blocks[0].attention.query.kernel])
    loss_unshared, g_each = grads(unshared, [b.attention.query.kernel for b in unshared.blocks])
    np.testing.assert_allclose(loss_shared, loss_unshared, rtol=1e-6)
    # Every use contributes something different, and the shared gradient collects them all.
    assert all(np.abs(g).max() > 1e-4 for g in g_each)
    assert np.abs(g_each[0] - g_each[1]).max() > 1e-4
    np.testing.assert_allclose(g_shared, tf.add_n(g_each), rtol=1e-6, atol=1e-6)  # float32: 27 is 2e-6 from its neighbours
