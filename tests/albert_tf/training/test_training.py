"""The pretraining loop under one device, two mirrored devices and two workers; resume after
SIGKILL; the errors it owes on bad input.

Strategies with several CPU devices or processes run in child processes (this file is also their
entry point: `python -m tests.albert_tf.training.test_training <mode> <args>`), because logical devices can
only be configured before TensorFlow initialises them, and workers are processes: children of the
warm Python (tests/warm_python.py), which has TensorFlow loaded but not initialised. The mirrored
child trains the mirrored run alone: the one-device run it must follow is made here, once, and is
the learning test's run too.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import pathlib
import re
import shutil
import signal
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.utils import patterns
from albert_tf.training import pretraining
from albert_tf.training import replicas
from albert_tf.checkpoints import run_folder
from albert_tf.training import loop
from albert_tf.checkpoints.weights import model_weights
from albert_tf.models.pretrainer import pretraining_sums
from tests.albert_tf.training.paused_pretrain import pause_env
from tests.helpers import LOOP_CONFIG as CONFIG
from tests.helpers import PRETRAINING_PREDICTIONS as PREDICTIONS
from tests.helpers import PRETRAINING_SEQ as SEQ
from tests.helpers import (ReservedPorts, cli_flags, console_script, loop_options as options,
                           random_dataset_fn, run_weights as weights, write_random_records as write_records)
from tests.warm_python import DEVNULL, PIPE

REPO_ROOT = pathlib.Path(__file__).resolve().parents[3]
# A 120-piece vocabulary (CONFIG has 128 ids): pretraining exports its encoder only with one.
VOCAB = REPO_ROOT / "tests" / "fixtures" / "export" / "tiny_spm.model"


def trajectory(run, num_steps, dataset_fn=None):
    """The losses of `num_steps` single updates from the run's step on the data it would read."""
    dataset = run.distribute(dataset_fn or random_dataset_fn(), run.per_replica_batch, skip_steps=run.current_step)
    iterator = iter(dataset)
    return [run.train_steps(iterator, 1)["loss"] for _ in range(num_steps)]


@contextlib.contextmanager
def transpiled_functions():
    """The package's functions (albert_tf, finetune) that autograph transpiles in the block, by module
    and name. Every conversion asks the transpiler, also where an earlier one in this process is
    cached, so the list does not depend on what the process traced before."""
    from tensorflow.python.autograph.pyct import transpiler

    found, transform = [], transpiler.PyToPy.transform

    def spy(self, fn, user_context):
        module = getattr(fn, "__module__", "") or ""
        if module.split(".")[0] in ("albert_tf", "finetune"):
            found.append(f"{module}.{fn.__qualname__}")
        return transform(self, fn, user_context)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(transpiler.PyToPy, "transform", spy)
        yield found


def cli_options(flags):
    """The PretrainingOptions the CLI builds from `flags`, for an in-process run of the same job."""
    values = dict(f[2:].split("=", 1) for f in flags if "=" in f)
    return pretraining.PretrainingOptions(
        output_dir=values["output_dir"], input_file=values["input_file"], train_batch_size=8,
        max_seq_length=SEQ, max_predictions_per_seq=PREDICTIONS, learning_rate=2e-2,
        num_train_steps=int(values["num_train_steps"]), num_warmup_steps=2, save_checkpoints_steps=2,
        steps_per_loop=1, seed=7, jit_compile=False,
    )


# ---- in-process: one replica -------------------------------------------------------------------


def test_loop_loss_is_the_pretrainer_loss(one_device):
    run = one_device["run"]  # whatever its step: the loss is a function of the weights it has
    features = next(iter(random_dataset_fn()(tf.distribute.InputContext(), 8)))
    expected = run.model(features, training=True)
    sums = pretraining_sums(features, expected["mlm_logits"], expected["sop_logits"])
    loss = sums["mlm_ce"] / (sums["mlm_weight"] + 1e-5) + sums["sop_ce"] / sums["examples"]
    np.testing.assert_allclose(float(loss), float(expected["loss"]), rtol=1e-6)


