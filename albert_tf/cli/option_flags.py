"""The flags several tools share, each defined and checked here once: those generated from an
option dataclass (`albert_tf.training.options`, `finetune.options`: one flag per field, named as the field,
its default the field's; a tool writes only each flag's help), the strategy's, and where the
weights start from; and the one rule of the values every tool checks alike when its command line is
parsed (`check_values`: exit code 2, the flag named, before anything is read or written)."""

from __future__ import annotations

import dataclasses

from absl import flags

from albert_tf.utils.errors import FlagError
from albert_tf.training.options import MIXED_PRECISION_POLICIES, OPTIMIZERS, STRATEGIES, WORKER_TIMEOUT_S

# Fields whose values are a fixed set of names.
_ENUMS = {"mixed_precision": list(MIXED_PRECISION_POLICIES), "optimizer": list(OPTIMIZERS)}


def define_option_flags(flag_values: flags.FlagValues, options_class, help_texts: dict | None = None,
                        defaults: dict | None = None, skip=()) -> tuple[str, ...]:
    """Defines, in `flag_values`, a flag for each field of `options_class` but those in `skip`,
    with the field's help unless `help_texts` gives the tool's own (a field with neither is an
    error here, at import) and the field's default unless `defaults` gives the command line's
    own; returns the flags' names."""
    help_texts, defaults = help_texts or {}, defaults or {}
    names = []
    for field in dataclasses.fields(options_class):
        if field.name in skip:
            continue
        name = field.name
        help_text = help_texts.get(name) or field.metadata.get("help")
        if not help_text:
            raise ValueError(f"the option {options_class.__name__}.{name} has no help for its flag")
        default = defaults.get(name, None if field.default is dataclasses.MISSING else field.default)
        kind = field.type if isinstance(field.type, str) else field.type.__name__
        if name in _ENUMS:
            flags.DEFINE_enum(name, default, _ENUMS[name], help_text, flag_values=flag_values)
        elif "bool" in kind:
            flags.DEFINE_bool(name, default, help_text, flag_values=flag_values)
        elif "int" in kind:
            positive = name in (*getattr(options_class, "_positive", ()),
                                *getattr(options_class, "_positive_optional", ()))
            flags.DEFINE_integer(name, default, help_text, lower_bound=1 if positive else None,
                                 flag_values=flag_values)
        elif "float" in kind:
            flags.DEFINE_float(name, default, help_text, flag_values=flag_values)
        else:
            flags.DEFINE_string(name, default, help_text, flag_values=flag_values)
        names.append(name)
    check_values(flag_values, paths=[name for name in names if name == "output_dir"])
    return tuple(names)


def option_values(flag_values: flags.FlagValues, names) -> dict:
    """The parsed values of the option flags `names`, as keyword arguments of their dataclass."""
    return {name: flag_values[name].value for name in names}


def define_allow_changed_flags(flag_values: flags.FlagValues) -> None:
    """--allow_changed_flags, of every tool that trains: resume a run with other training settings
    (`albert_tf.checkpoints.run_folder.check_run_settings`)."""
    flags.DEFINE_bool("allow_changed_flags", False, "Resume the run in --output_dir although the flags that make its "
                      "training what it is (learning rate, batch, sequence length, optimizer, weight decay, seed, "
                      "precision, dropout, training examples: docs/reliability.md) differ from those it was started "
                      "with: train on with the new values, a warning naming each. Without it such a resume is "
                      "refused; a longer or shorter --num_train_steps (and its warmup) needs no such flag.",
                      flag_values=flag_values)


def define_strategy_flags(flag_values: flags.FlagValues, worker_timeout: bool = False) -> None:
    """--strategy, --cpu_devices and --tpu (and --worker_timeout_s): the arguments of
    `albert_tf.training.strategies.get_strategy`."""
    flags.DEFINE_enum("strategy", "one_device", list(STRATEGIES), "The tf.distribute strategy.",
                      flag_values=flag_values)
    flags.DEFINE_integer("cpu_devices", None, "With --strategy=mirrored on a machine without GPUs: split the CPU "
                         "into this many logical devices, one replica each (to try multi-replica runs).",
                         flag_values=flag_values)
    flags.DEFINE_string("tpu", None, "For --strategy=tpu: a Cloud TPU name, grpc://host:port or 'local'.",
                        flag_values=flag_values)
    if worker_timeout:
        flags.DEFINE_float("worker_timeout_s", WORKER_TIMEOUT_S, "With --strategy=multi_worker: a worker not heard "
                           "from for this long (its machine gone) is taken as lost, and every other worker stops "
                           "with one line; a worker that dies on a live machine is noticed at once.",
                           flag_values=flag_values)


