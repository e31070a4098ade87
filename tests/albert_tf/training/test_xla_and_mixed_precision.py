"""The forward pass and a full train step compile with XLA (what TPUs need) and run under
mixed_bfloat16 with float32 losses."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertPretrainer
from tests.albert_tf.tiny import TINY, pretraining_batch

CONFIG = TINY.replace(num_hidden_groups=2, hidden_dropout_prob=0.1)


def train_step_fn(model, optimizer, jit_compile):
    @tf.function(jit_compile=jit_compile)
    def step(batch):
        with tf.GradientTape() as tape:
            outputs = model(batch, training=True)
        grads = tape.gradient(outputs["loss"], model.trainable_variables)
        optimizer.apply(grads, model.trainable_variables)
        return outputs
    return step


def test_forward_compiles_with_xla_and_matches_eager():
    model = AlbertPretrainer(CONFIG)
    batch = pretraining_batch(CONFIG)
    eager = model(batch)
    compiled_fn = tf.function(lambda b: model(b), jit_compile=True)
    compiled = compiled_fn(batch)
    # The graph really went through XLA: its HLO can be dumped.
    assert "HloModule" in compiled_fn.experimental_get_compiler_ir(batch)(stage="hlo")
    for key in ("mlm_logits", "sop_logits", "loss", "mlm_accuracy"):
        np.testing.assert_allclose(compiled[key], eager[key], atol=1e-5, err_msg=key)


@pytest.mark.parametrize("policy", ["float32", "mixed_bfloat16"])
def test_xla_train_step_learns(policy):
    model = AlbertPretrainer(CONFIG, dtype=policy)
    batch = pretraining_batch(CONFIG)
    model(batch)
    before = [v.numpy().copy() for v in model.trainable_variables]
    # Its variables made before the step, as the Trainer makes them: a step whose first call creates
    # them is traced twice (3.6 s more CPU of the 11 s its XLA compile takes here).
    optimizer = keras.optimizers.Adam(1e-2)
    optimizer.build(model.trainable_variables)
    step = train_step_fn(model, optimizer, jit_compile=True)
    losses = []
    for _ in range(20):
        outputs = step(batch)
        losses.append(float(outputs["loss"]))
        for key in ("loss", "mlm_loss", "sop_loss", "mlm_logits", "sop_logits"):
            assert outputs[key].dtype == tf.float32, key
    assert all(np.isfinite(losses))
    assert losses[-1] < 0.7 * losses[0]  # one fixed batch: it must be memorised
    changed = [np.abs(v.numpy() - b).max() > 0 for v, b in zip(model.trainable_variables, before)]
    assert all(changed)
    assert {v.dtype for v in model.trainable_variables} == {"float32"}


def test_mixed_bfloat16_computes_in_bf16_and_stays_close_to_float32():
    batch = pretraining_batch(CONFIG)
    full = AlbertPretrainer(CONFIG)
    mixed = AlbertPretrainer(CONFIG, dtype="mixed_bfloat16")
    full(batch)
    mixed(batch)
    mixed.set_weights(full.get_weights())
    assert mixed.encoder(batch)["sequence_output"].dtype == tf.bfloat16
    a, b = full(batch), mixed(batch)
    assert b["loss"].dtype == tf.float32
    # bf16 keeps 8 bits of mantissa: losses agree to about 1%.
    np.testing.assert_allclose(b["loss"], a["loss"], rtol=2e-2)


def test_bfloat16_inference_policy_holds_bf16_weights_and_gives_the_mixed_outputs():
    # "bfloat16" holds the matmul and embedding weights in bf16 (no cast each time the shared
    # layers run), LayerNorm's in float32: the same numbers as mixed_bfloat16 with the same weights.
    batch = pretraining_batch(CONFIG)
    full = AlbertPretrainer(CONFIG)
    mixed = AlbertPretrainer(CONFIG, dtype="mixed_bfloat16")
    bf16 = AlbertPretrainer(CONFIG, dtype="bfloat16")
    for model in (full, mixed, bf16):
        model(batch)
    mixed.set_weights(full.get_weights())
    bf16.set_weights(full.get_weights())
    dtypes = {v.path: v.dtype for v in bf16.weights}
    layer_norms = {path for path in dtypes if "layer_norm" in path.lower()}
    assert layer_norms and all(dtypes[path] == "float32" for path in layer_norms)
    assert {dtypes[path] for path in dtypes if path not in layer_norms} == {"bfloat16"}
    one, other = mixed.encoder(batch)["sequence_output"], bf16.encoder(batch)["sequence_output"]
    assert other.dtype == tf.bfloat16
    np.testing.assert_array_equal(tf.cast(other, tf.float32), tf.cast(one, tf.float32))
    np.testing.assert_allclose(bf16(batch)["loss"], full(batch)["loss"], rtol=2e-2)


def test_losses_equal_a_numpy_transcription_of_the_release():
    model = AlbertPretrainer(CONFIG)
    batch = pretraining_batch(CONFIG)
    batch["masked_lm_weights"][0, 2] = 0.0  # a padded prediction slot must not count
    out = model(batch)
    logits = np.asarray(out["mlm_logits"], np.float64)
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    ce = -np.take_along_axis(log_probs, batch["masked_lm_ids"][..., None], -1)[..., 0]
    w = batch["masked_lm_weights"]
    expected_mlm = (ce * w).sum() / (w.sum() + 1e-5)
    sop = np.asarray(out["sop_logits"], np.float64)
    sop_lp = sop - np.log(np.exp(sop).sum(-1, keepdims=True))
    labels = batch["next_sentence_labels"][:, 0]
    expected_sop = -sop_lp[np.arange(len(labels)), labels].mean()
    np.testing.assert_allclose(out["mlm_loss"], expected_mlm, rtol=1e-5)
    np.testing.assert_allclose(out["sop_loss"], expected_sop, rtol=1e-5)
    np.testing.assert_allclose(out["loss"], expected_mlm + expected_sop, rtol=1e-5)
    hits = (logits.argmax(-1) == batch["masked_lm_ids"]) * w
    np.testing.assert_allclose(out["mlm_accuracy"], hits.sum() / (w.sum() + 1e-5), rtol=1e-5)
    np.testing.assert_allclose(out["sop_accuracy"], (sop.argmax(-1) == labels).mean(), rtol=1e-6)
