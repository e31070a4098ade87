"""`output_positions`: the last block computes only the rows the heads read, with the same results."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertEncoder, AlbertPretrainer
from albert_tf.models.pretrainer import pretraining_losses
from tests.albert_tf.tiny import TINY, pretraining_batch

CONFIGS = {
    "all_shared": TINY.replace(num_hidden_layers=3),
    "groups_inner_groups": TINY.replace(num_hidden_layers=4, num_hidden_groups=2, inner_group_num=2),
    "not_shared": TINY.replace(num_hidden_layers=3, sharing="none"),
}
# Repeated positions, padding positions (the first rows have 3 padded tokens) and position 0.
POSITIONS = np.array([[3, 1, 8, 11], [0, 5, 5, 9], [2, 2, 7, 10], [11, 4, 1, 0]], np.int32)


def _inputs():
    batch = pretraining_batch(batch=4, length=12)
    return {k: tf.constant(batch[k]) for k in ("input_ids", "input_mask", "segment_ids")}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_gathered_output_equals_the_full_output_at_the_positions(name):
    keras.utils.set_random_seed(0)
    # A wide but not saturating init: at 0.5, the 8 block applications of groups_inner_groups make
    # every row of a sequence alike (attention collapses), which would hide a wrong gather.
    encoder = AlbertEncoder(CONFIGS[name].replace(initializer_range=0.1))
    inputs = _inputs()
    full = encoder(inputs)
    for positions in (POSITIONS, POSITIONS[:, :0]):
        part = encoder(inputs, output_positions=positions)
        assert set(part) == {"gathered_output", "pooled_output"}
        assert part["gathered_output"].shape == positions.shape + (16,)
        expected = tf.gather(full["sequence_output"], positions, batch_dims=1)
        np.testing.assert_allclose(part["gathered_output"], expected, atol=1e-6, rtol=0)
        np.testing.assert_allclose(part["pooled_output"], full["pooled_output"], atol=1e-6, rtol=0)
    # Not vacuous: the rows of each sequence differ from each other, so a wrong row would show.
    assert np.std(full["sequence_output"].numpy(), axis=1).mean() > 0.3


def test_only_the_last_block_runs_on_fewer_rows():
    encoder = AlbertEncoder(CONFIGS["groups_inner_groups"])
    encoder.build()
    rows = []
    for block in encoder.blocks:
        feed_forward = block.feed_forward
        original = feed_forward.call
        feed_forward.call = lambda x, *args, _original=original, **kwargs: (
            rows.append(x.shape[1]) or _original(x, *args, **kwargs))
    encoder(_inputs(), output_positions=POSITIONS)
    # 4 layers x 2 inner blocks; the last application computes the 4 positions and the first token.
    assert rows == [12] * 7 + [5]


def test_gradients_equal_those_of_the_full_computation():
    model = AlbertPretrainer(CONFIGS["groups_inner_groups"].replace(initializer_range=0.5))
    batch = {k: tf.constant(v) for k, v in pretraining_batch(batch=4, length=12, predictions=4).items()}
    batch["masked_lm_positions"] = tf.constant(POSITIONS)
    model(batch)

    def full_loss():
        # What the pretrainer computed before output_positions: every row, then gather.
        encoded = model.encoder({k: batch[k] for k in ("input_ids", "input_mask", "segment_ids")})
        hidden = tf.gather(encoded["sequence_output"], batch["masked_lm_positions"], batch_dims=1)
        mlm = model.mlm_head(hidden, model.encoder.embeddings.embedding_table)
        sop = model.sop_head(encoded["pooled_output"])
        return pretraining_losses(batch, mlm, sop)["loss"]

    gradients = []
    for loss_fn in (lambda: model(batch)["loss"], full_loss):
        with tf.GradientTape() as tape:
            loss = loss_fn()
        gradients.append((loss, tape.gradient(loss, model.trainable_variables)))
    (loss, got), (expected_loss, expected) = gradients
    np.testing.assert_allclose(loss, expected_loss, rtol=1e-6)
    assert len(got) == len(expected) and all(g is not None for g in got)
    for variable, g, e in zip(model.trainable_variables, got, expected):
        np.testing.assert_allclose(tf.convert_to_tensor(g), tf.convert_to_tensor(e), atol=1e-5, rtol=1e-5,
                                   err_msg=variable.path)


def test_output_positions_with_every_layer_output_is_refused():
    encoder = AlbertEncoder(TINY, output_all_layers=True)
    with pytest.raises(ValueError, match="output_positions cannot be combined with output_all_layers"):
        encoder(_inputs(), output_positions=POSITIONS)
