"""The preset folder: what it holds, and how a model is written to it and loaded from it.

    config.json        the encoder's `AlbertConfig`, in the keys of the original albert_config.json
    model.weights.h5   the encoder's weights, always (by name: `albert_tf.presets.weights`)
    spiece.model       the SentencePiece vocabulary
    task.json          only with a task: its class and constructor arguments
    task.weights.h5    only with a task: its weights other than the encoder's (heads)

The encoder sits in one file whatever the task, as keras-hub's presets keep the backbone, so every
model loads from every preset the part it shares with it: an encoder from a pretrainer's or a
classifier's preset, a classifier with a new head from an encoder's.
"""

from __future__ import annotations

import json
import os
import shutil

from albert_tf.config import AlbertConfig
from albert_tf.errors import UserError
from albert_tf.presets import weights as weights_module

CONFIG = "config.json"
WEIGHTS = "model.weights.h5"
VOCAB = "spiece.model"
TASK_CONFIG = "task.json"
TASK_WEIGHTS = "task.weights.h5"
# The task classes that conversion reads and writes without importing them.
PRETRAINER_TASK = "AlbertPretrainer"
TEXT_CLASSIFIER_TASK = "AlbertTextClassifier"


def is_preset(path: str | os.PathLike) -> bool:
    path = os.fspath(path)
    return os.path.isdir(path) and all(os.path.isfile(os.path.join(path, n)) for n in (CONFIG, WEIGHTS))


def read_config(folder: str | os.PathLike) -> AlbertConfig:
    path = os.path.join(os.fspath(folder), CONFIG)
    if not os.path.isfile(path):
        raise UserError(f"{folder} is not a preset folder: no {CONFIG}")
    return AlbertConfig.from_json_file(path)


def read_task(folder: str | os.PathLike) -> dict | None:
    """The preset's task (`{"class": ..., "arguments": {...}}`), or None for an encoder's preset."""
    path = os.path.join(os.fspath(folder), TASK_CONFIG)
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def describe(folder: str | os.PathLike) -> str:
    task = read_task(folder)
    return "an encoder" if task is None else f"an {task['class']}"


def check_vocabulary(spm_model_file: str | os.PathLike, config: AlbertConfig):
    """The tokenizer of `spm_model_file`; an error unless it is an ALBERT SentencePiece model whose
    ids all index the embedding table."""
    from albert_tf.tokenizer import AlbertTokenizer

    if not os.path.isfile(spm_model_file):
        raise FileNotFoundError(f"SentencePiece model {spm_model_file} not found")
    tokenizer = AlbertTokenizer(os.fspath(spm_model_file))
    if tokenizer.vocab_size > config.vocab_size:
        raise ValueError(
            f"{spm_model_file} has {tokenizer.vocab_size} pieces but the config's vocab_size is "
            f"{config.vocab_size}: ids beyond the embedding table"
        )
    return tokenizer


def write(folder: str | os.PathLike, config: AlbertConfig, encoder: dict, spm_model_file: str | os.PathLike,
          task: dict | None = None, task_weights: dict | None = None) -> str:
    """Writes a preset folder from tensors by name (`encoder`: below the encoder; `task_weights`:
    the task's others). `folder` must be new or empty."""
    from albert_tf.files import locked_run_folder, prepare_output_dir, write_json

    folder = os.fspath(folder)
    prepare_output_dir(folder, create=False, empty=True)
    check_vocabulary(spm_model_file, config)
    with locked_run_folder(folder):  # a write that fails (a full disk) leaves the folder as it was
        weights_module.save(os.path.join(folder, WEIGHTS), encoder)
        if task is not None:
            weights_module.save(os.path.join(folder, TASK_WEIGHTS), task_weights or {})
            write_json(os.path.join(folder, TASK_CONFIG), task)
        shutil.copyfile(spm_model_file, os.path.join(folder, VOCAB))
        write_json(os.path.join(folder, CONFIG), config.to_dict())  # last: a folder with it is complete
    return folder


def save_model(model, folder: str | os.PathLike, spm_model_file: str | os.PathLike, task: dict | None = None) -> str:
    """Writes `model` (an encoder, or a task model with `.encoder`) as a preset; `task` is its
    task.json (required when the model has weights beside the encoder's)."""
    encoder, others = weights_module.split(model)
    if others and task is None:
        raise ValueError(f"{type(model).__name__} has weights beside its encoder's: give its task")
    return write(folder, model.config, weights_module.values(encoder), spm_model_file, task,
                 weights_module.values(others))


def load_encoder(model, folder: str | os.PathLike) -> None:
    """Loads the preset's encoder into `model` (an encoder, or a task model's `.encoder`)."""
    path = os.path.join(os.fspath(folder), WEIGHTS)
    encoder, _ = weights_module.split(model)
    weights_module.assign(encoder, weights_module.read(path), f"preset {folder} ({WEIGHTS})")


def load_task(model, folder: str | os.PathLike) -> None:
    """Loads the preset's task weights (heads) into `model`."""
    path = os.path.join(os.fspath(folder), TASK_WEIGHTS)
    _, task = weights_module.split(model)
    weights_module.assign(task, weights_module.read(path), f"preset {folder} ({TASK_WEIGHTS})")


def load_model(model_class, folder: str | os.PathLike, heads_required: bool, **kwargs):
    """`model_class` of the preset's config with the preset's weights.

    The encoder always loads; a task model's other weights load when the preset's task is of its
    class (its stored arguments then fill the constructor's), else they stay new (a new head), or,
    where `heads_required` (the pretrainer: heads are part of what was pretrained), it is an error.
    """
    folder = os.fspath(folder)
    config = read_config(folder)
    task = read_task(folder)
    same_task = task is not None and task.get("class") == model_class.__name__
    if same_task:
        stored = task.get("arguments", {})
        differ = {k: (stored[k], v) for k, v in kwargs.items() if k in stored and stored[k] != v}
        if differ:
            raise UserError(f"preset {folder} holds an {task['class']} with "
                            + ", ".join(f"{k}={a!r}" for k, (a, _) in differ.items())
                            + f", not {', '.join(f'{k}={b!r}' for k, (_, b) in differ.items())}")
        kwargs = {**stored, **kwargs}
    model = model_class(config, **kwargs)
    model.build()
    load_encoder(model, folder)
    _, others = weights_module.split(model)
    if others and same_task:
        load_task(model, folder)
    elif others and heads_required:
        raise UserError(f"preset {folder} holds {describe(folder)} without the heads of an {model_class.__name__}; "
                        "load its encoder with AlbertEncoder.from_preset")
    return model
