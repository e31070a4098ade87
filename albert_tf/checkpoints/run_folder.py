"""A run folder and its checkpoints: what albert-pretrain and the fine-tuning tools write
(`tf.train.Checkpoint` of the model's variables by name, `albert_config.json` and the run's
`spiece.model` beside them) and the rules a run keeps in it.

- `check_output_dir`: a folder holding checkpoints of another config is refused; a run records
  its config there.
- `check_run_settings`: a run that resumes with other training settings (learning rate, batch,
  length, optimizer, ...: `RUN_SETTINGS`) is refused, naming each, unless allowed; a run records
  its settings there.
- `keep_run_vocabulary`: the run's vocabulary is copied in, so that later tools need no
  --spm_model_file.
- `checkpoint_key`: a weight's name in a run's checkpoint (read as a model source by
  `albert_tf.presets.model_source`).
- `disk_refusals_named`: a checkpoint or SavedModel write that the disk refuses (full, a file size
  limit, a quota) is the machine's one line naming the file, and TensorFlow's temp folder
  (`<prefix>_temp/`) goes with it; `remove_partial_writes` clears those a killed run left.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re

import tensorflow as tf
from absl import logging

from albert_tf.config import AlbertConfig
from albert_tf.utils.errors import FlagError, UserError
from albert_tf.utils.atomic import write_json
from albert_tf.utils.output_dirs import prepare_output_dir

CONFIG_FILE = "albert_config.json"
TASK_FILE = "task.json"  # a run's, an export's and a preset's task (albert_tf.presets.model_source reads it)
RUN_VOCAB = "spiece.model"  # a run folder's vocabulary: albert-pretrain's, a fine-tuning run's
SETTINGS_FILE = "settings.json"  # the training settings of the run's checkpoints (check_run_settings)

# The options (albert_tf.training.options, finetune.options) that make a run's training what it is:
# its peak learning rate, global batch, sequence length, masked positions, optimizer, weight decay,
# seed (initialisation, dropout and the data's order), precision, dropout and training examples. A
# run resumed with another of these would go on as another run than its checkpoints'. The others
# may change on a resume: the schedule's length (num_train_steps and num_warmup_steps: a finished
# run is trained on, run_demo.sh's DEMO_STEPS) and how the run is carried out (checkpoints, loops,
# XLA, evaluation, input paths, gradient accumulation of the same global batch).
RUN_SETTINGS = ("learning_rate", "train_batch_size", "max_seq_length", "max_predictions_per_seq", "optimizer",
                "weight_decay", "seed", "mixed_precision", "classifier_dropout", "encoder_dropout",
                "max_train_examples", "group_by_length")


def check_output_dir(output_dir: str, config: AlbertConfig, write: bool):
    """Refuses an `output_dir` that holds checkpoints of another config; records ours in it.

    A config without checkpoints beside it (a first run that failed before its first save)
    protects nothing: it is replaced.
    """
    prepare_output_dir(output_dir, create=write)  # a file, or not writable: one line naming the flag
    path = os.path.join(output_dir, CONFIG_FILE)
    orphans = sorted(os.path.basename(p) for p in tf.io.gfile.glob(os.path.join(output_dir, "ckpt-*.index")))
    if orphans and not tf.train.latest_checkpoint(output_dir):
        logging.warning("%s holds checkpoints (%s) but not their index file `checkpoint`: they are not resumed "
                        "from; restore that file to resume, or delete them", output_dir,
                        ", ".join(orphans[:3]) + (", ..." if len(orphans) > 3 else ""))
    if tf.io.gfile.exists(path) and tf.train.latest_checkpoint(output_dir):
        with tf.io.gfile.GFile(path) as f:
            saved = AlbertConfig.from_dict(json.load(f), source=path)
        if saved != config:
            changed = {
                k: (v, getattr(config, k)) for k, v in saved.to_dict().items() if getattr(config, k) != v
            }
            raise UserError(
                f"output_dir {output_dir} holds checkpoints of another config: "
                + ", ".join(f"{k} {a} there vs {b} here" for k, (a, b) in changed.items())
                + "; use a fresh output_dir or the same config"
            )
        return
    if tf.train.latest_checkpoint(output_dir):
        raise UserError(
            f"output_dir {output_dir} holds checkpoints but no {CONFIG_FILE}: cannot tell which "
            f"config wrote them; use a fresh output_dir"
        )
    if write:  # written aside and renamed: other workers check the same file and must never read half
        write_json(path, config.to_dict())


def run_settings(options) -> dict:
    """The `RUN_SETTINGS` of a run's options (those its options class has)."""
    return {name: getattr(options, name) for name in RUN_SETTINGS if hasattr(options, name)}


