"""The CLI skeleton of every fine-tuning task: shared flags named as the option fields, one flow.

A task's console script defines its own flags (GLUE: `--task`, `--data_dir`, `--skip_bad_rows`)
beside `define_flags(FLAGS)`; `finetune, run = entry_points(__doc__, FLAGS, make_task)` gives its
two doors: `run()`, its entry point (the one of every console script,
`albert_tf.cli.entry_point.run_main`), and `finetune(argv)`, a command line run in-process through
the same parser and `main`, where `make_task(FLAGS)` returns its `finetune.task.FinetuningTask`. A tool
whose action flags mean otherwise (SQuAD's --do_predict also scores) passes its `actions`. The run
itself is the library's `finetune.run.run_finetuning`: this module only turns flags into its
arguments. The flow:

1. the options: each flag named as a field of `finetune.options.FinetuneOptions`; those of the
   task's hparams (`finetune.task.HPARAM_FIELDS`) default to the hparams, the others to the field's
   default;
2. (`run_finetuning`, from here on) the data files checked, the strategy made, the encoder source found (`--preset`, or
   `--init_checkpoint`, its release's name: any model source, `albert_tf.presets.model_source`; or
   random weights with `--albert_config_file`), and its vocabulary checked against the SentencePiece
   model (`--spm_model_file`, default: the one the source carries);
3. `--do_train`: train (resuming from `output_dir`'s latest checkpoint if any);
   `--do_eval`: each evaluation split's metrics into `eval_results.json` (and TensorBoard's
   `eval/`); `--do_predict`: each prediction split's files (the task's `write_predictions`);
4. `--export`: the task's SavedModel in `output_dir/export`, written after training, or when
   there is none yet (a predict-only run does not rewrite it).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Callable, Sequence

from absl import app, flags

from albert_tf.serving.formats import EXPORT_FORMATS, PRECISIONS, QUANTIZATIONS, check_export_settings
from albert_tf.training import options as run_options
from albert_tf.training.options import EXPORT_DIR  # noqa: F401 (a name callers use)
from albert_tf.cli import entry_point
from albert_tf.cli.option_flags import (check_serving_version, check_values, define_allow_changed_flags,
                                        define_option_flags, define_serving_version_flag, define_strategy_flags,
                                        define_weights_source_flags, option_values, weights_source)
from albert_tf.utils.errors import FlagError
from albert_tf.utils.locks import locked_run_folder
from albert_tf.utils.output_dirs import prepare_output_dir
from albert_tf.utils.quiet import cpp_lines_kept
from finetune.options import FinetuneOptions
from finetune.run import BEST_CHECKPOINT, BEST_RESULTS, EVAL_RESULTS  # noqa: F401 (names callers use)
from finetune.run import Actions, ExportSettings, run_finetuning
from finetune.task import HPARAM_FIELDS


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
    "optimizer": "adamw_release (the release's AdamW, no bias correction: the paper's GLUE, SQuAD and RACE recipes), "
                 "adamw (torch's bias-corrected AdamW: recipes taken from Hugging Face, NER's hf) or lamb "
                 "(default: the task's hparams).",
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

    define_weights_source_flags(flag_values, "The encoder (and, from a run or preset of the same task, its head)")
    define("string", "albert_config_file", None, "The model's albert_config.json; needed when the checkpoint's "
           "folder has none, and to start from random weights.")
    define("string", "spm_model_file", None, "The SentencePiece model (default: the one the --init_checkpoint or "
           "--preset carries).")
    define("string", "cache_dir", None, "Where tokenized features are cached (default <output_dir>/features, on the "
           "output_dir's filesystem, gs:// too: where every worker of a TPU pod reads them).")
    define("bool", "do_train", False, "Fine-tune on the train split.")
    define("bool", "do_eval", False, "Evaluate on the labelled split(s); writes eval_results.json.")
    define("bool", "do_predict", False, "Predict the unlabelled split(s); writes the task's prediction files.")
    define_strategy_flags(flag_values)
    define_allow_changed_flags(flag_values)
    define("bool", "export", True, "Export the task model as a SavedModel to <output_dir>/export after training "
           "(or when there is none yet).")
    define("enum", "format", "saved_model", "The export's format: saved_model, or litert: a LiteRT (TFLite) model "
           "for phones, <output_dir>/export/model.tflite beside spiece.model and model_io.json (docs/on_device.md).",
           enum_values=list(EXPORT_FORMATS))
    define("enum", "quantization", "none", "--format=litert: the weights' (and for full_int8 the activations', "
           "calibrated on the training split's texts) type.", enum_values=list(QUANTIZATIONS))
    define("enum", "precision", "float32", "The SavedModel's weights and matmuls: bfloat16 serves 1.5-2x faster "
           "where the CPU has AVX512_BF16 or AMX (docs/serving.md).", enum_values=list(PRECISIONS))
    define_serving_version_flag(flag_values, "<output_dir>/export")
    define("integer", "max_eval_examples", None, "Evaluate on the first N examples of each evaluation split only "
           "(short runs; the metrics are over those N).")
    define("integer", "max_predict_examples", None, "Predict the first N examples of each prediction split only "
           "(short runs).")
    define_option_flags(flag_values, FinetuneOptions, _OPTION_HELP, _CLI_DEFAULTS)
    check_values(flag_values, paths=("init_checkpoint", "preset", "albert_config_file", "spm_model_file", "cache_dir"))
    entry_point.define_common_flags(flag_values)


def check_export_flags(flag_values: flags.FlagValues, task):
    """--format, --quantization, --precision and --serving_version agree with --export and with each
    other (a version not there yet: albert-export's check), and full int8 has training texts to
    calibrate on."""
    F = flag_values
    if not F.export and (F["format"].present or F["quantization"].present or F["serving_version"].present):
        # Else the run would train and export nothing, without a word of the format it was given.
        given = [f"--{name}={F[name].value}" for name in ("format", "quantization", "serving_version")
                 if F[name].present]
        raise app.UsageError(f"{' and '.join(given)} {'are' if len(given) > 1 else 'is'} for the export, and "
                             "--noexport exports nothing: drop one of them")
    check_export_settings(F.format, F.quantization, F.precision)
    if F.export and F.output_dir:
        check_serving_version(F, f"{F.output_dir.rstrip('/')}/{EXPORT_DIR}")
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
    if values["optimizer"] is None:  # a recipe that names none: the field's, the release's AdamW
        del values["optimizer"]
    return FinetuneOptions(**values)


def actions_of_flags(flag_values: flags.FlagValues) -> Actions:
    """The actions as --do_train, --do_eval and --do_predict name them (a tool whose flags mean
    otherwise gives `finetune` its own reading, as SQuAD's --do_predict scores)."""
    F = flag_values
    return Actions(F.do_train, F.do_eval, F.do_predict, tuple(name for name in ("do_eval", "do_predict") if F[name].value))


def run_task(flag_values: flags.FlagValues, task, actions: Actions | None = None) -> dict:
    """Runs what the parsed `flag_values` ask of `task` (`actions`, default: as the flags name
    them); returns a summary: `train` (the result of `finetune.trainer.train` or None), `eval`
    (what eval_results.json holds or None), `predictions` (the paths written), `export_dir` (or
    None), `model` (the task model) and `optimizer` (its name: the task's recipe's or --optimizer)."""
    F = flag_values
    actions = actions or actions_of_flags(F)
    check_export_flags(F, task)
    # Before any data is read or a model built: an unusable folder is one line naming its flag.
    prepare_output_dir(F.output_dir, create=False)
    if F.cache_dir:
        prepare_output_dir(F.cache_dir, "cache_dir", create=False)
    # One run a folder; a run refused or failed before its first checkpoint leaves it as it was.
    import tensorflow as tf  # here: --help must not load TensorFlow

    with locked_run_folder(F.output_dir, keep_on_failure=tf.train.latest_checkpoint):
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
    """The flags as `run_finetuning`'s arguments: the options, the strategy and the encoder source,
    the last two made by `run_finetuning` once it has checked the run's actions and data."""
    options = options_from_flags(F, task)

    def make_strategy():
        from albert_tf.training import strategies

        with cpp_lines_kept():
            return strategies.get_strategy(F.strategy, tpu=F.tpu, cpu_devices=F.cpu_devices)

    from albert_tf.presets import loader as initialization

    def find_source():
        import tensorflow as tf  # here: --help must not load TensorFlow

        if not (F.init_checkpoint or F.preset or F.albert_config_file) and tf.train.latest_checkpoint(F.output_dir):
            # A fine-tuning run folder remembers its config and vocabulary: resuming, evaluating or
            # predicting from it repeats neither.
            source = initialization.find_source(F.output_dir)
        else:
            source = initialization.find_source(F.init_checkpoint, F.preset, F.albert_config_file)
        print(f"encoder: {source.describe()}", flush=True)  # which source --init_checkpoint named, or the run folder
        return source

    return run_finetuning(
        task, options, find_source, F.spm_model_file, actions=actions, cache_dir=F.cache_dir, strategy=make_strategy,
        initialize=lambda model: initialization.initialize_encoder(model, F.init_checkpoint, F.preset),
        export=ExportSettings(F.format, F.quantization, F.precision, F.serving_version) if F.export else None,
        allow_changed_flags=F.allow_changed_flags)


def finetune(argv, flag_values: flags.FlagValues, make_task: Callable, required=(),
             actions: Callable[[flags.FlagValues], Actions] = actions_of_flags, doc: str | None = None) -> dict:
    """Runs the command line `argv` (argv[0] is the program name) in this process, parsed as the
    console script parses it (`albert_tf.cli.entry_point.parse_command_line`: --help, --verbose,
    the release's names); returns `run_parsed`'s summary. A user's error is raised, as the console
    script's `run` reports it: a bad flag as a one-line FlagError."""
    try:
        remaining = entry_point.parse_command_line(flag_values, argv, doc)
    except flags.Error as error:
        raise FlagError(entry_point.flag_error_line(error)) from None
    return _main(flag_values, make_task, required, actions)(remaining)


def _main(flag_values: flags.FlagValues, make_task: Callable, required, actions) -> Callable[[list], dict]:
    """The console script's `main(argv)` on parsed `flag_values`: what `run` and `finetune` run."""
    def main(argv) -> dict:
        if len(argv) > 1:
            raise FlagError(f"unexpected arguments: {argv[1:]}")
        return run_parsed(flag_values, make_task, required, actions)

    return main


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
        from albert_tf.training.summaries import train_summary

        train = summary["train"]
        print(f"trained to step {train['step']}: {train_summary(train['train'], train['step'])}; "
              f"optimizer {summary['optimizer']}; {train['started']}"
              + (f"; curves {train['curves']}" if train["curves"] else ""), flush=True)
    if summary["eval"]:
        print(json.dumps(summary["eval"], indent=2), flush=True)
        print_baselines(summary["eval"])
    for path in summary["predictions"]:
        print(f"wrote {path}", flush=True)


def print_baselines(results: dict):
    """Each evaluated split's scores beside its `baseline`'s (the task's metrics.py: the majority
    class, O everywhere, the majority letter, no answer), a line a split: what a score means."""
    for split, scores in results.items():
        baseline = scores.get("baseline") if isinstance(scores, dict) else None
        if baseline:
            pairs = ", ".join(f"{name} {scores[name]:.4g} against {value:.4g}"
                              for name, value in baseline.items() if name != "predictor")
            print(f"{split}: {pairs} for {baseline['predictor']}", flush=True)


def run(doc: str, flag_values: flags.FlagValues, make_task: Callable, required=(),
        actions: Callable[[flags.FlagValues], Actions] = actions_of_flags):
    """A fine-tuning console script on the one entry point (`albert_tf.cli.entry_point.run_main`):
    the readers' and checks' ValueErrors name the file or value, so they are the user's (exit 1)."""
    run_command_line = _main(flag_values, make_task, required, actions)

    def main(argv):
        print_summary(run_command_line(argv))

    entry_point.run_main(main, flag_values, doc, value_errors_are_users=True)


def entry_points(doc: str, flag_values: flags.FlagValues, make_task: Callable, required=(),
                 actions: Callable[[flags.FlagValues], Actions] = actions_of_flags):
    """A task's console script's two doors on one parser and one main: `finetune(argv)`, the
    command line run in this process (its summary returned, a user's error raised), and `run()`,
    the console script (its summary printed, a user's error one line and its exit code)."""
    def finetune_command_line(argv) -> dict:
        return finetune(argv, flag_values, make_task, required, actions, doc)

    def run_console_script():
        run(doc, flag_values, make_task, required, actions)

    return finetune_command_line, run_console_script
