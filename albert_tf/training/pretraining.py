"""Pretraining as a task of the one trainer: `PretrainingTask` trains an `AlbertPretrainer` (the
model, albert_tf.models.pretrainer) on masked-LM plus sentence-order loss, as Model Garden's masked_lm is
a Task on the trainer that runs sentence_prediction.

`albert_tf.training.loop` is the trainer (options, strategies' replicas, checkpoints, resumption, the
compiled steps, evaluation and the Python driver); this module adds what pretraining alone needs:
the checks of its TFRecords, its task (the losses normalised as the release normalised them) and
`run_pretraining()`, which drives a run; where its weights start and what it exports at the end
are the caller's (albert-pretrain: a preset or checkpoint, the encoder's SavedModel).

Example:
    >>> options = PretrainingOptions(output_dir="/tmp/albert", input_file="data/*.tfrecord",
    ...                              train_batch_size=64, max_seq_length=128, num_train_steps=1000,
    ...                              num_warmup_steps=100, learning_rate=1e-3,
    ...                              spm_model_file="30k-clean.model")
    >>> result = run_pretraining(AlbertConfig.named("albert_base_v2"), options,
    ...                          strategy=get_strategy("mirrored"))
"""

from __future__ import annotations

import functools
import os
import re
from typing import Callable, Optional

import numpy as np
import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.utils.errors import FlagError, UserError
from albert_tf.utils.compression import tfrecord_compression
from albert_tf.utils.patterns import expand_patterns
from albert_tf.models.pretrainer import AlbertPretrainer, losses_from_sums, pretraining_sums
from albert_tf.training.options import EXPORT_DIR, PretrainingOptions
from albert_tf.training.loop import DatasetFn, Trainer, TrainingTask, run_loop

TRAIN_METRICS = ("loss", "mlm_loss", "sop_loss", "mlm_accuracy", "sop_accuracy")


def check_record_shapes(files: list[str], max_seq_length: int, max_predictions_per_seq: int):
    """Checks the input before a model is built: the data-prep run that wrote it finished, it holds
    records, and the first record's lengths are the flags' (naming both values).

    The tf.data reader would fail too, but only inside the first step and with a message about
    tensor sizes that does not say which flag is wrong; and an empty training input would hang.
    """
    from albert_tf.data.datasets import check_complete

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


class PretrainingTask(TrainingTask):
    """Masked-LM plus sentence-order prediction on an `AlbertPretrainer`, with the release's losses.

    Example:
        >>> trainer = Trainer(config, PretrainingTask(), options, strategy)
        >>> trainer.restore_or_initialize()
        >>> run_loop(trainer, file_dataset_fn(files, options, is_training=True))
    """

    metric_names = TRAIN_METRICS
    progress_metrics = ("loss", "mlm_accuracy", "sop_accuracy")

    def build_model(self, config, options, dtype):
        return AlbertPretrainer(config, dtype=dtype)

    def optimizer_name(self, options):
        return options.optimizer

    def denominators(self, ctx, features, options):
        weights = tf.reduce_sum(tf.cast(features["masked_lm_weights"], tf.float32))
        return {
            "mlm_weight": ctx.all_reduce(tf.distribute.ReduceOp.SUM, weights),
            "examples": tf.constant(float(options.train_batch_size)),
        }

    def loss_parts(self, model, features, denominators):
        outputs = model(features, training=True)
        sums = pretraining_sums(features, outputs["mlm_logits"], outputs["sop_logits"])
        return losses_from_sums(sums, **denominators)

    def validation_step(self, model, features):
        # Sums, each of one element: gathered across replicas and added up over batches.
        outputs = model(features, training=False)
        return {k: tf.reshape(v, [1]) for k, v in pretraining_sums(features, outputs["mlm_logits"],
                                                                   outputs["sop_logits"]).items()}

    def aggregate_logs(self, state, outputs):
        sums = {k: float(np.sum(v)) for k, v in outputs.items()}
        return sums if state is None else {k: state[k] + sums[k] for k in state}

    def reduce_aggregated_logs(self, totals):
        """Masked-LM and SOP loss and accuracy, and the number of examples."""
        metrics = {k: float(v) for k, v in losses_from_sums(totals).items()}
        metrics["examples"] = totals["examples"]
        return metrics


def file_dataset_fn(files: list[str], options: PretrainingOptions, is_training: bool,
                    vocab_size: Optional[int] = None) -> DatasetFn:
    """A `DatasetFn` reading pretraining TFRecords with albert_tf.data.datasets (token ids checked
    against `vocab_size` when given)."""
    from albert_tf.data.datasets import pretraining_dataset

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