def check_run_settings(output_dir: str, options, write: bool, allow_changed: bool = False) -> None:
    """Refuses to resume the checkpoints of `output_dir` with settings (`run_settings(options)`)
    other than those the run recorded in its `SETTINGS_FILE`: a FlagError (exit code 2) naming every
    difference, old and new, before anything is written; with `allow_changed`, a warning instead.
    Records the settings (if `write`): on a first start, on a resume allowed to change them, and in
    a run folder from before this file (whose checkpoints resume as before). As with the config, a
    record without checkpoints beside it (a first run that failed before its first save) protects
    nothing: it is replaced."""
    settings = run_settings(options)
    path = os.path.join(output_dir, SETTINGS_FILE)
    recorded = {}
    if tf.train.latest_checkpoint(output_dir) and tf.io.gfile.exists(path):
        with tf.io.gfile.GFile(path) as f:
            try:
                recorded = json.load(f)
            except json.JSONDecodeError:
                logging.warning("%s is not JSON: recording this run's settings anew", path)
        recorded = recorded if isinstance(recorded, dict) else {}
    changed = [name for name, value in settings.items() if name in recorded and recorded[name] != value]
    if changed:
        was = " ".join(_as_flag(name, recorded[name]) for name in changed)
        now = " ".join(_as_flag(name, settings[name]) for name in changed)
        message = f"{output_dir}: this run was started with {was}; resuming with {now}"
        if not allow_changed:
            raise FlagError(f"{message} (pass --allow_changed_flags to go on with the new values)")
        logging.warning("%s (--allow_changed_flags: going on with the new values)", message)
    if write and {**recorded, **settings} != recorded:
        write_json(path, {**recorded, **settings})


def _as_flag(name: str, value) -> str:
    if value is None:
        return f"no --{name}"
    if isinstance(value, bool):
        return f"--{name}={str(value).lower()}"
    return f"--{name}={value}"


# TensorFlow writes a checkpoint (or a SavedModel's variables) as `<prefix>_temp/part-*` files, then
# merges them under the prefix; a kill or a refused write leaves that folder, which nothing reads.
_TEMP = "_temp"
# The disk's refusals as TensorFlow's messages word them (strerror), and their errno.
_DISK_REFUSALS = {"No space left on device": errno.ENOSPC, "File too large": errno.EFBIG,
                  "Disk quota exceeded": errno.EDQUOT}


def remove_partial_writes(folder: str) -> list[str]:
    """Removes the temp folders of checkpoint writes that did not finish (`ckpt-N_temp/`) from a run
    folder, which the run holds (one run a folder); returns them. On a full disk, the one a refused
    write left would make the rerun fail again."""
    left = [p for p in tf.io.gfile.glob(os.path.join(folder, "*" + _TEMP)) if tf.io.gfile.isdir(p)]
    for path in left:
        logging.warning("removing %s, left by a checkpoint write that did not finish", path)
        tf.io.gfile.rmtree(path)
    return left


