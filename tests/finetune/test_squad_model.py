"""The SQuAD v2.0 answerability head against a NumPy transcription of the release's equations."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from finetune.squad.model import AlbertSquadV2, v1_loss_sums, v2_loss_sums
from tests.albert_tf.tiny import TINY

B, T, K = 3, 12, 3


def _batch(seed=0):
    rng = np.random.default_rng(seed)
    input_mask = np.ones((B, T), np.int32)
    input_mask[1:, T - 3 :] = 0
    segment_ids = (np.arange(T)[None] >= 4).astype(np.int32) * input_mask
    p_mask = 1 - segment_ids
    p_mask[:, 0] = 0
    p_mask[input_mask == 0] = 1
    return {
        "input_ids": (rng.integers(5, TINY.vocab_size, (B, T)) * input_mask).astype(np.int32),
        "input_mask": input_mask,
        "segment_ids": segment_ids,
        "p_mask": p_mask.astype(np.int32),
    }


def _layer_norm(x, gamma, beta):
    mean = x.mean(-1, keepdims=True)
    var = x.var(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-12) * gamma + beta


def _log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def _reference(model, batch, start_positions=None):
    """create_v2_model's equations in NumPy, with the model's weights."""
    seq = model.encoder({k: batch[k] for k in ("input_ids", "input_mask", "segment_ids")})["sequence_output"].numpy()
    p = batch["p_mask"].astype(np.float64)
    w = lambda layer: [v.numpy().astype(np.float64) for v in layer.weights]  # noqa: E731
    ws, bs = w(model.start_dense)
    start_logits = (seq @ ws)[..., 0] + bs[0]
    start_logits = start_logits * (1 - p) - 1e30 * p
    start_log_probs = _log_softmax(start_logits)
    w0, b0 = w(model.end_dense_0)
    gamma, beta = w(model.end_layer_norm)
    w1, b1 = w(model.end_dense_1)

    def end_log_probs(start_states):  # [B, H] -> [B, T]
        x = np.concatenate([seq, np.repeat(start_states[:, None], T, 1)], -1)
        logits = (_layer_norm(np.tanh(x @ w0 + b0), gamma, beta) @ w1)[..., 0] + b1[0]
        return _log_softmax(logits * (1 - p) - 1e30 * p)

    out = {}
    if start_positions is not None:
        out["start_log_probs"] = start_log_probs
        out["end_log_probs"] = end_log_probs(seq[np.arange(B), start_positions])
    else:
        top = np.argsort(-start_log_probs, -1, kind="stable")[:, :K]
        out["start_top_index"] = top
        out["start_top_log_probs"] = np.take_along_axis(start_log_probs, top, -1)
        ends = np.stack([end_log_probs(seq[np.arange(B), top[:, k]]) for k in range(K)], 1)  # [B, K, T]
        end_top = np.argsort(-ends, -1, kind="stable")[..., :K]
        out["end_top_index"] = end_top.reshape(B, K * K)
        out["end_top_log_probs"] = np.take_along_axis(ends, end_top, -1).reshape(B, K * K)
    probs = np.exp(start_log_probs)
    a0, c0 = w(model.answer_dense_0)
    (a1,) = w(model.answer_dense_1)
    feature = np.concatenate([np.einsum("bth,bt->bh", seq, probs), seq[:, 0]], -1)
    out["cls_logits"] = (np.tanh(feature @ a0 + c0) @ a1)[:, 0]
    return out


@pytest.fixture(scope="module")
def model():
    keras.utils.set_random_seed(3)
    m = AlbertSquadV2(TINY, start_n_top=K, end_n_top=K)
    m(_batch())
    return m


def test_beam_matches_the_release_equations(model):
    batch = _batch()
    got = model(batch)
    want = _reference(model, batch)
    assert set(got) == set(want)
    for name in want:
        if name.endswith("index"):
            np.testing.assert_array_equal(got[name].numpy(), want[name])
        else:
            np.testing.assert_allclose(got[name].numpy(), want[name], rtol=1e-5, atol=1e-5)
    # No start falls on the question, [SEP] or padding: p_mask keeps them out of the beam.
    starts = got["start_top_index"].numpy()
    assert (np.take_along_axis(batch["p_mask"], starts, -1) == 0).all()


def test_training_path_conditions_the_end_on_the_gold_start(model):
    batch = _batch(1)
    positions = np.array([0, 5, 7], np.int32)
    got = model({**batch, "start_positions": positions})
    want = _reference(model, batch, positions)
    for name in ("start_log_probs", "end_log_probs", "cls_logits"):
        np.testing.assert_allclose(got[name].numpy(), want[name], rtol=1e-5, atol=1e-5)
    labels = {"start_positions": positions, "end_positions": np.array([0, 6, 9], np.int32),
              "is_impossible": np.array([1, 0, 0], np.int32)}
    sums = v2_loss_sums(got, labels, tf.constant([1.0, 1.0, 0.0]))
    rows = np.arange(2)
    span = -(want["start_log_probs"][rows, positions[:2]] + want["end_log_probs"][rows, [0, 6]]) / 2
    logits = want["cls_logits"][:2]
    bce = np.maximum(logits, 0) - logits * np.array([1.0, 0.0]) + np.log1p(np.exp(-np.abs(logits)))
    assert float(sums["loss"]) == pytest.approx(float((span + 0.5 * bce).sum()), rel=1e-5)


def test_v1_loss_is_the_mean_of_start_and_end_cross_entropies():
    start = tf.math.log(tf.constant([[0.5, 0.25, 0.25]]))
    end = tf.math.log(tf.constant([[0.1, 0.1, 0.8]]))
    sums = v1_loss_sums(start, end, {"start_positions": [0], "end_positions": [2]}, tf.constant([2.0]))
    assert float(sums["loss"]) == pytest.approx(2 * 0.5 * (np.log(2) - np.log(0.8)), rel=1e-6)


def test_config_holds_the_beam_and_dropout(model):
    # Its round trips (config, .keras, preset, SavedModel): tests/albert_tf/models/test_model_harness.py.
    assert model.get_config()["start_n_top"] == K and model.get_config()["dropout"] == 0.1


def test_outputs_stay_float32_under_mixed_bfloat16():
    model = AlbertSquadV2(TINY, start_n_top=2, end_n_top=2, dtype="mixed_bfloat16")
    out = model(_batch())
    assert all(v.dtype in (tf.float32, tf.int32) for v in out.values())
    assert out["end_top_index"].shape == (B, 4)


@pytest.mark.parametrize("version_2", [False, True])
def test_every_trainable_weight_of_the_squad_models_gets_a_gradient(version_2):
    """The heads read the sequence output only: the task freezes the unused pooler, so training
    neither warns of missing gradients nor carries optimizer slots for it."""
    from finetune.squad.task import SquadTask
    from finetune.options import FinetuneOptions

    task = SquadTask(version_2_with_negative=version_2)
    model = task.build_model(TINY, FinetuneOptions(output_dir="/nonexistent"), dtype="float32")
    batch = _batch()
    features = {**batch, "start_positions": np.array([4, 5, 0]), "end_positions": np.array([6, 5, 0]),
                "is_impossible": np.array([0, 0, 1]), "example_weight": np.ones(B, np.float32)}
    model(task._inputs(features, with_start=True))
    with tf.GradientTape() as tape:
        loss = task.loss_sums(model, features, training=True)["loss"]
    grads = tape.gradient(loss, model.trainable_variables)
    assert not [v.path for v, g in zip(model.trainable_variables, grads) if g is None]
    assert not [v.path for v in model.trainable_variables if "pooler" in v.path]
    assert [v.path for v in model.non_trainable_variables if "pooler" in v.path]  # still saved
