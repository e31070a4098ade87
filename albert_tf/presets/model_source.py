"""What a model source holds: `open_source(source)`, the one place that decides it.

A model source is any of (docs/presets.md):

- a released name, a URL of a release tarball, `hf://owner/repo`, a local release folder or
  tarball, a Hugging Face folder: `albert_tf.presets.sources.resolve` converts them once into a
  preset folder in the cache;
- a preset folder (`config.json`, `model.weights.h5`, `spiece.model`; a task's `task.json` and
  `task.weights.h5`), as `save_to_preset` and `albert-convert` write it;
- a run of this package: the output_dir of `albert-pretrain` or of a fine-tuning tool (its latest
  checkpoint), or a checkpoint prefix in one (`runs/rte/model.ckpt-best`);
- a SavedModel folder of `albert-export` or of a fine-tuning run's `export/`;
- a TF1 checkpoint prefix of the original release (`bert/...` names) in a folder with its
  `albert_config.json`.

Each becomes a `ModelSource`: the encoder's config, the vocabulary (and lower-casing) that travel
with the weights, the task it holds (`task.json`'s class and arguments, or None for an encoder) and
a reader of its tensors by name. `albert_tf.presets.loader` loads one into a model; nothing else
reads weights from a source.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Callable, Optional

from albert_tf.config import AlbertConfig
from albert_tf.checkpoints.run_folder import CONFIG_FILE, RUN_VOCAB, read_task_file, weight_name
from albert_tf.utils.errors import UserError
from albert_tf.utils.files import is_url
from albert_tf.presets import folder as preset_folder
from albert_tf.presets.convert import TF1_VOCAB

TF1_WORD_EMBEDDINGS = "bert/embeddings/word_embeddings"
ENCODER_PREFIX = "encoder/"
# What a pretraining run or a release holds beside its encoder.
_PRETRAINER = {"class": preset_folder.PRETRAINER_TASK, "arguments": {}}

KINDS = ("preset", "checkpoint", "saved_model", "tf1_checkpoint", "random")
_DESCRIPTIONS = {
    "checkpoint": "a checkpoint of an albert_tf run",
    "saved_model": "a SavedModel of albert-export",
    "preset": "a preset folder",
    "tf1_checkpoint": "a TF1 checkpoint of the original release",
    "random": "random weights",
}


@dataclasses.dataclass(frozen=True)
class ModelSource:
    """What a source holds.

    Args:
        name: the source as the user gave it (None for random weights).
        kind: one of `KINDS`.
        path: the local folder or checkpoint prefix read.
        config: the encoder's config.
        spm_model_file: the vocabulary that travels with the weights, if the source holds one.
        task: `{"class", "arguments"}` of the model whose heads the source holds (and "labels" where a
            run or preset named its classes); None for an encoder alone.
        read: returns `(encoder, heads)`: float32 tensors by name below the encoder and below the
            task model.
    """

    name: Optional[str]
    kind: str
    path: Optional[str]
    config: AlbertConfig
    spm_model_file: Optional[str] = None
    task: Optional[dict] = None
    read: Optional[Callable[[], tuple[dict, dict]]] = dataclasses.field(default=None, repr=False, compare=False)

    def describe(self) -> str:
        what = _DESCRIPTIONS[self.kind]
        return what if self.name is None else f"{what}: {self.name}"

    def holds(self) -> str:
        """What it holds, for messages: "an encoder", "an AlbertClassifier"."""
        return "an encoder" if self.task is None else f"an {self.task['class']}"

    def vocabulary(self) -> str:
        """The SentencePiece model; a one-line error naming the source when it holds none."""
        if self.spm_model_file is None:
            raise UserError(f"{self.name} holds no SentencePiece model ({self.describe()}): copy the vocabulary it was "
                            f"trained with into {self.path if os.path.isdir(self.path or '') else 'its folder'} as "
                            f"{RUN_VOCAB}")
        return self.spm_model_file


def open_source(source: str | os.PathLike, albert_config_file: Optional[str] = None) -> ModelSource:
    """The `ModelSource` of `source` (see the module docstring); a one-line UserError naming it when
    it is none of them. `albert_config_file` gives the config of a checkpoint whose folder has none."""
    name = os.fspath(source)
    from albert_tf.presets import registry, sources

    if name in registry.RELEASES or name.startswith(("http://", "https://", sources.HF_SCHEME)):
        return _preset(name, sources.resolve(name))
    if not is_url(name) and preset_folder.is_preset(name):
        return _preset(name, name)
    # Runs and exports may sit on any filesystem TensorFlow knows (a TPU's gs://): looked at through it.
    if is_saved_model(name):
        return _saved_model(name, albert_config_file)
    if not is_url(name) and os.path.isfile(os.path.join(name, TF1_VOCAB)):
        return _preset(name, sources.resolve(name))  # a release's folder: converted once, into the cache
    prefix = _checkpoint_prefix(name)
    if prefix is not None:
        return _checkpoint(name, prefix, albert_config_file)
    if _isdir(name) and not any(_exists(os.path.join(name, n)) for n in (CONFIG_FILE, "config.json")):
        raise UserError(f"{name}: holds no model: not a preset folder, a run's output_dir (no checkpoint), a "
                        "SavedModel, nor a release's folder (docs/presets.md lists the sources)")
    # A release's tarball or folder, a Hugging Face folder, a tarball URL of another scheme, or nothing:
    # resolve converts it, or says in one line what it is not.
    return _preset(name, sources.resolve(name))


def _reader(prefix: str):
    """The reader of checkpoint `prefix`, on any filesystem (tf.train.load_checkpoint takes a prefix
    that ram:// calls a folder, as it calls every prefix of a file's name, for one)."""
    import tensorflow as tf

    return tf.compat.v1.train.NewCheckpointReader(prefix)


def _isdir(path: str) -> bool:
    import tensorflow as tf

    return tf.io.gfile.isdir(path)


def _exists(path: str) -> bool:
    import tensorflow as tf

    return tf.io.gfile.exists(path)


def _read_json(path: str):
    import tensorflow as tf

    with tf.io.gfile.GFile(path) as f:
        try:
            return json.load(f)
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise UserError(f"{path}: not valid JSON ({error})") from None


def random_source(albert_config_file: str) -> ModelSource:
    return ModelSource(None, "random", None, AlbertConfig.from_json_file(albert_config_file))


# ---- preset folders ----------------------------------------------------------------------------


def _preset(name: str, folder: str) -> ModelSource:
    vocab = os.path.join(folder, preset_folder.VOCAB)

    def read():
        encoder = preset_folder.read_weights(folder, preset_folder.WEIGHTS)
        heads = (preset_folder.read_weights(folder, preset_folder.TASK_WEIGHTS)
                 if os.path.isfile(os.path.join(folder, preset_folder.TASK_WEIGHTS)) else {})
        return encoder, heads

    return ModelSource(name, "preset", folder, preset_folder.read_config(folder),
                       vocab if os.path.isfile(vocab) else None, preset_folder.read_task(folder), read)


# ---- runs and TF1 checkpoints ------------------------------------------------------------------


def _checkpoint_prefix(path: str) -> Optional[str]:
    """The checkpoint a path names: a prefix as it is; a run folder's latest (its `checkpoint`
    index), else a release's model.ckpt-best; None when there is none."""
    import tensorflow as tf

    if not _isdir(path):
        return path if _exists(path + ".index") else None
    latest = tf.train.latest_checkpoint(path)
    if latest is None and _exists(os.path.join(path, "model.ckpt-best.index")):
        latest = os.path.join(path, "model.ckpt-best")
    return latest


def _config_beside(name: str, folder: str, albert_config_file: Optional[str], what: str) -> AlbertConfig:
    if albert_config_file:
        return AlbertConfig.from_json_file(albert_config_file)
    path = os.path.join(folder, CONFIG_FILE)
    if not _exists(path):
        raise UserError(f"{name}: no {CONFIG_FILE} in {folder} to tell the {what}'s config; give --albert_config_file")
    return AlbertConfig.from_dict(_read_json(path), source=path)


def _run_task(folder: str, has_heads: bool) -> Optional[dict]:
    """The task a run folder (or an export) records in task.json: the model's class and arguments
    (`albert_tf.presets.folder.record_task`) beside the fine-tuning task's name and labels. A run
    made before the model was recorded: a pretraining run's heads are the pretrainer's, a fine-tuning
    run's are not known (its encoder loads)."""
    recorded = read_task_file(folder)
    if recorded is None:
        return dict(_PRETRAINER) if has_heads else None
    if not (isinstance(recorded, dict) and isinstance(recorded.get("class"), str)):
        return None
    task = {"class": recorded["class"], "arguments": dict(recorded.get("arguments") or {})}
    if isinstance(recorded.get("labels"), list):
        task["labels"] = [str(label) for label in recorded["labels"]]
    return task


def _checkpoint(name: str, prefix: str, albert_config_file: Optional[str]) -> ModelSource:
    import tensorflow as tf

    folder = os.path.dirname(prefix)
    variables = _reader(prefix).get_variable_to_shape_map()
    if TF1_WORD_EMBEDDINGS in variables:
        return _tf1(name, prefix, folder, albert_config_file)
    config = _config_beside(name, folder, albert_config_file, "checkpoint")
    keys = {weight_name(key): key for key in variables if weight_name(key) is not None}
    if not keys:
        raise UserError(f"{name}: {prefix} holds no model weights of an albert_tf run")
    has_heads = any(not key.startswith(ENCODER_PREFIX) for key in keys)
    vocab = os.path.join(folder, RUN_VOCAB)

    def read():
        import numpy as np

        reader = _reader(prefix)
        tensors = {key: np.asarray(reader.get_tensor(stored), np.float32) for key, stored in keys.items()}
        return split_tensors(tensors)

    return ModelSource(name, "checkpoint", prefix, config, vocab if _exists(vocab) else None,
                       _run_task(folder, has_heads), read)


def split_tensors(tensors: dict) -> tuple[dict, dict]:
    encoder = {k[len(ENCODER_PREFIX):]: v for k, v in tensors.items() if k.startswith(ENCODER_PREFIX)}
    if not encoder:  # an encoder's own weights
        return tensors, {}
    return encoder, {k: v for k, v in tensors.items() if not k.startswith(ENCODER_PREFIX)}


def _tf1(name: str, prefix: str, folder: str, albert_config_file: Optional[str]) -> ModelSource:
    from albert_tf.presets import convert

    config = _config_beside(name, folder, albert_config_file, "TF1 checkpoint")
    vocab = os.path.join(folder, TF1_VOCAB)

    def read():
        encoder, heads = convert.tf1_tensors(prefix, config)
        return encoder, heads or {}

    import tensorflow as tf

    has_heads = any(key.startswith("cls/") for key in _reader(prefix).get_variable_to_shape_map())
    return ModelSource(name, "tf1_checkpoint", prefix, config, vocab if _exists(vocab) else None,
                       dict(_PRETRAINER) if has_heads else None, read)


# ---- SavedModels -------------------------------------------------------------------------------


def is_saved_model(path: str) -> bool:
    return _isdir(path) and _exists(os.path.join(path, "saved_model.pb"))


def saved_model_vocab_file(path: str) -> Optional[str]:
    """The SentencePiece model that `albert_tf.serving.export` stored in a SavedModel's assets, if any."""
    import tensorflow as tf

    assets = os.path.join(path, "assets")
    if not _isdir(assets):
        return None
    models = [name for name in tf.io.gfile.listdir(assets) if name.endswith(".model")]
    return os.path.join(assets, models[0]) if len(models) == 1 else None


def load_saved_model(path: str):
    """`tf.saved_model.load` after registering tensorflow_text's ops (SentencepieceOp), which every
    export of this package uses in its text signatures."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the ops)

    return tf.saved_model.load(path)


def saved_model_variables(path: str) -> dict:
    """The values of the SavedModel's root `variables` list by variable name, read from its object
    graph and variables checkpoint without loading it: `tf.saved_model.load` would rebuild every
    function (most of the time a fine-tuning run took to start from an export)."""
    import tensorflow as tf
    from tensorflow.core.protobuf import saved_model_pb2

    saved_model = saved_model_pb2.SavedModel()
    with tf.io.gfile.GFile(os.path.join(path, "saved_model.pb"), "rb") as f:
        saved_model.ParseFromString(f.read())
    nodes = saved_model.meta_graphs[0].object_graph_def.nodes
    listed = [child.node_id for child in nodes[0].children if child.local_name == "variables"]
    if not listed:
        from albert_tf.utils.errors import UserError

        raise UserError(f"the SavedModel {path} has no `variables` list at its root: it is not an export "
                        "of albert-export (or TF-Hub's reusable format)")
    reader = tf.train.load_checkpoint(os.path.join(path, "variables", "variables"))
    return {nodes[child.node_id].variable.name.split(":")[0]:
            reader.get_tensor(f"variables/{child.local_name}/.ATTRIBUTES/VARIABLE_VALUE")
            for child in nodes[listed[0]].children}


def saved_model_key(name: str) -> str:
    """A weight's name below the exported model, from its SavedModel variable name (the top model's
    name and ":0" go)."""
    return name.split(":")[0].split("/", 1)[-1]


def _saved_model(name: str, albert_config_file: Optional[str]) -> ModelSource:
    config = _config_beside(name, name, albert_config_file, "SavedModel")

    def read():
        import numpy as np

        # The root's `variables` are the model's own (albert_tf.serving.export.write), not the
        # values it stores beside them (labels, thresholds); dropout's seed states are no weights.
        return split_tensors({saved_model_key(key): np.asarray(value, np.float32)
                              for key, value in saved_model_variables(name).items()
                              if not key.endswith("seed_generator_state")})

    return ModelSource(name, "saved_model", name, config, saved_model_vocab_file(name),
                       _run_task(name, has_heads=False), read)