def eval_baselines(eval_dataset_fn: DatasetFn, options: PretrainingOptions) -> dict:
    """What the held-out figures are compared with, over the records the evaluation reads (its first
    `max_eval_steps` batches when set): the masked-LM accuracy of always predicting the most
    frequent masked piece among them, and the sentence-order accuracy of always predicting their
    majority order. These are the best a model that ignores its input can score there.

    Returns `mlm_accuracy`, `mlm_piece` (that piece's id), `mlm_predictions` (masked positions
    weighed), `sop_accuracy`, `sop_label` (0: in order, 1: swapped) and `examples`.
    """
    from albert_tf.data.features import EXAMPLE_WEIGHT

    dataset = eval_dataset_fn(None, options.eval_batch_size)
    if options.max_eval_steps:
        dataset = dataset.take(options.max_eval_steps)
    pieces, labels = np.zeros(0), np.zeros(2)
    for batch in dataset.as_numpy_iterator():
        counts = np.bincount(batch["masked_lm_ids"].ravel(), weights=batch["masked_lm_weights"].ravel())
        pieces = np.pad(pieces, (0, max(0, len(counts) - len(pieces))))
        pieces[:len(counts)] += counts
        examples = batch.get(EXAMPLE_WEIGHT, np.ones(len(batch["next_sentence_labels"])))
        labels += np.bincount(batch["next_sentence_labels"].reshape(-1), weights=examples, minlength=2)[:2]
    if not pieces.sum() or not labels.sum():
        raise ValueError("the eval input holds no records, or no masked positions")
    return {"mlm_accuracy": float(pieces.max() / pieces.sum()), "mlm_piece": int(pieces.argmax()),
            "mlm_predictions": int(round(pieces.sum())), "sop_accuracy": float(labels.max() / labels.sum()),
            "sop_label": int(labels.argmax()), "examples": int(round(labels.sum()))}


def run_pretraining(
    config: AlbertConfig,
    options: PretrainingOptions,
    strategy=None,
    train_dataset_fn: Optional[DatasetFn] = None,
    eval_dataset_fn: Optional[DatasetFn] = None,
    export_fn: Optional[Callable[[AlbertPretrainer, str], Optional[str]]] = None,
    initialize: Optional[Callable[[AlbertPretrainer], str]] = None,
    allow_changed_flags: bool = False,
) -> dict:
    """Pretrains (or resumes pretraining) to `options.num_train_steps`; returns the last metrics.

    `train_dataset_fn(input_context, per_replica_batch)` (and `eval_dataset_fn`) default to the
    TFRecords of `options.input_file` (and `options.eval_input_file`). At the end the chief calls
    `export_fn(model, <output_dir>/export)`, if given, which returns the folder it wrote or None
    (albert-pretrain's exports the encoder with `albert_tf.serving.export`: serving is the
    caller's, as the starting weights are). `initialize(model)`,
    if given, loads a fresh run's starting weights and returns where from (albert-pretrain's:
    `albert_tf.presets.loader.initialize_pretrainer` of --init_checkpoint or --preset); a resumed
    run does not call it. A run resumed with other training settings than its checkpoints' (the
    learning rate, batch, ...: `albert_tf.checkpoints.run_folder.check_run_settings`) is refused
    unless `allow_changed_flags`.

    Returns what `run_loop` returns (`step`, `train`, `eval`, `resumed_from`,
    `resumed_checkpoint`, `curves`, `examples_per_second`), `eval_baselines` (`eval_baselines()`
    on the chief of a run that evaluates, else None), `export_dir` (None where nothing was
    exported) and `model`, the trained `AlbertPretrainer`. A rerun that finds no step left to
    train evaluates all the same, so that it reports its held-out figures again.
    """
    if train_dataset_fn is None:
        files = expand_patterns(options.input_file, flag="input_file")
        check_record_shapes(files, options.max_seq_length, options.max_predictions_per_seq)
        train_dataset_fn = file_dataset_fn(files, options, is_training=True, vocab_size=config.vocab_size)
    if eval_dataset_fn is None and options.eval_input_file:
        eval_files = expand_patterns(options.eval_input_file, flag="eval_input_file")
        check_record_shapes(eval_files, options.max_seq_length, options.max_predictions_per_seq)
        eval_dataset_fn = file_dataset_fn(eval_files, options, is_training=False, vocab_size=config.vocab_size)

    from albert_tf.checkpoints.run_folder import keep_run_vocabulary

    run = Trainer(config, PretrainingTask(), options, strategy, check_settings=True,
                  allow_changed_flags=allow_changed_flags)
    if options.spm_model_file and run.is_chief:
        # Only now that the folder's checks have passed: a run refused there overwrites nothing.
        keep_run_vocabulary(options.spm_model_file, options.output_dir)
    run.restore_or_initialize(initialize)
    evaluate = None
    if eval_dataset_fn is not None:
        eval_data = run.distribute(eval_dataset_fn, run.per_replica_eval_batch)
        evaluate = functools.partial(run.evaluate, eval_data, options.max_eval_steps)
    result = run_loop(run, train_dataset_fn, evaluate, options.eval_every_steps)
    if evaluate is not None and result["eval"] is None:  # nothing left to train
        result["eval"] = evaluate()
    baselines = eval_baselines(eval_dataset_fn, options) if evaluate is not None and run.is_chief else None
    export_dir = None
    if export_fn is not None and run.is_chief:
        export_dir = export_fn(run.model, os.path.join(options.output_dir, EXPORT_DIR))
    return {**result, "eval_baselines": baselines, "export_dir": export_dir, "model": run.model}
