"""The release's LAMB, AdamW, schedule and gradient accumulation against NumPy transcriptions."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf.training import optimization
from tests.helpers import release_learning_rate


def released_update(weights, grads, m, v, lr, *, excluded, layer_adaptation, wd=0.01,
                    beta_1=0.9, beta_2=0.999, eps=1e-6):
    """One step of google-research/albert lamb_optimizer.py (and BERT's AdamWeightDecay), in NumPy."""
    m = beta_1 * m + (1 - beta_1) * grads
    v = beta_2 * v + (1 - beta_2) * grads**2
    update = m / (np.sqrt(v) + eps)
    if not excluded:
        update = update + wd * weights
    ratio = 1.0
    if layer_adaptation and not excluded:
        w_norm, u_norm = np.linalg.norm(weights), np.linalg.norm(update)
        ratio = w_norm / u_norm if w_norm > 0 and u_norm > 0 else 1.0
    return weights - ratio * lr * update, m, v


def tiny_model():
    inputs = keras.Input((4,))
    x = keras.layers.LayerNormalization(name="embeddings_layer_norm")(inputs)
    x = keras.layers.Dense(3, name="dense")(x)
    x = keras.layers.LayerNormalization(name="ln")(x)  # a LayerNorm whose name does not say so
    outputs = keras.layers.Dense(2, use_bias=False, name="head")(x)
    return keras.Model(inputs, outputs)


def test_exclusion_rule_names_every_layer_norm_and_bias():
    model = tiny_model()
    excluded = {v.path: optimization.is_excluded_variable(v) for v in model.trainable_variables}
    assert excluded == {
        "embeddings_layer_norm/gamma": True,
        "embeddings_layer_norm/beta": True,
        "dense/kernel": False,
        "dense/bias": True,
        "ln/gamma": True,
        "ln/beta": True,
        "head/kernel": False,
    }
    # The release's own checkpoint names.
    release = tf.Variable(1.0, name="bert/embeddings/LayerNorm/beta_x")
    assert optimization.is_excluded_variable(release)


@pytest.mark.parametrize("name,adaptation", [("lamb", True), ("adamw_release", False)])
def test_two_updates_match_numpy_transcription_of_release(name, adaptation):
    model = tiny_model()
    rng = np.random.default_rng(0)
    for v in model.trainable_variables:
        v.assign(rng.normal(size=v.shape).astype("float32"))
    # A zero weight vector must take the ratio-1 branch rather than divide by zero.
    model.get_layer("head").kernel.assign(np.zeros((3, 2), "float32"))
    optimizer = optimization.create_optimizer(name, 0.1, num_train_steps=10, num_warmup_steps=0,
                                              clip_norm=None)
    variables = model.trainable_variables
    weights = [v.numpy().astype("float64") for v in variables]
    m = [np.zeros_like(w) for w in weights]
    s = [np.zeros_like(w) for w in weights]
    for step in range(2):
        grads = [rng.normal(size=w.shape).astype("float32") for w in weights]
        lr = 0.1 * (1 - (step + 1) / 10)  # update k uses the rate at step k, as in the release
        optimizer.apply([tf.constant(g) for g in grads], variables)
        for i, v in enumerate(variables):
            weights[i], m[i], s[i] = released_update(
                weights[i], grads[i].astype("float64"), m[i], s[i], lr,
                excluded=optimization.is_excluded_variable(v), layer_adaptation=adaptation)
    for v, w in zip(variables, weights):
        np.testing.assert_allclose(v.numpy(), w, atol=1e-6, rtol=0, err_msg=v.path)
    # The update really differs between excluded and decayed variables: not equal by coincidence.
    assert not np.allclose(model.get_layer("head").kernel.numpy(), 0)


def test_update_k_uses_the_release_rate_at_step_k_warmup_included():
    """The release's update k (from 1) reads the rate at global step k: the first is nonzero."""
    model = tiny_model()
    rng = np.random.default_rng(5)
    for v in model.trainable_variables:
        v.assign(rng.normal(size=v.shape).astype("float32"))
    optimizer = optimization.create_optimizer("adamw_release", 0.05, num_train_steps=20, num_warmup_steps=5,
                                              clip_norm=None)
    variables = model.trainable_variables
    weights = [v.numpy().astype("float64") for v in variables]
    m = [np.zeros_like(w) for w in weights]
    s = [np.zeros_like(w) for w in weights]
    for k in range(1, 21):
        lr = release_learning_rate(k, 0.05, 20, 5)
        assert float(optimizer.learning_rate) == pytest.approx(lr, rel=1e-6, abs=1e-12)
        grads = [rng.normal(size=w.shape).astype("float32") for w in weights]
        before = variables[0].numpy()
        optimizer.apply([tf.constant(g) for g in grads], variables)
        if k == 1:  # lr(1) = 0.05 / 5: the first update moves the weights
            assert not np.allclose(variables[0].numpy(), before)
        for i, v in enumerate(variables):
            weights[i], m[i], s[i] = released_update(
                weights[i], grads[i].astype("float64"), m[i], s[i], lr,
                excluded=optimization.is_excluded_variable(v), layer_adaptation=False)
        for v, w in zip(variables, weights):
            np.testing.assert_allclose(v.numpy(), w, atol=2e-6, rtol=0, err_msg=f"update {k} {v.path}")


def test_gradients_are_clipped_to_global_norm_one():
    var = tf.Variable(np.full([4], 2.0, "float32"), name="w")
    optimizer = optimization.AdamWeightDecay(learning_rate=1.0, weight_decay_rate=0.0, clip_norm=1.0)
    grad = np.array([3.0, 4.0, 0.0, 0.0], "float32")  # norm 5
    optimizer.apply([tf.constant(grad)], [var])
    clipped = grad / 5.0
    m, v = 0.1 * clipped, 0.001 * clipped**2
    expected = 2.0 - m / (np.sqrt(v) + 1e-6)
    np.testing.assert_allclose(var.numpy(), expected, atol=1e-6)


def test_schedule_warms_up_then_decays_on_absolute_step():
    schedule = optimization.WarmupPolynomialDecay(1e-3, num_train_steps=1000, num_warmup_steps=100)
    values = [float(schedule(s)) for s in (0, 50, 99, 100, 500, 1000, 1200)]
    np.testing.assert_allclose(
        values, [0.0, 5e-4, 9.9e-4, 9e-4, 5e-4, 0.0, 0.0], rtol=1e-6, atol=1e-12)
    clone = optimization.WarmupPolynomialDecay.from_config(schedule.get_config())
    assert float(clone(250)) == pytest.approx(7.5e-4)
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(schedule))
    assert float(restored(100)) == pytest.approx(9e-4)


