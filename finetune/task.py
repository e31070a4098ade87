"""The fine-tuning task protocol: what a fine-tuning task supplies to the shared trainer, CLI and
export, on albert_tf's `albert_tf.training.task.TrainingTask` (which pretraining implements too).

A task is one class derived from `FinetuningTask`; the trainer (`albert_tf.training.loop.Trainer`), the
CLI skeleton (`finetune.cli`), the feature cache (`finetune.cache`), the input pipeline
(`finetune.inputs`), the encoder initialisation (`albert_tf.presets.loader`, the one loader) and the
export never change for a new task. Model Garden's tasks (build_model, build_inputs, build_losses,
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
    The evaluation protocol of every trainer task (`albert_tf.training.task.TrainingTask`) is
    written here once: `validation_step` is `predict_outputs` with the `prediction_features`,
    `reduce_aggregated_logs` puts every record's back in file order (`finetune.trainer.predict`).

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
        SavedModel or a LiteRT model, at a serving precision, with the settings the run's
        evaluation `results` give (not state left on the task). The SavedModel is
        `export_saved_model(..., results)`: by default
        `serving_outputs(model)` on every signature of `albert_tf.serving.export` (token ids, serialized
        tf.Examples, raw text); a task with other text inputs overrides it with its own
        `albert_tf.serving.export.ServingModule`. The LiteRT model's outputs are the task's
        `litert_outputs` (a classifier's: `albert_tf.serving.litert`'s).
    `recipe()`: the task's `Hparams` (the paper's hyperparameters, or the set the task was made
        with), which `default_options(**given)` fills the option fields `HPARAM_FIELDS` from.
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

import dataclasses
import os
from typing import TYPE_CHECKING, Mapping, Optional, Sequence

import numpy as np

from albert_tf.tokenizers.tokenizer import check_seq_length
from albert_tf.training.options import check_warmup
from albert_tf.training.task import TrainingTask

if TYPE_CHECKING:  # TensorFlow is loaded when used: a script's --help must not load it
    import tensorflow as tf

SEQUENCE_INPUTS = ("input_ids", "input_mask", "segment_ids")


@dataclasses.dataclass(frozen=True)
class Hparams:
    """A task's fine-tuning hyperparameters (a row of the paper's Table 14, or the release's), named
    as the `finetune.options.FinetuneOptions` fields whose defaults they give; the one shape of
    every task's hparams.

    Args:
        learning_rate: peak learning rate of AdamW, reached after the warmup.
        train_batch_size: global training batch size (split across replicas).
        num_train_steps: optimizer steps.
        num_warmup_steps: steps of linear warmup from 0, then linear decay to 0 at `num_train_steps`.
        max_seq_length: tokens per example, [CLS] and [SEP]s included.
        classifier_dropout: dropout on the head's input.
        encoder_dropout: the encoder's hidden and attention dropout while fine-tuning; None keeps
            the model config's.
        optimizer: the optimizer the recipe was tuned on (`albert_tf.training.options.OPTIMIZERS`):
            the release's AdamW for the paper's and the release's recipes, torch's bias-corrected
            "adamw" for a recipe taken from Hugging Face (the same rate moves it less early on).
    """

    learning_rate: float
    train_batch_size: int
    num_train_steps: int
    num_warmup_steps: int
    max_seq_length: int = 512
    classifier_dropout: float = 0.1
    encoder_dropout: Optional[float] = None
    optimizer: str = "adamw_release"

    def __post_init__(self):
        if not self.learning_rate > 0:
            raise ValueError(f"learning_rate must be positive, got {self.learning_rate}")
        for field in ("train_batch_size", "num_train_steps"):
            if getattr(self, field) < 1:
                raise ValueError(f"{field} must be at least 1, got {getattr(self, field)}")
        check_seq_length(self.max_seq_length)
        check_warmup(self.num_train_steps, self.num_warmup_steps)
        for name in ("classifier_dropout", "encoder_dropout"):
            value = getattr(self, name)
            if value is not None and not 0.0 <= value < 1.0:
                raise ValueError(f"{name} must be in [0, 1), got {value}")


# The option fields whose defaults a task's hparams give.
HPARAM_FIELDS = tuple(field.name for field in dataclasses.fields(Hparams))


def model_inputs(features: Mapping[str, tf.Tensor]) -> dict[str, tf.Tensor]:
    """The encoder's three inputs out of a batch of features."""
    return {name: features[name] for name in SEQUENCE_INPUTS}


