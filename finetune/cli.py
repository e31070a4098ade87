"""The CLI skeleton of every fine-tuning task: shared flags named as the option fields, one flow.

A task's console script defines its own flags (GLUE: `--task`, `--data_dir`, `--skip_bad_rows`)
beside `define_flags(FLAGS)`; `run(__doc__, FLAGS, make_task)` is its entry point (the one of every
console script, `albert_tf.cli.entry_point.run_main`) and `finetune(argv, FLAGS, make_task)` runs a
command line in-process, where `make_task(FLAGS)` returns its `finetune.task.FinetuningTask`. A tool
whose action flags mean otherwise (SQuAD's --do_predict also scores) passes its `actions`. The flow:

1. the options: each flag named as a field of `finetune.options.FinetuneOptions`; those of the
   task's hparams (`finetune.task.HPARAM_FIELDS`) default to the hparams, the others to the field's
   default;
2. the data files checked, the strategy made, the encoder source found (`--init_checkpoint`: a run
   folder or checkpoint, a SavedModel, a preset folder or a TF1 checkpoint; `--preset`; or random
   weights with `--albert_config_file`), and its vocabulary checked against the SentencePiece model
   (`--spm_model_file`, default: the one the source carries);
3. `--do_train`: train (resuming from `output_dir`'s latest checkpoint if any);
   `--do_eval`: each evaluation split's metrics into `eval_results.json` (and TensorBoard's
   `eval/`); `--do_predict`: each prediction split's files (the task's `write_predictions`);
4. `--export`: the task's SavedModel in `output_dir/export`, written after training, or when
   there is none yet (a predict-only run does not rewrite it).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from typing import Callable, Sequence

from absl import app, flags, logging

from albert_tf.training import options as run_options
from albert_tf.cli import entry_point
from albert_tf.cli.option_flags import (check_values, define_option_flags, define_strategy_flags, option_values,
                                        weights_source)
from albert_tf.cli.release_flags import apply_release_flags
from albert_tf.utils.errors import FlagError, UserError
from albert_tf.utils.files import locked_run_folder, prepare_output_dir, write_json
from albert_tf.utils.quiet import quiet_device_start
from finetune.options import FinetuneOptions
from finetune.task import HPARAM_FIELDS

EVAL_RESULTS = "eval_results.json"
EXPORT_DIR = "export"
BEST_CHECKPOINT = "model.ckpt-best"  # the release's name
BEST_RESULTS = "best_checkpoint.json"

# The help of fine-tuning's own meaning of a field, where the task's hparams give the default; the
# others are the fields' (albert_tf.training.options, finetune.options).
_OPTION_HELP = {
    "output_dir": "Checkpoints, results, prediction files and the SavedModel.",
    "train_batch_size": "Global training batch (default: the task's hparams, the paper's).",
    "max_seq_length": "Tokens per sequence (default: the task's hparams).",
    "learning_rate": "Peak AdamW learning rate (default: the task's hparams, the paper's).",
    "num_train_steps": "Updates (default: the task's hparams, the paper's).",
    "num_warmup_steps": "Updates of linear warmup (default: the task's hparams, the paper's).",
    "classifier_dropout": "Dropout on the head's input while training (default: the task's hparams, the release's 0.1).",
    "encoder_dropout": "The encoder's hidden and attention dropout while fine-tuning, in place of the model "
                       "config's (default: the task's hparams, the paper's ALBERT DR; --hparams=release keeps the config's).",
    "seed": "Seed of the head's initialisation (and the encoder's when it starts from random weights), "
            "dropout and shuffling.",
}
# Where the command line's default differs from the option field's: the task's hparams fill theirs.
_CLI_DEFAULTS = {"progress_bar": True, **{name: None for name in HPARAM_FIELDS}}


def define_flags(flag_values: flags.FlagValues, hparams: Sequence[str] = (), hparams_help: str = ""):
    """Defines the shared flags on a task's `flag_values`: the encoder source, the run's folders,
    what to do, the strategy, one flag per option field and, where the task has several sets of
    hyperparameters, `--hparams` choosing among `hparams` (the first by default; `hparams_help`
    says what each is)."""
    def define(kind, name, default, help_text, enum_values=None):
        if kind == "enum":
            flags.DEFINE_enum(name, default, enum_values, help_text, flag_values=flag_values)
        else:
            getattr(flags, f"DEFINE_{kind}")(name, default, help_text, flag_values=flag_values)

    if hparams:
        define("enum", "hparams", hparams[0], f"The hyperparameters that fill the flags not given: {hparams_help}",
               enum_values=list(hparams))

    define("string", "init_checkpoint", None, "Encoder weights to start from: an albert-pretrain (or fine-tuning) "
           "output_dir or checkpoint prefix, an encoder/pretrainer SavedModel of albert-export, a preset folder, "
           "or a TF1 checkpoint of the original release.")
    define("string", "preset", None, "Instead of --init_checkpoint: a preset folder (config.json, "
           "model.weights.h5, spiece.model).")
    define("string", "albert_config_file", None, "The model's albert_config.json; needed when the checkpoint's "
           "folder has none, and to start from random weights.")
    define("string", "spm_model_file", None, "The SentencePiece model (default: the one the --init_checkpoint or "
           "--preset carries).")
    define("string", "cache_dir", None, "Where tokenized features are cached (default <output_dir>/features).")
    define("bool", "do_train", False, "Fine-tune on the train split.")
    define("bool", "do_eval", False, "Evaluate on the labelled split(s); writes eval_results.json.")
    define("bool", "do_predict", False, "Predict the unlabelled split(s); writes the task's prediction files.")
    define_strategy_flags(flag_values)
    define("bool", "export", True, "Export the task model as a SavedModel to <output_dir>/export after training "
           "(or when there is none yet).")
    define("enum", "format", "saved_model", "The export's format: saved_model, or litert: a LiteRT (TFLite) model "
           "for phones, <output_dir>/export/model.tflite beside spiece.model and model_io.json (docs/on_device.md).",
           enum_values=list(run_options.EXPORT_FORMATS))
    define("enum", "quantization", "none", "--format=litert: the weights' (and for full_int8 the activations', "
           "calibrated on the training split's texts) type.", enum_values=list(run_options.QUANTIZATIONS))
    define("enum", "precision", "float32", "The SavedModel's weights and matmuls: bfloat16 serves 1.5-2x faster "
           "where the CPU has AVX512_BF16 or AMX (docs/serving.md).", enum_values=list(run_options.PRECISIONS))
    define("integer", "max_eval_examples", None, "Evaluate on the first N examples of each evaluation split only "
           "(short runs; the metrics are over those N).")
    define("integer", "max_predict_examples", None, "Predict the first N examples of each prediction split only "
           "(short runs).")
    define_option_flags(flag_values, FinetuneOptions, _OPTION_HELP, _CLI_DEFAULTS)
    check_values(flag_values, paths=("init_checkpoint", "preset", "albert_config_file", "spm_model_file", "cache_dir"))
    entry_point.define_common_flags(flag_values)


def check_export_flags(flag_values: flags.FlagValues, task):
    """--format, --quantization and --precision agree with --export and with each other, and full
    int8 has training texts to calibrate on."""
    F = flag_values
    if not F.export and (F["format"].present or F["quantization"].present):
        # Else the run would train and export nothing, without a word of the format it was given.
        given = [f"--{name}={F[name].value}" for name in ("format", "quantization") if F[name].present]
        raise app.UsageError(f"{' and '.join(given)} {'are' if len(given) > 1 else 'is'} for the export, and "
                             "--noexport exports nothing: drop one of them")
    if F.format != "litert" and F.quantization != "none":
        raise app.UsageError("--quantization is for --format=litert")
    if F.format == "litert" and F.precision != "float32":
        raise app.UsageError(f"--precision={F.precision} is for SavedModels: LiteRT has no {F.precision} kernels "
                             "(pick --quantization=float16 or dynamic_int8 for smaller weights)")
    if F.export and F.quantization == "full_int8" and not task.train_split:
        raise app.UsageError(f"--quantization=full_int8 calibrates on {task.name}'s training texts: give its "
                             "training data too")


def options_from_flags(flag_values: flags.FlagValues, task):
    """`FinetuneOptions` of the flags, the task's hparams filling the hparams fields not given."""
    given = {name: flag_values[name].value for name in HPARAM_FIELDS}
    if given.get("num_train_steps") is not None and given.get("num_warmup_steps") is None:
        # A shorter (or longer) run keeps the hparams' warmup ratio instead of failing on its warmup.
        recipe = task.default_options()
        if recipe.get("num_train_steps") and recipe.get("num_warmup_steps") is not None:
            given["num_warmup_steps"] = run_options.scaled_warmup_steps(
                given["num_train_steps"], recipe["num_train_steps"], recipe["num_warmup_steps"])
    steps, warmup = given.get("num_train_steps"), given.get("num_warmup_steps")
    if steps is not None and warmup is not None:
        try:
            run_options.check_warmup(steps, warmup, prefix="--")
        except FlagError as error:
            raise app.UsageError(str(error)) from None
    hparams = task.default_options(**given)
    values = option_values(flag_values, [field.name for field in dataclasses.fields(FinetuneOptions)])
    values.update(hparams)
    return FinetuneOptions(**values)


