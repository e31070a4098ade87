"""Fine-tuning on the one trainer: any `finetune.task.FinetuningTask` runs on
`albert_tf.training.loop.Trainer`, as pretraining's task does; this module adds fine-tuning's input
and its use of the trainer's evaluation.

`FinetuneOptions` (finetune/options.py) extends the loop's options with fine-tuning's own. The
trainer builds the task's model and the release's AdamW, trains on each replica's share of the
global batch's sums, and owns strategies, XLA, mixed precision, checkpoints in `output_dir` (with
dropout's seed states), resumption on the data the interrupted run would have read next,
TensorBoard summaries, curves.png, the progress bar and the Python driver, as in pretraining.

Batching happens in one place, `dataset_fn` (over `finetune.inputs.make_dataset`). Prediction is
the trainer's `evaluate` (the task's `validation_step` on full batches, the last one completed with
filler records of weight 0, every replica's outputs gathered; the task puts them back in file
order): no record is dropped and none is counted twice.

Example:
    >>> options = FinetuneOptions(output_dir="/tmp/mrpc", train_batch_size=32, learning_rate=2e-5,
    ...                           num_train_steps=800, num_warmup_steps=200)
    >>> task = GlueTask("MRPC", "glue_data")
    >>> run = Trainer(config, task, options, strategy)
    >>> run.restore_or_initialize(lambda model: initialize_encoder(model, "pretrain_dir"))
    >>> train(run, train_features)
    >>> predictions, rate = predict(run, dev_features)
    >>> task.evaluate("dev", predictions, dev_features)
"""

from __future__ import annotations

import time
from typing import Optional

import numpy as np
import tensorflow as tf

from albert_tf.training import loop
from finetune import inputs
from finetune.cache import CachedFeatures

# Where the task cuts batches to length buckets, evaluation and prediction (and training, with
# `group_by_length`) order the records of each window of this many batches by length
# (`finetune.inputs.make_dataset`'s `sort_window`).
SORT_WINDOW = 32


def dataset_fn(run: loop.Trainer, cached: CachedFeatures, for_training: bool) -> loop.DatasetFn:
    """A `DatasetFn` of the cached features for `run`: shuffled and repeated for training, else one
    pass completed to full batches, each record with its position (in file order). Where the task
    has length buckets, records are sorted by length within windows of `SORT_WINDOW` batches (in
    training with `group_by_length`). The one place where fine-tuning input is batched."""
    options = run.options
    buckets = run.task.length_buckets(options.max_seq_length)
    if isinstance(run.strategy, tf.distribute.TPUStrategy):
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


def predict(run: loop.Trainer, cached: CachedFeatures) -> tuple[dict[str, np.ndarray], float]:
    """The task's outputs and `prediction_features` on every record of `cached`, in file order,
    fillers removed (the trainer's `evaluate`); and the records per second."""
    began = time.perf_counter()
    predictions = run.evaluate(run.distribute(dataset_fn(run, cached, for_training=False), run.per_replica_eval_batch),
                               cached=cached)
    return predictions, cached.num_records / (time.perf_counter() - began)


def train(run: loop.Trainer, cached: CachedFeatures, evaluate=None, eval_every_steps: Optional[int] = None) -> dict:
    """Trains (or resumes training) to `num_train_steps` with `albert_tf.training.loop.run_loop`;
    `evaluate()`, if given, runs at every checkpoint (or every `eval_every_steps`) and at the end,
    its metrics going to TensorBoard's `eval/`. Returns what `run_loop` returns: `step`, `train`
    (the last loop's metrics), `eval` (the last evaluation), `resumed_from`, `started` (where the
    run took its state from), `curves` (curves.png) and `examples_per_second` (the steady rate)."""
    return loop.run_loop(run, dataset_fn(run, cached, for_training=True), evaluate, eval_every_steps)