@pytest.fixture(scope="module")
def one_device(tmp_path_factory):
    """A one-device run of the loop's default options after 5 steps: its losses, its weights and
    its evaluation of 17 records, the mirrored run's reference; and the run itself, which
    test_training_learns_and_accumulation_gives_the_same_updates takes on (the values kept here
    are copies: they stay those of step 5); and the package's functions that autograph transpiled
    meanwhile."""
    folder = tmp_path_factory.mktemp("one_device")
    with transpiled_functions() as transpiled:
        run = loop.Trainer(CONFIG, pretraining.PretrainingTask(), options(folder / "run"))
        losses = trajectory(run, 5)
        records = [write_records(folder / "eval.tfrecord", 17, seed=3)]
        evaluation = run.evaluate(run.distribute(pretraining.file_dataset_fn(records, run.options, is_training=False),
                                                 run.per_replica_eval_batch))
    return {"run": run, "losses": losses, "weights": weights(run), "evaluation": evaluation,
            "transpiled": transpiled}


def test_training_and_evaluation_are_traced_as_written(one_device):
    # Autograph's transpiling of the loop, the steps and the task's functions was 1.2 s of CPU in
    # every training process; the evaluation's reader (albert_tf.data.datasets) was transpiled too.
    assert one_device["transpiled"] == []


def test_input_pipelines_are_traced_as_written(tmp_path):
    from albert_tf.data.datasets import pretraining_dataset
    from albert_tf.data.features import pretraining_feature_spec, serialize_example
    from finetune import inputs
    from finetune.cache import CachedFeatures, spec_to_json

    files = [write_records(tmp_path / f"train-{i}.tfrecord", 8, seed=i) for i in range(2)]
    spec = {name: tf.io.FixedLenFeature([SEQ], tf.int64) for name in inputs.SEQUENCE_INPUTS}
    path = tmp_path / "features.tfrecord"
    with tf.io.TFRecordWriter(str(path)) as writer:
        for length in range(1, 9):
            writer.write(serialize_example({name: [1] * length + [0] * (SEQ - length) for name in spec}, spec))
    cached = CachedFeatures(path=str(path), task="toy", split="dev", max_seq_length=SEQ, spec=spec_to_json(spec),
                            num_records=8, num_examples=8)
    with transpiled_functions() as transpiled:
        # Evaluation's pipelines: the same functions as training's, and no shuffle buffer to fill.
        pretraining_batch = next(iter(pretraining_dataset(files, batch_size=12, max_seq_length=SEQ, is_training=False,
                                                          max_predictions_per_seq=PREDICTIONS, vocab_size=CONFIG.vocab_size)))
        finetuning_batch = next(iter(inputs.make_dataset(cached, global_batch_size=4, training=False, with_index=True,
                                                         length_buckets=(2, 4, SEQ), sort_window=2)))
    assert transpiled == []
    # The two files' records in turn (interleaved), in file order.
    records = [[tf.io.parse_single_example(r, pretraining_feature_spec(SEQ, PREDICTIONS))["input_ids"]
                for r in tf.data.TFRecordDataset(f).take(6)] for f in files]
    np.testing.assert_array_equal(pretraining_batch["input_ids"], [ids for pair in zip(*records) for ids in pair])
    # Sorted by length in a window of two batches: the four shortest rows, cut to 4 columns.
    np.testing.assert_array_equal(finetuning_batch[inputs.RECORD_INDEX], [0, 1, 2, 3])
    assert finetuning_batch["input_ids"].shape == (4, 4)


def test_training_learns_and_accumulation_gives_the_same_updates(tmp_path, one_device):
    whole = one_device["run"]  # 5 steps made (its evaluation changed nothing): one more
    assert whole.current_step == 5
    losses = one_device["losses"] + trajectory(whole, 1)
    # The synthetic masked ids come from 4 values: from ln(128) = 4.85 the MLM loss must fall.
    assert losses[-1] < losses[0] - 0.5, losses
    accumulated = loop.Trainer(CONFIG, pretraining.PretrainingTask(), options(tmp_path / "b", grad_accum_steps=4))
    np.testing.assert_allclose(trajectory(accumulated, 6), losses, atol=2e-5)
    for a, b in zip(weights(whole), weights(accumulated)):
        np.testing.assert_allclose(a, b, atol=2e-5)
    assert accumulated.current_step == 6  # one optimizer step per accumulated batch


