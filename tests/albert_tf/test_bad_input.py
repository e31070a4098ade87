"""Out-of-range inputs give a clear error, not silent garbage."""

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertEncoder
from tests.albert_tf.tiny import TINY


@pytest.fixture(scope="module")
def encoder():
    return AlbertEncoder(TINY)


def test_ids_outside_the_vocabulary(encoder):
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"input_ids must be < vocab_size \(97\)"):
        encoder({"input_ids": tf.constant([[2, 97, 3]])})
    with pytest.raises(tf.errors.InvalidArgumentError, match="input_ids must be >= 0"):
        encoder({"input_ids": tf.constant([[2, -1, 3]])})


def test_segment_ids_outside_the_type_vocabulary(encoder):
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"segment_ids must be < type_vocab_size \(2\)"):
        encoder({"input_ids": tf.constant([[2, 5, 3]]), "segment_ids": tf.constant([[0, 2, 1]])})


def test_sequence_longer_than_max_position_embeddings(encoder):
    too_long = np.full((1, 33), 5, np.int32)
    with pytest.raises(ValueError, match=r"sequence length 33 exceeds max_position_embeddings \(32\)"):
        encoder({"input_ids": too_long})
    # With a dynamic length the check runs in the graph.
    fn = tf.function(lambda ids: encoder({"input_ids": ids}),
                     input_signature=[tf.TensorSpec([None, None], tf.int32)])
    with pytest.raises(tf.errors.InvalidArgumentError, match="exceeds max_position_embeddings"):
        fn(too_long)
    assert fn(too_long[:, :32])["sequence_output"].shape == (1, 32, 16)


def test_int64_inputs_from_tfrecords_are_accepted(encoder):
    ids = tf.constant([[2, 5, 3]], tf.int64)
    out = encoder({"input_ids": ids, "input_mask": tf.ones_like(ids), "segment_ids": tf.zeros_like(ids)})
    np.testing.assert_allclose(out["sequence_output"], encoder({"input_ids": tf.cast(ids, tf.int32)})["sequence_output"])
