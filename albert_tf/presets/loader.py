"""The one loader: a model's weights from any model source, for every door of the package.

Every door names a source the same way (`albert_tf.presets.model_source.open_source`: a released
name, a URL, hf://, a preset folder, a run's output_dir, a SavedModel, a release's folder or
checkpoint) and loads it here:

- `model_from_preset(cls, source, **kwargs)`: what every model and task class's `from_preset` calls;
- `initialize_encoder(model, init_checkpoint, preset)`: `--init_checkpoint` / `--preset` of the
  fine-tuning tools, into the task model they build;
- `initialize_pretrainer(model, source)`: `albert-pretrain --init_checkpoint` / `--preset`;
- `find_source(...)`: which source the flags name, its config and vocabulary, before a model is built.

keras-hub's task rule decides the heads (`task_arguments`): a source holding a task's weights
restores them into the same task class (or one that keeps the same head: the text classifier's is
an `AlbertClassifier`), a different class or another head size gets the encoder and a new head,
and a class that needs what the source cannot give is one line naming what the source holds.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
from typing import Optional

from absl import logging

from albert_tf.config import AlbertConfig
from albert_tf.utils.errors import UserError
from albert_tf.checkpoints import weights as weights_module
from albert_tf.presets import folder as preset_folder
from albert_tf.presets.model_source import (KINDS, TF1_VOCAB, ModelSource, is_saved_model, load_saved_model,  # noqa: F401
                                            open_source, random_source, saved_model_key)

# The word-embedding table's path below the encoder, in checkpoints and SavedModels alike.
WORD_EMBEDDINGS = "embeddings/word_embeddings/embeddings"

# Task classes whose heads are one another's, with the arguments they share: the text classifier
# keeps an AlbertClassifier, the entity recognizer an AlbertTokenClassifier, whose weights are
# their task weights ("labels": the class or tag names a run or preset records beside them).
_SAME_HEADS = {
    (preset_folder.TEXT_CLASSIFIER_TASK, "AlbertClassifier"): ("num_classes", "dropout"),
    ("AlbertClassifier", preset_folder.TEXT_CLASSIFIER_TASK): ("num_classes", "dropout", "labels"),
    (preset_folder.ENTITY_RECOGNIZER_TASK, preset_folder.TOKEN_CLASSIFIER_TASK): ("num_classes", "dropout"),
    (preset_folder.TOKEN_CLASSIFIER_TASK, preset_folder.ENTITY_RECOGNIZER_TASK): ("num_classes", "dropout", "labels"),
}
# The argument that sizes a head: given another value than the source's, the model gets a new head.
HEAD_SIZE_ARGUMENTS = ("num_classes",)
# The pretrainer's sentence-order head: the Hugging Face Hub's ALBERT checkpoints hold none
# (transformers initialises `sop_classifier` afresh when it loads them), so a pretrainer from one
# starts it new.
SENTENCE_ORDER_HEAD = preset_folder.SENTENCE_ORDER_HEAD


def task_arguments(source: ModelSource, class_name: str, kwargs: dict, required: tuple = (),
                   heads_required: bool = False) -> tuple[dict, bool]:
    """keras-hub's task rule: `(arguments, load_heads)` for a `class_name` made from `source`.

    The source's task weights load into the same task class (its stored arguments fill the ones not
    given); a different class, or a head size (`num_classes`) given that differs from the source's,
    gets the encoder and a new head. Anything else is a one-line error naming what the source holds:
    a pretrainer (`heads_required`) from a source without its heads, or a new head without the
    `required` arguments that size it.
    """
    task, stored = source.task, None
    if task is not None and task["class"] == class_name:
        stored = dict(task["arguments"])
    elif task is not None and (task["class"], class_name) in _SAME_HEADS:
        shared = _SAME_HEADS[(task["class"], class_name)]
        recorded = {**task["arguments"], **({"labels": task["labels"]} if task.get("labels") else {})}
        stored = {k: v for k, v in recorded.items() if k in shared}
    if stored is not None:
        other = {k: (stored[k], kwargs[k]) for k in HEAD_SIZE_ARGUMENTS if k in kwargs and k in stored
                 and kwargs[k] != stored[k]}
        if not other:
            return {**stored, **kwargs}, True
        logging.warning("%s holds %s with %s: a new head for %s", source.name, source.holds(),
                        ", ".join(f"{k}={a!r}" for k, (a, _) in other.items()),
                        ", ".join(f"{k}={b!r}" for k, (_, b) in other.items()))
    if heads_required:
        raise UserError(f"{source.name} holds {source.holds()} without the heads of an {class_name}; "
                        "load its encoder with AlbertEncoder.from_preset, or fine-tune from it")
    missing = [name for name in required if kwargs.get(name) is None]
    if missing:
        raise UserError(f"{source.name} holds {source.holds()}, not an {class_name}: give "
                        f"{' and '.join(missing)} for a new head")
    return kwargs, False


def check_config(source: ModelSource, config: AlbertConfig) -> None:
    preset_folder.check_config(source.config, config, f"{'preset ' if source.kind == 'preset' else ''}{source.name}")


def load_weights(model, source: ModelSource, heads: bool) -> None:
    """Assigns `source`'s encoder to `model` (an encoder, or a task model's `.encoder`), and with
    `heads` its task weights; strict (`albert_tf.checkpoints.weights.assign`): a weight missing, left
    over or of another shape is one line naming it, and nothing is assigned."""
    if not model.built:
        model.build()
    encoder, task = weights_module.split(model)
    stored_encoder, stored_heads = source.read()
    what = source.describe()
    weights_module.assign(encoder, stored_encoder, what)
    if not (heads and task):
        return
    if not any(k.startswith(SENTENCE_ORDER_HEAD) for k in stored_heads):
        fresh = {k for k in task if k.startswith(SENTENCE_ORDER_HEAD)}
        if fresh:
            logging.warning("%s has no sentence-order head (as the Hugging Face Hub's ALBERT checkpoints): "
                            "%s starts with a new one", source.name, type(model).__name__)
            task = {k: v for k, v in task.items() if k not in fresh}
    weights_module.assign(task, stored_heads, f"{what} (heads)")
    logging.info("heads of %s loaded from %s", type(model).__name__, what)


def required_arguments(model_class) -> tuple[str, ...]:
    """The constructor arguments of `model_class` without a default (besides the config)."""
    parameters = list(inspect.signature(model_class.__init__).parameters.values())[2:]
    return tuple(p.name for p in parameters if p.default is inspect.Parameter.empty
                 and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))


def model_from_preset(model_class, source, heads_required: bool = False, **kwargs):
    """`model_class` (an `AlbertConfigModel`) of the source's config with its weights: the encoder
    always, the heads by the task rule (`task_arguments`)."""
    source = source if isinstance(source, ModelSource) else open_source(source)
    kwargs, load_heads = task_arguments(source, model_class.__name__, kwargs, required_arguments(model_class),
                                        heads_required)
    model = model_class(source.config, **kwargs)
    model.build()
    load_weights(model, source, load_heads)
    return model


def find_source(init_checkpoint: Optional[str] = None, preset: Optional[str] = None,
                albert_config_file: Optional[str] = None) -> ModelSource:
    """Which source the flags name (`--preset` and `--init_checkpoint` name any kind alike), with
    its config and vocabulary. Neither: random weights, which need `albert_config_file`. For a
    source with its own config, `albert_config_file` may set another dropout, not other weights."""
    if init_checkpoint and preset:
        raise UserError("give at most one of --init_checkpoint and --preset")
    name = preset or init_checkpoint
    if not name:
        if not albert_config_file:
            raise UserError("without --init_checkpoint or --preset, --albert_config_file is required "
                            "(the model then starts from random weights)")
        return random_source(albert_config_file)
    source = open_source(name, albert_config_file)
    if albert_config_file:
        wanted = AlbertConfig.from_json_file(albert_config_file)
        preset_folder.check_config(source.config, wanted, f"--{'preset' if preset else 'init_checkpoint'} {name}")
        source = dataclasses.replace(source, config=wanted)
    return source


def check_vocab_size(source: ModelSource, pieces: int, given: str) -> None:
    """A source's embedding table against the vocabulary a run was given: another one's ids mean
    other pieces."""
    if source.kind != "random" and source.config.vocab_size != pieces:
        raise UserError(f"init_checkpoint {source.name} has a vocabulary of {source.config.vocab_size} tokens but "
                        f"{given} has {pieces}: it was pretrained with another vocabulary")


def _own_arguments(model) -> dict:
    return {name: getattr(model, name) for name in getattr(model, "config_arguments", ())}


def initialize_encoder(model, init_checkpoint: Optional[str] = None, preset: Optional[str] = None) -> str:
    """Loads the encoder weights of `model` (a task model with `model.encoder`) from any source, and
    by the task rule its heads from a source of its own task class and head size (a Keras task's
    `save_to_preset`, a fine-tuning run of the same task); returns the source's name ("random" for
    none) and logs which kind of source it was."""
    if init_checkpoint and preset:
        raise UserError("give at most one of --init_checkpoint and --preset")
    name = preset or init_checkpoint
    if not name:
        return "random"
    source = open_source(name)
    check_config(source, model.config)
    _, load_heads = task_arguments(source, type(model).__name__, _own_arguments(model))
    load_weights(model, source, load_heads)
    logging.info("encoder initialised from %s", source.describe())
    return source.path if source.kind in ("checkpoint", "tf1_checkpoint") else name  # the checkpoint read


def initialize_pretrainer(model, source) -> str:
    """Loads a whole `AlbertPretrainer` (encoder and heads) from any source of the same config that
    holds a pretrainer's heads (a pretraining run, a release, a pretrainer's preset); returns its name."""
    source = source if isinstance(source, ModelSource) else open_source(source)
    check_config(source, model.config)
    task_arguments(source, type(model).__name__, {}, heads_required=True)
    load_weights(model, source, heads=True)
    return source.name


def init_vocab_size(source: str) -> int:
    """Rows of the word-embedding table that a source holds."""
    encoder, _ = open_source(source).read()
    if WORD_EMBEDDINGS not in encoder:
        raise UserError(f"{source} holds no ALBERT word embeddings ({WORD_EMBEDDINGS})")
    return int(encoder[WORD_EMBEDDINGS].shape[0])


def preset_from_source(source, output_dir: str | os.PathLike) -> str:
    """Writes what `source` holds (encoder, heads, vocabulary) as a preset folder (new or empty):
    how a run, an export or a checkpoint becomes a preset that goes wherever a released one goes."""
    source = source if isinstance(source, ModelSource) else open_source(source)
    encoder, heads = source.read()
    task = None if source.task is None else {"class": source.task["class"], "arguments": source.task["arguments"]}
    return preset_folder.write(output_dir, source.config, encoder, source.vocabulary(), task,
                               heads if task is not None else None)