def _features(task, split, tokenizer, max_seq_length, cache_dir):
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
        step = self.run.current_step
        if self._step == step:
            return self._results
        results = {"task": self.task.name, "global_step": step}
        for split, cached in self.splits.items():
            predictions, rate = self.run.predict(cached)
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
        if not os.path.exists(self._best_path):
            return None
        with open(self._best_path, encoding="utf-8") as f:
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


@dataclasses.dataclass(frozen=True)
class Actions:
    """What a run does (train, evaluate, predict) and the flags that asked for it (named in messages)."""

    train: bool
    eval: bool
    predict: bool
    asked: tuple[str, ...]


def actions_of_flags(flag_values: flags.FlagValues) -> Actions:
    """The actions as --do_train, --do_eval and --do_predict name them (a tool whose flags mean
    otherwise gives `finetune` its own reading, as SQuAD's --do_predict scores)."""
    F = flag_values
    return Actions(F.do_train, F.do_eval, F.do_predict, tuple(name for name in ("do_eval", "do_predict") if F[name].value))


def run_task(flag_values: flags.FlagValues, task, actions: Actions | None = None) -> dict:
    """Runs what the parsed `flag_values` ask of `task` (`actions`, default: as the flags name
    them); returns a summary: `train` (the result of `finetune.trainer.train` or None), `eval`
    (what eval_results.json holds or None), `predictions` (the paths written), `export_dir` (or
    None) and `model` (the task model)."""
    F = flag_values
    actions = actions or actions_of_flags(F)
    check_export_flags(F, task)
    # Before any data is read or a model built: an unusable folder is one line naming its flag.
    prepare_output_dir(F.output_dir, create=False)
    if F.cache_dir:
        prepare_output_dir(F.cache_dir, "cache_dir", create=False)
    # One run a folder; a run refused or failed before its first checkpoint leaves it as it was.
    from albert_tf.training import loop  # here: --help must not load TensorFlow

    with locked_run_folder(F.output_dir, keep_on_failure=loop.tf.train.latest_checkpoint):
        return _run_task(F, task, actions)