# What --preset and --init_checkpoint take, in every tool alike (albert_tf.presets.model_source).
SOURCE_HELP = ("a released name such as albert_base_v2 (albert-presets), a tarball URL, hf://<repo>, a preset "
               "folder, the output_dir of albert-pretrain or of a fine-tuning tool (or a checkpoint prefix in "
               "one), a SavedModel of albert-export, or a release's folder (docs/presets.md)")


def define_weights_source_flags(flag_values: flags.FlagValues, what: str) -> None:
    """--preset and --init_checkpoint (the release's name for the same flag): where `what` comes
    from, any model source, by one rule (`albert_tf.presets.loader`)."""
    flags.DEFINE_string("preset", None, f"{what} from any model source: {SOURCE_HELP}.", flag_values=flag_values)
    flags.DEFINE_string("init_checkpoint", None, "The release's name for --preset: the same sources, loaded by the "
                        "same rule.", flag_values=flag_values)


def weights_source(flag_values: flags.FlagValues, required: bool = False) -> str | None:
    """Where the weights start from: --preset or --init_checkpoint, never both (and one of them
    when `required`); None when neither is given."""
    preset, checkpoint = flag_values["preset"].value, flag_values["init_checkpoint"].value
    if preset and checkpoint or required and not (preset or checkpoint):
        raise FlagError(f"give {'exactly' if required else 'at most'} one of --preset and --init_checkpoint")
    return preset or checkpoint


def check_values(flag_values: flags.FlagValues, paths=(), names=()) -> None:
    """Checks, as the command line is parsed, what every tool checks alike: `paths` (string flags
    naming a file or folder) are not empty when given, and `names` (list flags: entity types) hold
    at least one name, none empty or given twice. Positive integers are absl's `lower_bound=1` where
    the flag is defined (`define_option_flags` gives it to the options' positive fields). A value
    refused is `error: flag --<name>=<value>: <why>` and exit code 2, before anything is read."""
    for name in paths:
        flags.register_validator(name, lambda value: value is None or bool(value.strip()),
                                 message="is empty: give a path", flag_values=flag_values)
    for name in names:
        flags.register_validator(name, _distinct_names, flag_values=flag_values)


def _distinct_names(values) -> bool:
    if values is None:
        return True
    if not values:
        raise flags.ValidationError("names nothing: give one or more, comma-separated")
    for index, value in enumerate(values):
        if not value.strip():
            raise flags.ValidationError(f"name {index + 1} of {len(values)} is empty")
        if values.index(value) < index:
            raise flags.ValidationError(f"{value!r} is given twice")
    return True


def define_serving_version_flag(flag_values: flags.FlagValues, model_base: str) -> None:
    """--serving_version, TF Serving's layout of the export (albert-export's and every fine-tuning
    tool's): `model_base` names the model base path in the help."""
    flags.DEFINE_integer("serving_version", None, f"Write TF Serving's layout: {model_base} is the model base path "
                         f"and the SavedModel goes to {model_base}/<serving_version>/ (a new version, beside the "
                         "others, never over one) with its warmup requests in assets.extra/ (docs/serving.md).",
                         flag_values=flag_values)


def check_serving_version(flag_values: flags.FlagValues, model_base: str) -> None:
    """--serving_version, if given: a positive integer, for a SavedModel, naming a version not at
    `model_base` yet (`albert_tf.serving.tf_serving.version_folder`); else a FlagError naming it."""
    version = flag_values.serving_version
    if version is None:
        return
    from albert_tf.serving.tf_serving import version_folder
    from albert_tf.utils.errors import UserError

    if flag_values.format != "saved_model":
        raise FlagError("--serving_version writes TF Serving's layout of a SavedModel: drop --format=litert")
    if version < 1:
        raise FlagError(f"--serving_version {version}: a TF Serving version is a positive integer")
    try:
        version_folder(model_base, version)
    except UserError as error:
        raise FlagError(f"--serving_version {version}: {error}") from None