@contextlib.contextmanager
def disk_refusals_named(prefix: str, shown: str | None = None):
    """Around TensorFlow's write of a checkpoint `prefix` (or of a SavedModel's variables): a write
    the disk refuses removes TensorFlow's temp folder `<prefix>_temp` and raises the machine's
    OSError naming `shown` (default: the prefix), which a console script prints as one line
    (`albert_tf.utils.errors`: "no space left on the device writing ..."); TensorFlow's own is a
    `SaveV2` error naming a temp file."""
    try:
        yield
    except tf.errors.OpError as error:
        code = next((code for text, code in _DISK_REFUSALS.items() if text in error.message), None)
        if code is None or _TEMP + "/" not in error.message:
            raise
        if tf.io.gfile.isdir(prefix + _TEMP):
            tf.io.gfile.rmtree(prefix + _TEMP)
        raise OSError(code, os.strerror(code), shown or prefix) from None


def keep_run_vocabulary(spm_model_file: str, output_dir: str) -> str:
    """Copies a run's vocabulary into its folder as `RUN_VOCAB` (unless it is that file) and returns
    the kept path: a later tool reading the folder (export, fine-tuning, predicting) then needs no
    --spm_model_file."""
    kept = os.path.join(output_dir, RUN_VOCAB)
    if os.path.abspath(spm_model_file) != os.path.abspath(kept):
        tf.io.gfile.makedirs(output_dir)
        tf.io.gfile.copy(spm_model_file, kept, overwrite=True)
    return kept


def checkpoint_key(key: str) -> str:
    """The name in a run's checkpoint of the model weight named `key` (`model_weights`' names)."""
    # tf.train.Checkpoint escapes "/" and "." in dict keys of the object graph.
    escaped = key.replace(".", "..").replace("/", ".S")
    return f"model/{escaped}/.ATTRIBUTES/VARIABLE_VALUE"


def weight_name(stored: str) -> str | None:
    """The model weight named by a key of a run's checkpoint (`checkpoint_key`'s inverse); None for
    the optimizer's slots and the run's other state."""
    head, tail = "model/", "/.ATTRIBUTES/VARIABLE_VALUE"
    if not (stored.startswith(head) and stored.endswith(tail)) or ".OPTIMIZER_SLOT" in stored:
        return None
    escaped = stored[len(head):-len(tail)]
    if "/" in escaped:  # a nested object of the checkpoint, not one entry of the weights' dict
        return None
    return re.sub(r"\.([.S])", lambda m: "." if m.group(1) == "." else "/", escaped)


def model_task(model) -> dict | None:
    """A task model's task.json (its class and constructor arguments); None for an encoder."""
    if not hasattr(model, "encoder"):
        return None
    return {"class": type(model).__name__,
            "arguments": {name: getattr(model, name) for name in getattr(model, "config_arguments", ())}}


def read_task_file(folder: str | os.PathLike):
    """What `folder`'s task.json holds (a run's, an export's, a preset's: the model's class and
    arguments, a fine-tuning task's name and labels), read on any filesystem (a run on gs://); None
    where it has none. The one reader of the file: a file that is not JSON is a UserError naming it."""
    return read_run_json(folder, TASK_FILE)


def read_run_json(folder: str | os.PathLike, name: str):
    """The JSON file `name` of a run folder (`TASK_FILE`, `albert_tf.training.options.EVAL_RESULTS`)
    on any filesystem; None where there is none; a UserError naming it where it is not JSON."""
    path = os.path.join(os.fspath(folder), name)
    if not tf.io.gfile.exists(path):
        return None
    with tf.io.gfile.GFile(path, "rb") as f:
        try:
            return json.loads(f.read().decode("utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise UserError(f"{path}: not valid JSON ({error})") from None


def record_task(folder: str | os.PathLike, model) -> None:
    """Records `model`'s class and arguments in `folder`'s task.json (a run's output_dir, an export),
    beside what a fine-tuning run keeps there (its task's name and labels), so that every door loads
    the folder's heads into the model they belong to (`albert_tf.presets.model_source`)."""
    task = model_task(model)
    if task is None:
        return
    path = os.path.join(os.fspath(folder), TASK_FILE)
    try:
        recorded = read_task_file(folder) or {}
    except UserError:  # not JSON: replaced by the model's record
        recorded = {}
    if not isinstance(recorded, dict) or {k: recorded.get(k) for k in task} == task:
        return
    write_json(path, {**recorded, **task}, sort_keys=False)