def test_optimizer_round_trips_through_config():
    optimizer = optimization.create_optimizer("lamb", 1e-3, 100, 10, weight_decay=0.02)
    clone = optimization.Lamb.from_config(optimizer.get_config())
    assert (clone.weight_decay_rate, clone.clip_norm, clone.epsilon) == (0.02, 1.0, 1e-6)
    with pytest.raises(ValueError, match="lamb, adamw"):
        optimization.create_optimizer("sgd", 1e-3, 100, 10)


def test_accumulated_micro_batches_give_the_update_of_one_large_batch():
    def run(num_micro_batches):
        keras.utils.set_random_seed(1)
        model = tiny_model()
        optimizer = optimization.create_optimizer("lamb", 0.01, 10, 0)
        rng = np.random.default_rng(3)
        x = tf.constant(rng.normal(size=(8, 4)).astype("float32"))
        y = tf.constant(rng.normal(size=(8, 2)).astype("float32"))

        def loss_fn(batch):
            # Normalised by the whole batch of 8, so the micro-batch losses add up to its mean.
            err = model(batch["x"]) - batch["y"]
            return tf.reduce_sum(err**2) / 8.0, {"n": tf.constant(float(batch["x"].shape[0]))}

        step = tf.function(lambda: optimization.accumulate_gradients(
            loss_fn, model.trainable_variables, {"x": x, "y": y}, num_micro_batches))
        for _ in range(3):
            grads, loss, aux = step()
            optimizer.apply(grads, model.trainable_variables)
        return [v.numpy() for v in model.trainable_variables], float(loss), float(aux["n"])

    whole, loss_whole, n_whole = run(1)
    accumulated, loss_acc, n_acc = run(4)
    assert n_whole == n_acc == 8.0
    assert loss_acc == pytest.approx(loss_whole, abs=1e-5)
    for a, b in zip(whole, accumulated):
        np.testing.assert_allclose(a, b, atol=1e-5)


def test_micro_batches_must_divide_the_batch():
    with pytest.raises(ValueError, match="per-replica batch of 6 .* grad_accum_steps=4"):
        optimization.split_micro_batches({"x": tf.zeros([6, 2])}, 4)


def test_clipping_uses_the_norm_of_the_dense_embedding_gradient():
    # Row 0 looked up twice: the dense gradient is [[6, 8], [0, 0]] (norm 10), although the slices
    # [[3, 4], [3, 4]] have norm sqrt(50). Clipping must scale by 1/10.
    table = tf.Variable(np.zeros([2, 2], "float32"), name="word_embeddings")
    optimizer = optimization.AdamWeightDecay(learning_rate=1.0, weight_decay_rate=0.0, clip_norm=1.0,
                                             beta_1=0.0, beta_2=0.0, epsilon=1.0)
    slices = tf.IndexedSlices(tf.constant([[3.0, 4.0], [3.0, 4.0]]), tf.constant([0, 0]), tf.constant([2, 2]))
    optimizer.apply([slices], [table])
    clipped = np.array([[0.6, 0.8], [0.0, 0.0]])
    # beta 0: m = g, v = g^2, update = g / (|g| + 1).
    np.testing.assert_allclose(table.numpy(), -clipped / (np.abs(clipped) + 1.0), atol=1e-6)
