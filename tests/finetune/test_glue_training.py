"""The GLUE fine-tuning loop under two mirrored devices: the one-device loss trajectory at the same
global batch, the same predictions, and a resume that ends where the uninterrupted run ends.

The devices are two logical CPUs, which can only be configured before TensorFlow initialises
them: the runs happen in a child process of the warm Python (tests/warm_python.py: TensorFlow
loaded, not started), of which this file is the entry point
(`python -m tests.finetune.test_glue_training <output_dir> <data_dir>`).
"""

from __future__ import annotations

import json
import os
import pathlib
import sys

import numpy as np

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
TINY_VOCAB = REPO_ROOT / "tests" / "fixtures" / "data_prep" / "tiny_vocab.model"
SEQ, BATCH, STEPS = 32, 16, 6


def test_two_mirrored_devices_follow_the_one_device_trajectory(tmp_path, small_data_dir, warm_python):
    result = warm_python.run(["-m", "tests.finetune.test_glue_training", tmp_path, small_data_dir], cwd=REPO_ROOT,
                             capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["replicas"] == 2
    # Same global batch (the two replicas' halves are the one device's batch), the loss normalised
    # by the global batch, gradients summed then clipped: the runs differ only by float summation
    # order, well below 1e-5 over these steps.
    np.testing.assert_allclose(report["mirrored"], report["one_device"], atol=1e-5, rtol=0)
    assert report["max_weight_difference"] < 1e-5
    assert np.ptp(report["one_device"]) > 1e-3  # not a constant that any two runs would share
    # Prediction gathers both replicas' rows and puts them back in file order.
    assert report["predicted"] == 408 and report["max_prediction_difference"] < 1e-5
    # A mirrored run resumed from its step-3 checkpoint reads the batches the uninterrupted one read
    # next (two per step from the one input pipeline) and ends on its weights (within 1e-5; other
    # batches would move them by ~1e-3).
    assert report["resumed"] == {"resumed_from": 3, "step": STEPS}
    assert report["resumed_weight_difference"] < 1e-5


def _options(output_dir, **changes):
    from finetune.options import FinetuneOptions

    values = dict(output_dir=str(output_dir), train_batch_size=BATCH, eval_batch_size=BATCH, max_seq_length=SEQ,
                  learning_rate=1e-3, num_train_steps=STEPS, num_warmup_steps=1, classifier_dropout=0.0,
                  save_checkpoints_steps=3, steps_per_loop=1, jit_compile=False, seed=3)
    values.update(changes)
    return FinetuneOptions(**values)


def _trajectory(run, cached, num_steps):
    from finetune import trainer

    dataset = run.distribute(trainer.dataset_fn(run, cached, for_training=True), run.per_replica_batch,
                             skip_steps=run.current_step)
    iterator = iter(dataset)
    return [run.train_steps(iterator, 1)["loss"] for _ in range(num_steps)]


def _max_difference(a, b):
    return max(float(np.max(np.abs(x.numpy() - y.numpy()))) for x, y in zip(a.model.weights, b.model.weights,
                                                                           strict=True))


def _mirrored(output_dir, data_dir):
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    from albert_tf import AlbertConfig
    from albert_tf.training import loop, strategies
    from albert_tf.tokenizers.tokenizer import AlbertTokenizer
    from finetune import trainer
    from finetune.glue import data
    from finetune.glue.task import GlueTask
    from finetune.glue.definitions import get_task

    config = AlbertConfig(vocab_size=300, embedding_size=16, hidden_size=32, num_hidden_layers=2,
                          num_attention_heads=2, intermediate_size=64, max_position_embeddings=64)
    task = get_task("MRPC")
    # The 408 dev rows: a small split that trains and predicts in seconds.
    cached = data.cache_features(task, os.path.join(data_dir, "glue"), "dev", AlbertTokenizer(TINY_VOCAB), SEQ,
                                 os.path.join(output_dir, "features"))
    one = loop.Trainer(config, GlueTask(task), _options(f"{output_dir}/one"), strategies.get_strategy("one_device"))
    mirrored = strategies.get_strategy("mirrored")
    # Without XLA: albert_tf/training/test_training.py's mirrored trajectory compiles its replicas.
    two = loop.Trainer(config, GlueTask(task), _options(f"{output_dir}/two"), mirrored)
    report = {"replicas": two.num_replicas, "one_device": _trajectory(one, cached, STEPS)}
    # Interrupted after step 3 (its checkpoint), then on to the end: the resume below starts there.
    report["mirrored"] = _trajectory(two, cached, 3)
    two.save()
    report["mirrored"] += _trajectory(two, cached, STEPS - 3)
    report["max_weight_difference"] = _max_difference(one, two)
    (outputs_one, _), (outputs_two, _) = trainer.predict(one, cached), trainer.predict(two, cached)
    outputs_one, outputs_two = outputs_one["logits"], outputs_two["logits"]
    report["predicted"] = len(outputs_two)
    report["max_prediction_difference"] = float(np.max(np.abs(outputs_one - outputs_two)))

    resumed = loop.Trainer(config, GlueTask(task), _options(f"{output_dir}/two"), mirrored)
    resumed.restore_or_initialize()
    result = trainer.train(resumed, cached)
    report["resumed"] = {"resumed_from": result["resumed_from"], "step": result["step"]}
    report["resumed_weight_difference"] = _max_difference(resumed, two)
    return report


if __name__ == "__main__":
    print(json.dumps(_mirrored(*sys.argv[1:])))
