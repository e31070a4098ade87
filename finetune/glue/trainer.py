"""The GLUE fine-tuning loop: the same strategy-aware custom loop as pretraining, for a classifier.

As in `albert_tf.training` (whose helpers it uses): `strategy.run` inside a `tf.function` running
`steps_per_loop` updates per call, datasets built once per input context with per-replica batches,
the loss of each replica normalised by the global batch so that the gradients summed across
replicas are those of the whole batch, the release's AdamW on a warmup-then-linear-decay schedule,
checkpoints (model, optimizer, step) every `save_checkpoints_steps` in `output_dir`, from which a
rerun resumes on the data the interrupted run would have read next.

Evaluation and prediction run the compiled forward pass on full batches (the last one padded with
rows of weight 0), gather every replica's outputs and put them back in file order.

Example:
    >>> options = FinetuneOptions(output_dir="/tmp/mrpc", train_batch_size=32, learning_rate=2e-5,
    ...                           num_train_steps=800, num_warmup_steps=200)
    >>> run = GlueFinetuning(config, get_task("MRPC"), options, strategy)
    >>> run.restore_or_initialize(lambda model: initialize_encoder(model, "pretrain_dir"))
    >>> train(run, train_features)
    >>> run.predict(dev_features)
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import time
from typing import Callable, Optional

import keras
import numpy as np
import tensorflow as tf
from absl import logging

from albert_tf import optimization, training
from albert_tf.validation import require_positive_ints
from albert_tf.config import AlbertConfig
from finetune.glue import data
from finetune.glue.model import GlueClassifier, classifier_sums
from finetune.glue.tasks import Task

TASK_FILE = "glue_task.json"
TRAIN_METRICS = ("loss", "accuracy")


@dataclasses.dataclass(frozen=True)
class FinetuneOptions:
    """How to fine-tune; the task's paper preset (finetune.glue.hparams) fills the CLI's defaults.

    `train_batch_size` and `eval_batch_size` are global batches, split across replicas.
    """

    output_dir: str
    train_batch_size: int = 32
    eval_batch_size: int = 32
    max_seq_length: int = 512
    learning_rate: float = 2e-5
    num_train_steps: int = 800
    num_warmup_steps: int = 200
    weight_decay: float = 0.01
    classifier_dropout: float = 0.1
    save_checkpoints_steps: int = 1000
    keep_checkpoint_max: int = 3
    steps_per_loop: int = 50
    mixed_precision: str = "none"
    jit_compile: bool = True
    max_train_examples: Optional[int] = None
    seed: int = 12345
    progress_bar: bool = False

    def __post_init__(self):
        positive = ("train_batch_size", "eval_batch_size", "max_seq_length", "num_train_steps",
                    "save_checkpoints_steps", "keep_checkpoint_max", "steps_per_loop")
        require_positive_ints({name: getattr(self, name) for name in positive})
        if not 0 <= self.num_warmup_steps <= self.num_train_steps:
            raise ValueError(f"num_warmup_steps must be in [0, num_train_steps={self.num_train_steps}], "
                             f"got {self.num_warmup_steps}")
        if self.mixed_precision not in training.MIXED_PRECISION_POLICIES:
            raise ValueError(f"mixed_precision must be one of {', '.join(training.MIXED_PRECISION_POLICIES)}, "
                             f"got {self.mixed_precision!r}")
        if self.max_train_examples is not None and self.max_train_examples < 1:
            raise ValueError(f"max_train_examples must be positive, got {self.max_train_examples}")
        if not self.output_dir:
            raise ValueError("output_dir must be given")


def check_task_of_output_dir(output_dir: str, task: Task, write: bool):
    """Refuses an output_dir holding another task's checkpoints: their heads have other shapes, or
    worse, the same shape and other label meanings (RTE vs QNLI)."""
    path = os.path.join(output_dir, TASK_FILE)
    if tf.io.gfile.exists(path):
        with tf.io.gfile.GFile(path) as f:
            saved = json.load(f)["task"]
        if saved != task.name:
            raise ValueError(f"output_dir {output_dir} holds a {saved} run, not {task.name}; "
                             f"use a fresh output_dir")
    elif write:
        tf.io.gfile.makedirs(output_dir)
        with tf.io.gfile.GFile(path, "w") as f:
            f.write(json.dumps({"task": task.name, "labels": task.labels}) + "\n")


class GlueFinetuning:
    """The state of one fine-tuning run: classifier, optimizer, checkpoints and compiled steps."""

    def __init__(self, config: AlbertConfig, task: Task, options: FinetuneOptions, strategy=None):
        self.config = config
        self.task = task
        self.options = options
        self.strategy = strategy or tf.distribute.get_strategy()
        self.num_replicas = self.strategy.num_replicas_in_sync
        self.per_replica_batch = training.replica_batch_size(options.train_batch_size, self.num_replicas)
        training.replica_batch_size(options.eval_batch_size, self.num_replicas)  # fails on an uneven split
        if options.max_seq_length > config.max_position_embeddings:
            raise ValueError(f"max_seq_length {options.max_seq_length} exceeds the model's "
                             f"max_position_embeddings ({config.max_position_embeddings})")
        # Public on every strategy: True on the one worker whose files are kept.
        self.is_chief = self.strategy.extended.should_checkpoint
        training.check_output_dir(options.output_dir, config, write=self.is_chief)
        check_task_of_output_dir(options.output_dir, task, write=self.is_chief)
        self.schedule = optimization.WarmupPolynomialDecay(
            options.learning_rate, options.num_train_steps, options.num_warmup_steps
        )

        keras.utils.set_random_seed(options.seed)
        policy = training.MIXED_PRECISION_POLICIES[options.mixed_precision]
        with self.strategy.scope():
            self.model = GlueClassifier(config, task.num_labels, options.classifier_dropout,
                                        dtype=keras.DTypePolicy(policy) if policy else None)
            self.model.build()
            optimizer = optimization.create_optimizer(
                "adamw", options.learning_rate, num_train_steps=options.num_train_steps,
                num_warmup_steps=options.num_warmup_steps, weight_decay=options.weight_decay,
            )
            if options.mixed_precision == "fp16":
                optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
            self.optimizer = optimizer
            self.optimizer.build(self.model.trainable_variables)
            self.step = self.optimizer.iterations
        weights = training.model_weights(self.model)
        # Dropout's seed-generator states too: a resumed run then draws the masks that the
        # uninterrupted run would have drawn, and ends on the same weights.
        in_weights = {id(v) for v in weights.values()}
        rng = [v for v in self.model.variables if id(v) not in in_weights]
        self.checkpoint = tf.train.Checkpoint(model=weights, rng=rng, optimizer=self.optimizer, step=self.step)
        directory = options.output_dir
        if not self.is_chief:
            # Every worker takes part in a save (it may run collectives); only the chief's is kept.
            task_id = getattr(getattr(self.strategy, "cluster_resolver", None), "task_id", 0)
            directory = os.path.join(options.output_dir, ".workers", f"worker_{task_id or 0}")
        self.manager = tf.train.CheckpointManager(self.checkpoint, directory,
                                                  max_to_keep=options.keep_checkpoint_max, checkpoint_name="ckpt")
        self._train_loop = tf.function(self._train_loop_fn)
        self._grad_fn = tf.function(self._grad_fn_impl, jit_compile=options.jit_compile)
        self._forward = tf.function(self._forward_impl, jit_compile=options.jit_compile)
        self._predict_step = tf.function(self._predict_step_fn)

    # ---- state -------------------------------------------------------------------------------

    @property
    def current_step(self) -> int:
        return int(self.step.numpy())

    def restore_or_initialize(self, initialize: Callable[[GlueClassifier], str] | None = None) -> int:
        """Resumes from the latest checkpoint in output_dir, else calls `initialize(model)` (which
        loads the encoder's starting weights). Returns the step reached."""
        latest = tf.train.latest_checkpoint(self.options.output_dir)
        if latest:
            self.checkpoint.restore(latest).assert_consumed()
            logging.info("resumed from %s at step %d", latest, self.current_step)
        elif initialize is not None:
            source = initialize(self.model)
            logging.info("encoder initialised from %s", source)
        return self.current_step

    def save(self) -> str:
        return self.manager.save(checkpoint_number=self.current_step)

    # ---- input -------------------------------------------------------------------------------

    def distribute(self, cached: data.CachedFeatures, for_training: bool, skip_batches: int = 0):
        """The cached features as a distributed dataset of per-replica batches."""
        options = self.options
        batch = options.train_batch_size if for_training else options.eval_batch_size

        def fn(input_context):
            dataset = data.make_dataset(
                cached, global_batch_size=batch, training=for_training, input_context=input_context,
                seed=options.seed, with_index=not for_training,
                max_examples=options.max_train_examples if for_training else None,
            )
            # Each update consumes one per-replica batch per replica: skipping those that the
            # checkpointed steps consumed puts a resumed run on the data it would have read next.
            return dataset.skip(skip_batches) if skip_batches else dataset

        return self.strategy.distribute_datasets_from_function(fn)

    # ---- steps -------------------------------------------------------------------------------

    def _grad_fn_impl(self, inputs, label_ids, weights):
        variables = self.model.trainable_variables
        with tf.GradientTape() as tape:
            logits = self.model(inputs, training=True)
            sums = classifier_sums(logits, label_ids, weights, self.model.is_regression)
            # Normalised by the global batch: the sum over replicas is the batch's mean loss.
            loss = sums["loss"] / float(self.options.train_batch_size)
            scaled = self.optimizer.scale_loss(loss) if self.options.mixed_precision == "fp16" else loss
        grads = tape.gradient(scaled, variables)
        return grads, {"loss": loss, "accuracy": sums["hits"] / float(self.options.train_batch_size)}

    def _replica_step(self, batch):
        inputs, label_ids, weights = batch
        grads, parts = self._grad_fn(inputs, label_ids, weights)
        # The optimizer sums the gradients across replicas, then clips their global norm.
        self.optimizer.apply(grads, self.model.trainable_variables)
        return parts

    def _train_loop_fn(self, iterator, num_steps):
        totals = {k: tf.constant(0.0) for k in TRAIN_METRICS}
        for _ in tf.range(num_steps):
            parts = self.strategy.run(self._replica_step, args=(next(iterator),))
            totals = {k: totals[k] + self.strategy.reduce(tf.distribute.ReduceOp.SUM, parts[k], axis=None)
                      for k in TRAIN_METRICS}
        return {k: v / tf.cast(num_steps, tf.float32) for k, v in totals.items()}

    def train_steps(self, iterator, num_steps: int) -> dict[str, float]:
        """Runs `num_steps` updates in one call; returns the metrics averaged over them."""
        metrics = self._train_loop(iterator, tf.constant(num_steps, tf.int32))
        metrics = {k: float(v) for k, v in metrics.items()}
        if self.model.is_regression:
            metrics.pop("accuracy")
        return metrics

    def _forward_impl(self, inputs):
        return self.model(inputs, training=False)

    def _predict_step_fn(self, batch):
        inputs, label_ids, weights, index = batch
        outputs = self.strategy.run(self._forward, args=(inputs,))
        gathered = [outputs, label_ids, weights, index]
        return [self.strategy.gather(x, axis=0) for x in gathered]

    def predict(self, cached: data.CachedFeatures):
        """The model's outputs on every example of `cached`, in file order, padding removed.

        Returns `(outputs [N, num_labels], label_ids [N], examples_per_second)`.
        """
        parts = [[], [], [], []]
        began = time.perf_counter()
        for batch in self.distribute(cached, for_training=False):
            for part, value in zip(parts, self._predict_step(batch)):
                part.append(value.numpy())
        elapsed = time.perf_counter() - began
        outputs, label_ids, weights, index = (np.concatenate(p) for p in parts)
        real = weights > 0
        order = np.argsort(index[real], kind="stable")
        outputs, label_ids, index = outputs[real][order], label_ids[real][order], index[real][order]
        if not np.array_equal(index, np.arange(cached.num_examples)):
            raise RuntimeError(f"prediction saw {index.size} of the {cached.num_examples} examples "
                               f"of {cached.path} (or some twice)")
        return outputs, label_ids, cached.num_examples / elapsed

    def learning_rate_at(self, step: int) -> float:
        return float(self.schedule(step))


def train(run: GlueFinetuning, cached: data.CachedFeatures) -> dict:
    """Trains (or resumes training) to `num_train_steps`; returns `{"step", "train",
    "resumed_from", "examples_per_second"}` (the last loop's metrics and the mean rate)."""
    options = run.options
    start = run.current_step
    iterator = iter(run.distribute(cached, for_training=True, skip_batches=start))
    writer = training._summary_writer(options, run.is_chief, "train")
    progress = None
    if options.progress_bar and run.is_chief:
        from tqdm import tqdm

        progress = tqdm(total=options.num_train_steps, initial=start, unit="step", dynamic_ncols=True)
    step, metrics, rates = start, {}, []
    while step < options.num_train_steps:
        next_save = (step // options.save_checkpoints_steps + 1) * options.save_checkpoints_steps
        num_steps = min(options.steps_per_loop, options.num_train_steps - step, next_save - step)
        began = time.perf_counter()
        metrics = run.train_steps(iterator, num_steps)
        elapsed = time.perf_counter() - began
        step = run.current_step
        if not np.isfinite(metrics["loss"]):
            raise FloatingPointError(f"loss is {metrics['loss']} at step {step}")
        metrics["learning_rate"] = run.learning_rate_at(step - 1)
        metrics["examples_per_second"] = num_steps * options.train_batch_size / elapsed
        rates.append((num_steps, elapsed))
        training._write_scalars(writer, metrics, step)
        if progress is not None:
            progress.update(num_steps)
            progress.set_postfix_str(training.format_metrics(
                {k: metrics[k] for k in TRAIN_METRICS if k in metrics}))
        logging.info("step %d/%d %s", step, options.num_train_steps, training.format_metrics(metrics))
        if step % options.save_checkpoints_steps == 0 or step == options.num_train_steps:
            logging.info("saved %s", run.save())
    if progress is not None:
        progress.close()
    writer.flush()
    if not run.is_chief:
        shutil.rmtree(os.path.join(options.output_dir, ".workers"), ignore_errors=True)
    # The first loop includes tracing and compilation: the steady rate leaves it out if it can.
    steady = rates[1:] or rates
    rate = sum(n for n, _ in steady) * options.train_batch_size / sum(t for _, t in steady) if steady else None
    return {"step": step, "train": metrics, "resumed_from": start or None, "examples_per_second": rate}
