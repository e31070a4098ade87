"""The GLUE classifier (encoder, pooled output, dropout, dense) and where its encoder weights come from.

The head is the released `run_classifier.py`'s: dropout 0.1 on the pooled output, then a dense
layer of `num_labels` outputs initialised N(0, initializer_range) truncated, biases 0. With
`num_labels=1` it is the STS-B regressor: its one output is the similarity score, trained with the
mean squared error as released.

The encoder starts from one of
- a pretraining run's checkpoint (an `albert-pretrain` output_dir or a checkpoint prefix in it),
  read by `albert_tf.training.load_init_checkpoint`, which refuses missing or misshapen weights;
- a reusable encoder (or pretrainer) SavedModel written by `albert_tf.export`;
- a preset folder (`AlbertEncoder.from_preset`);
- nothing: random weights, the baseline that shows what pretraining is worth.
"""

from __future__ import annotations

import os
from typing import Optional

import keras
import tensorflow as tf

from albert_tf.config import AlbertConfig
from albert_tf.encoder import AlbertEncoder
from albert_tf.layers import common
from albert_tf.model_base import AlbertConfigModel
from albert_tf.training import CONFIG_FILE, load_init_checkpoint
from albert_tf.validation import require_positive_ints

# The word-embedding table's path below the encoder, in checkpoints and SavedModels alike.
WORD_EMBEDDINGS = "embeddings/word_embeddings/embeddings"


@keras.saving.register_keras_serializable(package="albert_tf")
class GlueClassifier(AlbertConfigModel):
    """An ALBERT encoder with the GLUE head: pooled output -> dropout -> dense.

    Args:
        config: the encoder's `AlbertConfig` (or its dict).
        num_labels: classes of the task; 1 for a regression task (STS-B), whose output is the score.
        dropout_rate: dropout on the pooled output while training (0.1 as released).
        dtype: a Keras dtype policy; the outputs are float32 under any policy.

    Inputs: the encoder's dict of `input_ids`, `input_mask`, `segment_ids` [B, T].
    Outputs: logits [B, num_labels] in float32 (the score in [B, 1] for regression).

    Example:
        >>> classifier = GlueClassifier(AlbertConfig.from_preset("albert_base_v2"), num_labels=2)
        >>> logits = classifier({"input_ids": ids, "input_mask": mask, "segment_ids": segments})
    """

    config_arguments = ("num_labels", "dropout_rate")

    def __init__(self, config: AlbertConfig | dict, num_labels: int, dropout_rate: float = 0.1, **kwargs):
        super().__init__(config, **kwargs)
        require_positive_ints({"num_labels": num_labels})
        if not 0.0 <= dropout_rate < 1.0:
            raise ValueError(f"dropout_rate must be in [0, 1), got {dropout_rate!r}")
        self.num_labels = num_labels
        self.dropout_rate = dropout_rate
        self.encoder = AlbertEncoder(self.config, dtype=self.dtype_policy, name="encoder")
        self.dropout = keras.layers.Dropout(dropout_rate, dtype=self.dtype_policy, name="dropout")
        self.classifier = keras.layers.Dense(
            num_labels,
            kernel_initializer=common.kernel_initializer(self.config.initializer_range),
            dtype=self.dtype_policy,
            name="classifier",
        )

    @property
    def is_regression(self) -> bool:
        return self.num_labels == 1

    def build(self, input_shape=None):
        self.encoder.build()
        self.classifier.build((None, self.config.hidden_size))
        self.built = True

    def call(self, inputs, training=None):
        # Only the first token of the last layer is read: the encoder computes no other row of it.
        no_positions = tf.zeros_like(inputs["input_ids"][:, :0])
        pooled = self.encoder(inputs, training=training, output_positions=no_positions)["pooled_output"]
        logits = self.classifier(self.dropout(pooled, training=training))
        return tf.cast(logits, tf.float32)


def classifier_sums(logits, label_ids, weights, regression: bool) -> dict[str, tf.Tensor]:
    """Sums over a batch, in float32, of the released loss and of the hits.

    Sums rather than means, so that replicas' shares of a global batch add up exactly. `loss` is
    the cross-entropy (the squared error of the score for regression) weighted by `weights`
    (`is_real_example`: the padding rows of the last evaluation batch count 0); `hits` counts
    correct argmaxes (0 for regression); `examples` is the sum of the weights.
    """
    logits = tf.cast(logits, tf.float32)
    weights = tf.reshape(tf.cast(weights, tf.float32), [-1])
    if regression:
        scores = tf.reshape(logits, [-1])
        per_example = tf.square(scores - tf.reshape(tf.cast(label_ids, tf.float32), [-1]))
        hits = tf.zeros_like(per_example)
    else:
        labels = tf.reshape(tf.cast(label_ids, tf.int32), [-1])
        per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
        hits = tf.cast(tf.equal(tf.argmax(logits, axis=-1, output_type=tf.int32), labels), tf.float32)
    return {
        "loss": tf.reduce_sum(per_example * weights),
        "hits": tf.reduce_sum(hits * weights),
        "examples": tf.reduce_sum(weights),
    }


# ---- where the encoder weights come from -----------------------------------------------------------


def is_saved_model(path: str) -> bool:
    return tf.io.gfile.isdir(path) and tf.io.gfile.exists(os.path.join(path, "saved_model.pb"))


