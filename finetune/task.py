"""The task protocol: what a fine-tuning task supplies to the shared trainer, CLI and export.

A task is one class derived from `FinetuningTask`; the trainer (`finetune.trainer.Finetuning`), the
CLI skeleton (`finetune.cli`), the feature cache (`finetune.cache`), the input pipeline
(`finetune.inputs`), the encoder initialisation (`finetune.initialization`) and the export never
change for a new task. Model Garden's tasks (build_model, build_inputs, build_losses,
validation_step, aggregate_logs, reduce_aggregated_logs) are the model, made smaller.

What a task fills in, and when each is called:

Data
    `splits`: `train_split`, `eval_splits` (labelled), `predict_splits` (unlabelled).
    `check_data(splits)`: fails, naming the missing file, before any model is built.
    `features(split, tokenizer, max_seq_length, cache_dir)`: the split's `CachedFeatures`; a task
        reads its files and converts them inside `finetune.cache.cache_features`. Features are
        dicts of fixed-shape int or float arrays (any shape: [T], [4, T], scalars) with the
        task's spec; one example may give several records (SQuAD's windows), which the task
        ties to their example with a feature of its own (e.g. `example_index`).

Model
    `build_model(config, options, dtype)`: the task model, its encoder kept as `model.encoder`
        (the models of `albert_tf.models`, or the task's own).
    `train_metric_names`: the sums of `loss_sums` that training reports ("loss" first).
    `loss_sums(model, features, training)`: sums over the batch, in float32, of the loss and of
        the other training metrics, each row weighted by `features["example_weight"]`. Sums, not
        means: the trainer divides by the global batch so replicas' shares add up exactly.
    `predict_outputs(model, features)`: the per-record outputs that prediction gathers (a dict of
        tensors with the batch dimension first).
    `prediction_features`: record features handed back beside the outputs (labels, indices).

Results
    `evaluate(split, predictions, cached)`: the split's metrics (a dict of floats) from
        `predictions` (the outputs and `prediction_features` of every record, in file order,
        fillers removed); post-processing of records into answers happens here.
    `write_predictions(split, predictions, cached, output_dir)`: writes the prediction files of
        a split (eval or predict); returns their paths.
    `best_metric`: the metric (of the first eval split, higher is better) by which the CLI keeps
        the best checkpoint as `model.ckpt-best` when it evaluates while training.

Serving and runs
    `export(model, spm_model_file, max_seq_length, export_dir, format, quantization, ...)`: a
        SavedModel or a LiteRT model. The SavedModel is `export_saved_model(...)`: by default
        `serving_outputs(model)` on every signature of `albert_tf.export` (token ids, serialized
        tf.Examples, raw text); a task with other text inputs overrides it. The LiteRT model's
        outputs are the model's own (`albert_tf.litert`) unless `litert_outputs` gives others.
    `default_options(**given)`: the task's hparams (the paper's hyperparameters) for the option
        fields `HPARAM_FIELDS`, with the values the user gave.
    `run_info()`: what `output_dir/task.json` records, so that a run of another task (or another
        label set) is refused there.

Example (a new task's module; GLUE's is finetune/glue/task.py):
    >>> class MyTask(FinetuningTask):
    ...     name = "MyTask"
    ...     train_metric_names = ("loss", "accuracy")
    ...     prediction_features = ("label_ids",)
    ...     def features(self, split, tokenizer, max_seq_length, cache_dir): ...
    ...     def build_model(self, config, options, dtype):
    ...         return AlbertClassifier(config, 3, options.classifier_dropout, dtype=dtype)
    ...     def loss_sums(self, model, features, training):
    ...         logits = model(model_inputs(features), training=training)
    ...         sums = classifier_sums(logits, features["label_ids"], features["example_weight"], False)
    ...         return {"loss": sums["loss"], "accuracy": sums["hits"]}
    ...     def predict_outputs(self, model, features):
    ...         return {"logits": model(model_inputs(features), training=False)}
    ...     def evaluate(self, split, predictions, cached):
    ...         return {"accuracy": float(np.mean(predictions["logits"].argmax(-1) == predictions["label_ids"]))}
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Mapping, Optional, Sequence

import numpy as np

from albert_tf.options import EXPORT_FORMATS
from albert_tf.features import EXAMPLE_WEIGHT

if TYPE_CHECKING:  # TensorFlow is loaded when used: a script's --help must not load it
    import tensorflow as tf

SEQUENCE_INPUTS = ("input_ids", "input_mask", "segment_ids")
# The option fields whose defaults a task's hparams give (the paper's per-task hyperparameters).
HPARAM_FIELDS = ("learning_rate", "train_batch_size", "num_train_steps", "num_warmup_steps",
                 "max_seq_length", "classifier_dropout", "encoder_dropout")


def model_inputs(features: Mapping[str, tf.Tensor]) -> dict[str, tf.Tensor]:
    """The encoder's three inputs out of a batch of features."""
    return {name: features[name] for name in SEQUENCE_INPUTS}


