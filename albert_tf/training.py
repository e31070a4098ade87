"""The one training loop, for pretraining and fine-tuning alike, under TPU, mirrored, multi-worker
and one-device strategies; and pretraining on it.

`model.fit` fails under MultiWorkerMirroredStrategy with Keras 3 (see STYLE.md), so this is a
custom loop: `strategy.run` inside a `tf.function` that runs `steps_per_loop` steps per call, the
dataset built once per input context with the per-replica batch, and the losses normalised by the
whole global batch so that the gradients summed across replicas are those of the global batch:
the trajectory does not depend on how many replicas (or accumulated micro-batches) share a batch.

`TrainingLoop` holds what every run needs (strategy, schedule, model and optimizer, checkpoints,
the compiled loop) and `run_loop` drives it from Python; a task supplies only its model, its loss
and its metric names. `Pretraining` and `pretrain()` are the pretraining task;
finetune/trainer.py is fine-tuning (any task of finetune/task.py).

Checkpoints (model, optimizer, step and dropout's seed states) are written every
`save_checkpoints_steps`; a rerun with the same `output_dir` resumes from the latest one, and
skips the batches the checkpointed steps consumed so that it sees the data, and draws the dropout
masks, that an uninterrupted run would have.

Example:
    >>> options = PretrainingOptions(output_dir="/tmp/albert", input_file="data/*.tfrecord",
    ...                              train_batch_size=64, max_seq_length=128, num_train_steps=1000,
    ...                              num_warmup_steps=100, learning_rate=1e-3)
    >>> result = pretrain(AlbertConfig.named("albert_base_v2"), options,
    ...                   strategy=get_strategy("mirrored"))
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import math
import os
import re
import shutil
import sys
import time
from typing import Callable, Optional

import keras
import numpy as np
import tensorflow as tf
from absl import logging
from tensorflow.core.framework import summary_pb2

from albert_tf import optimization
from albert_tf.choices import MIXED_PRECISION_HELP, MIXED_PRECISION_POLICIES  # noqa: F401 (re-exported)
from albert_tf.config import AlbertConfig
from albert_tf.errors import FlagError, UserError, reason
from albert_tf.files import prepare_output_dir, tfrecord_compression, write_json
from albert_tf.preemption import PreemptionWatcher
from albert_tf.presets.checkpoints import (  # noqa: F401 (re-exported: the run folder's rules)
    CONFIG_FILE,
    RUN_VOCAB,
    _checkpoint_key,
    load_init_checkpoint,
)
from albert_tf.presets.weights import model_weights
from albert_tf.pretrainer import AlbertPretrainer, losses_from_sums, pretraining_sums
from albert_tf.strategies import lost_workers_named
from albert_tf.validation import require_positive_ints

TRAIN_METRICS = ("loss", "mlm_loss", "sop_loss", "mlm_accuracy", "sop_accuracy")

# The release adds this to the sum of masked_lm_weights, so a batch without predictions gives 0.
_WEIGHT_EPSILON = 1e-5

DatasetFn = Callable[[tf.distribute.InputContext, int], tf.data.Dataset]


class TrainingOptions:
    """The checks of the fields that `TrainingLoop` and `run_loop` read, shared by the options of
    every task.

    Subclasses are frozen dataclasses that declare these fields with their task's defaults and add
    their own: `output_dir`, `train_batch_size` and `eval_batch_size` (global batches),
    `max_seq_length`, `learning_rate`, `num_train_steps`, `num_warmup_steps`, `weight_decay`,
    `save_checkpoints_steps`, `keep_checkpoint_max`, `steps_per_loop`, `mixed_precision`,
    `jit_compile`, `seed`, `progress_bar`, and optionally `grad_accum_steps`.
    """

    grad_accum_steps = 1  # for tasks whose options do not declare gradient accumulation
    _positive = ("train_batch_size", "eval_batch_size", "max_seq_length", "num_train_steps",
                 "save_checkpoints_steps", "keep_checkpoint_max", "steps_per_loop", "grad_accum_steps")

    def __post_init__(self):
        require_positive_ints({name: getattr(self, name) for name in self._positive})
        if not (isinstance(self.learning_rate, (int, float)) and math.isfinite(self.learning_rate)
                and self.learning_rate > 0):
            # 0 trains nothing, a negative rate ascends the loss, NaN ruins the weights: and each
            # would still run to the end and export.
            raise FlagError(f"learning_rate must be a positive number, got {self.learning_rate!r}")
        if not (math.isfinite(self.weight_decay) and self.weight_decay >= 0):
            raise FlagError(f"weight_decay must be a number >= 0, got {self.weight_decay!r}")
        if not 0 <= self.num_warmup_steps <= self.num_train_steps:
            raise FlagError(
                f"num_warmup_steps must be in [0, num_train_steps={self.num_train_steps}], "
                f"got {self.num_warmup_steps}"
            )
        if self.mixed_precision not in MIXED_PRECISION_POLICIES:
            raise FlagError(
                f"mixed_precision must be one of {', '.join(MIXED_PRECISION_POLICIES)}, "
                f"got {self.mixed_precision!r}"
            )
        if not self.output_dir:
            raise FlagError("output_dir must be given")


@dataclasses.dataclass(frozen=True)
class PretrainingOptions(TrainingOptions):
    """How to pretrain; the defaults are the paper's run (ALBERT.md §4) except `steps_per_loop`.

    `train_batch_size` is the global batch of one update: it is split across replicas, and each
    replica's share into `grad_accum_steps` micro-batches whose gradients are summed before the one
    update. `input_file` and `eval_input_file` are comma-separated globs of pretraining TFRecords.
    """

    output_dir: str
    input_file: str = ""
    eval_input_file: str = ""
    train_batch_size: int = 4096
    eval_batch_size: int = 64
    max_seq_length: int = 512
    max_predictions_per_seq: int = 20
    learning_rate: float = 0.00176
    num_train_steps: int = 125000
    num_warmup_steps: int = 3125
    weight_decay: float = 0.01
    optimizer: str = "lamb"
    save_checkpoints_steps: int = 5000
    keep_checkpoint_max: int = 5
    steps_per_loop: int = 100
    grad_accum_steps: int = 1
    mixed_precision: str = "none"
    jit_compile: bool = True
    init_checkpoint: Optional[str] = None
    eval_every_steps: Optional[int] = None  # None: at every checkpoint
    max_eval_steps: Optional[int] = None  # None: the whole eval input
    seed: int = 12345
    progress_bar: bool = False

    _positive = TrainingOptions._positive + ("max_predictions_per_seq",)

    def __post_init__(self):
        super().__post_init__()
        if self.optimizer not in optimization.OPTIMIZERS:
            raise FlagError(
                f"optimizer must be one of {', '.join(optimization.OPTIMIZERS)}, got {self.optimizer!r}"
            )


def expand_globs(patterns: str, flag: str = "input_file") -> list[str]:
    """The files matched by comma-separated globs; a glob that matches nothing is an error."""
    from albert_tf.datasets import expand_file_patterns

    try:
        return expand_file_patterns(patterns)
    except ValueError as error:
        raise FlagError(f"--{flag}: {error}") from None


def check_record_shapes(files: list[str], max_seq_length: int, max_predictions_per_seq: int):
    """Checks the input before a model is built: the data-prep run that wrote it finished, it holds
    records, and the first record's lengths are the flags' (naming both values).

    The tf.data reader would fail too, but only inside the first step and with a message about
    tensor sizes that does not say which flag is wrong; and an empty training input would hang.
    """
    from albert_tf.datasets import check_complete

    check_complete(files)
    for path in files:
        try:
            first = [raw.numpy() for raw in tf.data.TFRecordDataset(path, compression_type=tfrecord_compression(path)).take(1)]
        except tf.errors.DataLossError as error:
            # Without TensorFlow's op decorations: "{{function_node ...}} corrupted record at 0 (...) [Op:...]".
            first_line = re.sub(r"^\{\{.*?\}\}\s*|\s*\[Op:.*$", "", error.message.splitlines()[0])
            raise UserError(f"{path} is not a TFRecord file, or it is corrupted: {first_line}") from None
        if first:
            break
    else:
        shown = ", ".join(files[:3]) + (f" and {len(files) - 3} more" if len(files) > 3 else "")
        raise UserError(f"the input files hold no records: {shown}")
    feature = tf.train.Example.FromString(first[0]).features.feature
    found = {
        "max_seq_length": len(feature["input_ids"].int64_list.value),
        "max_predictions_per_seq": len(feature["masked_lm_positions"].int64_list.value),
    }
    wanted = {"max_seq_length": max_seq_length, "max_predictions_per_seq": max_predictions_per_seq}
    for name in found:
        if found[name] != wanted[name]:
            raise FlagError(f"{path}: records were written with {name}={found[name]}, but --{name}={wanted[name]}")


def replica_batch_size(global_batch_size: int, num_replicas: int, grad_accum_steps: int = 1) -> int:
    """The per-replica batch; an uneven split is an error, never a silently different batch."""
    if global_batch_size % num_replicas:
        raise ValueError(
            f"the global batch of {global_batch_size} is not divisible by the {num_replicas} "
            f"replicas of the strategy"
        )
    per_replica = global_batch_size // num_replicas
    if per_replica % grad_accum_steps:
        raise ValueError(
            f"the per-replica batch of {per_replica} (global {global_batch_size} / {num_replicas} "
            f"replicas) is not divisible by grad_accum_steps={grad_accum_steps}"
        )
    return per_replica


def _worker_id(strategy) -> int:
    resolver = getattr(strategy, "cluster_resolver", None)
    return int(resolver.task_id or 0) if resolver is not None else 0


def check_output_dir(output_dir: str, config: AlbertConfig, write: bool):
    """Refuses an `output_dir` that holds checkpoints of another config; records ours in it.

    A config without checkpoints beside it (a first run that failed before its first save)
    protects nothing: it is replaced.
    """
    prepare_output_dir(output_dir, create=write)  # a file, or not writable: one line naming the flag
    path = os.path.join(output_dir, CONFIG_FILE)
    if tf.io.gfile.exists(path) and tf.train.latest_checkpoint(output_dir):
        with tf.io.gfile.GFile(path) as f:
            saved = AlbertConfig.from_dict(json.load(f), source=path)
        if saved != config:
            changed = {
                k: (v, getattr(config, k)) for k, v in saved.to_dict().items() if getattr(config, k) != v
            }
            raise UserError(
                f"output_dir {output_dir} holds checkpoints of another config: "
                + ", ".join(f"{k} {a} there vs {b} here" for k, (a, b) in changed.items())
                + "; use a fresh output_dir or the same config"
            )
        return
    if tf.train.latest_checkpoint(output_dir):
        raise UserError(
            f"output_dir {output_dir} holds checkpoints but no {CONFIG_FILE}: cannot tell which "
            f"config wrote them; use a fresh output_dir"
        )
    if write:  # written aside and renamed: other workers check the same file and must never read half
        write_json(path, config.to_dict())


def keep_run_vocabulary(spm_model_file: str, output_dir: str) -> str:
    """Copies a run's vocabulary into its folder as `RUN_VOCAB` (unless it is that file) and returns
    the kept path: a later tool reading the folder (export, fine-tuning, predicting) then needs no
    --spm_model_file."""
    kept = os.path.join(output_dir, RUN_VOCAB)
    if os.path.abspath(spm_model_file) != os.path.abspath(kept):
        tf.io.gfile.makedirs(output_dir)
        tf.io.gfile.copy(spm_model_file, kept, overwrite=True)
    return kept


def _share_overflow(ctx, grads):
    """Makes one replica's fp16 overflow every replica's.

    Keras's LossScaleOptimizer judges the gradients before they are summed across replicas, and
    under merge-call strategies by the first replica's alone: an overflow elsewhere would reach
    the weights. Poisoning every replica's gradients then makes all of them skip the step and
    lower the scale together.
    """
    grads = [tf.convert_to_tensor(g) for g in grads]
    finite = tf.reduce_all([tf.reduce_all(tf.math.is_finite(g)) for g in grads])
    overflows = ctx.all_reduce(tf.distribute.ReduceOp.SUM, 1.0 - tf.cast(finite, tf.float32))
    all_finite = tf.equal(overflows, 0.0)
    return [tf.where(all_finite, g, tf.constant(float("nan"), g.dtype)) for g in grads]


def _mixed_precision_policy(name: str):
    policy = MIXED_PRECISION_POLICIES[name]
    return keras.DTypePolicy(policy) if policy else None


class TrainingLoop:
    """The state of one training run: model, optimizer, checkpoints and the compiled loop.

    It owns everything that pretraining and fine-tuning do alike: the per-replica batch, the
    learning-rate schedule, the seed, the model and optimizer built under the strategy's scope
    (with fp16 loss scaling), the checkpoint and its manager, resumption, the distributed input and
    the compiled loop of `steps_per_loop` updates. A task subclasses it and supplies:

    - `_create_model(dtype)`: the Keras model (called under the strategy's scope);
    - `_loss_parts(batch, denominators)`: this replica's (micro-)batch share of each metric of the
      global batch, as a dict; `_total_loss(parts)` is the loss to minimise (`parts["loss"]`
      unless overridden);
    - `metric_names`: the parts (and "loss") that `train_steps` reports, averaged over its steps;
    - where needed, `_denominators(ctx, batch)` for normalisers that need every replica's batch
      (an all-reduce), `_initializer()` for a fresh run's default starting weights and
      `_check_output_dir()` for more than the config to record in output_dir.

    `run_loop` drives it; tests and benchmarks call `train_steps` directly.

    Args:
        config: the model's AlbertConfig, recorded in (and checked against) `output_dir`.
        options: a `TrainingOptions` subclass.
        strategy: a tf.distribute strategy; None for the default one.
        optimizer_name: one of `albert_tf.optimization.OPTIMIZERS`.
    """

    metric_names: tuple[str, ...] = ("loss",)

    def __init__(self, config: AlbertConfig, options: TrainingOptions, strategy=None, *, optimizer_name: str):
        self.config = config
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
        self.schedule = optimization.WarmupPolynomialDecay(
            options.learning_rate, options.num_train_steps, options.num_warmup_steps
        )
        self._check_output_dir()

        keras.utils.set_random_seed(options.seed)
        with self.strategy.scope():
            self.model = self._create_model(_mixed_precision_policy(options.mixed_precision))
            self.model.build()
            self.optimizer = optimization.create_optimizer(
                optimizer_name,
                options.learning_rate,
                num_train_steps=options.num_train_steps,
                num_warmup_steps=options.num_warmup_steps,
                weight_decay=options.weight_decay,
            )
            if options.mixed_precision == "fp16":
                self.optimizer = keras.optimizers.LossScaleOptimizer(self.optimizer)
            self.optimizer.build(self.model.trainable_variables)
            self.step = self.optimizer.iterations
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
            directory = os.path.join(options.output_dir, ".workers", f"worker_{_worker_id(self.strategy)}")
            keep = 1
        self.manager = tf.train.CheckpointManager(
            self.checkpoint, directory, max_to_keep=keep, checkpoint_name="ckpt"
        )
        self._train_loop = tf.function(self._train_loop_fn)
        self._grad_fn = tf.function(self._grad_fn_impl, jit_compile=options.jit_compile)

    # ---- what a task supplies ----------------------------------------------------------------

    def _create_model(self, dtype) -> keras.Model:
        raise NotImplementedError

    def _check_output_dir(self):
        """Refuses an output_dir holding another run's checkpoints; records this run's config."""
        check_output_dir(self.options.output_dir, self.config, write=self.is_chief)

    def _initializer(self) -> Optional[Callable[[keras.Model], str]]:
        """What loads a fresh run's starting weights by default; None: the seed's."""
        return None

    def _denominators(self, ctx, batch) -> dict:
        return {}

    def _loss_parts(self, batch, denominators: dict) -> dict:
        raise NotImplementedError

    def _total_loss(self, parts: dict):
        return parts["loss"]

    @property
    def progress_metrics(self) -> tuple[str, ...]:
        """The metrics the progress bar shows."""
        return self.metric_names

    # ---- state -------------------------------------------------------------------------------

    @property
    def current_step(self) -> int:
        return int(self.step.numpy())

    def restore_or_initialize(self, initialize: Optional[Callable[[keras.Model], str]] = None) -> int:
        """Resumes from the latest checkpoint in output_dir, else calls `initialize(model)` (by
        default the task's own initializer), which loads starting weights and returns where from.
        Returns the step reached."""
        initialize = initialize or self._initializer()
        latest = tf.train.latest_checkpoint(self.options.output_dir)
        if latest is None:
            if initialize is not None:
                logging.info("initialised from %s", initialize(self.model))
            return self.current_step
        # Newest first: a checkpoint cut short (a full disk, a copy that stopped) is named and
        # passed over for the one before it, rather than ending the run or starting from scratch.
        candidates = [latest] + [p for p in reversed(self.manager.checkpoints) if p != latest]
        for path in candidates:
            try:
                self._restore(path)
                break
            except (IndexError, ValueError, tf.errors.OpError) as error:
                other_model = self._shape_differences(path)
                if other_model:  # readable, but of another model: no older checkpoint helps
                    raise UserError(
                        f"output_dir {self.options.output_dir} holds checkpoints of another model: in {path}, "
                        f"{other_model}; use a fresh output_dir, or the config (and task) that wrote them"
                    ) from None
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
        differences = [
            f"{key} has shape {list(stored[name])} there, {list(variable.shape)} here"
            for key, variable in self._weights.items()
            if (name := _checkpoint_key(key)) in stored and list(stored[name]) != list(variable.shape)
        ]
        if not differences:
            return None
        more = f" (and {len(differences) - 1} more variables)" if len(differences) > 1 else ""
        return differences[0] + more

    def _restore(self, path: str):
        checkpoint = self.checkpoint
        if self._seed_states and not any(name.startswith("rng/") for name, _ in tf.train.list_variables(path)):
            logging.warning("%s holds no dropout seed states (written by an older version): the "
                            "resumed run draws other dropout masks than an uninterrupted one", path)
            checkpoint = tf.train.Checkpoint(model=self.checkpoint.model, optimizer=self.optimizer, step=self.step)
        checkpoint.restore(path).assert_consumed()

    def save(self) -> str:
        """Writes a checkpoint numbered by the step; returns its path."""
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
            parts = self._loss_parts(micro, denominators)
            loss = self._total_loss(parts)
            return (self.optimizer.scale_loss(loss) if fp16 else loss), parts

        grads, _, parts = optimization.accumulate_gradients(
            loss_fn, self.model.trainable_variables, batch, self.options.grad_accum_steps
        )
        return grads, parts

    def _replica_step(self, batch):
        ctx = tf.distribute.get_replica_context()
        grads, parts = self._grad_fn(batch, self._denominators(ctx, batch))
        if self.options.mixed_precision == "fp16":
            grads = _share_overflow(ctx, grads)
        # The optimizer sums the gradients across replicas, then clips their global norm.
        self.optimizer.apply(grads, self.model.trainable_variables)
        return {**parts, "loss": self._total_loss(parts)}

    def _train_loop_fn(self, iterator, num_steps):
        totals = {k: tf.constant(0.0) for k in self.metric_names}
        for _ in tf.range(num_steps):
            parts = self.strategy.run(self._replica_step, args=(next(iterator),))
            totals = {
                k: totals[k] + self.strategy.reduce(tf.distribute.ReduceOp.SUM, parts[k], axis=None)
                for k in self.metric_names
            }
        return {k: v / tf.cast(num_steps, tf.float32) for k, v in totals.items()}

    def train_steps(self, iterator, num_steps: int) -> dict[str, float]:
        """Runs `num_steps` updates in one call; returns the metrics averaged over them."""
        metrics = self._train_loop(iterator, tf.constant(num_steps, tf.int32))
        return {k: float(v) for k, v in metrics.items()}

    def learning_rate_at(self, step: int) -> float:
        return float(self.schedule(step))


# TensorBoard's scalar plugin metadata, written by hand: tf.summary.scalar lives in the tensorboard
# package, which is not a dependency, while tf.summary.write is TensorFlow's own.
_SCALAR_METADATA = summary_pb2.SummaryMetadata(
    plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars")
).SerializeToString()


def write_scalars(writer, metrics: dict[str, float], step: int):
    """Writes `metrics` as TensorBoard scalars at `step`."""
    with writer.as_default(step=step):
        for name, value in metrics.items():
            tf.summary.write(name, tf.constant(value, tf.float32), metadata=_SCALAR_METADATA)


def summary_writer(options, is_chief, name):
    """A summary writer for `<output_dir>/<name>` on the chief; a no-op writer on other workers."""
    if not is_chief:
        return tf.summary.create_noop_writer()
    return tf.summary.create_file_writer(os.path.join(options.output_dir, name))


def format_metrics(metrics: dict[str, float]) -> str:
    """`name value` pairs; a learning rate keeps 3 significant digits (3e-05, not 0.0000)."""

    def value(name, v):
        if name == "examples_per_second":
            return f"{v:.1f} ex/s"
        if name == "learning_rate":
            return f"{name} {v:.3g}"
        return f"{name} {v:.4f}"

    return " ".join(value(k, v) for k, v in metrics.items())


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
def _input_errors_named():
    """A failed check of the reader's (a corrupted file, ids outside the vocabulary, lengths other
    than the flags') becomes its one-line UserError; anything else passes unchanged."""
    from albert_tf.datasets import input_error

    try:
        yield
    except tf.errors.InvalidArgumentError as error:
        user_error = input_error(error)
        if user_error is None:
            raise
        raise user_error from error


def run_loop(
    run: TrainingLoop,
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

    Returns a dict with `step`, `train` (the last call's metrics), `eval` (the last evaluation, or
    None), `resumed_from` (the step started from, or None from 0) and `examples_per_second` (the
    steady rate: the first call, which traces and compiles, is left out when others ran; None if
    nothing ran).
    """
    options = run.options
    total, save_every = options.num_train_steps, options.save_checkpoints_steps
    eval_every = eval_every_steps or save_every
    start = run.current_step
    iterator = iter(run.distribute(dataset_fn, run.per_replica_batch, skip_steps=start))
    train_writer = summary_writer(options, run.is_chief, "train")
    eval_writer = summary_writer(options, run.is_chief, "eval") if evaluate is not None else None
    progress = None
    if options.progress_bar and run.is_chief:
        from tqdm import tqdm

        progress = tqdm(total=total, initial=start, unit="step", dynamic_ncols=True)

    step, metrics, eval_metrics, rates = start, {}, None, []
    # A SIGTERM (a preemption) saves at the next loop boundary on every worker; a lost worker ends
    # the others with one line (albert_tf/preemption.py, strategies.lost_workers_named).
    with PreemptionWatcher(run.strategy) as preemption, \
            lost_workers_named(run.strategy, options.output_dir, lambda: run.current_step), \
            _closed_at_the_end(progress, train_writer, eval_writer):
        while step < total:
            boundaries = [total - step, save_every - step % save_every]
            if evaluate is not None:
                boundaries.append(eval_every - step % eval_every)
            num_steps = min(options.steps_per_loop, *boundaries)
            began = time.perf_counter()
            with _input_errors_named():
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
                progress.set_postfix_str(format_metrics({k: metrics[k] for k in run.progress_metrics}))
            else:  # the progress bar already shows the step
                logging.info("step %d/%d %s", step, total, format_metrics(metrics))

            preempted = preemption.should_stop()  # the same answer on every worker
            if preempted or step % save_every == 0 or step == total:
                logging.info("saved %s", saved := run.save())
            if preempted:
                raise preemption.stopped(step, saved)
            if evaluate is not None and (step % eval_every == 0 or step == total):
                eval_metrics = evaluate()
                write_scalars(eval_writer, eval_metrics, step)
                if run.is_chief:  # a result the user wants, with or without the bar (which it must not break)
                    line = f"eval at step {step}: {format_metrics(eval_metrics)}"
                    if progress is not None:
                        progress.write(line, file=sys.stderr)
                    else:
                        print(line, file=sys.stderr, flush=True)
    if not run.is_chief:
        shutil.rmtree(os.path.join(options.output_dir, ".workers"), ignore_errors=True)

    steady = rates[1:] or rates
    rate = sum(n for n, _ in steady) * options.train_batch_size / sum(t for _, t in steady) if steady else None
    return {"step": step, "train": metrics, "eval": eval_metrics, "resumed_from": start or None,
            "examples_per_second": rate}


class Pretraining(TrainingLoop):
    """One pretraining run: an `AlbertPretrainer` trained on masked-LM plus sentence-order loss.

    `pretrain()` drives it; tests use it directly to run single loops and inspect the weights.
    """

    metric_names = TRAIN_METRICS
    progress_metrics = ("loss", "mlm_accuracy", "sop_accuracy")

    def __init__(self, config: AlbertConfig, options: PretrainingOptions, strategy=None):
        super().__init__(config, options, strategy, optimizer_name=options.optimizer)
        self._eval_step = tf.function(self._eval_step_fn)

    def _create_model(self, dtype):
        return AlbertPretrainer(self.config, dtype=dtype)

    def _initializer(self):
        path = self.options.init_checkpoint
        if not path:
            return None
        from albert_tf.presets.loader import initialize_pretrainer

        return lambda model: initialize_pretrainer(model, path)

    # ---- steps -------------------------------------------------------------------------------

    def _denominators(self, ctx, features):
        weights = tf.reduce_sum(tf.cast(features["masked_lm_weights"], tf.float32))
        return {
            "weight": ctx.all_reduce(tf.distribute.ReduceOp.SUM, weights) + _WEIGHT_EPSILON,
            "examples": tf.constant(float(self.options.train_batch_size)),
        }

    def _loss_parts(self, features, denominators):
        outputs = self.model(features, training=True)
        sums = pretraining_sums(features, outputs["mlm_logits"], outputs["sop_logits"])
        return {
            "mlm_loss": sums["mlm_ce"] / denominators["weight"],
            "sop_loss": sums["sop_ce"] / denominators["examples"],
            "mlm_accuracy": sums["mlm_hits"] / denominators["weight"],
            "sop_accuracy": sums["sop_hits"] / denominators["examples"],
        }

    def _total_loss(self, parts):
        return parts["mlm_loss"] + parts["sop_loss"]

    # ---- evaluation --------------------------------------------------------------------------

    def _eval_replica(self, features):
        outputs = self.model(features, training=False)
        return pretraining_sums(features, outputs["mlm_logits"], outputs["sop_logits"])

    def _eval_step_fn(self, features):
        sums = self.strategy.run(self._eval_replica, args=(features,))
        return {k: self.strategy.reduce(tf.distribute.ReduceOp.SUM, v, axis=None) for k, v in sums.items()}

    def evaluate(self, dataset) -> dict[str, float]:
        """Masked-LM and SOP loss and accuracy over `dataset` (a distributed dataset)."""
        totals = None
        with _input_errors_named():
            for i, features in enumerate(dataset):
                if self.options.max_eval_steps and i >= self.options.max_eval_steps:
                    break
                sums = {k: float(v) for k, v in self._eval_step(features).items()}
                totals = sums if totals is None else {k: totals[k] + sums[k] for k in totals}
        if not totals:
            raise ValueError("the eval input holds no records")
        metrics = {k: float(v) for k, v in losses_from_sums(totals).items()}
        metrics["examples"] = totals["examples"]
        return metrics


def file_dataset_fn(files: list[str], options: PretrainingOptions, is_training: bool,
                    vocab_size: Optional[int] = None) -> DatasetFn:
    """A `DatasetFn` reading pretraining TFRecords with albert_tf.datasets (token ids checked
    against `vocab_size` when given)."""
    from albert_tf.datasets import pretraining_dataset

    def fn(input_context, batch_size):
        return pretraining_dataset(
            files,
            batch_size=batch_size,
            max_seq_length=options.max_seq_length,
            max_predictions_per_seq=options.max_predictions_per_seq,
            is_training=is_training,
            input_context=input_context,
            seed=options.seed,
            deterministic=True,
            vocab_size=vocab_size,
        )

    return fn


def pretrain(
    config: AlbertConfig,
    options: PretrainingOptions,
    strategy=None,
    train_dataset_fn: Optional[DatasetFn] = None,
    eval_dataset_fn: Optional[DatasetFn] = None,
    export_fn: Optional[Callable[[AlbertPretrainer, str], None]] = None,
) -> dict:
    """Pretrains (or resumes pretraining) to `options.num_train_steps`; returns the last metrics.

    `train_dataset_fn(input_context, per_replica_batch)` (and `eval_dataset_fn`) default to the
    TFRecords of `options.input_file` (and `options.eval_input_file`). `export_fn(model, dir)`
    runs on the chief at the end with `<output_dir>/export`.

    Returns what `run_loop` returns (`step`, `train`, `eval`, `resumed_from`,
    `examples_per_second`) and `model`, the trained `AlbertPretrainer`.
    """
    if train_dataset_fn is None:
        files = expand_globs(options.input_file, "input_file")
        check_record_shapes(files, options.max_seq_length, options.max_predictions_per_seq)
        train_dataset_fn = file_dataset_fn(files, options, is_training=True, vocab_size=config.vocab_size)
    if eval_dataset_fn is None and options.eval_input_file:
        eval_files = expand_globs(options.eval_input_file, "eval_input_file")
        check_record_shapes(eval_files, options.max_seq_length, options.max_predictions_per_seq)
        eval_dataset_fn = file_dataset_fn(eval_files, options, is_training=False, vocab_size=config.vocab_size)

    run = Pretraining(config, options, strategy)
    run.restore_or_initialize()
    evaluate = None
    if eval_dataset_fn is not None:
        eval_data = run.distribute(eval_dataset_fn, run.per_replica_eval_batch)
        evaluate = functools.partial(run.evaluate, eval_data)
    result = run_loop(run, train_dataset_fn, evaluate, options.eval_every_steps)
    if run.is_chief:
        (export_fn or export_encoder)(run.model, os.path.join(options.output_dir, "export"))
    return {**result, "model": run.model}


class _EncoderServing(tf.Module):
    def __init__(self, encoder):
        super().__init__()
        self.encoder = encoder

    @tf.function(
        input_signature=[
            tf.TensorSpec([None, None], tf.int32, name="input_ids"),
            tf.TensorSpec([None, None], tf.int32, name="input_mask"),
            tf.TensorSpec([None, None], tf.int32, name="segment_ids"),
        ]
    )
    def serve(self, input_ids, input_mask, segment_ids):
        outputs = self.encoder(
            {"input_ids": input_ids, "input_mask": input_mask, "segment_ids": segment_ids},
            training=False,
        )
        return {k: tf.cast(v, tf.float32) for k, v in outputs.items()}


def export_encoder(model: AlbertPretrainer, export_dir: str):
    """Saves the encoder as a SavedModel with a `serving_default` signature on token ids.

    Kept to one function so that albert_tf.export (named signatures for serialized examples and raw
    text) can replace it.
    """
    module = _EncoderServing(model.encoder)
    tf.saved_model.save(module, export_dir, signatures={"serving_default": module.serve})
    logging.info("exported the encoder to %s", export_dir)