def test_the_loop_rates_each_update_as_the_release_does(tmp_path):
    """Over 20 steps the rate of update k is the release's formula at global step k (from 1)."""
    from tests.helpers import release_learning_rate

    run = loop.Trainer(CONFIG, pretraining.PretrainingTask(), options(tmp_path, num_train_steps=20, num_warmup_steps=5))
    iterator = iter(run.distribute(random_dataset_fn(), run.per_replica_batch))
    initial = weights(run)
    used = []
    for k in range(1, 21):
        used.append(float(run.optimizer.learning_rate))  # what the next update's step reads
        run.train_steps(iterator, 1)
        assert run.current_step == k and run.learning_rate_at(k) == pytest.approx(used[-1], rel=1e-6)
        if k == 1:  # warmup's first rate is 2e-2 / 5, not 0: the weights move
            assert any(not np.array_equal(a, b) for a, b in zip(initial, weights(run)))
    expected = [release_learning_rate(k, 2e-2, 20, 5) for k in range(1, 21)]
    np.testing.assert_allclose(used, expected, rtol=1e-6, atol=1e-12)
    assert used[0] == pytest.approx(4e-3) and used[-1] == 0.0


def test_the_logged_rate_is_the_optimizers_schedule(tmp_path, monkeypatch):
    """The rate written to the summaries is read from the optimizer's own schedule: given another
    decay (power 2 where the loop's default is linear), the log follows it, in warmup and in decay."""
    import functools

    from albert_tf.training import optimization

    monkeypatch.setattr(optimization, "create_optimizer", functools.partial(optimization.create_optimizer, power=2.0))
    logged = {}
    monkeypatch.setattr(loop, "write_scalars",
                        lambda writer, metrics, step: logged.__setitem__(step, metrics["learning_rate"]))
    run = loop.Trainer(CONFIG, pretraining.PretrainingTask(), options(tmp_path, num_train_steps=6, num_warmup_steps=2,
                                                  save_checkpoints_steps=6))
    loop.run_loop(run, random_dataset_fn())
    assert sorted(logged) == [1, 2, 3, 4, 5, 6]
    used = []
    for k in range(1, 7):  # the rate the optimizer gives update k, read before it (k - 1 updates made)
        run.optimizer.iterations.assign(k - 1)
        used.append(float(run.optimizer.learning_rate))
    np.testing.assert_allclose([logged[k] for k in range(1, 7)], used, rtol=1e-6, atol=1e-12)
    # the release's shape: update 1 in warmup (2e-2 / 2), then the decay over all 6 steps, squared
    np.testing.assert_allclose(used, [1e-2] + [2e-2 * (1 - k / 6) ** 2 for k in range(2, 7)], rtol=1e-6, atol=1e-12)


def test_checkpoint_restores_exactly_the_saved_state(one_device):
    first = one_device["run"]  # trained 5 steps (6 after the learning test): weights and Adam's moments moved
    step = first.current_step
    path = first.save()
    assert step >= 5 and path.endswith(f"ckpt-{step}")
    saved = [v.numpy() for v in first.model.weights + first.optimizer.variables]
    second = loop.Trainer(CONFIG, pretraining.PretrainingTask(), first.options)
    assert second.restore_or_initialize() == step
    restored = [v.numpy() for v in second.model.weights + second.optimizer.variables]
    assert len(saved) == len(restored) > 20
    for a, b in zip(saved, restored):
        np.testing.assert_array_equal(a, b)


def test_resume_with_dropout_draws_the_masks_of_the_uninterrupted_run(tmp_path):
    config = CONFIG.replace(hidden_dropout_prob=0.1)
    # The uninterrupted run checkpoints at step 2 and goes on; a new Trainer resumes from that
    # checkpoint (the steps of an interrupted run up to it are these, element for element).
    straight = loop.Trainer(config, pretraining.PretrainingTask(), options(tmp_path / "straight"))
    fresh_states = [state.numpy() for state in straight._seed_states]  # where a fresh run starts them
    expected = trajectory(straight, 2)
    path = straight.save()
    expected += trajectory(straight, 2)
    assert any(name.startswith("rng/") for name, _ in tf.train.list_variables(path))
    resumed = loop.Trainer(config, pretraining.PretrainingTask(), options(tmp_path / "straight"))
    assert resumed.restore_or_initialize() == 2
    np.testing.assert_allclose(trajectory(resumed, 2), expected[2:], atol=1e-6, rtol=0)
    for a, b in zip(weights(resumed), weights(straight)):
        np.testing.assert_allclose(a, b, atol=1e-6, rtol=0)

    # The seed states matter: the same checkpoint resumed with dropout's seed states put back to
    # where a fresh run starts them draws other masks, and so another loss.
    # (The resumed Trainer restores that checkpoint once more: a new one would trace its steps again.)
    reseeded = resumed
    assert reseeded.restore_or_initialize() == 2
    assert len(reseeded._seed_states) == len(fresh_states) > 0
    for state, start in zip(reseeded._seed_states, fresh_states, strict=True):
        state.assign(start)
    # 2e-3 apart when written; the bound is a hundred times the 1e-6 of the match above.
    assert abs(trajectory(reseeded, 1)[0] - expected[2]) > 1e-4


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_mixed_precision_trains(tmp_path, precision):
    run = loop.Trainer(CONFIG, pretraining.PretrainingTask(), options(tmp_path, mixed_precision=precision))
    losses = trajectory(run, 2)
    assert all(np.isfinite(losses)) and abs(losses[0] - 5.5) < 0.5, losses
    assert run.model.encoder.compute_dtype == {"bf16": "bfloat16", "fp16": "float16"}[precision]
    assert all(v.dtype == "float32" for v in run.model.trainable_variables)