class FinetuningTask:
    """Base class of a fine-tuning task; see the module docstring for what a task fills in."""

    name: str = ""
    train_split: Optional[str] = "train"
    eval_splits: Sequence[str] = ()
    predict_splits: Sequence[str] = ()
    train_metric_names: Sequence[str] = ("loss",)
    prediction_features: Sequence[str] = ()
    # The metric of the first evaluation split whose highest value picks `model.ckpt-best`; None:
    # no best checkpoint is kept.
    best_metric: Optional[str] = None
    # 1 or 2 where the default export's `serve_text` must refuse the other (single texts, pairs).
    text_segments: Optional[int] = None
    # Split -> how many of its first examples are read (--max_eval_examples, --max_predict_examples);
    # a split not named is read whole. The CLI sets it; a task applies it with `first_examples`.
    max_examples: Mapping[str, int] = {}

    # ---- data --------------------------------------------------------------------------------

    def check_data(self, splits: Sequence[str]) -> None:
        """Fails before any model is built when a split's file is missing (the message names it)."""

    def features(self, split: str, tokenizer, max_seq_length: int, cache_dir: str):
        raise NotImplementedError

    def first_examples(self, split: str, examples: list) -> list:
        """`examples` of `split` as the run reads them: the first `max_examples[split]`, or all."""
        limit = self.max_examples.get(split)
        return examples if limit is None else examples[:limit]

    def example_settings(self, split: str) -> tuple:
        """What the feature cache's fingerprint adds for `split`'s example limit (nothing without one)."""
        limit = self.max_examples.get(split)
        return () if limit is None else (("max_examples", limit),)

    # ---- model -------------------------------------------------------------------------------

    def build_model(self, config, options, dtype):
        raise NotImplementedError

    def loss_sums(self, model, features: Mapping[str, tf.Tensor], training: bool) -> dict[str, tf.Tensor]:
        raise NotImplementedError

    def length_buckets(self, max_seq_length: int) -> Optional[Sequence[int]]:
        """The lengths evaluation and prediction batches are cut to (`finetune.inputs`), or None
        to keep `max_seq_length`. Only for a task whose outputs have no sequence axis."""
        return None

    def predict_outputs(self, model, features: Mapping[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        outputs = model(model_inputs(features), training=False)
        return dict(outputs) if isinstance(outputs, Mapping) else {"outputs": outputs}

    # ---- results -----------------------------------------------------------------------------

    def evaluate(self, split: str, predictions: Mapping[str, np.ndarray], cached) -> dict[str, float]:
        raise NotImplementedError

    def write_predictions(self, split: str, predictions: Mapping[str, np.ndarray], cached,
                          output_dir: str) -> list[str]:
        return []

    # ---- serving and runs --------------------------------------------------------------------

    def serving_outputs(self, model):
        """`outputs_fn(inputs, training)` of `albert_tf.export.export_saved_model`."""
        return lambda inputs, training: model(inputs, training=training)

    def export(self, model, spm_model_file: str, max_seq_length: int, export_dir: str, format: str = "saved_model",
               quantization: str = "none", calibration=None) -> str:
        """The task model as a SavedModel (`export_saved_model`) or, with `format="litert"`, a LiteRT
        model of `quantization` (`albert_tf.litert.export_litert`; full int8 calibrated on
        `calibration`, the `CachedFeatures` of the training split), replacing what `export_dir`
        held; returns the folder."""
        import tensorflow as tf

        if format not in EXPORT_FORMATS:
            raise ValueError(f"format must be one of {', '.join(EXPORT_FORMATS)}, got {format!r}")
        if tf.io.gfile.exists(export_dir):
            tf.io.gfile.rmtree(export_dir)
        if format == "saved_model":
            return self.export_saved_model(model, spm_model_file, max_seq_length, os.fspath(export_dir))
        from albert_tf.litert import export_litert

        def records():  # the first training records, read when the converter calibrates
            spec = calibration.feature_spec()
            for serialized in tf.data.TFRecordDataset(str(calibration.path)).as_numpy_iterator():
                yield {k: v.numpy() for k, v in tf.io.parse_single_example(serialized, spec).items()}

        return export_litert(model, export_dir, spm_model_file, max_seq_length, quantization=quantization,
                             representative_data=records if calibration is not None else None,
                             outputs=self.litert_outputs(model, max_seq_length))

    def export_saved_model(self, model, spm_model_file: str, max_seq_length: int, export_dir: str) -> str:
        """The task's SavedModel: by default `serving_outputs(model)` on every signature of
        `albert_tf.export` (token ids, serialized tf.Examples, raw text)."""
        from albert_tf.export import export_saved_model

        return export_saved_model(model, export_dir, spm_model_file, max_seq_length,
                                  outputs_fn=self.serving_outputs(model), text_segments=self.text_segments)

    def litert_outputs(self, model, max_seq_length: int):
        """The LiteRT model's `albert_tf.litert.TaskOutputs`; None: the model is one of albert_tf's,
        which knows its own."""
        return None

    def default_options(self, **given) -> dict:
        """The hparams' values of `HPARAM_FIELDS` with `given` (a None keeps the hparams' value)."""
        return {k: v for k, v in given.items() if v is not None}

    def run_info(self) -> dict:
        return {"task": self.name}


def weights_of(features: Mapping[str, tf.Tensor]) -> tf.Tensor:
    """Each row's weight: 1 for a record, 0 for a filler of the last evaluation batch."""
    return features[EXAMPLE_WEIGHT]
