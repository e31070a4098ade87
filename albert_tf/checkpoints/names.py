"""Where each of our weights lives in the original TF1 checkpoints and in Hugging Face's ALBERT.

One table, computed from an `AlbertConfig` alone, serves the converters in both directions and the
parity tests: no model is built. A weight is named on our side by its path below the encoder
(`embeddings/word_embeddings/embeddings`) or, for the pretraining heads, below the pretrainer
(`predictions/output_bias`): the names of `albert_tf.checkpoints.weights`, which a test checks against
built models. The released checkpoints and Hugging Face's `AlbertModel` only know the grouped
all-shared structure, so the table exists for `sharing="all"` configs.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from albert_tf.utils.validation import require_choice

NAMINGS = ("tf1", "hf")


@dataclasses.dataclass(frozen=True)
class WeightName:
    """One of our weights (`ours`, its path; `shape`, ours), its name in an external checkpoint, and
    whether its matrix is the transpose of ours there (PyTorch stores Linear weights [out, in]; the
    original stores the SOP classifier as [2, H])."""

    ours: str
    source: str
    shape: tuple[int, ...]
    transpose: bool = False

    def to_ours(self, array: np.ndarray) -> np.ndarray:
        return array.T if self.transpose else array

    def to_source(self, array: np.ndarray) -> np.ndarray:
        return array.T if self.transpose else array

    @property
    def source_shape(self) -> tuple[int, ...]:
        return tuple(reversed(self.shape)) if self.transpose else self.shape


def _dense(ours: str, tf1: str, hf: str, naming: str, shape, transpose_hf: bool = True):
    if naming == "tf1":
        return [WeightName(f"{ours}/kernel", f"{tf1}/kernel", shape),
                WeightName(f"{ours}/bias", f"{tf1}/bias", shape[1:])]
    return [WeightName(f"{ours}/kernel", f"{hf}.weight", shape, transpose_hf),
            WeightName(f"{ours}/bias", f"{hf}.bias", shape[1:])]


def _layer_norm(ours: str, tf1: str, hf: str, naming: str, width: int):
    if naming == "tf1":
        return [WeightName(f"{ours}/gamma", f"{tf1}/gamma", (width,)),
                WeightName(f"{ours}/beta", f"{tf1}/beta", (width,))]
    return [WeightName(f"{ours}/gamma", f"{hf}.weight", (width,)),
            WeightName(f"{ours}/beta", f"{hf}.bias", (width,))]


def _check(config, naming: str) -> None:
    require_choice("naming", naming, NAMINGS)
    if config.sharing != "all":
        raise ValueError(
            f"checkpoints of the original release and of Hugging Face hold grouped all-shared models; "
            f"this model has sharing={config.sharing!r}"
        )


def encoder_weight_names(config, naming: str) -> list[WeightName]:
    """The encoder's weights of `config`: `bert/...` (tf1) or `albert....` (hf)."""
    _check(config, naming)
    tf1 = naming == "tf1"
    e, h, i = config.embedding_size, config.hidden_size, config.intermediate_size
    names = [
        WeightName("embeddings/word_embeddings/embeddings",
                   "bert/embeddings/word_embeddings" if tf1 else "albert.embeddings.word_embeddings.weight",
                   (config.vocab_size, e)),
        WeightName("embeddings/position_embeddings",
                   "bert/embeddings/position_embeddings" if tf1 else "albert.embeddings.position_embeddings.weight",
                   (config.max_position_embeddings, e)),
        WeightName("embeddings/token_type_embeddings/embeddings",
                   "bert/embeddings/token_type_embeddings" if tf1
                   else "albert.embeddings.token_type_embeddings.weight", (config.type_vocab_size, e)),
        *_layer_norm("embeddings/layer_norm", "bert/embeddings/LayerNorm", "albert.embeddings.LayerNorm", naming, e),
    ]
    if config.has_projection:
        names += _dense("embeddings/embedding_hidden_mapping_in", "bert/encoder/embedding_hidden_mapping_in",
                        "albert.encoder.embedding_hidden_mapping_in", naming, (e, h))
    for g in config.used_groups:
        for k in range(config.inner_group_num):
            ours = f"group_{g}_inner_group_{k}"
            t = f"bert/encoder/transformer/group_{g}/inner_group_{k}"
            hf = f"albert.encoder.albert_layer_groups.{g}.albert_layers.{k}"
            for part in ("query", "key", "value"):
                names += _dense(f"{ours}/attention/{part}", f"{t}/attention_1/self/{part}",
                                f"{hf}.attention.{part}", naming, (h, h))
            names += _dense(f"{ours}/attention/output", f"{t}/attention_1/output/dense", f"{hf}.attention.dense",
                            naming, (h, h))
            names += _layer_norm(f"{ours}/attention/layer_norm", f"{t}/LayerNorm", f"{hf}.attention.LayerNorm",
                                 naming, h)
            names += _dense(f"{ours}/feed_forward/intermediate", f"{t}/ffn_1/intermediate/dense", f"{hf}.ffn",
                            naming, (h, i))
            names += _dense(f"{ours}/feed_forward/output", f"{t}/ffn_1/intermediate/output/dense",
                            f"{hf}.ffn_output", naming, (i, h))
            names += _layer_norm(f"{ours}/feed_forward/layer_norm", f"{t}/LayerNorm_1",
                                 f"{hf}.full_layer_layer_norm", naming, h)
    names += _dense("pooler", "bert/pooler/dense", "albert.pooler", naming, (h, h))
    return names


