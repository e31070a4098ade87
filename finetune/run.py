"""A fine-tuning run as a library call: `run_finetuning(task, options, source, ...)`, beside
pretraining's `albert_tf.training.pretraining.run_pretraining` (Model Garden's `run_experiment`
beneath its thin driver). Every fine-tuning console script maps its flags to these arguments
(`finetune.cli`); experiments and tests may call it directly.

A run: the task's data checked, the model built on the `strategy` and resumed from `output_dir`'s
latest checkpoint or initialised (`initialize(model)`, default: the encoder of `source`); then
`actions`: train (the run's vocabulary kept in `output_dir`; with evaluation, the evaluation splits
scored at every checkpoint and the best kept as `model.ckpt-best`), evaluate (`eval_results.json`
and TensorBoard's `eval/`), predict (the task's prediction files); last, the export in
`output_dir/export`, after training or when there is none yet.

Example:
    >>> from albert_tf.presets.loader import find_source
    >>> task = GlueTask("MRPC", "../shared/data/glue")
    >>> options = FinetuneOptions(output_dir="runs/mrpc", **task.default_options(max_seq_length=128))
    >>> summary = run_finetuning(task, options, find_source("runs/demo/model"), actions=Actions(True, True, False))
    >>> summary["eval"]["dev"]["accuracy"]
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from typing import Callable, Optional

from absl import logging

from albert_tf.training.options import EVAL_RESULTS, EXPORT_DIR
from albert_tf.utils.atomic import write_json
from albert_tf.utils.errors import FlagError, UserError
from albert_tf.utils.files import files_for
from finetune.options import FinetuneOptions

BEST_CHECKPOINT = "model.ckpt-best"  # the release's name
BEST_RESULTS = "best_checkpoint.json"


@dataclasses.dataclass(frozen=True)
class Actions:
    """What a run does (train, evaluate, predict) and the flags that asked for it (named in messages)."""

    train: bool
    eval: bool
    predict: bool
    asked: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class ExportSettings:
    """The export of a run: `format` ("saved_model" or "litert"), a LiteRT model's `quantization`
    (full int8 calibrates on the task's training split), a SavedModel's `precision` and, for TF
    Serving's layout, its `serving_version` (`<output_dir>/export/<version>/`, beside the others)."""

    format: str = "saved_model"
    quantization: str = "none"
    precision: str = "float32"
    serving_version: Optional[int] = None


def check_actions(task, actions: Actions, output_dir: str) -> tuple[str, ...]:
    """The splits `actions` read, refused before any model is built: training a task without a
    training split, evaluating or predicting without a fine-tuned model in `output_dir`, a missing
    data file (`task.check_data`)."""
    import tensorflow as tf  # here: the module loads without TensorFlow (--help)

    splits = (((task.train_split,) if actions.train and task.train_split else ())
              + (tuple(task.eval_splits) if actions.eval else ())
              + (tuple(task.predict_splits) if actions.predict else ()))
    if actions.train and not task.train_split:
        raise FlagError(f"{task.name} has no training split")
    if not actions.train and not tf.train.latest_checkpoint(output_dir):
        # Only the encoder comes from --init_checkpoint/--preset: the task's head would be random,
        # and its scores, prediction files and export would look like results.
        asked = actions.asked or tuple(name for name in ("do_eval", "do_predict")
                                       if getattr(actions, name.removeprefix("do_")))
        raise UserError(
            f"{' and '.join('--' + name for name in asked)} without --do_train needs a fine-tuned model, and "
            f"--output_dir {output_dir} holds no "
            "checkpoint: add --do_train, or give the output_dir of a fine-tuning run"
        )
    task.check_data(splits)
    return splits


def features(task, split, tokenizer, max_seq_length, cache_dir):
    """The split's cached features (`task.features`), a warning naming the malformed rows skipped."""
    cached = task.features(split, tokenizer, max_seq_length, cache_dir)
    if cached.num_skipped:
        logging.warning("%s %s: skipped %d malformed rows", task.name, split, cached.num_skipped)
    return cached


class Evaluation:
    """The evaluation splits of a run, scored at most once per step: their metrics (written to
    TensorBoard's `eval/` at the step), their predictions, and the best checkpoint so far.

    When `task.best_metric` (on the first evaluation split) beats the best recorded in
    `BEST_RESULTS`, the run's state is written as `model.ckpt-best` in output_dir, as the release
    kept its best checkpoint.
    """

    def __init__(self, run, task, splits: dict):
        self.run, self.task, self.splits = run, task, splits
        self.predictions: dict = {}
        self._results, self._step = None, None
        self._writer = None  # made on first use: run_loop writes the scalars of evaluations while training
        self._best_path = os.path.join(run.options.output_dir, BEST_RESULTS)
        # Read once, at the start: every worker then takes the same decisions (a checkpoint write
        # may need them all).
        best = self.best()
        self._best_value = None if best is None else best["value"]

    def results(self, write_summaries: bool = True) -> dict:
        """`{"task", "global_step", <split>: {metrics, examples, skipped_rows, examples_per_second}}`;
        the metrics go to TensorBoard unless `write_summaries` is False (`run_loop` writes them)."""
        from finetune import trainer  # here: the module loads without TensorFlow (--help)

        step = self.run.current_step
        if self._step == step:
            return self._results
        results = {"task": self.task.name, "global_step": step}
        for split, cached in self.splits.items():
            predictions, rate = trainer.predict(self.run, cached)
            split_results = self.task.evaluate(split, predictions, cached)
            split_results.update(examples=cached.num_examples, skipped_rows=cached.num_skipped,
                                 examples_per_second=rate)
            results[split], self.predictions[split] = split_results, predictions
        self._results, self._step = results, step
        if write_summaries:
            from albert_tf.training import summaries  # here: the module loads without TensorFlow (--help)

            if self._writer is None:
                self._writer = summaries.summary_writer(self.run.options, self.run.is_chief, "eval")
            summaries.write_scalars(self._writer, self.scalars_of(results), step)
            self._writer.flush()
        self._keep_best(results)
        return results

    def scalars(self) -> dict:
        """The metrics as `run_loop`'s evaluation callback wants them: `<split>/<metric>` floats."""
        return self.scalars_of(self.results(write_summaries=False))

    def best(self) -> dict | None:
        fs = files_for(self._best_path)
        if not fs.exists(self._best_path):
            return None
        with fs.open(self._best_path, "r", encoding="utf-8") as f:
            return json.load(f)

    def _keep_best(self, results: dict):
        step = results["global_step"]
        metric, splits = self.task.best_metric, list(self.splits)
        if not metric or not splits or metric not in results[splits[0]]:
            return
        value = float(results[splits[0]][metric])
        if math.isnan(value):
            return
        if self._best_value is not None and not value > self._best_value:
            return
        self._best_value = value
        path = self.run.write_copy(BEST_CHECKPOINT)
        if self.run.is_chief:
            record = {"checkpoint": os.path.basename(path), "global_step": step, "split": splits[0],
                      "metric": metric, "value": value}
            write_json(self._best_path, record, sort_keys=False)
            logging.info("best %s %s so far (%.4f at step %d): %s", splits[0], metric, value, step, path)

    def scalars_of(self, results: dict) -> dict:
        """The task's metrics of each split as `<split>/<metric>` floats (counts and rates left out)."""
        counts = ("examples", "skipped_rows", "examples_per_second")
        return {f"{split}/{name}": float(value) for split in self.splits
                for name, value in results[split].items() if isinstance(value, (int, float)) and name not in counts}


def check_vocabulary(source, spm_model_file: Optional[str] = None):
    """The run's tokenizer: `spm_model_file`, or the one `source` carries; refused in one line when
    there is none, or when its pieces do not fit the model's embedding table (or, given, the
    vocabulary `source` was trained with)."""
    from albert_tf.presets import folder, loader
    from albert_tf.tokenizers.tokenizer import AlbertTokenizer

    vocabulary = spm_model_file or source.spm_model_file
    if not vocabulary:
        raise FlagError("--spm_model_file is required (the vocabulary the model was pretrained with)")
    tokenizer = AlbertTokenizer(vocabulary)
    folder.check_pieces(vocabulary, tokenizer.vocab_size, source.config.vocab_size)
    if spm_model_file:
        loader.check_vocab_size(source, tokenizer.vocab_size, f"--spm_model_file {spm_model_file}")
    return tokenizer


def default_cache_dir(output_dir: str) -> str:
    """Where a run caches its tokenized features unless told: `<output_dir>/features`, on the run's
    own filesystem whatever it is. The release's `--cached_dir` defaulted to `--output_dir`, written
    through `tf.gfile` (google-research/albert, run_classifier.py): on a TPU pod that is gs://, the
    one place every worker reads; a host's local temp would be unreadable to the others."""
    return os.path.join(output_dir, "features")


def _initialize_from(source) -> Callable:
    """`initialize(model)` loading the encoder of `source` (`albert_tf.presets.loader.find_source`'s)."""
    from albert_tf.presets import loader

    def initialize(model):
        return loader.initialize_encoder(model, preset=source.name)  # None (random weights) loads nothing

    return initialize


def run_finetuning(task, options: FinetuneOptions, source, spm_model_file: Optional[str] = None, *,
                   actions: Actions, cache_dir: Optional[str] = None, strategy=None,
                   initialize: Optional[Callable] = None, export: Optional[ExportSettings] = ExportSettings(),
                   allow_changed_flags: bool = False) -> dict:
    """Runs `actions` of `task` in `options.output_dir` (see the module's docstring).

    Args:
        task: a `finetune.task.FinetuningTask`.
        options: the run's `FinetuneOptions` (`task.default_options(...)` gives its hparams).
        source: where the encoder comes from (`albert_tf.presets.loader.find_source`'s result), or a
            function returning it, called once the actions and data are checked: its config is the
            model's.
        spm_model_file: the vocabulary (default: the one `source` carries), checked against the
            model's embedding table (`check_vocabulary`).
        actions: what to do.
        cache_dir: where tokenized features are cached (default `<output_dir>/features`).
        strategy: a `tf.distribute.Strategy` (default: TensorFlow's default strategy), or a
            function making it, called once the actions and data are checked and before the source
            is read (multi-worker collectives are configured before any other TensorFlow op).
        initialize: `initialize(model)` loading a fresh run's starting weights, returning where from
            (default: the encoder of `source`); a resumed run does not call it.
        export: the export's settings, or None for no export.
        allow_changed_flags: train on from `output_dir`'s checkpoints with other training settings
            than theirs (the learning rate, batch, ...: `albert_tf.checkpoints.run_folder.check_run_settings`),
            which is refused otherwise. Evaluating and predicting compare none.

    Returns a summary: `train` (`finetune.trainer.train`'s result or None), `eval` (what
    eval_results.json holds or None), `predictions` (the paths written), `export_dir` (or None) and
    `model` (the task model).
    """
    from albert_tf.checkpoints.run_folder import keep_run_vocabulary
    from albert_tf.training import loop
    from finetune import trainer

    check_actions(task, actions, options.output_dir)  # the run's one check, before any device or model
    if callable(strategy):
        strategy = strategy()
    if callable(source):
        source = source()
    tokenizer = check_vocabulary(source, spm_model_file)
    spm_model_file = spm_model_file or source.spm_model_file
    output_dir = options.output_dir
    cache_dir = cache_dir or default_cache_dir(output_dir)
    # The settings of training are compared when training: an evaluation at another length is no resume.
    run = loop.Trainer(source.config, task, options, strategy, check_settings=actions.train,
                       allow_changed_flags=allow_changed_flags)
    run.restore_or_initialize(initialize or _initialize_from(source))
    if actions.train:  # once the folder is known to be this run's: a refused run changes nothing in it
        keep_run_vocabulary(spm_model_file, output_dir)
    summary = {"train": None, "eval": None, "predictions": [], "export_dir": None, "model": run.model,
               "optimizer": options.optimizer}
    evaluation = None
    if actions.eval:
        evaluation = Evaluation(run, task, {split: features(task, split, tokenizer, options.max_seq_length, cache_dir)
                                            for split in task.eval_splits})
    if actions.train:
        cached = features(task, task.train_split, tokenizer, options.max_seq_length, cache_dir)
        # With evaluation, the evaluation splits are scored at every checkpoint: TensorBoard's eval/
        # and model.ckpt-best.
        summary["train"] = trainer.train(run, cached, evaluation.scalars if evaluation else None)

    if evaluation is not None:
        results = evaluation.results()
        for split, split_results in results.items():
            if split in task.eval_splits:
                logging.info("%s %s: %s", task.name, split, json.dumps(split_results))
        if run.is_chief:
            for split, cached in evaluation.splits.items():
                summary["predictions"] += task.write_predictions(split, evaluation.predictions[split], cached,
                                                                 output_dir)
            write_json(os.path.join(output_dir, EVAL_RESULTS), results, sort_keys=False)
        summary["eval"] = results

    if actions.predict:
        for split in task.predict_splits:
            cached = features(task, split, tokenizer, options.max_seq_length, cache_dir)
            predictions, _ = trainer.predict(run, cached)
            if run.is_chief:
                summary["predictions"] += task.write_predictions(split, predictions, cached, output_dir)

    export_dir = os.path.join(output_dir, EXPORT_DIR)
    if export is not None and run.is_chief and (actions.train or not files_for(export_dir).exists(export_dir)
                                                or export.serving_version is not None):
        calibration = None  # full int8 calibrates on the task's own training texts
        if export.quantization == "full_int8":
            calibration = features(task, task.train_split, tokenizer, options.max_seq_length, cache_dir)
        summary["export_dir"] = task.export(run.model, spm_model_file, options.max_seq_length, export_dir,
                                            export.format, export.quantization, calibration, export.precision,
                                            results=summary["eval"], serving_version=export.serving_version)
        logging.info("exported the %s model to %s", task.name, summary["export_dir"])
    return summary