def example_limits(flag_values: flags.FlagValues) -> dict[str, int | None]:
    """--max_eval_examples and --max_predict_examples, checked, as a task's constructor takes them."""
    limits = {}
    for name in ("max_eval_examples", "max_predict_examples"):
        value = flag_values[name].value
        if value is not None and value < 1:
            raise FlagError(f"--{name} must be positive, got {value}")
        limits[name] = value
    return limits


def _run_task(F: flags.FlagValues, task, actions: Actions) -> dict:
    from albert_tf.training import strategies  # here: --help must not load TensorFlow
    from albert_tf.training import loop

    options = options_from_flags(F, task)
    splits = (((task.train_split,) if actions.train and task.train_split else ())
              + (tuple(task.eval_splits) if actions.eval else ())
              + (tuple(task.predict_splits) if actions.predict else ()))
    if actions.train and not task.train_split:
        raise app.UsageError(f"{task.name} has no training split")
    if not actions.train and not loop.tf.train.latest_checkpoint(F.output_dir):
        # Only the encoder comes from --init_checkpoint/--preset: the task's head would be random,
        # and its scores, prediction files and export would look like results.
        raise UserError(
            f"{' and '.join('--' + name for name in actions.asked)} without --do_train needs a fine-tuned model, and "
            f"--output_dir {F.output_dir} holds no "
            "checkpoint: add --do_train, or give the output_dir of a fine-tuning run"
        )
    task.check_data(splits)
    # Before any other TensorFlow op: multi-worker collectives are configured at startup.
    with quiet_device_start():
        strategy = strategies.get_strategy(F.strategy, tpu=F.tpu, cpu_devices=F.cpu_devices)

    from albert_tf.tokenizers.tokenizer import AlbertTokenizer
    from albert_tf.presets import folder as preset_folder
    from albert_tf.presets import loader as initialization
    from albert_tf.checkpoints.run_folder import keep_run_vocabulary
    from finetune import trainer

    source_given = F.init_checkpoint or F.preset or F.albert_config_file
    if not source_given and loop.tf.train.latest_checkpoint(F.output_dir):
        # A fine-tuning run folder remembers its config and vocabulary: resuming, evaluating or
        # predicting from it repeats neither.
        source = initialization.find_source(F.output_dir)
    else:
        source = initialization.find_source(F.init_checkpoint, F.preset, F.albert_config_file)
    config = source.config
    spm_model_file = F.spm_model_file or source.spm_model_file
    if not spm_model_file:
        raise app.UsageError("--spm_model_file is required (the vocabulary the model was pretrained with)")
    tokenizer = AlbertTokenizer(spm_model_file)
    preset_folder.check_pieces(spm_model_file, tokenizer.vocab_size, config.vocab_size)
    if F.init_checkpoint:
        initialization.check_vocab_size(F.init_checkpoint, tokenizer.vocab_size, f"--spm_model_file {spm_model_file}")
    print(f"encoder: {source.describe()}", flush=True)  # which source --init_checkpoint named, or the run folder

    cache_dir = F.cache_dir or os.path.join(F.output_dir, "features")
    run = trainer.Finetuning(config, task, options, strategy)
    run.restore_or_initialize(lambda model: initialization.initialize_encoder(model, F.init_checkpoint, F.preset))
    if actions.train:  # once the folder is known to be this run's: a refused run changes nothing in it
        keep_run_vocabulary(spm_model_file, F.output_dir)
    summary = {"train": None, "eval": None, "predictions": [], "export_dir": None, "model": run.model}
    evaluation = None
    if actions.eval:
        evaluation = Evaluation(run, task, {split: _features(task, split, tokenizer, options.max_seq_length, cache_dir)
                                            for split in task.eval_splits})
    if actions.train:
        cached = _features(task, task.train_split, tokenizer, options.max_seq_length, cache_dir)
        # With --do_eval, the evaluation splits are scored at every checkpoint: TensorBoard's eval/
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
                                                                 F.output_dir)
            write_json(os.path.join(F.output_dir, EVAL_RESULTS), results, sort_keys=False)
        summary["eval"] = results

    if actions.predict:
        for split in task.predict_splits:
            cached = _features(task, split, tokenizer, options.max_seq_length, cache_dir)
            predictions, _ = run.predict(cached)
            if run.is_chief:
                summary["predictions"] += task.write_predictions(split, predictions, cached, F.output_dir)

    export_dir = os.path.join(F.output_dir, EXPORT_DIR)
    if F.export and run.is_chief and (actions.train or not os.path.exists(export_dir)):
        calibration = None  # full int8 calibrates on the task's own training texts
        if F.quantization == "full_int8":
            calibration = _features(task, task.train_split, tokenizer, options.max_seq_length, cache_dir)
        summary["export_dir"] = task.export(run.model, spm_model_file, options.max_seq_length, export_dir,
                                            F.format, F.quantization, calibration, F.precision,
                                            results=summary["eval"])
        logging.info("exported the %s model to %s", task.name, summary["export_dir"])
    return summary