def head_weight_names(config, naming: str) -> list[WeightName]:
    """The pretraining heads' weights of `config` (below the pretrainer): `cls/...` (tf1) or HF's."""
    _check(config, naming)
    e, h = config.embedding_size, config.hidden_size
    names = _dense("predictions/transform", "cls/predictions/transform/dense", "predictions.dense", naming, (h, e))
    names += _layer_norm("predictions/layer_norm", "cls/predictions/transform/LayerNorm", "predictions.LayerNorm",
                         naming, e)
    names.append(WeightName("predictions/output_bias",
                            "cls/predictions/output_bias" if naming == "tf1" else "predictions.bias",
                            (config.vocab_size,)))
    if naming == "tf1":
        names += [WeightName("seq_relationship/seq_relationship/kernel", "cls/seq_relationship/output_weights",
                             (h, 2), transpose=True),
                  WeightName("seq_relationship/seq_relationship/bias", "cls/seq_relationship/output_bias", (2,))]
    else:
        names += _dense("seq_relationship/seq_relationship", "", "sop_classifier.classifier", naming, (h, 2))
    return names


# Hugging Face's ALBERT task models (transformers' models/albert/modeling_albert.py): the one dense
# layer each puts on `albert`, its name there and ours, and whether the model keeps the pooler
# (`AlbertModel(config, add_pooling_layer=False)` in the token classifier and question answering).
@dataclasses.dataclass(frozen=True)
class TaskHead:
    ours: str
    hf: str
    pooler: bool


HF_TASK_HEADS = {
    "AlbertForSequenceClassification": TaskHead("classifier", "classifier", pooler=True),
    "AlbertForMultipleChoice": TaskHead("classifier", "classifier", pooler=True),
    "AlbertForTokenClassification": TaskHead("classifier", "classifier", pooler=False),
    "AlbertForQuestionAnswering": TaskHead("span", "qa_outputs", pooler=False),
}


def task_head_weight_names(config, architecture: str, outputs: int) -> list[WeightName]:
    """The dense head of a Hugging Face task model (`HF_TASK_HEADS`) of `outputs` outputs: our
    `<ours>/kernel` [H, outputs] is its `<hf>.weight` [outputs, H] transposed."""
    _check(config, "hf")
    head = HF_TASK_HEADS[architecture]
    return _dense(head.ours, "", head.hf, "hf", (config.hidden_size, outputs))


def to_ours(names: list[WeightName], tensors: dict[str, np.ndarray], source: str) -> dict[str, np.ndarray]:
    """Our weights (by our name, float32) from an external checkpoint's tensors; a missing or
    misshapen tensor is an error naming it."""
    missing = [n.source for n in names if n.source not in tensors]
    if missing:
        raise ValueError(f"{source}: missing tensors {missing}")
    ours = {}
    for n in names:
        value = np.asarray(tensors[n.source])
        if tuple(value.shape) != n.source_shape:
            raise ValueError(f"{source}: tensor {n.source} has shape {tuple(value.shape)}, expected "
                             f"{n.source_shape} for {n.ours}")
        ours[n.ours] = np.ascontiguousarray(n.to_ours(value).astype(np.float32))
    return ours


def to_source(names: list[WeightName], ours: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The external checkpoint's tensors (float32) of our weights."""
    return {n.source: np.ascontiguousarray(n.to_source(np.asarray(ours[n.ours], np.float32))) for n in names}