def test_an_fp16_overflow_poisons_every_gradient():
    ctx = tf.distribute.get_replica_context()
    finite = [tf.constant([1.0, 2.0]), tf.constant([[3.0]])]
    np.testing.assert_array_equal(replicas.share_overflow(ctx, finite)[0], [1.0, 2.0])
    poisoned = replicas.share_overflow(ctx, [tf.constant([1.0, np.inf]), tf.constant([[3.0]])])
    assert all(np.isnan(g.numpy()).all() for g in poisoned)


def test_the_training_code_imports_no_presets():
    """Starting weights are the caller's: no module of training/ (the trainer, its task protocol,
    pretraining) imports presets; a run folder's checkpoints and weight names are checkpoints/'."""
    from tests.test_import_graph import import_graph

    graph = import_graph()
    training = [name for name in graph if name.startswith("albert_tf.training.")]
    assert {"albert_tf.training.loop", "albert_tf.training.task", "albert_tf.training.pretraining"} <= set(training)
    for module in training + ["albert_tf.checkpoints.run_folder"]:
        assert not {m for m in graph[module] if m.startswith("albert_tf.presets")}, module
    assert "albert_tf.presets.loader" in graph["albert_tf.cli.pretrain"]  # the caller's initialisation


# ---- bad input -----------------------------------------------------------------------------------


def test_bad_inputs_are_errors(tmp_path):
    with pytest.raises(ValueError, match="--input_file: .*'/nonexistent/\\*.tfrecord' matches no file"):
        patterns.expand_patterns("/nonexistent/*.tfrecord", flag="input_file")
    with pytest.raises(ValueError, match="global batch of 7 is not divisible by the 2 replicas"):
        replicas.replica_batch_size(7, 2)
    with pytest.raises(ValueError, match="per-replica batch of 6 .* grad_accum_steps=4"):
        replicas.replica_batch_size(12, 2, grad_accum_steps=4)

    loop.Trainer(CONFIG, pretraining.PretrainingTask(), options(tmp_path)).save()  # a config with checkpoints is kept
    other = CONFIG.replace(hidden_size=64)
    with pytest.raises(ValueError, match="another config: hidden_size 32 there vs 64 here"):
        loop.Trainer(other, pretraining.PretrainingTask(), options(tmp_path))


