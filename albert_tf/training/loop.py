"""The one trainer and its task protocol, for pretraining and fine-tuning alike, under TPU,
mirrored, multi-worker and one-device strategies.

`model.fit` fails under MultiWorkerMirroredStrategy with Keras 3 (TensorFlow 2.21, Keras 3.15, two
local workers: "Attempt to convert a value (PerReplica...) to a Tensor"), so this is a custom loop:
`strategy.run` inside a `tf.function` that runs `steps_per_loop` steps per call, the dataset built
once per input context with the per-replica batch, and the losses normalised by the whole global
batch so that the gradients summed across replicas are those of the global batch: the trajectory
does not depend on how many replicas (or accumulated micro-batches) share a batch.

`TrainingOptions` is what every run is told; a `TrainingTask` is what it trains (model, losses,
metrics: Model Garden's Task, one extension mechanism for every run); `Trainer` is what every run
holds (strategy, model and optimizer, whose schedule is the one logged, checkpoints, the compiled
loop), and `run_loop(trainer, dataset_fn)` drives it from Python. The tasks:
`albert_tf.training.pretraining.PretrainingTask` (masked-LM and sentence order) and fine-tuning's
`finetune.task.FinetuningTask`. Replicas share batches by `albert_tf.training.replicas`, scalars go through
`albert_tf.training.summaries`, the run folder's rules are `albert_tf.checkpoints.run_folder`'.

Checkpoints (model, optimizer, step and dropout's seed states) are written every
`save_checkpoints_steps`; a rerun with the same `output_dir` resumes from the latest one, and
skips the batches the checkpointed steps consumed so that it sees the data, and draws the dropout
masks, that an uninterrupted run would have.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import time
from typing import Callable, Optional

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from albert_tf.training import optimization
from albert_tf.config import AlbertConfig
from albert_tf.training.curves import plot_curves
from albert_tf.utils.errors import UserError, reason
from albert_tf.training.options import MIXED_PRECISION_POLICIES, TrainingOptions
from albert_tf.training.preemption import PreemptionWatcher
from albert_tf.checkpoints.run_folder import (check_output_dir, check_run_settings, checkpoint_key, disk_refusals_named,
                                              record_task, remove_partial_writes)
from albert_tf.checkpoints.weights import check_match, model_weights
from albert_tf.training.replicas import replica_batch_size, share_overflow, worker_id
from albert_tf.training.strategies import lost_workers_named
from albert_tf.training.summaries import format_metrics, summary_writer, write_scalars
from albert_tf.training.task import TrainingTask
from albert_tf.utils.validation import check_positions

DatasetFn = Callable[[tf.distribute.InputContext, int], tf.data.Dataset]


def _mixed_precision_policy(name: str):
    policy = MIXED_PRECISION_POLICIES[name]
    return keras.DTypePolicy(policy) if policy else None


class Trainer:
    """One training run of a `TrainingTask`: model, optimizer, checkpoints and the compiled loop.

    It owns everything that every task does alike: the per-replica batch, the seed, the task's
    model and optimizer built under the strategy's scope (with fp16 loss scaling), the checkpoint
    and its manager, resumption, the distributed input, the compiled loop of `steps_per_loop`
    updates and the one evaluation protocol (`evaluate`, over the task's validation step). `run_loop`
    drives it; tests and benchmarks call `train_steps` directly.

    Args:
        config: the model's AlbertConfig, recorded in (and checked against) `output_dir`.
        task: the `TrainingTask`.
        options: a `TrainingOptions` subclass.
        strategy: a tf.distribute strategy; None for the default one.
        check_settings: compare the run's training settings with those `output_dir`'s checkpoints
            were made with, and record them (`albert_tf.checkpoints.run_folder.check_run_settings`;
            a changed setting is refused unless `allow_changed_flags`), with the folder's other checks:
            a refused run builds no model and writes nothing.
    """

    resumed_checkpoint: Optional[str] = None  # set by restore_or_initialize
    initialized_from: Optional[str] = None

    def __init__(self, config: AlbertConfig, task: TrainingTask, options: TrainingOptions, strategy=None,
                 check_settings: bool = False, allow_changed_flags: bool = False):
        check_positions(options.max_seq_length, config.max_position_embeddings)
        self.config = config
        self.task = task
        self.options = options
        self.strategy = strategy or tf.distribute.get_strategy()
        self.num_replicas = self.strategy.num_replicas_in_sync
        self.per_replica_batch = replica_batch_size(
            options.train_batch_size, self.num_replicas, options.grad_accum_steps
        )
        self.per_replica_eval_batch = replica_batch_size(options.eval_batch_size, self.num_replicas)
        # The strategy's own answer: True on the one worker whose checkpoints and summaries are
        # kept (the chief, or worker 0 where there is none), and on every single-worker strategy.
        self.is_chief = self.strategy.extended.should_checkpoint
        # Refuses an output_dir holding another run's checkpoints; records this run's config.
        check_output_dir(options.output_dir, config, write=self.is_chief)
        task.check_output_dir(options.output_dir, write=self.is_chief)
        if check_settings:
            check_run_settings(options.output_dir, options, write=self.is_chief, allow_changed=allow_changed_flags)

        keras.utils.set_random_seed(options.seed)
        with self.strategy.scope():
            self.model = task.build_model(task.model_config(config, options), options,
                                          _mixed_precision_policy(options.mixed_precision))
            self.model.build()
            self.optimizer = optimization.create_optimizer(
                task.optimizer_name(options),
                options.learning_rate,
                num_train_steps=options.num_train_steps,
                num_warmup_steps=options.num_warmup_steps,
                weight_decay=options.weight_decay,
            )
            if options.mixed_precision == "fp16":
                self.optimizer = keras.optimizers.LossScaleOptimizer(self.optimizer)
            self.optimizer.build(self.model.trainable_variables)
            self.step = self.optimizer.iterations
        if self.is_chief:  # the run folder says which model its checkpoints hold (every door loads it)
            record_task(options.output_dir, self.model)
        weights = model_weights(self.model)
        # Dropout's seed-generator states too: a resumed run then draws the masks that the
        # uninterrupted run would have drawn, and ends on the same weights.
        in_weights = {id(v) for v in weights.values()}
        self._seed_states = [v for v in self.model.variables if id(v) not in in_weights]
        self._weights = weights
        self.checkpoint = tf.train.Checkpoint(
            model=weights, rng=self._seed_states, optimizer=self.optimizer, step=self.step
        )
        directory, keep = options.output_dir, options.keep_checkpoint_max
        if not self.is_chief:
            # Every worker must take part in a save (it may run collectives); only the chief's
            # copy is kept, so the others write one throw-away copy each.
            directory = os.path.join(options.output_dir, ".workers", f"worker_{worker_id(self.strategy)}")
            keep = 1
        self.manager = tf.train.CheckpointManager(
            self.checkpoint, directory, max_to_keep=keep, checkpoint_name="ckpt"
        )
        # Traced as written, without autograph: its transpiling of the loop, the steps and the task's
        # functions cost every training process 1.2 s of CPU (the tests' tiny trainer traced its loop
        # in 2.8 s, now 1.7 s: bench/trace_costs.py). So the loop over steps is an explicit
        # tf.while_loop, and the tasks' Python `if`s and `for`s are on Python values (a tensor's
        # would fail at trace time).
        self._train_loop = tf.function(self._train_loop_fn, autograph=False)
        self._grad_fn = tf.function(self._grad_fn_impl, jit_compile=options.jit_compile, autograph=False)
        self._validation_step = tf.function(lambda batch: task.validation_step(self.model, batch),
                                            jit_compile=options.jit_compile, autograph=False)
        # Length-bucketed batches differ in their last axis: traced once for any length (after the
        # first), not once a bucket; XLA still compiles one program a shape.
        self._eval_step = tf.function(self._eval_step_fn, reduce_retracing=True, autograph=False)

    @property
    def metric_names(self) -> tuple[str, ...]:
        return tuple(self.task.metric_names)

    # ---- state -------------------------------------------------------------------------------

    @property
    def current_step(self) -> int:
        return int(self.step.numpy())

    def how_started(self) -> str:
        """For a summary: "resumed from <checkpoint> at step N", "started fresh (from <weights>)"."""
        if self.resumed_checkpoint:
            return f"resumed from {self.resumed_checkpoint} at step {self.current_step}"
        if self.initialized_from and self.initialized_from != "random":
            return f"started fresh from {self.initialized_from}"
        return "started fresh"

    def restore_or_initialize(self, initialize: Optional[Callable[[keras.Model], str]] = None) -> int:
        """Resumes from the latest checkpoint in output_dir (kept as `resumed_checkpoint`), else
        calls `initialize(model)`, if given, which loads starting weights and returns where from
        (kept as `initialized_from`). Returns the step reached."""
        remove_partial_writes(self.manager.directory)  # a killed save's: on a full disk, it would fail the rerun
        latest = tf.train.latest_checkpoint(self.options.output_dir)
        if latest is None:
            if initialize is not None:
                self.initialized_from = initialize(self.model)
                logging.info("initialised from %s", self.initialized_from)
            return self.current_step
        # Newest first: a checkpoint cut short (a full disk, a copy that stopped) is named and
        # passed over for the one before it, rather than ending the run or starting from scratch.
        candidates = [latest] + [p for p in reversed(self.manager.checkpoints) if p != latest]
        for path in candidates:
            # Checked before restoring: a restore that fails on shapes leaves TensorFlow to warn of
            # unrestored values whenever the garbage collector next frees them, long after the error.
            other_model = self._shape_differences(path)
            if other_model:  # readable, but of another model: no older checkpoint helps
                raise UserError(
                    f"output_dir {self.options.output_dir} holds checkpoints of another model: {other_model}; "
                    "use a fresh output_dir, or the config (and task) that wrote them"
                )
            try:
                self._restore(path)
                break
            except (IndexError, ValueError, tf.errors.OpError) as error:
                files = ", ".join(sorted(tf.io.gfile.glob(path + ".*"))) or path
                logging.warning("checkpoint %s is unreadable (%s; its files: %s): trying the one before",
                                path, reason(error), files)
        else:
            raise UserError(
                f"no checkpoint in {self.options.output_dir} could be read ({', '.join(candidates)}): they are "
                "truncated or damaged; delete them to start again, or use another output_dir"
            )
        if path != latest:
            logging.warning("resumed from %s, not from the unreadable latest %s", path, latest)
        self.resumed_checkpoint = path
        logging.info("resumed from %s at step %d", path, self.current_step)
        if initialize is not None:
            logging.info("starting weights not loaded: resuming instead")
        return self.current_step

    def _shape_differences(self, path: str) -> str | None:
        """How the variables of checkpoint `path` differ in shape from the model's, or None (also
        when its index cannot be read: then it is damaged, not of another model)."""
        try:
            stored = dict(tf.train.list_variables(path))
        except (IndexError, ValueError, tf.errors.OpError):
            return None
        try:
            check_match(path, {key: stored[checkpoint_key(key)] for key in self._weights if checkpoint_key(key) in stored},
                        {key: tuple(variable.shape) for key, variable in self._weights.items()}, missing_ok=True)
        except UserError as error:
            return str(error)
        return None

    def _restore(self, path: str):
        self.checkpoint.restore(path).assert_consumed()

    def write_copy(self, name: str) -> str:
        """Writes the whole state as checkpoint `name` in output_dir (every worker takes part; only
        the chief's copy is kept), beside the numbered ones; returns its prefix."""
        directory = self.options.output_dir if self.is_chief else self.manager.directory
        with disk_refusals_named(os.path.join(directory, name)):
            return self.checkpoint.write(os.path.join(directory, name))

    def save(self) -> str:
        """Writes a checkpoint numbered by the step; returns its path (a write the disk refuses: the
        machine's one line, the checkpoints before kept)."""
        with disk_refusals_named(os.path.join(self.manager.directory, f"ckpt-{self.current_step}")):
            return self.manager.save(checkpoint_number=self.current_step)

    # ---- input -------------------------------------------------------------------------------

    def distribute(self, dataset_fn: DatasetFn, batch_size: int, skip_steps: int = 0):
        """Builds `dataset_fn(input_context, batch_size)` once per input pipeline, `batch_size`
        being per replica; drops what the first `skip_steps` updates consumed."""

        def fn(input_context):
            dataset = dataset_fn(input_context, batch_size)
            # Each update takes one batch per replica, and a pipeline feeds its share of the
            # replicas in turn: skipping what the checkpointed steps consumed puts a resumed run on
            # the data the interrupted one would have read next.
            per_step = input_context.num_replicas_in_sync // input_context.num_input_pipelines
            return dataset.skip(skip_steps * per_step) if skip_steps else dataset

        return self.strategy.distribute_datasets_from_function(fn)

    # ---- steps -------------------------------------------------------------------------------

    def _grad_fn_impl(self, batch, denominators):
        fp16 = self.options.mixed_precision == "fp16"

        def loss_fn(micro):
            # Normalised by the global batch: the sum over replicas and micro-batches is its loss.
            parts = self.task.loss_parts(self.model, micro, denominators)
            loss = self.task.total_loss(parts)
            return (self.optimizer.scale_loss(loss) if fp16 else loss), parts

        grads, _, parts = optimization.accumulate_gradients(
            loss_fn, self.model.trainable_variables, batch, self.options.grad_accum_steps
        )
        return grads, parts

    def _replica_step(self, batch):
        ctx = tf.distribute.get_replica_context()
        grads, parts = self._grad_fn(batch, self.task.denominators(ctx, batch, self.options))
        if self.options.mixed_precision == "fp16":
            grads = share_overflow(ctx, grads)
        # The optimizer sums the gradients across replicas, then clips their global norm.
        self.optimizer.apply(grads, self.model.trainable_variables)
        return {**parts, "loss": self.task.total_loss(parts)}

    def _train_loop_fn(self, iterator, num_steps):
        def step(i, totals):  # one update; the metrics' sums over the steps are the loop's variables
            parts = self.strategy.run(self._replica_step, args=(next(iterator),))
            return i + 1, {
                k: totals[k] + self.strategy.reduce(tf.distribute.ReduceOp.SUM, parts[k], axis=None)
                for k in self.metric_names
            }

        _, totals = tf.while_loop(lambda i, _: i < num_steps, step,
                                  (tf.constant(0), {k: tf.constant(0.0) for k in self.metric_names}),
                                  maximum_iterations=num_steps)
        return {k: v / tf.cast(num_steps, tf.float32) for k, v in totals.items()}

    def train_steps(self, iterator, num_steps: int) -> dict[str, float]:
        """Runs `num_steps` updates in one call; returns the metrics averaged over them."""
        metrics = self._train_loop(iterator, tf.constant(num_steps, tf.int32))
        return {k: float(v) for k, v in metrics.items()}

    # ---- evaluation --------------------------------------------------------------------------

    def _eval_step_fn(self, batch):
        # Through a Python function: handed to strategy.run itself, the XLA-compiled step reads
        # every replica's variables from the first device, which XLA refuses.
        outputs = self.strategy.run(lambda x: self._validation_step(x), args=(batch,))
        return {name: self.strategy.gather(value, axis=0) for name, value in outputs.items()}

    def evaluate(self, dataset, max_steps: Optional[int] = None, **context):
        """The task's evaluation of `dataset` (a distributed dataset; its first `max_steps` batches
        when given): its `validation_step` on every batch and replica, gathered, aggregated by its
        `aggregate_logs` and reduced by its `reduce_aggregated_logs(state, **context)`, whose
        result this returns (`albert_tf.training.task.TrainingTask`)."""
        state, batches = None, 0
        with input_errors_named():
            for batches, batch in enumerate(dataset, start=1):
                outputs = {name: value.numpy() for name, value in self._eval_step(batch).items()}
                state = self.task.aggregate_logs(state, outputs)
                if max_steps and batches >= max_steps:
                    break
        if not batches:
            raise ValueError("the eval input holds no records")
        return self.task.reduce_aggregated_logs(state, **context)

    def learning_rate_at(self, step: int) -> float:
        """The rate of update `step`, asked of the optimizer (the inner one under loss scaling)."""
        optimizer = getattr(self.optimizer, "inner_optimizer", self.optimizer)
        return float(optimizer.learning_rate_of_update(step))


@contextlib.contextmanager
def _closed_at_the_end(progress, *writers):
    """Closes the progress bar and flushes the summaries however the loop ends (a preemption too:
    the steps it completed are in the summaries)."""
    try:
        yield
    finally:
        if progress is not None:
            progress.close()
        for writer in writers:
            if writer is not None:
                writer.flush()


@contextlib.contextmanager
def input_errors_named():
    """A failed check of the reader's (a corrupted file, ids outside the vocabulary, lengths other
    than the flags') becomes its one-line UserError; anything else passes unchanged."""
    from albert_tf.data.datasets import input_error

    try:
        yield
    except tf.errors.InvalidArgumentError as error:
        user_error = input_error(error)
        if user_error is None:
            raise
        raise user_error from error


def run_loop(
    run: Trainer,
    dataset_fn: DatasetFn,
    evaluate: Optional[Callable[[], dict]] = None,
    eval_every_steps: Optional[int] = None,
) -> dict:
    """Trains `run` from its current step to `num_train_steps` on `dataset_fn`'s batches.

    Each compiled call runs up to `steps_per_loop` updates and stops at the next checkpoint (every
    `save_checkpoints_steps`, and the last step) and evaluation. After each call: a non-finite
    loss is an error; the metrics, learning rate and examples/s go to TensorBoard
    (`<output_dir>/train`), the log and the progress bar (with `progress_bar`, on the chief).
    `evaluate()`, if given, returns metrics (written to `<output_dir>/eval`) every
    `eval_every_steps` (None: at every checkpoint) and at the end.

    At the end the chief draws `<output_dir>/curves.png` from the run's event files
    (`albert_tf.training.curves`: the whole run, a resumed one too).

    Returns a dict with `step`, `train` (the last call's metrics), `eval` (the last evaluation, or
    None), `resumed_from` (the step started from, or None from 0), `started` (`run.how_started()`),
    `curves` (the png's path; None on other workers) and `examples_per_second` (the steady rate: the
    first call, which traces and compiles, is left out when others ran; None if nothing ran).
    """
    options = run.options
    total, save_every = options.num_train_steps, options.save_checkpoints_steps
    eval_every = eval_every_steps or save_every
    start, started = run.current_step, run.how_started()
    iterator = iter(run.distribute(dataset_fn, run.per_replica_batch, skip_steps=start))
    train_writer = summary_writer(options, run.is_chief, "train")
    eval_writer = summary_writer(options, run.is_chief, "eval") if evaluate is not None else None
    progress = None
    if options.progress_bar and run.is_chief:
        from tqdm import tqdm

        progress = tqdm(total=total, initial=start, unit="step", dynamic_ncols=True)

    step, metrics, eval_metrics, rates = start, {}, None, []
    # A SIGTERM (a preemption) saves at the next loop boundary on every worker; a lost worker ends
    # the others with one line (albert_tf/training/preemption.py, strategies.lost_workers_named).
    with PreemptionWatcher(run.strategy) as preemption, \
            lost_workers_named(run.strategy, options.output_dir, lambda: run.current_step), \
            _closed_at_the_end(progress, train_writer, eval_writer):
        while step < total:
            boundaries = [total - step, save_every - step % save_every]
            if evaluate is not None:
                boundaries.append(eval_every - step % eval_every)
            num_steps = min(options.steps_per_loop, *boundaries)
            began = time.perf_counter()
            with input_errors_named():
                metrics = run.train_steps(iterator, num_steps)
            elapsed = time.perf_counter() - began
            step = run.current_step
            if not np.isfinite(metrics["loss"]):
                raise UserError(
                    f"loss is {metrics['loss']} at step {step}: training diverged (the checkpoints saved before are "
                    f"kept); lower --learning_rate (now {options.learning_rate:g}) or check the input"
                )
            metrics["learning_rate"] = run.learning_rate_at(step)  # the rate of update `step`
            metrics["examples_per_second"] = num_steps * options.train_batch_size / elapsed
            rates.append((num_steps, elapsed))
            write_scalars(train_writer, metrics, step)
            if progress is not None:
                progress.update(num_steps)
                progress.set_postfix_str(format_metrics({k: metrics[k] for k in run.task.progress_metrics}))
            else:  # the progress bar already shows the step
                logging.info("step %d/%d %s", step, total, format_metrics(metrics))

            preempted = preemption.should_stop()  # the same answer on every worker
            if preempted or step % save_every == 0 or step == total:
                logging.info("saved %s", saved := run.save())
                train_writer.flush()  # a killed run's curves then reach its last checkpoint
            if preempted:
                raise preemption.stopped(step, saved)
            if evaluate is not None and (step % eval_every == 0 or step == total):
                eval_metrics = evaluate()
                write_scalars(eval_writer, eval_metrics, step)
                eval_writer.flush()
                if run.is_chief:  # a result the user wants, with or without the bar (which it must not break)
                    line = f"eval at step {step}: {format_metrics(eval_metrics)}"
                    if progress is not None:
                        progress.write(line, file=sys.stderr)
                    else:
                        print(line, file=sys.stderr, flush=True)
    if not run.is_chief:
        shutil.rmtree(os.path.join(options.output_dir, ".workers"), ignore_errors=True)
    curves = plot_curves(options.output_dir) if run.is_chief else None

    steady = rates[1:] or rates
    rate = sum(n for n, _ in steady) * options.train_batch_size / sum(t for _, t in steady) if steady else None
    return {"step": step, "train": metrics, "eval": eval_metrics, "resumed_from": start or None,
            "started": started, "curves": curves, "examples_per_second": rate}
