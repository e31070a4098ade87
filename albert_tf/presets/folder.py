"""The preset folder: what it holds, and how a model is written to it and loaded from it.

    config.json        the encoder's `AlbertConfig`, in the keys of the original albert_config.json
    model.weights.h5   the encoder's weights, always (by name: `albert_tf.checkpoints.weights`)
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
from albert_tf.utils.errors import UserError
from albert_tf.checkpoints import weights as weights_module

CONFIG = "config.json"
WEIGHTS = "model.weights.h5"
VOCAB = "spiece.model"
from albert_tf.checkpoints.run_folder import TASK_FILE as TASK_CONFIG  # noqa: E402 (one name for the file)
from albert_tf.checkpoints.run_folder import read_task_file  # noqa: E402 (the one reader of it)
from albert_tf.checkpoints.run_folder import model_task, record_task  # noqa: F401 (the model a folder holds)
TASK_WEIGHTS = "task.weights.h5"
# The task classes that conversion reads and writes without importing them.
PRETRAINER_TASK = "AlbertPretrainer"
TEXT_CLASSIFIER_TASK = "AlbertTextClassifier"
ENTITY_RECOGNIZER_TASK = "AlbertEntityRecognizer"
TOKEN_CLASSIFIER_TASK = "AlbertTokenClassifier"


def is_preset(path: str | os.PathLike) -> bool:
    path = os.fspath(path)
    return os.path.isdir(path) and all(os.path.isfile(os.path.join(path, n)) for n in (CONFIG, WEIGHTS))


def read_config(folder: str | os.PathLike) -> AlbertConfig:
    path = os.path.join(os.fspath(folder), CONFIG)
    if not os.path.isfile(path):
        raise UserError(f"{folder} is not a preset folder: no {CONFIG}")
    return AlbertConfig.from_json_file(path)


# The config's fields that do not shape or define the weights: a run-time choice of whoever loads
# them (the fine-tuning tables set their own dropout), not part of a checkpoint's identity.
RUN_TIME_FIELDS = frozenset({"hidden_dropout_prob", "attention_probs_dropout_prob", "initializer_range"})


def check_config(found: AlbertConfig, wanted: AlbertConfig, source: str) -> None:
    """Refuses weights of `found`'s config for a model of `wanted`'s unless every field that
    determines the weights (shapes, sharing, groups, activation) agrees; names the first that does
    not, with both values. Dropout and the initializer range are the model's own choice."""
    for name, value in found.to_dict().items():
        if name not in RUN_TIME_FIELDS and getattr(wanted, name) != value:
            raise UserError(f"{source} holds an encoder with {name}={value!r}, the model has "
                            f"{name}={getattr(wanted, name)!r}")


def read_task(folder: str | os.PathLike) -> dict | None:
    """The preset's task (`{"class": ..., "arguments": {...}}`), or None for an encoder's preset."""
    path = os.path.join(os.fspath(folder), TASK_CONFIG)
    task = read_task_file(folder)
    if task is None:
        return None
    if not (isinstance(task, dict) and isinstance(task.get("class"), str)
            and isinstance(task.get("arguments", {}), dict)):
        raise UserError(f'{path}: not a task ({{"class": <name>, "arguments": {{...}}}}), got '
                        f"{json.dumps(task)[:80]}")
    return {"class": task["class"], "arguments": task.get("arguments", {})}


def check_pieces(spm_model_file: str | os.PathLike, pieces: int, vocab_size: int) -> None:
    """A vocabulary against the embedding table it indexes: every id must have a row. The one
    check of it (conversion, presets, fine-tuning, export)."""
    if pieces > vocab_size:
        raise UserError(f"the SentencePiece model {spm_model_file} has {pieces} pieces, more than the model's "
                        f"vocab_size ({vocab_size})")


def check_vocabulary(spm_model_file: str | os.PathLike, config: AlbertConfig):
    """The tokenizer of `spm_model_file`; an error unless it is an ALBERT SentencePiece model whose
    ids all index the embedding table."""
    from albert_tf.tokenizers.tokenizer import AlbertTokenizer

    if not os.path.isfile(spm_model_file):
        raise FileNotFoundError(f"SentencePiece model {spm_model_file} not found")
    tokenizer = AlbertTokenizer(os.fspath(spm_model_file))
    check_pieces(spm_model_file, tokenizer.vocab_size, config.vocab_size)
    return tokenizer


def write(folder: str | os.PathLike, config: AlbertConfig, encoder: dict, spm_model_file: str | os.PathLike,
          task: dict | None = None, task_weights: dict | None = None, argument: str | None = None) -> str:
    """Writes a preset folder from tensors by name (`encoder`: below the encoder; `task_weights`:
    the task's others). `folder` must be new or empty: else a FlagError names --output_dir, or the
    library call's `argument` that gave it."""
    from albert_tf.utils.atomic import write_json
    from albert_tf.utils.locks import locked_run_folder
    from albert_tf.utils.output_dirs import prepare_output_dir

    folder = os.fspath(folder)
    prepare_output_dir(folder, create=False, empty=True, argument=argument)
    check_vocabulary(spm_model_file, config)
    with locked_run_folder(folder):  # a write that fails (a full disk) leaves the folder as it was
        weights_module.save(os.path.join(folder, WEIGHTS), encoder)
        if task is not None:
            weights_module.save(os.path.join(folder, TASK_WEIGHTS), task_weights or {})
            write_json(os.path.join(folder, TASK_CONFIG), task)
        shutil.copyfile(spm_model_file, os.path.join(folder, VOCAB))
        write_json(os.path.join(folder, CONFIG), config.to_dict())  # last: a folder with it is complete
    return folder


def save_model(model, folder: str | os.PathLike, spm_model_file: str | os.PathLike, task: dict | None = None,
               argument: str = "preset_dir") -> str:
    """Writes `model` (an encoder, or a task model with `.encoder`) as a preset; `task` is its
    task.json (required when the model has weights beside the encoder's). A folder refused names
    `argument`, the caller's name for it (`save_to_preset`'s)."""
    encoder, others = weights_module.split(model)
    if others and task is None:
        raise ValueError(f"{type(model).__name__} has weights beside its encoder's: give its task")
    return write(folder, model.config, weights_module.values(encoder), spm_model_file, task,
                 weights_module.values(others), argument)


def read_weights(folder: str | os.PathLike, name: str) -> dict:
    """A weights file of the preset; a cached preset that cannot be read is named with the folder to
    delete (the next load fetches it again)."""
    from albert_tf.presets import download

    try:
        return weights_module.read(os.path.join(os.fspath(folder), name))
    except UserError as error:
        cache = os.path.join(os.path.abspath(download.home()), "presets") + os.sep
        if not os.path.abspath(folder).startswith(cache):
            raise
        raise UserError(f"{error}; the cached preset is corrupt: delete {folder} and load again to fetch it "
                        "again") from None


# The pretrainer's sentence-order head's weights (albert_tf.presets.loader).
SENTENCE_ORDER_HEAD = "seq_relationship/"