def test_records_of_other_lengths_name_both_values(tmp_path):
    from albert_tf.data import features

    spec = features.pretraining_feature_spec(SEQ, PREDICTIONS + 1)
    values = {name: [0] * int(np.prod(f.shape)) for name, f in spec.items()}
    path = str(tmp_path / "records.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        writer.write(features.to_example(values, spec).SerializeToString())
    pretraining.check_record_shapes([path], SEQ, PREDICTIONS + 1)
    with pytest.raises(ValueError, match="max_predictions_per_seq=5, but --max_predictions_per_seq=4"):
        pretraining.check_record_shapes([path], SEQ, PREDICTIONS)
    with pytest.raises(ValueError, match="max_seq_length=16, but --max_seq_length=32"):
        pretraining.check_record_shapes([path], 32, PREDICTIONS + 1)


def test_init_checkpoint_missing_or_mismatching_is_an_error(tmp_path):
    from albert_tf.presets.loader import initialize_pretrainer

    def started_from(config, opts, path):
        run = loop.Trainer(config, pretraining.PretrainingTask(), opts)
        run.restore_or_initialize(lambda model: initialize_pretrainer(model, path))
        return run

    source = loop.Trainer(CONFIG, pretraining.PretrainingTask(), options(tmp_path / "source"))
    path = source.save()
    with pytest.raises(ValueError, match="ckpt-0x: no such folder or file"):  # the one source rule's line
        started_from(CONFIG, options(tmp_path / "a"), path + "x")
    wider = CONFIG.replace(intermediate_size=128)
    with pytest.raises(ValueError, match="holds an encoder with intermediate_size=64, the model has intermediate_size=128"):
        started_from(wider, options(tmp_path / "b"), path)
    started = started_from(CONFIG, options(tmp_path / "c"), str(tmp_path / "source"))
    for a, b in zip(weights(source), weights(started)):
        np.testing.assert_array_equal(a, b)


# ---- subprocesses: several replicas, several workers, SIGKILL ------------------------------------


def test_two_mirrored_devices_follow_the_one_device_trajectory(tmp_path, warm_python, one_device):
    result = warm_python.run(["-m", "tests.albert_tf.training.test_training", "mirrored", tmp_path], cwd=REPO_ROOT,
                             capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["replicas"] == 2
    # Same global batch, losses normalised by the global batch, gradients summed then clipped: the
    # two runs differ only by float summation order (and XLA on the mirrored side).
    np.testing.assert_allclose(report["mirrored"], one_device["losses"], atol=1e-5)
    with np.load(report["weights"]) as saved:
        mirrored_weights = [saved[f"arr_{i}"] for i in range(len(saved.files))]
    assert len(mirrored_weights) == len(one_device["weights"]) > 20
    assert max(float(np.max(np.abs(a - b))) for a, b in zip(one_device["weights"], mirrored_weights)) < 1e-5
    assert report["mirrored"][-1] < report["mirrored"][0] - 0.3
    assert "not divisible by the 2 replicas" in report["uneven_batch_error"]
    one_eval, two_eval = one_device["evaluation"], report["evaluation"]
    assert one_eval["examples"] == two_eval["examples"] == 17
    for name, value in one_eval.items():
        assert two_eval[name] == pytest.approx(value, abs=1e-4), name


def test_two_workers_train_and_checkpoint(tmp_path, warm_python):
    with ReservedPorts(2) as reserved:
        cluster = {"worker": [f"localhost:{p}" for p in reserved.ports]}
        workers = [
            warm_python.popen(
                ["-m", "tests.albert_tf.training.test_training", "worker", tmp_path], cwd=REPO_ROOT, stdout=PIPE,
                stderr=PIPE, text=True, env={**os.environ, **ReservedPorts.ENV, "TF_CONFIG": json.dumps(
                    {"cluster": cluster, "task": {"type": "worker", "index": i}})},
            )
            for i in range(2)
        ]
        outputs = [w.communicate(timeout=240) for w in workers]
    failed = [f"worker {i}: {err[-2000:]}" for i, (w, (_, err)) in enumerate(zip(workers, outputs)) if w.returncode]
    assert not failed, "\n".join(failed)
    reports = [json.loads(out.strip().splitlines()[-1]) for out, _ in outputs]
    assert [r["replicas"] for r in reports] == [2, 2]
    assert reports[0]["step"] == reports[1]["step"] == 4
    # Every worker holds the same weights after the synchronous updates.
    assert reports[0]["checksum"] == pytest.approx(reports[1]["checksum"], abs=1e-6)
    assert np.isfinite(reports[0]["loss"])
    assert sorted(p.name for p in tmp_path.glob("ckpt-*.index")) == ["ckpt-2.index", "ckpt-4.index"]
    assert not (tmp_path / ".workers").exists()
    assert (tmp_path / "export" / "saved_model.pb").exists()


def test_sigkill_midway_resumes_from_the_last_checkpoint_and_ends_as_uninterrupted(tmp_path, monkeypatch, capsys,
                                                                                    warm_python):
    from albert_tf.cli import pretrain

    write_records(tmp_path / "train-0.tfrecord", 96, seed=0)
    write_records(tmp_path / "train-1.tfrecord", 96, seed=1)
    steps = 12
    killed_dir = tmp_path / "killed"
    flags = cli_flags(tmp_path, killed_dir, steps)
    # albert-pretrain, waiting after step 5 to be killed (tests/albert_tf/training/paused_pretrain.py):
    # the kill lands there however far a loaded machine let the run go while this process polled
    # (it used to be killed once ckpt-4 was seen, and could have finished by then).
    process = warm_python.popen(["-m", "tests.albert_tf.training.paused_pretrain", *flags], cwd=REPO_ROOT,
                                stdout=DEVNULL, stderr=PIPE, text=True, env={**os.environ, **pause_env(5, tmp_path)})
    deadline = time.monotonic() + 180
    while not (tmp_path / "paused").exists():
        if process.poll() is not None:
            pytest.fail("the run ended before it could be killed: " + process.stderr.read()[-3000:])
        assert time.monotonic() < deadline
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait()
    last = tf.train.latest_checkpoint(str(killed_dir))
    last_step = int(last.rsplit("-", 1)[1])
    assert last_step == 4, "killed midway, after a step its last checkpoint does not hold"

    # Rerun as a user would (on a copy of the killed folder; the console script in this process):
    # the summary says where it resumed.
    rerun_dir = tmp_path / "rerun"
    shutil.copytree(killed_dir, rerun_dir)
    code, out, err = console_script(pretrain.run, ["albert-pretrain", *cli_flags(tmp_path, rerun_dir, steps)],
                                    monkeypatch, capsys)
    assert code == 0, err[-3000:]
    rerun_summary = out.strip().splitlines()[-1]
    assert rerun_summary.startswith(f"finished at step {steps}: train loss ")
    assert f"; resumed from {rerun_dir / f'ckpt-{last_step}'} at step {last_step}; " in rerun_summary
    assert f"; curves {rerun_dir / 'curves.png'}; " in rerun_summary
    # The curves hold the whole run: the killed run's steps up to its checkpoint and the rerun's after.
    from albert_tf.training.curves import curve_series

    assert [step for step, _ in curve_series(str(rerun_dir))["loss"]["train loss"]] == list(range(1, steps + 1))

    # The restart resumes at the step of the last checkpoint with exactly its weights...
    opts = cli_options(flags)
    run = loop.Trainer(CONFIG, pretraining.PretrainingTask(), opts)
    assert run.restore_or_initialize() == last_step
    reader = tf.train.load_checkpoint(last)
    for key, variable in model_weights(run.model).items():
        np.testing.assert_array_equal(variable.numpy(), reader.get_tensor(run_folder.checkpoint_key(key)))

    # ...and the rerun, finishing (its summary above: from last_step to step 12), ends where an
    # uninterrupted run with the same seed ends: the same last loss, the same weights.
    straight_dir = tmp_path / "straight"
    straight = pretraining.run_pretraining(CONFIG, cli_options(cli_flags(tmp_path, straight_dir, steps)))
    assert straight["resumed_from"] is None
    last_loss = curve_series(str(rerun_dir))["loss"]["train loss"][-1]
    assert last_loss == (steps, pytest.approx(straight["train"]["loss"], abs=1e-6))
    ends = [tf.train.load_checkpoint(tf.train.latest_checkpoint(str(d))) for d in (rerun_dir, straight_dir)]
    names = [n for n in ends[0].get_variable_to_shape_map() if n.startswith("model/")]
    assert len(names) == len(run.model.weights) > 30
    for name in names:
        np.testing.assert_allclose(ends[0].get_tensor(name), ends[1].get_tensor(name), atol=1e-6, err_msg=name)


def test_cli_pretrains_evaluates_and_exports(tmp_path, monkeypatch, capsys):
    from albert_tf.cli import pretrain

    write_records(tmp_path / "train-0.tfrecord", 64, seed=0)
    write_records(tmp_path / "eval.tfrecord", 24, seed=5)
    output_dir = tmp_path / "run"
    flags = cli_flags(tmp_path, output_dir, 4, eval_input_file=str(tmp_path / "eval.tfrecord"),
                      eval_batch_size=8, steps_per_loop=2, spm_model_file=VOCAB)
    # In this process: the console script as a child is test_quiet_cli's and test_worker_faults'.
    code, out, err = console_script(pretrain.run, ["albert-pretrain", *flags], monkeypatch, capsys)
    assert code == 0, err[-3000:]
    figures, finding, summary = out.strip().splitlines()[-3:]
    assert summary.startswith("finished at step 4: train loss ")
    assert summary.endswith(f"; started fresh; curves {output_dir / 'curves.png'}; exported to {output_dir / 'export'}")
    assert re.search(r"^eval at step 4: .* examples 24$", err, re.MULTILINE), err  # a count, as an integer
    # The held-out figures beside their baselines, counted here from the records: the most frequent
    # masked piece every time, the majority order every time.
    pieces, orders = {}, [0, 0]
    for raw in tf.data.TFRecordDataset(str(tmp_path / "eval.tfrecord")).as_numpy_iterator():
        feature = tf.train.Example.FromString(raw).features.feature
        masked = feature["masked_lm_ids"].int64_list.value, feature["masked_lm_weights"].float_list.value
        for piece, weight in zip(*masked):
            pieces[piece] = pieces.get(piece, 0) + weight
        orders[feature["next_sentence_labels"].int64_list.value[0]] += 1
    top = max(pieces, key=pieces.get)
    from albert_tf.tokenizers.tokenizer import AlbertTokenizer

    (name,) = AlbertTokenizer(VOCAB).convert_ids_to_tokens([top])
    assert figures.startswith("held-out at step 4 (24 records): masked-LM accuracy ")
    assert (f'(the most frequent masked piece, "{name}", every time: {pieces[top] / sum(pieces.values()):.1%})'
            in figures)
    assert (f"(the majority order, {('in order', 'swapped')[orders[1] > orders[0]]}, every time: "
            f"{max(orders) / 24:.1%})") in figures
    assert re.fullmatch(r"so: the masked-LM head (learnt beyond|is not above) its baseline \(held-out loss "
                        r"\d\.\d\d at step 2 -> \d\.\d\d at step 4.*\); the sentence-order head (learnt beyond|is not "
                        r"above) its baseline \(held-out loss .*", finding), finding
    assert (output_dir / "export" / "saved_model.pb").exists()
    assert json.loads((output_dir / "albert_config.json").read_text())["hidden_size"] == 32
    # TensorBoard scalars: update k runs at lr(k) as in the release, here 2e-2 * (1 - k/4), logged at
    # steps 2 and 4 (the rate of the update before would give 1.5e-2 and 5e-3).
    scalars = {}
    for events in (output_dir / "train").glob("events.*"):
        for event in tf.compat.v1.train.summary_iterator(str(events)):
            for value in event.summary.value:
                scalars[(value.tag, event.step)] = float(tf.make_ndarray(value.tensor))
    assert scalars[("learning_rate", 2)] == pytest.approx(1e-2)
    assert scalars[("learning_rate", 4)] == 0.0
    assert {"loss", "mlm_accuracy", "sop_accuracy", "examples_per_second"} <= {t for t, _ in scalars}
    # curves.png draws those values: train at steps 2 and 4, the evaluations at 2 and 4.
    from albert_tf.training.curves import curve_series

    drawn = curve_series(str(output_dir))
    assert drawn["loss"]["train loss"] == [(2, scalars[("loss", 2)]), (4, scalars[("loss", 4)])]
    assert drawn["learning rate"]["train learning_rate"] == [(2, scalars[("learning_rate", 2)]), (4, 0.0)]
    assert [step for step, _ in drawn["accuracy and metrics"]["eval mlm_accuracy"]] == [2, 4]
    assert (output_dir / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # The SavedModel computes what the checkpointed weights compute.
    import tensorflow_text  # noqa: F401 (the export's SentencePiece ops)

    serving = tf.saved_model.load(str(output_dir / "export")).signatures["serving_default"]
    inputs = {"input_ids": tf.constant([[2, 7, 3, 9]]), "input_mask": tf.constant([[1, 1, 1, 0]]),
              "segment_ids": tf.constant([[0, 0, 1, 1]])}
    exported = serving(**inputs)
    fresh = loop.Trainer(CONFIG, pretraining.PretrainingTask(), options(tmp_path / "fresh"))
    from albert_tf.presets.loader import initialize_pretrainer

    initialize_pretrainer(fresh.model, str(output_dir))
    expected = fresh.model.encoder(inputs)
    for name in ("sequence_output", "pooled_output"):
        np.testing.assert_allclose(exported[name].numpy(), expected[name].numpy(), atol=1e-5)

    # A rerun of the finished run: nothing to train, its held-out figures again, and its export
    # replaced by a new one, as every tool's export of its own run is (issue 53).
    (output_dir / "export" / "left_by_the_first_run").write_text("")
    code, out, err = console_script(pretrain.run, ["albert-pretrain", *flags], monkeypatch, capsys)
    assert code == 0, err[-3000:]
    assert out.strip().splitlines()[-3:-1] == [figures, finding]
    assert out.strip().splitlines()[-1].startswith(
        "finished at step 4: no step left (--num_train_steps=4 reached before; a larger one trains on); "
        f"resumed from {output_dir / 'ckpt-4'} at step 4; ")
    assert (output_dir / "export" / "saved_model.pb").exists()
    assert not (output_dir / "export" / "left_by_the_first_run").exists()

    # Records of another max_predictions_per_seq: refused before any model is built.
    with pytest.raises(ValueError, match="max_predictions_per_seq=4, but --max_predictions_per_seq=5"):
        pretraining.run_pretraining(CONFIG, dataclasses.replace(cli_options(flags), max_predictions_per_seq=5,
                                                      output_dir=str(tmp_path / "bad")))
    assert not (tmp_path / "bad").exists()


def test_evaluation_counts_every_record_of_a_last_partial_batch(tmp_path, one_device):
    from albert_tf.data.datasets import pretraining_dataset
    from albert_tf.models.pretrainer import losses_from_sums

    path = write_records(tmp_path / "eval.tfrecord", 21, seed=3)
    run = one_device["run"]  # evaluates in batches of 8; compared below with its own model, whatever its step
    assert run.options.eval_batch_size == 8
    eval_data = run.distribute(pretraining.file_dataset_fn([path], run.options, is_training=False),
                               run.per_replica_eval_batch)
    got = run.evaluate(eval_data)
    assert got["examples"] == 21  # two batches of 8 and one of 5 records filled up with 3 rows
    # The same model on all 21 records in one batch.
    whole = next(iter(pretraining_dataset(path, batch_size=21, max_seq_length=SEQ,
                                          max_predictions_per_seq=PREDICTIONS, is_training=False)))
    outputs = run.model(whole, training=False)
    expected = losses_from_sums(pretraining_sums(whole, outputs["mlm_logits"], outputs["sop_logits"]))
    for name, value in expected.items():
        assert got[name] == pytest.approx(float(value), abs=1e-5), name


# ---- subprocess entry points ---------------------------------------------------------------------


def _mirrored(output_dir):
    tf.config.set_visible_devices([], "GPU")  # two logical CPUs, also on a machine with a GPU
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    from albert_tf.training import strategies

    # The one-device run to compare with is the test's own (the one_device fixture, in its process).
    mirrored_strategy = strategies.get_strategy("mirrored")
    two = loop.Trainer(CONFIG, pretraining.PretrainingTask(), options(f"{output_dir}/two", jit_compile=True), mirrored_strategy)
    report = {"replicas": two.num_replicas, "mirrored": trajectory(two, 5), "weights": f"{output_dir}/weights.npz"}
    np.savez(report["weights"], *weights(two))
    # 17 records make 5 per-replica batches of 4: the replicas' last step is completed by fillers.
    records = [write_records(f"{output_dir}/eval.tfrecord", 17, seed=3)]
    report["evaluation"] = two.evaluate(two.distribute(pretraining.file_dataset_fn(records, two.options, is_training=False),
                                                       two.per_replica_eval_batch))
    try:
        loop.Trainer(CONFIG, pretraining.PretrainingTask(), options(f"{output_dir}/odd", train_batch_size=7), mirrored_strategy)
    except ValueError as error:
        report["uneven_batch_error"] = str(error)
    return report


def _worker(output_dir):
    from albert_tf.cli.pretrain import encoder_export
    from albert_tf.training import strategies

    strategy = strategies.get_strategy("multi_worker")
    opts = options(output_dir, num_train_steps=4, save_checkpoints_steps=2, steps_per_loop=2, spm_model_file=str(VOCAB))
    result = pretraining.run_pretraining(CONFIG, opts, strategy=strategy, train_dataset_fn=random_dataset_fn(),
                                         export_fn=encoder_export(opts))  # written by the chief alone
    checksum = sum(float(np.sum(w.numpy())) for w in result["model"].weights)
    return {"replicas": strategy.num_replicas_in_sync, "step": result["step"],
            "loss": result["train"]["loss"], "checksum": checksum}


if __name__ == "__main__":
    mode, *args = sys.argv[1:]
    report = {"mirrored": _mirrored, "worker": _worker}[mode](*args)
    print(json.dumps(report))
