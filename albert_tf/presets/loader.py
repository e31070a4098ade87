"""The one loader: a model's weights from every source the package knows, for every entry point.

`model_from_preset(cls, source)` is what every model class's `from_preset` calls: a preset (a folder, a
released name, a URL, hf://: `albert_tf.presets.sources.resolve`) -> the model with its weights.

`find_source` looks at what `--init_checkpoint` (or `--preset`) of a tool names and says which kind it is:

- `checkpoint`: a run of this package, pretraining or fine-tuning (an `albert-pretrain` or
  `albert-finetune-*` output_dir, or a checkpoint prefix in one), with `albert_config.json` beside
  it; read by `albert_tf.checkpoints.run_folder.load_init_checkpoint`, which refuses missing or
  misshapen weights;
- `saved_model`: an encoder, pretrainer or task SavedModel of `albert_tf.serving.export` (`albert-export`,
  or a fine-tuning run's `export/`); its vocabulary is the asset inside it;
- `preset`: a preset folder (`config.json`, `model.weights.h5`, `spiece.model`) of `albert-convert`
  or `save_to_preset`, or the name or address of one (a released name, a URL, hf://);
- `tf1_checkpoint`: a checkpoint of the original google-research release (`bert/...` names; a
  released folder with `albert_config.json`, `30k-clean.model`, `model.ckpt-best`);
- `random`: nothing, the seed's weights: the baseline that shows what pretraining is worth.

`initialize_encoder(model, ...)` copies the encoder weights into any task model that keeps its
encoder as `model.encoder` (every model of `albert_tf.models`); the head stays as initialised,
except from a preset of the model's own task class and head size, whose head loads too
(keras-hub's task rule, `albert_tf.presets.folder.task_arguments`).

Loading a SavedModel needs the SentencePiece op of tensorflow_text registered (the export holds the
in-graph tokenizer): `load_saved_model` imports it first, so a fresh process can load any export.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Optional

import tensorflow as tf
from absl import logging

from albert_tf.config import AlbertConfig
from albert_tf.presets.convert import TF1_CHECKPOINT, TF1_VOCAB, read_tf1_checkpoint
from albert_tf.presets import folder as preset_folder
from albert_tf.checkpoints.run_folder import CONFIG_FILE, RUN_VOCAB, latest_checkpoint, load_init_checkpoint
from albert_tf.checkpoints.weights import ENCODER_PREFIX, model_weights
from albert_tf.checkpoints.weights import split as weights_split
from albert_tf.utils.files import is_url
from albert_tf.presets.sources import resolve

# The word-embedding table's path below the encoder, in checkpoints and SavedModels alike.
WORD_EMBEDDINGS = "embeddings/word_embeddings/embeddings"
TF1_WORD_EMBEDDINGS = "bert/embeddings/word_embeddings"

KINDS = ("checkpoint", "saved_model", "preset", "tf1_checkpoint", "random")
_DESCRIPTIONS = {
    "checkpoint": "a checkpoint of an albert_tf run",
    "saved_model": "a SavedModel of albert-export",
    "preset": "a preset folder",
    "tf1_checkpoint": "a TF1 checkpoint of the original release",
    "random": "random weights",
}


@dataclasses.dataclass(frozen=True)
class EncoderSource:
    """What `find_source` found.

    Args:
        kind: one of `KINDS`.
        path: the folder, prefix or SavedModel given (None for `random`).
        config: the encoder's config (from the source, or `albert_config_file` where given).
        spm_model_file: the vocabulary the source carries, if it carries one.
    """

    kind: str
    path: Optional[str]
    config: AlbertConfig
    spm_model_file: Optional[str] = None

    def describe(self) -> str:
        what = _DESCRIPTIONS[self.kind]
        return what if self.path is None else f"{what}: {self.path}"


def load_saved_model(path: str):
    """`tf.saved_model.load` after registering tensorflow_text's ops (SentencepieceOp), which every
    export of this package uses in its text signatures."""
    import tensorflow_text  # noqa: F401  (registers the ops)

    return tf.saved_model.load(path)


def is_saved_model(path: str) -> bool:
    return tf.io.gfile.isdir(path) and tf.io.gfile.exists(os.path.join(path, "saved_model.pb"))


def model_from_preset(model_class, source, heads_required: bool = False, **kwargs):
    """`model_class` (an `AlbertConfigModel`) with the weights of a preset, named as `resolve` takes
    it; see `albert_tf.presets.folder.model_from_folder` for which part loads."""
    return preset_folder.model_from_folder(model_class, resolve(source), heads_required, **kwargs)


def is_preset(path: str) -> bool:
    return preset_folder.is_preset(path)


def names_preset(path: str) -> bool:
    """Whether `path` names a preset to resolve (a released name, a URL, hf://) rather than a file
    or folder of this machine."""
    from albert_tf.presets.registry import RELEASES

    return is_url(path) or path in RELEASES


def _folder(path: str) -> str:
    return path if tf.io.gfile.isdir(path) else os.path.dirname(path)


def _checkpoint_prefix(path: str) -> str:
    return latest_checkpoint(path, fallback=TF1_CHECKPOINT)


def _is_tf1_checkpoint(prefix: str) -> bool:
    return any(name == TF1_WORD_EMBEDDINGS for name, _ in tf.train.list_variables(prefix))


def source_kind(path: str) -> str:
    """The kind of source `path` is (see the module docstring); FileNotFoundError if none."""
    if names_preset(path):
        return "preset"
    if is_saved_model(path):
        return "saved_model"
    if tf.io.gfile.isdir(path) and is_preset(path):
        return "preset"
    prefix = _checkpoint_prefix(path)
    if not tf.io.gfile.exists(prefix + ".index"):
        raise FileNotFoundError(f"init_checkpoint: {prefix} does not exist (no {prefix}.index)")
    return "tf1_checkpoint" if _is_tf1_checkpoint(prefix) else "checkpoint"


def init_config(init_checkpoint: Optional[str], albert_config_file: Optional[str] = None) -> AlbertConfig:
    """The config of the encoder that `init_checkpoint` holds.

    `albert_config_file` wins when given; else a run's checkpoint carries its config as
    `albert_config.json` in its folder (so do the release's TF1 folders, and a SavedModel folder
    that has one beside it); a preset folder has its `config.json`.
    """
    if albert_config_file:
        return AlbertConfig.from_json_file(albert_config_file)
    if not init_checkpoint:
        raise ValueError("without --init_checkpoint or --preset, --albert_config_file is required "
                         "(the model then starts from random weights)")
    if names_preset(init_checkpoint) or (tf.io.gfile.isdir(init_checkpoint) and is_preset(init_checkpoint)):
        return preset_folder.read_config(resolve(init_checkpoint))
    folder = _folder(init_checkpoint)
    path = os.path.join(folder, CONFIG_FILE)
    if not tf.io.gfile.exists(path):
        kind = "SavedModel" if is_saved_model(init_checkpoint) else "checkpoint"
        raise FileNotFoundError(
            f"init_checkpoint {init_checkpoint}: no {CONFIG_FILE} in {folder} to tell the {kind}'s "
            f"config; give --albert_config_file"
        )
    return AlbertConfig.from_json_file(path)


def saved_model_vocab_file(path: str) -> Optional[str]:
    """The SentencePiece model that `albert_tf.serving.export` stored in a SavedModel's assets, if any."""
    assets = os.path.join(path, "assets")
    if not tf.io.gfile.isdir(assets):
        return None
    models = [name for name in tf.io.gfile.listdir(assets) if name.endswith(".model")]
    return os.path.join(assets, models[0]) if len(models) == 1 else None


def _source_vocab_file(kind: str, path: str) -> Optional[str]:
    if kind == "saved_model":
        return saved_model_vocab_file(path)
    if kind == "preset":
        path = resolve(path)
    candidates = {"preset": preset_folder.VOCAB, "tf1_checkpoint": TF1_VOCAB, "checkpoint": RUN_VOCAB}
    if kind in candidates:
        found = os.path.join(_folder(path), candidates[kind])
        return found if tf.io.gfile.exists(found) else None
    return None


def find_source(init_checkpoint: Optional[str] = None, preset: Optional[str] = None,
                albert_config_file: Optional[str] = None) -> EncoderSource:
    """Which source the flags name, its config and the vocabulary it carries.

    `preset` is `--preset` (a preset: a folder, a released name, a URL, hf://); `init_checkpoint` may
    name any kind, a preset included. Neither: random weights, which need `albert_config_file`.
    """
    if init_checkpoint and preset:
        raise ValueError("give at most one of --init_checkpoint and --preset")
    if preset:
        config = preset_folder.read_config(resolve(preset))
        if albert_config_file:  # it may set another dropout, not other weights
            wanted = AlbertConfig.from_json_file(albert_config_file)
            preset_folder.check_config(config, wanted, f"--preset {preset}")
            config = wanted
        return EncoderSource("preset", preset, config, _source_vocab_file("preset", preset))
    if not init_checkpoint:
        return EncoderSource("random", None, init_config(None, albert_config_file))
    kind = source_kind(init_checkpoint)
    config = init_config(init_checkpoint, albert_config_file)
    return EncoderSource(kind, init_checkpoint, config, _source_vocab_file(kind, init_checkpoint))


def _encoder_key(name: str) -> str:
    """A variable's path below the encoder, from a SavedModel variable name: the top model's name
    goes, and so does the pretrainer's (or task model's) "encoder/" level."""
    key = name.split(":")[0].split("/", 1)[-1]
    return key[len("encoder/"):] if key.startswith("encoder/") else key


def init_vocab_size(init_checkpoint: str) -> int:
    """Rows of the word-embedding table in a checkpoint (ours or TF1), SavedModel or preset."""
    kind = source_kind(init_checkpoint)
    if kind == "preset":
        return init_config(init_checkpoint).vocab_size
    if kind == "saved_model":
        variables = load_saved_model(init_checkpoint).variables
        shapes = {_encoder_key(v.name): v.shape for v in variables}
    else:
        prefix = _checkpoint_prefix(init_checkpoint)
        if kind == "tf1_checkpoint":
            wanted = TF1_WORD_EMBEDDINGS
        else:
            # Checkpoint keys escape "/" as ".S"; the table is the one variable named like this.
            wanted = "model/encoder" + "".join(".S" + part for part in WORD_EMBEDDINGS.split("/"))
            wanted += "/.ATTRIBUTES/VARIABLE_VALUE"
        shapes = {WORD_EMBEDDINGS: shape for name, shape in tf.train.list_variables(prefix) if name == wanted}
    if WORD_EMBEDDINGS not in shapes:
        raise ValueError(f"init_checkpoint {init_checkpoint} holds no ALBERT word embeddings "
                         f"({WORD_EMBEDDINGS})")
    return int(shapes[WORD_EMBEDDINGS][0])


def check_vocab_size(init_checkpoint: str, vocab_size: int, source: str):
    """An init checkpoint must have the vocabulary of the run: another one's ids mean other pieces."""
    found = init_vocab_size(init_checkpoint)
    if found != vocab_size:
        raise ValueError(
            f"init_checkpoint {init_checkpoint} has a vocabulary of {found} tokens but {source} has "
            f"{vocab_size}: it was pretrained with another vocabulary"
        )


def load_encoder_saved_model(encoder, path: str):
    """Copies the weights of an `albert_tf.serving.export` SavedModel of an encoder, pretrainer or task
    model into `encoder`, matching variables by their path below the encoder; all must be there,
    same shape (`weights.assign`, the one check of weights against a model)."""
    from albert_tf.checkpoints import weights

    loaded = {_encoder_key(v.name): v for v in load_saved_model(path).variables}
    variables = weights.split(encoder)[0]
    # The SavedModel may hold heads beside the encoder: only the encoder's variables are compared.
    tensors = {key: loaded[key].numpy() for key in variables if key in loaded}
    weights.assign(variables, tensors, f"init_checkpoint {path} (a SavedModel)")


def _load_tf1(encoder, path: str) -> str:
    from albert_tf.checkpoints.names import encoder_weight_names, to_ours
    from albert_tf.checkpoints import weights

    prefix = _checkpoint_prefix(path)
    source = f"TF1 checkpoint {prefix}"
    tensors = to_ours(encoder_weight_names(encoder.config, "tf1"), read_tf1_checkpoint(prefix), source)
    weights.assign(weights.split(encoder)[0], tensors, source)
    return prefix


def _load_preset(model, preset: str) -> str:
    """The encoder, and by the task rule (`folder.task_arguments`) the heads of a preset of the
    model's own task class and head size."""
    folder = resolve(preset)
    preset_folder.check_config(preset_folder.read_config(folder), model.config, f"preset {preset}")
    preset_folder.load_encoder(model, folder)
    arguments = {name: getattr(model, name) for name in model.config_arguments}
    _, load_heads = preset_folder.task_arguments(folder, type(model).__name__, arguments)
    if load_heads and weights_split(model)[1]:
        preset_folder.load_task(model, folder)
        logging.info("heads of %s loaded from preset %s", type(model).__name__, preset)
    return preset


def initialize_encoder(model, init_checkpoint: Optional[str] = None, preset: Optional[str] = None) -> str:
    """Loads the encoder weights of `model` (a task model with `model.encoder`) from any source;
    returns where they came from (the checkpoint prefix read, the SavedModel or preset folder, or
    "random" for none) and logs which kind of source it was."""
    if init_checkpoint and preset:
        raise ValueError("give at most one of --init_checkpoint and --preset")
    if not model.built:
        model.build()
    if preset:
        loaded = _load_preset(model, preset)
        kind = "preset"
    elif not init_checkpoint:
        return "random"
    else:
        kind = source_kind(init_checkpoint)
        if kind == "preset":
            loaded = _load_preset(model, init_checkpoint)
        else:
            check_vocab_size(init_checkpoint, model.config.vocab_size, "the model's config")
            if kind == "saved_model":
                load_encoder_saved_model(model.encoder, init_checkpoint)
                loaded = init_checkpoint
            elif kind == "tf1_checkpoint":
                loaded = _load_tf1(model.encoder, init_checkpoint)
            else:
                # The encoder's variables by their path below the task model ("encoder/..."), which is
                # their path below a pretrainer too.
                encoder = {k: v for k, v in model_weights(model).items() if k.startswith(ENCODER_PREFIX)}
                loaded = load_init_checkpoint(model, _checkpoint_prefix(init_checkpoint), encoder)
    logging.info("encoder initialised from %s", _DESCRIPTIONS[kind] + f": {loaded}")
    return loaded


def initialize_pretrainer(model, source: str) -> str:
    """Loads a whole `AlbertPretrainer` (encoder and heads) from a run's checkpoint or a preset (a
    folder, a released name, a URL, hf://) of the same config; returns where from."""
    if source_kind(source) != "preset":
        return load_init_checkpoint(model, source)
    folder = resolve(source)
    preset_folder.check_config(preset_folder.read_config(folder), model.config, f"init_checkpoint {source}")
    preset_folder.task_arguments(folder, type(model).__name__, {}, heads_required=True)
    preset_folder.load_encoder(model, folder)
    preset_folder.load_task(model, folder)
    return folder