def init_config(init_checkpoint: Optional[str], albert_config_file: Optional[str] = None) -> AlbertConfig:
    """The config of the encoder that `init_checkpoint` holds.

    `albert_config_file` wins when given; else a pretraining run's checkpoint carries its config as
    `albert_config.json` in its folder (so does a SavedModel folder that has one beside it).
    """
    if albert_config_file:
        return AlbertConfig.from_json_file(albert_config_file)
    if not init_checkpoint:
        raise ValueError("without --init_checkpoint or --preset, --albert_config_file is required "
                         "(the model then starts from random weights)")
    folder = init_checkpoint if tf.io.gfile.isdir(init_checkpoint) else os.path.dirname(init_checkpoint)
    path = os.path.join(folder, CONFIG_FILE)
    if not tf.io.gfile.exists(path):
        kind = "SavedModel" if is_saved_model(init_checkpoint) else "checkpoint"
        raise FileNotFoundError(
            f"init_checkpoint {init_checkpoint}: no {CONFIG_FILE} in {folder} to tell the {kind}'s "
            f"config; give --albert_config_file"
        )
    return AlbertConfig.from_json_file(path)


def saved_model_vocab_file(path: str) -> Optional[str]:
    """The SentencePiece model that `albert_tf.export` stored in a SavedModel's assets, if any."""
    assets = os.path.join(path, "assets")
    if not tf.io.gfile.isdir(assets):
        return None
    models = [name for name in tf.io.gfile.listdir(assets) if name.endswith(".model")]
    return os.path.join(assets, models[0]) if len(models) == 1 else None


def _checkpoint_prefix(path: str) -> str:
    if tf.io.gfile.isdir(path):
        latest = tf.train.latest_checkpoint(path)
        if latest is None:
            raise FileNotFoundError(f"init_checkpoint: no checkpoint in directory {path}")
        return latest
    return path


def _encoder_key(name: str) -> str:
    """A variable's path below the encoder, from a SavedModel variable name: the top model's name
    goes, and so does the pretrainer's "encoder/" level."""
    key = name.split(":")[0].split("/", 1)[-1]
    return key[len("encoder/"):] if key.startswith("encoder/") else key


def init_vocab_size(init_checkpoint: str) -> int:
    """Rows of the word-embedding table in a checkpoint or SavedModel."""
    if is_saved_model(init_checkpoint):
        variables = tf.saved_model.load(init_checkpoint).variables
        shapes = {_encoder_key(v.name): v.shape for v in variables}
    else:
        prefix = _checkpoint_prefix(init_checkpoint)
        if not tf.io.gfile.exists(prefix + ".index"):
            raise FileNotFoundError(f"init_checkpoint: {prefix} does not exist (no {prefix}.index)")
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


class _EncoderWeights:
    """The encoder's variables as `load_init_checkpoint` names them: by their path below the
    classifier ("encoder/..."), which is their path below a pretrainer too."""

    def __init__(self, classifier: GlueClassifier):
        self.weights = classifier.encoder.weights


def load_encoder_saved_model(encoder: AlbertEncoder, path: str):
    """Copies the weights of an `albert_tf.export` SavedModel of an encoder or pretrainer into
    `encoder`, matching variables by their path below the encoder; all must be there, same shape."""
    loaded = {_encoder_key(v.name): v for v in tf.saved_model.load(path).variables}
    problems = []
    pairs = []
    prefix = encoder.weights[0].path.split("/")[0] + "/"
    for variable in encoder.weights:
        key = variable.path[len(prefix):] if variable.path.startswith(prefix) else variable.path
        key = key[len("encoder/"):] if key.startswith("encoder/") else key
        source = loaded.get(key)
        if source is None:
            problems.append(f"{key} is missing")
        elif list(source.shape) != list(variable.shape):
            problems.append(f"{key} has shape {list(source.shape)} there, {list(variable.shape)} here")
        else:
            pairs.append((variable, source))
    if problems:
        shown = "; ".join(problems[:8]) + (f"; and {len(problems) - 8} more" if len(problems) > 8 else "")
        raise ValueError(f"init_checkpoint {path} (a SavedModel) does not match the model: {shown}")
    for variable, source in pairs:
        variable.assign(source)


def initialize_encoder(classifier: GlueClassifier, init_checkpoint: Optional[str] = None,
                       preset: Optional[str] = None) -> str:
    """Loads the classifier's encoder weights; returns where they came from ("random" for none)."""
    if init_checkpoint and preset:
        raise ValueError("give at most one of --init_checkpoint and --preset")
    if not classifier.built:
        classifier.build()
    if preset:
        source = AlbertEncoder.from_preset(preset)
        if source.config != classifier.config:
            raise ValueError(f"preset {preset} has another config than the classifier")
        for ours, theirs in zip(classifier.encoder.weights, source.weights, strict=True):
            ours.assign(theirs)
        return preset
    if not init_checkpoint:
        return "random"
    check_vocab_size(init_checkpoint, classifier.config.vocab_size, "the model's config")
    if is_saved_model(init_checkpoint):
        load_encoder_saved_model(classifier.encoder, init_checkpoint)
        return init_checkpoint
    return load_init_checkpoint(_EncoderWeights(classifier), _checkpoint_prefix(init_checkpoint))
