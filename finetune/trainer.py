"""The one fine-tuning trainer: any `finetune.task.FinetuningTask` on albert_tf's trainer.

`FinetuneOptions` (finetune/options.py) extends the loop's options with fine-tuning's own;
`Finetuning` is `albert_tf.training.loop.Trainer` (the task's model and loss, each replica's share of
the global batch's sums, and the release's AdamW) with fine-tuning's input and prediction;
strategies, XLA, mixed precision, checkpoints in
`output_dir` (with dropout's seed states), resumption on the data the interrupted run would have
read next, TensorBoard summaries and curves.png, the progress bar and the Python driver are the
loop's, as in pretraining.

Batching happens in one place, `dataset_fn` (over `finetune.inputs.make_dataset`). Evaluation and
prediction run the task's compiled forward pass on full batches (the last one completed with filler
records of weight 0), gather every replica's outputs and put them back in file order: no record is
dropped and none is counted twice.

Example:
    >>> options = FinetuneOptions(output_dir="/tmp/mrpc", train_batch_size=32, learning_rate=2e-5,
    ...                           num_train_steps=800, num_warmup_steps=200)
    >>> run = Finetuning(config, GlueTask("MRPC", "glue_data"), options, strategy)
    >>> run.restore_or_initialize(lambda model: initialize_encoder(model, "pretrain_dir"))
    >>> train(run, train_features)
    >>> predictions, rate = run.predict(dev_features)
"""

from __future__ import annotations

import os
import time
from typing import Optional

import numpy as np
import tensorflow as tf

from albert_tf.training import loop
from albert_tf.checkpoints.run_folder import disk_refusals_named
from albert_tf.config import AlbertConfig
from albert_tf.data.features import EXAMPLE_WEIGHT
from albert_tf.utils.validation import check_positions
from finetune import inputs
from finetune.cache import CachedFeatures
from finetune.options import FinetuneOptions
from finetune.task import FinetuningTask

# Where the task cuts batches to length buckets, evaluation and prediction (and training, with
# `group_by_length`) order the records of each window of this many batches by length
# (`finetune.inputs.make_dataset`'s `sort_window`).
SORT_WINDOW = 32


class Finetuning(loop.Trainer):
    """One fine-tuning run of `task`'s model on the trainer, with its input and prediction."""

    def __init__(self, config: AlbertConfig, task: FinetuningTask, options: FinetuneOptions, strategy=None):
        check_positions(options.max_seq_length, config.max_position_embeddings)
        super().__init__(config, task, options, strategy)
        self._forward = tf.function(self._forward_impl, jit_compile=options.jit_compile)
        # Length-bucketed batches differ in their last axis: traced once for any length (after the
        # first), not once a bucket; XLA still compiles one program a shape.
        self._predict_step = tf.function(self._predict_step_fn, reduce_retracing=True)

    def write_copy(self, name: str) -> str:
        """Writes the whole state as checkpoint `name` in output_dir (every worker takes part; only
        the chief's copy is kept), beside the numbered ones; returns its prefix."""
        directory = self.options.output_dir if self.is_chief else self.manager.directory
        with disk_refusals_named(os.path.join(directory, name)):
            return self.checkpoint.write(os.path.join(directory, name))

    # ---- input -------------------------------------------------------------------------------

    def dataset_fn(self, cached: CachedFeatures, for_training: bool) -> loop.DatasetFn:
        """A `DatasetFn` of the cached features: shuffled and repeated for training, else one
        pass completed to full batches, each record with its position (in file order). Where the
        task has length buckets, records are sorted by length within windows of `SORT_WINDOW`
        batches (in training with `group_by_length`). The one place where fine-tuning input is
        batched."""
        options = self.options
        buckets = self.task.length_buckets(options.max_seq_length)
        if isinstance(self.strategy, tf.distribute.TPUStrategy):
            buckets = None  # a TPU program needs every shape static

        sort = buckets is not None and (options.group_by_length or not for_training)

        def fn(input_context, batch_size):
            return inputs.make_dataset(
                cached, global_batch_size=batch_size * input_context.num_replicas_in_sync,
                training=for_training, input_context=input_context, seed=options.seed,
                with_index=not for_training,
                max_records=options.max_train_examples if for_training else None,
                length_buckets=buckets,
                sort_window=SORT_WINDOW if sort else None,
            )

        return fn

    # ---- prediction --------------------------------------------------------------------------

    def _forward_impl(self, features):
        return self.task.predict_outputs(self.model, features)

    def _predict_step_fn(self, batch):
        # Through a Python function: handed to strategy.run itself, the XLA-compiled forward pass
        # reads every replica's variables from the first device, which XLA refuses.
        outputs = self.strategy.run(lambda x: self._forward(x), args=(batch,))
        kept = {name: batch[name] for name in (*self.task.prediction_features, EXAMPLE_WEIGHT, inputs.RECORD_INDEX)}
        return {name: self.strategy.gather(value, axis=0) for name, value in {**outputs, **kept}.items()}

    def predict(self, cached: CachedFeatures) -> tuple[dict[str, np.ndarray], float]:
        """The task's outputs and `prediction_features` on every record of `cached`, in file
        order, fillers removed; and the records per second."""
        parts: dict[str, list] = {}
        began = time.perf_counter()
        for batch in self.distribute(self.dataset_fn(cached, for_training=False), self.per_replica_eval_batch):
            for name, value in self._predict_step(batch).items():
                parts.setdefault(name, []).append(value.numpy())
        elapsed = time.perf_counter() - began
        arrays = {name: np.concatenate(values) for name, values in parts.items()}
        real = arrays.pop(EXAMPLE_WEIGHT) > 0
        index = arrays.pop(inputs.RECORD_INDEX)[real]
        order = np.argsort(index, kind="stable")
        if not np.array_equal(index[order], np.arange(cached.num_records)):
            raise RuntimeError(f"prediction saw {index.size} of the {cached.num_records} records "
                               f"of {cached.path} (or some twice)")
        return {name: value[real][order] for name, value in arrays.items()}, cached.num_records / elapsed


def train(run: Finetuning, cached: CachedFeatures, evaluate=None, eval_every_steps: Optional[int] = None) -> dict:
    """Trains (or resumes training) to `num_train_steps` with `albert_tf.training.loop.run_loop`;
    `evaluate()`, if given, runs at every checkpoint (or every `eval_every_steps`) and at the end,
    its metrics going to TensorBoard's `eval/`. Returns what `run_loop` returns: `step`, `train`
    (the last loop's metrics), `eval` (the last evaluation), `resumed_from`, `started` (where the
    run took its state from), `curves` (curves.png) and `examples_per_second` (the steady rate)."""
    return loop.run_loop(run, run.dataset_fn(cached, for_training=True), evaluate, eval_every_steps)
