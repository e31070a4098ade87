"""GLUE fine-tuning: a classifier (or regressor) on the one training loop of albert_tf.training.

`GlueFinetuning` supplies the loop with the classifier, its loss (each replica's share of the
global batch's mean) and the release's AdamW; strategies, checkpoints in `output_dir` (with dropout's
seed states), resumption on the data the interrupted run would have read next, and the Python
driver are the loop's, as in pretraining.

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
import time
from typing import Optional

import numpy as np
import tensorflow as tf

from albert_tf import training
from albert_tf.config import AlbertConfig
from finetune.glue import data
from finetune.glue.model import GlueClassifier, classifier_sums
from finetune.glue.tasks import Task

TASK_FILE = "glue_task.json"
TRAIN_METRICS = ("loss", "accuracy")


@dataclasses.dataclass(frozen=True)
class FinetuneOptions(training.TrainingOptions):
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
        super().__post_init__()
        if self.max_train_examples is not None and self.max_train_examples < 1:
            raise ValueError(f"max_train_examples must be positive, got {self.max_train_examples}")


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


class GlueFinetuning(training.TrainingLoop):
    """One fine-tuning run: a `GlueClassifier` for `task` on the training loop, with prediction."""

    def __init__(self, config: AlbertConfig, task: Task, options: FinetuneOptions, strategy=None):
        if options.max_seq_length > config.max_position_embeddings:
            raise ValueError(f"max_seq_length {options.max_seq_length} exceeds the model's "
                             f"max_position_embeddings ({config.max_position_embeddings})")
        self.task = task
        super().__init__(config, options, strategy, optimizer_name="adamw")
        self._forward = tf.function(self._forward_impl, jit_compile=options.jit_compile)
        self._predict_step = tf.function(self._predict_step_fn)

    def _check_output_dir(self):
        super()._check_output_dir()
        check_task_of_output_dir(self.options.output_dir, self.task, write=self.is_chief)

    def _create_model(self, dtype):
        return GlueClassifier(self.config, self.task.num_labels, self.options.classifier_dropout, dtype=dtype)

    @property
    def metric_names(self) -> tuple[str, ...]:
        return ("loss",) if self.model.is_regression else TRAIN_METRICS

    def _loss_parts(self, batch, denominators):
        inputs, label_ids, weights = batch
        logits = self.model(inputs, training=True)
        sums = classifier_sums(logits, label_ids, weights, self.model.is_regression)
        # Normalised by the global batch: the sum over replicas is the batch's mean loss.
        batch_size = float(self.options.train_batch_size)
        return {"loss": sums["loss"] / batch_size, "accuracy": sums["hits"] / batch_size}

    # ---- input -------------------------------------------------------------------------------

    def dataset_fn(self, cached: data.CachedFeatures, for_training: bool) -> training.DatasetFn:
        """A `DatasetFn` of the cached features: shuffled and repeated for training, else one
        pass in file order padded to full batches, each record with its position."""
        options = self.options

        def fn(input_context, batch_size):
            return data.make_dataset(
                cached, global_batch_size=batch_size * input_context.num_replicas_in_sync,
                training=for_training, input_context=input_context, seed=options.seed,
                with_index=not for_training, max_examples=options.max_train_examples if for_training else None,
            )

        return fn

    # ---- prediction --------------------------------------------------------------------------

    def _forward_impl(self, inputs):
        return self.model(inputs, training=False)

    def _predict_step_fn(self, batch):
        inputs, label_ids, weights, index = batch
        # Through a Python function: handed to strategy.run itself, the XLA-compiled forward pass
        # reads every replica's variables from the first device, which XLA refuses.
        outputs = self.strategy.run(lambda x: self._forward(x), args=(inputs,))
        gathered = [outputs, label_ids, weights, index]
        return [self.strategy.gather(x, axis=0) for x in gathered]

    def predict(self, cached: data.CachedFeatures):
        """The model's outputs on every example of `cached`, in file order, padding removed.

        Returns `(outputs [N, num_labels], label_ids [N], examples_per_second)`.
        """
        parts = [[], [], [], []]
        began = time.perf_counter()
        for batch in self.distribute(self.dataset_fn(cached, for_training=False), self.per_replica_eval_batch):
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


def train(run: GlueFinetuning, cached: data.CachedFeatures) -> dict:
    """Trains (or resumes training) to `num_train_steps` with `albert_tf.training.run_loop`, no
    evaluation on the way; returns its `{"step", "train", "eval" (None), "resumed_from",
    "examples_per_second"}` (the last loop's metrics and the steady rate)."""
    return training.run_loop(run, run.dataset_fn(cached, for_training=True))