class FinetuningTask(TrainingTask):
    """Base class of a fine-tuning task; see the module docstring for what a task fills in. Its
    `TrainingTask` side (model config, losses, output_dir's check) is written here once for every
    fine-tuning task."""

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
    # How many of the first examples of each evaluation (prediction) split are read; None: all.
    # Given to a task's constructor (--max_eval_examples, --max_predict_examples); a task applies
    # them with `first_examples`.
    max_eval_examples: Optional[int] = None
    max_predict_examples: Optional[int] = None

    # ---- data --------------------------------------------------------------------------------

    def check_data(self, splits: Sequence[str]) -> None:
        """Fails before any model is built when a split's file is missing (the message names it)."""

    def features(self, split: str, tokenizer, max_seq_length: int, cache_dir: str):
        raise NotImplementedError

    def example_limit(self, split: str) -> Optional[int]:
        """How many of `split`'s first examples are read; None: all."""
        if split in self.eval_splits:
            return self.max_eval_examples
        if split in self.predict_splits:
            return self.max_predict_examples
        return None

    def first_examples(self, split: str, examples: list) -> list:
        """`examples` of `split` as the run reads them: the first `example_limit(split)`, or all."""
        limit = self.example_limit(split)
        return examples if limit is None else examples[:limit]

    def example_settings(self, split: str) -> tuple:
        """What the feature cache's fingerprint adds for `split`'s example limit (nothing without one)."""
        limit = self.example_limit(split)
        return () if limit is None else (("max_examples", limit),)

    # ---- model -------------------------------------------------------------------------------

    @property
    def metric_names(self) -> tuple[str, ...]:
        return tuple(self.train_metric_names)

    def model_config(self, config, options):
        # The run's folder keeps the encoder's own config; only the model trained here has the
        # fine-tuning dropout.
        if options.encoder_dropout is None:
            return config
        import dataclasses

        return dataclasses.replace(config, hidden_dropout_prob=options.encoder_dropout,
                                   attention_probs_dropout_prob=options.encoder_dropout)

    def build_model(self, config, options, dtype):
        raise NotImplementedError

    def check_output_dir(self, output_dir: str, write: bool) -> None:
        """Refuses an output_dir holding another task's checkpoints: their heads have other shapes,
        or worse, the same shape and other label meanings (RTE vs QNLI); records `run_info()`."""
        from albert_tf.checkpoints.run_folder import TASK_FILE, read_task_file
        from albert_tf.utils.atomic import write_json

        path = os.path.join(output_dir, TASK_FILE)
        info = self.run_info()
        saved = read_task_file(output_dir)
        if saved is not None:
            task = saved.get("task") if isinstance(saved, dict) else None
            if task != info["task"]:
                raise ValueError(f"output_dir {output_dir} holds a {task} run, not {info['task']}; "
                                 f"use a fresh output_dir")
        elif write:
            write_json(path, info, sort_keys=False)

    def denominators(self, ctx, batch, options) -> dict:
        return {"examples": float(options.train_batch_size)}

    def loss_parts(self, model, batch, denominators: dict) -> dict:
        sums = self.loss_sums(model, batch, training=True)
        # Normalised by the global batch: the sum over replicas is the batch's mean.
        return {name: sums[name] / denominators["examples"] for name in self.metric_names}

    def loss_sums(self, model, features: Mapping[str, tf.Tensor], training: bool) -> dict[str, tf.Tensor]:
        raise NotImplementedError

    def length_buckets(self, max_seq_length: int) -> Optional[Sequence[int]]:
        """The lengths evaluation and prediction batches are cut to (`finetune.inputs`), or None
        to keep `max_seq_length`. Only for a task whose outputs have no sequence axis."""
        return None

    def predict_outputs(self, model, features: Mapping[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        outputs = model(model_inputs(features), training=False)
        return dict(outputs) if isinstance(outputs, Mapping) else {"outputs": outputs}

    def validation_step(self, model, features: Mapping[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        """`predict_outputs` with the record features that prediction hands back: the
        `prediction_features`, and each record's weight (0: a filler completing the last batch) and
        position in its file."""
        from albert_tf.data.features import EXAMPLE_WEIGHT
        from finetune.inputs import RECORD_INDEX

        kept = (*self.prediction_features, EXAMPLE_WEIGHT, RECORD_INDEX)
        return {**self.predict_outputs(model, features), **{name: features[name] for name in kept}}

    def reduce_aggregated_logs(self, state: list, cached) -> dict[str, np.ndarray]:
        """The outputs and `prediction_features` of every record of `cached`, once each, in file
        order, the fillers removed: the `predictions` that `evaluate` scores."""
        from albert_tf.data.features import EXAMPLE_WEIGHT
        from finetune.inputs import RECORD_INDEX

        arrays = {name: np.concatenate([outputs[name] for outputs in state]) for name in state[0]}
        real = arrays.pop(EXAMPLE_WEIGHT) > 0
        index = arrays.pop(RECORD_INDEX)[real]
        order = np.argsort(index, kind="stable")
        if not np.array_equal(index[order], np.arange(cached.num_records)):
            raise RuntimeError(f"prediction saw {index.size} of the {cached.num_records} records "
                               f"of {cached.path} (or some twice)")
        return {name: value[real][order] for name, value in arrays.items()}

    # ---- results -----------------------------------------------------------------------------

    def evaluate(self, split: str, predictions: Mapping[str, np.ndarray], cached) -> dict[str, float]:
        raise NotImplementedError

    def write_predictions(self, split: str, predictions: Mapping[str, np.ndarray], cached,
                          output_dir: str) -> list[str]:
        return []

    # ---- serving and runs --------------------------------------------------------------------

    def serving_outputs(self, model):
        """`outputs_fn(inputs, training)` of `albert_tf.serving.export.export_saved_model`."""
        return lambda inputs, training: model(inputs, training=training)

    def export(self, model, spm_model_file: str, max_seq_length: int, export_dir: str, format: str = "saved_model",
               quantization: str = "none", calibration=None, precision: str = "float32",
               results: Mapping[str, Mapping[str, float]] | None = None, serving_version: int | None = None) -> str:
        """The task model as a SavedModel (`export_saved_model`) or, with `format="litert"`, a LiteRT
        model of `quantization` (`albert_tf.serving.litert.export_litert`; full int8 calibrated on
        `calibration`, the `CachedFeatures` of the training split); returns the folder.

        `precision`: the SavedModel's weights and matmuls, "float32" or "bfloat16"
        (`albert_tf.serving.export.at_precision`). `results`: this run's evaluation results by split, which
        a task may read settings of its export from (SQuAD v2.0's null-score threshold). What
        `export_dir` held is replaced only once the new export is complete; with `serving_version`
        the SavedModel is instead version `serving_version` of TF Serving's layout at `export_dir`
        with its warmup requests, beside the versions there (`albert_tf.serving.tf_serving.write_version`):
        returns the version's folder.
        """
        import tensorflow as tf

        from albert_tf.serving.export import at_precision
        from albert_tf.serving.formats import check_export_settings
        from albert_tf.utils.atomic import atomic_folder

        check_export_settings(format, quantization, precision)  # the one line every door refuses with
        model = at_precision(model, precision)
        if serving_version is not None:
            from albert_tf.serving.tf_serving import write_version

            if format != "saved_model":
                raise ValueError(f"serving_version is TF Serving's layout of a SavedModel, not of {format}")
            return write_version(export_dir, serving_version, pairs=self.text_segments == 2, export=lambda folder: (
                self.export_saved_model(model, spm_model_file, max_seq_length, folder, results or {})))
        with atomic_folder(export_dir, replace=True) as folder:
            if format == "saved_model":
                self.export_saved_model(model, spm_model_file, max_seq_length, folder, results or {})
                return os.fspath(export_dir)
            from albert_tf.serving.litert import export_litert

            def records():  # the first training records, read when the converter calibrates
                spec = calibration.feature_spec()
                for serialized in tf.data.TFRecordDataset(str(calibration.path)).as_numpy_iterator():
                    yield {k: v.numpy() for k, v in tf.io.parse_single_example(serialized, spec).items()}

            export_litert(model, folder, spm_model_file, max_seq_length, quantization=quantization,
                          representative_data=records if calibration is not None else None,
                          outputs=self.litert_outputs(model, max_seq_length))
        return os.fspath(export_dir)

    def export_saved_model(self, model, spm_model_file: str, max_seq_length: int, export_dir: str,
                           results: Mapping[str, Mapping[str, float]]) -> str:
        """The task's SavedModel: by default `serving_outputs(model)` on every signature of
        `albert_tf.serving.export` (token ids, serialized tf.Examples, raw text). `results`: `export`'s."""
        from albert_tf.serving.export import export_saved_model

        return export_saved_model(model, export_dir, spm_model_file, max_seq_length,
                                  outputs_fn=self.serving_outputs(model), text_segments=self.text_segments)

    def litert_outputs(self, model, max_seq_length: int):
        """The LiteRT model's `albert_tf.serving.litert.TaskOutputs`: each task owns its model's outputs.
        None: the model is an encoder or classifier, whose outputs albert_tf.serving.litert knows."""
        return None

    def recipe(self) -> Optional[Hparams]:
        """The task's hyperparameters; None: it has none (every option is given or defaulted)."""
        return None

    def default_options(self, **given) -> dict:
        """The recipe's values of `HPARAM_FIELDS` with `given` (a None keeps the recipe's value);
        the options made of them check them as a whole (`finetune.options.FinetuneOptions`)."""
        given = {k: v for k, v in given.items() if v is not None}
        recipe = self.recipe()
        return given if recipe is None else {**dataclasses.asdict(recipe), **given}

    def run_info(self) -> dict:
        return {"task": self.name}
