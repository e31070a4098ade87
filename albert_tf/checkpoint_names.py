"""Where each of our variables lives in the original TF1 checkpoints and in Hugging Face's ALBERT.

One table serves the converters in both directions and the parity tests. The released checkpoints
and Hugging Face's `AlbertModel` only know the grouped all-shared structure, so the table exists for
`sharing="all"` models.
"""

from __future__ import annotations

import dataclasses

import numpy as np

NAMINGS = ("tf1", "hf")


@dataclasses.dataclass(frozen=True)
class WeightName:
    """One of our variables, its name in an external checkpoint, and whether its matrix is the
    transpose of ours there (PyTorch stores Linear weights [out, in]; the original stores the SOP
    classifier as [2, H])."""

    variable: object
    source: str
    transpose: bool = False

    def to_ours(self, array: np.ndarray) -> np.ndarray:
        return array.T if self.transpose else array

    def to_source(self, array: np.ndarray) -> np.ndarray:
        return array.T if self.transpose else array


def _dense(layer, tf1: str, hf: str, naming: str, transpose_hf: bool = True):
    if naming == "tf1":
        return [WeightName(layer.kernel, f"{tf1}/kernel"), WeightName(layer.bias, f"{tf1}/bias")]
    return [WeightName(layer.kernel, f"{hf}.weight", transpose_hf), WeightName(layer.bias, f"{hf}.bias")]


def _layer_norm(layer, tf1: str, hf: str, naming: str):
    if naming == "tf1":
        return [WeightName(layer.gamma, f"{tf1}/gamma"), WeightName(layer.beta, f"{tf1}/beta")]
    return [WeightName(layer.gamma, f"{hf}.weight"), WeightName(layer.beta, f"{hf}.bias")]


def encoder_weight_names(encoder, naming: str) -> list[WeightName]:
    """The names of an `AlbertEncoder`'s variables: `bert/...` (tf1) or `albert....` (hf)."""
    if naming not in NAMINGS:
        raise ValueError(f"naming must be one of {NAMINGS}, got {naming!r}")
    config = encoder.config
    if config.sharing != "all":
        raise ValueError(
            f"checkpoints of the original release and of Hugging Face hold grouped all-shared models; "
            f"this model has sharing={config.sharing!r}"
        )
    if not encoder.built:
        encoder.build()
    emb = encoder.embeddings
    tf1 = naming == "tf1"
    names = [
        WeightName(
            emb.word_embeddings.embeddings,
            "bert/embeddings/word_embeddings" if tf1 else "albert.embeddings.word_embeddings.weight",
        ),
        WeightName(
            emb.position_embeddings,
            "bert/embeddings/position_embeddings" if tf1 else "albert.embeddings.position_embeddings.weight",
        ),
        WeightName(
            emb.token_type_embeddings.embeddings,
            "bert/embeddings/token_type_embeddings" if tf1 else "albert.embeddings.token_type_embeddings.weight",
        ),
        *_layer_norm(emb.layer_norm, "bert/embeddings/LayerNorm", "albert.embeddings.LayerNorm", naming),
    ]
    if emb.projection is not None:
        names += _dense(
            emb.projection,
            "bert/encoder/embedding_hidden_mapping_in",
            "albert.encoder.embedding_hidden_mapping_in",
            naming,
        )
    for position, g in enumerate(config.used_groups):
        for k in range(config.inner_group_num):
            block = encoder.blocks[position * config.inner_group_num + k]
            att, ffn = block.attention, block.feed_forward
            t = f"bert/encoder/transformer/group_{g}/inner_group_{k}"
            h = f"albert.encoder.albert_layer_groups.{g}.albert_layers.{k}"
            for part in ("query", "key", "value"):
                names += _dense(
                    getattr(att, part), f"{t}/attention_1/self/{part}", f"{h}.attention.{part}", naming
                )
            names += _dense(att.output_dense, f"{t}/attention_1/output/dense", f"{h}.attention.dense", naming)
            names += _layer_norm(att.layer_norm, f"{t}/LayerNorm", f"{h}.attention.LayerNorm", naming)
            names += _dense(ffn.intermediate, f"{t}/ffn_1/intermediate/dense", f"{h}.ffn", naming)
            names += _dense(ffn.output_dense, f"{t}/ffn_1/intermediate/output/dense", f"{h}.ffn_output", naming)
            names += _layer_norm(ffn.layer_norm, f"{t}/LayerNorm_1", f"{h}.full_layer_layer_norm", naming)
    names += _dense(encoder.pooler, "bert/pooler/dense", "albert.pooler", naming)
    return names


def pretrainer_weight_names(pretrainer, naming: str) -> list[WeightName]:
    """The names of an `AlbertPretrainer`'s variables: encoder, `cls/...` (tf1) or heads (hf)."""
    if not pretrainer.built:
        pretrainer.build()
    names = encoder_weight_names(pretrainer.encoder, naming)
    mlm, sop = pretrainer.mlm_head, pretrainer.sop_head
    names += _dense(mlm.transform, "cls/predictions/transform/dense", "predictions.dense", naming)
    names += _layer_norm(mlm.layer_norm, "cls/predictions/transform/LayerNorm", "predictions.LayerNorm", naming)
    names.append(
        WeightName(mlm.output_bias, "cls/predictions/output_bias" if naming == "tf1" else "predictions.bias")
    )
    if naming == "tf1":
        names += [
            WeightName(sop.classifier.kernel, "cls/seq_relationship/output_weights", transpose=True),
            WeightName(sop.classifier.bias, "cls/seq_relationship/output_bias"),
        ]
    else:
        names += _dense(sop.classifier, "", "sop_classifier.classifier", naming)
    return names


def assign_from(names: list[WeightName], tensors: dict[str, np.ndarray], source: str = "checkpoint"):
    """Assigns every named tensor to its variable; a missing or misshapen tensor is an error naming it.

    Returns the source names that were not used (optimizer slots, tied copies, ...), so that a
    caller can decide which leftovers are expected.
    """
    missing = [n.source for n in names if n.source not in tensors]
    if missing:
        raise ValueError(f"{source}: missing tensors {missing}")
    for n in names:
        value = n.to_ours(np.asarray(tensors[n.source]))
        if tuple(value.shape) != tuple(n.variable.shape):
            raise ValueError(
                f"{source}: tensor {n.source} has shape {tuple(np.asarray(tensors[n.source]).shape)}, "
                f"expected {tuple(n.to_source(np.zeros(n.variable.shape)).shape)} for {n.variable.path}"
            )
    for n in names:
        n.variable.assign(n.to_ours(np.asarray(tensors[n.source])).astype(n.variable.dtype))
    used = {n.source for n in names}
    return sorted(set(tensors) - used)
