"""A run folder's checkpoints as a source of weights: what albert-pretrain and the fine-tuning tools
write (`tf.train.Checkpoint` of the model's variables by name, `albert_config.json` and the run's
`spiece.model` beside them), read back strictly.
"""

from __future__ import annotations

import tensorflow as tf
from absl import logging

from albert_tf.errors import UserError
from albert_tf.presets.weights import model_weights

CONFIG_FILE = "albert_config.json"
RUN_VOCAB = "spiece.model"  # a run folder's vocabulary: albert-pretrain's, a fine-tuning run's


def load_init_checkpoint(model, path: str, weights: dict | None = None):
    """Initialises `model` from a checkpoint written by this loop (a file prefix or a directory);
    `weights`, the model's variables by name (default: all of them), says which to load.

    A missing checkpoint, a variable of the model absent from it, or a tensor of another shape is
    an error: a silent start from scratch was the original release's most reported failure.
    """
    if tf.io.gfile.isdir(path):
        latest = tf.train.latest_checkpoint(path)
        if latest is None:
            raise FileNotFoundError(f"init_checkpoint: no checkpoint in directory {path}")
        path = latest
    if not tf.io.gfile.exists(path + ".index"):
        raise FileNotFoundError(f"init_checkpoint: {path} does not exist (no {path}.index)")
    weights = model_weights(model) if weights is None else weights
    stored = dict(tf.train.list_variables(path))
    problems = []
    for key, variable in weights.items():
        name = _checkpoint_key(key)
        if name not in stored:
            problems.append(f"{key} is missing")
        elif list(stored[name]) != list(variable.shape):
            problems.append(f"{key} has shape {stored[name]} there, {list(variable.shape)} here")
    if problems:
        shown = "; ".join(problems[:8]) + (f"; and {len(problems) - 8} more" if len(problems) > 8 else "")
        raise UserError(f"init_checkpoint {path} does not match the model: {shown}")
    tf.train.Checkpoint(model=weights).read(path).assert_existing_objects_matched().expect_partial()
    logging.info("initialised %d variables from %s", len(weights), path)
    return path


def _checkpoint_key(key: str) -> str:
    # tf.train.Checkpoint escapes "/" and "." in dict keys of the object graph.
    escaped = key.replace(".", "..").replace("/", ".S")
    return f"model/{escaped}/.ATTRIBUTES/VARIABLE_VALUE"
