"""The encoder's own Dense and LayerNorm: Keras' layers with the same variables and outputs,
written in the forms TensorFlow's oneDNN graph rewrites run as one kernel each."""

import glob

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf.layers import common

WIDTH = 32


def keras_and_ours_layer_norm():
    reference = keras.layers.LayerNormalization(epsilon=common.LAYER_NORM_EPSILON)
    reference.build((None, None, WIDTH))
    rng = np.random.default_rng(0)
    reference.set_weights([rng.normal(1, 0.5, WIDTH), rng.normal(0, 0.5, WIDTH)])
    ours = common.LayerNorm()
    ours.build((None, None, WIDTH))
    ours.set_weights(reference.get_weights())
    return reference, ours


def rows(shape=(3, 7, WIDTH)):
    return tf.constant(np.random.default_rng(1).normal(2, 3, shape), tf.float32)


def kernel_names(fn, *args):
    """The kernels TensorFlow ran for `fn(*args)`, read from a profiler trace."""
    import tempfile

    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    fn(*args)  # traced and optimised before the trace starts
    with tempfile.TemporaryDirectory() as logdir:
        tf.profiler.experimental.start(logdir)
        fn(*args)
        tf.profiler.experimental.stop()
        space = xplane_pb2.XSpace()
        with open(glob.glob(f"{logdir}/**/*.xplane.pb", recursive=True)[0], "rb") as f:
            space.ParseFromString(f.read())
    return {
        event.name.split(":")[-1]
        for plane in space.planes
        for event in plane.event_metadata.values()
        if ":" in event.name
    }


@pytest.mark.parametrize("how", ["eager", "graph", "graph with unknown shapes", "xla", "training"])
def test_layer_norm_equals_keras_in_float32(how):
    reference, ours = keras_and_ours_layer_norm()
    x = rows()
    run = {
        "eager": lambda: ours(x),
        "graph": lambda: tf.function(lambda t: ours(t))(x),
        "graph with unknown shapes": lambda: tf.function(
            lambda t: ours(t), input_signature=[tf.TensorSpec([None, None, WIDTH])]
        )(x),
        "xla": lambda: tf.function(lambda t: ours(t), jit_compile=True)(x),
        "training": lambda: ours(x, training=True),
    }[how]
    got = run()
    assert got.dtype == tf.float32
    np.testing.assert_allclose(got, reference(x), atol=2e-6)
    # Every row normalised: mean beta-free, spread gamma-free, as LayerNorm means.
    normalised = (got.numpy() - ours.beta.numpy()) / ours.gamma.numpy()
    np.testing.assert_allclose(normalised.mean(-1), 0, atol=1e-5)
    np.testing.assert_allclose(normalised.std(-1), 1, atol=1e-4)


def test_layer_norm_keeps_a_bf16_input_in_bf16_within_its_rounding():
    reference, ours = keras_and_ours_layer_norm()
    x = tf.cast(rows(), tf.bfloat16)
    expected = reference(tf.cast(x, tf.float32)).numpy()
    for got in (ours(x), tf.function(lambda t: ours(t))(x)):
        assert got.dtype == tf.bfloat16
        got = tf.cast(got, tf.float32).numpy()
        # Output, scale and shift each round to bf16 (8 significant bits): a few units in the last place.
        np.testing.assert_allclose(got, expected, rtol=3 * 2.0**-8, atol=3 * 2.0**-8)
        assert np.abs(got - expected).max() > 0  # really bf16, not a float32 path cast at the end
    # Training computes in float32 (the policy's dtype), as Keras' layer does.
    assert ours(x, training=True).dtype == tf.float32


def test_layer_norm_trains_with_keras_gradients():
    reference, ours = keras_and_ours_layer_norm()
    x = rows()
    grads = []
    for layer in (reference, ours):
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = tf.reduce_sum(layer(x, training=True) ** 3)
        grads.append(tape.gradient(loss, [x, *layer.trainable_variables]))
    for theirs, mine in zip(*grads):
        np.testing.assert_allclose(mine, theirs, rtol=1e-5, atol=1e-4)


def test_layer_norm_config_round_trips():
    ours = common.LayerNorm(name="layer_norm", dtype="float32")
    again = common.LayerNorm.from_config(ours.get_config())
    assert (again.epsilon, again.name) == (common.LAYER_NORM_EPSILON, "layer_norm")
    assert [w.path for w in ours.weights] == [w.path for w in again.weights]


@pytest.mark.parametrize("dtype", [tf.float32, tf.bfloat16])
def test_layer_norm_runs_as_one_onednn_kernel_outside_xla(dtype):
    _, ours = keras_and_ours_layer_norm()
    dense = common.Dense(WIDTH, dtype=dtype.name)
    dense.build((None, None, WIDTH))
    # With static and with unknown shapes (a tf.function's first trace, a SavedModel's signature).
    for signature in (None, [tf.TensorSpec([None, None, WIDTH], dtype)]):
        fn = tf.function(lambda t: ours(dense(t) + t), input_signature=signature)
        kernels = kernel_names(fn, tf.cast(rows(), dtype))
        if not any(name.startswith("_Mkl") for name in kernels):
            pytest.skip("TensorFlow runs without oneDNN here (TF_ENABLE_ONEDNN_OPTS=0 or no x86)")
        assert "_MklLayerNorm" in kernels, sorted(kernels)
        assert not {"Mean", "Rsqrt", "SquaredDifference", "FusedBatchNormV3"} & kernels, sorted(kernels)
        assert not any(name.startswith("_MklNativeFusedBatchNorm") for name in kernels), sorted(kernels)


def test_dense_equals_keras_dense_with_the_same_variables():
    reference = keras.layers.Dense(8, activation="gelu", name="dense")
    reference.build((None, None, WIDTH))
    ours = common.Dense(8, activation="gelu", name="dense")
    ours.build((None, None, WIDTH))
    assert [w.path for w in ours.weights] == [w.path for w in reference.weights]
    ours.set_weights([np.random.default_rng(2).normal(size=w.shape) for w in ours.weights])
    reference.set_weights(ours.get_weights())
    x = rows()
    np.testing.assert_allclose(ours(x), reference(x), atol=1e-5)
    got = tf.function(lambda t: ours(t), input_signature=[tf.TensorSpec([None, None, WIDTH])])(x)
    assert got.shape == (3, 7, 8)
    np.testing.assert_allclose(got, reference(x), atol=1e-5)