def finetune(argv, flag_values: flags.FlagValues, make_task: Callable, required=(),
             actions: Callable[[flags.FlagValues], Actions] = actions_of_flags) -> dict:
    """Parses `argv` (argv[0] is the program name) into `flag_values` and runs it (`run_parsed`)."""
    flag_values.unparse_flags()
    flag_values(argv)
    apply_release_flags(flag_values)
    return run_parsed(flag_values, make_task, required, actions)


def run_parsed(flag_values: flags.FlagValues, make_task: Callable, required=(),
               actions: Callable[[flags.FlagValues], Actions] = actions_of_flags) -> dict:
    """Checks the flags in `required` and that there is something to do, builds the task with
    `make_task(flag_values)` and runs the `actions(flag_values)` on it (`run_task`)."""
    for name in (*required, "output_dir"):
        if not flag_values[name].value:
            raise app.UsageError(f"--{name} is required")
    weights_source(flag_values)
    todo = actions(flag_values)
    if not (todo.train or todo.eval or todo.predict):
        raise app.UsageError("give at least one of --do_train, --do_eval and --do_predict")
    return run_task(flag_values, make_task(flag_values), todo)


def print_summary(summary: dict):
    if summary["train"]:  # where training started (fresh, or resumed from which checkpoint) and its curves
        from albert_tf.training.summaries import format_metrics

        train = summary["train"]
        metrics = format_metrics(train["train"]) or "(no step left)"
        print(f"trained to step {train['step']}: train {metrics}; {train['started']}"
              + (f"; curves {train['curves']}" if train["curves"] else ""), flush=True)
    if summary["eval"]:
        print(json.dumps(summary["eval"], indent=2), flush=True)
    for path in summary["predictions"]:
        print(f"wrote {path}", flush=True)


def run(doc: str, flag_values: flags.FlagValues, make_task: Callable, required=(),
        actions: Callable[[flags.FlagValues], Actions] = actions_of_flags):
    """A fine-tuning console script on the one entry point (`albert_tf.cli.entry_point.run_main`):
    the readers' and checks' ValueErrors name the file or value, so they are the user's (exit 1)."""
    def main(argv):
        if len(argv) > 1:
            raise FlagError(f"unexpected arguments: {argv[1:]}")
        print_summary(run_parsed(flag_values, make_task, required, actions))

    entry_point.run_main(main, flag_values, doc, value_errors_are_users=True)
