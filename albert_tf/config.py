"""The ALBERT hyperparameters, in the names of the original `albert_config.json`."""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

from albert_tf.utils.validation import require_choice, require_positive_ints

SHARING_MODES = ("all", "attention", "ffn", "none")
ACTIVATIONS = ("gelu", "gelu_new", "relu", "tanh", "swish", "silu")

# Keys that the original release wrote into albert_config.json for experimental structures it never
# used in the released models; accepted and ignored so that every released config loads unchanged.
LEGACY_KEYS = frozenset(
    {
        "net_structure_type",
        "layers_to_keep",
        "gap_size",
        "num_memory_blocks",
        "down_scale_factor",
    }
)


@dataclasses.dataclass(frozen=True)
class AlbertConfig:
    """Hyperparameters of an ALBERT (or BERT) encoder.

    Field names are those of the original `albert_config.json`, so released configs load as they
    are. Cross-layer sharing follows the original's groups: layer `i` of `num_hidden_layers` runs
    group `int(i / num_hidden_layers * num_hidden_groups)` (`group_of_layer`), and each group holds
    `inner_group_num` transformer blocks. `sharing` picks among the paper's four modes (Table 4):
    "all" (the default, grouped as above), "attention" (one attention sublayer for every layer,
    a feed-forward sublayer per layer), "ffn" (the reverse) and "none" (BERT: a block per layer).
    The modes other than "all" have no groups (`num_hidden_groups == inner_group_num == 1`).

    Example:
        >>> config = AlbertConfig.named("albert_base_v2")
        >>> config.replace(num_hidden_layers=6).num_hidden_layers
        6
    """

    vocab_size: int = 30000
    embedding_size: int = 128
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.0
    attention_probs_dropout_prob: float = 0.0
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    num_hidden_groups: int = 1
    inner_group_num: int = 1
    sharing: str = "all"

    def __post_init__(self):
        positive = (
            "vocab_size",
            "embedding_size",
            "hidden_size",
            "num_hidden_layers",
            "num_attention_heads",
            "intermediate_size",
            "max_position_embeddings",
            "type_vocab_size",
            "num_hidden_groups",
            "inner_group_num",
        )
        require_positive_ints({name: getattr(self, name) for name in positive}, owner="AlbertConfig.")
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
                raise ValueError(f"AlbertConfig.{name} must be a probability in [0, 1), got {value!r}")
        if isinstance(self.initializer_range, bool) or not (
            isinstance(self.initializer_range, (int, float)) and self.initializer_range > 0
        ):
            raise ValueError(
                f"AlbertConfig.initializer_range must be a positive number, got {self.initializer_range!r}"
            )
        require_choice("AlbertConfig.hidden_act", self.hidden_act, ACTIVATIONS)
        require_choice("AlbertConfig.sharing", self.sharing, SHARING_MODES)
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"AlbertConfig.hidden_size ({self.hidden_size}) must be divisible by "
                f"num_attention_heads ({self.num_attention_heads})"
            )
        if self.num_hidden_groups > self.num_hidden_layers:
            raise ValueError(
                f"AlbertConfig.num_hidden_groups ({self.num_hidden_groups}) must not exceed "
                f"num_hidden_layers ({self.num_hidden_layers})"
            )
        if self.num_hidden_layers % self.num_hidden_groups:
            raise ValueError(
                f"AlbertConfig.num_hidden_groups ({self.num_hidden_groups}) must divide "
                f"num_hidden_layers ({self.num_hidden_layers})"
            )
        if self.sharing != "all":
            for name in ("num_hidden_groups", "inner_group_num"):
                if getattr(self, name) != 1:
                    raise ValueError(
                        f"AlbertConfig.{name} must be 1 when sharing={self.sharing!r} "
                        f"(groups exist only with sharing='all'), got {getattr(self, name)}"
                    )

    # ---- derived facts -------------------------------------------------------------------------

    @property
    def head_size(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @property
    def has_projection(self) -> bool:
        """Whether the embeddings are projected E -> H (absent in BERT-style configs, E == H)."""
        return self.embedding_size != self.hidden_size

    def group_of_layer(self, layer_index: int) -> int:
        """The group that layer `layer_index` runs: `int(i / L * G)` in floating point, as the release.

        Rounding makes this differ from `i * G // L` for some configs: with L = G = 22, layer 15
        runs group 14 (15 / 22 * 22 = 14.999...), and no layer runs group 15 (see `used_groups`).
        """
        return int(layer_index / self.num_hidden_layers * self.num_hidden_groups)

    @property
    def used_groups(self) -> tuple[int, ...]:
        """The groups that some layer runs, in order: the ones the release creates variables for."""
        return tuple(sorted({self.group_of_layer(i) for i in range(self.num_hidden_layers)}))

    # ---- conversion ----------------------------------------------------------------------------

    def replace(self, **changes) -> "AlbertConfig":
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any], source: str = "config") -> "AlbertConfig":
        """Builds a config from the keys of an `albert_config.json`; legacy keys are ignored."""
        if not isinstance(values, dict):
            raise ValueError(f"{source}: an ALBERT config must be a JSON object, got {type(values).__name__}")
        fields = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - fields - LEGACY_KEYS)
        if unknown:
            raise ValueError(
                f"{source}: unknown ALBERT config keys {unknown}; known keys are {sorted(fields)}"
            )
        return cls(**{k: v for k, v in values.items() if k in fields})

    @classmethod
    def from_json_file(cls, path: str | os.PathLike) -> "AlbertConfig":
        from albert_tf.utils.files import files_for  # a path on any filesystem (gs://)

        with files_for(path).open(os.fspath(path), "r", encoding="utf-8") as f:
            try:
                values = json.load(f)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}: not valid JSON ({e})") from None
        return cls.from_dict(values, source=str(path))

    def to_json_file(self, path: str | os.PathLike) -> None:
        from albert_tf.utils.atomic import write_json  # on any filesystem, never half-written

        write_json(path, self.to_dict())

    @classmethod
    def named(cls, name: str) -> "AlbertConfig":
        """A released size by name, without weights (see `SIZES`), e.g. "albert_base_v2" or
        "bert_base". The weights of a released model are a preset: `AlbertEncoder.from_preset`."""
        try:
            return SIZES[name]
        except KeyError:
            raise ValueError(f"unknown size {name!r}; known sizes are {sorted(SIZES)}") from None


def _released(hidden_size: int, num_layers: int, dropout: float, embedding_size: int = 128) -> AlbertConfig:
    return AlbertConfig(
        embedding_size=embedding_size,
        hidden_size=hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=hidden_size // 64,
        intermediate_size=4 * hidden_size,
        hidden_dropout_prob=dropout,
        attention_probs_dropout_prob=dropout,
    )


# The released sizes: v2 has no dropout; v1 has 0.1 except xxlarge. xxlarge has 64 heads of 64.
SIZES: dict[str, AlbertConfig] = {
    "albert_base_v1": _released(768, 12, 0.1),
    "albert_large_v1": _released(1024, 24, 0.1),
    "albert_xlarge_v1": _released(2048, 24, 0.1),
    "albert_xxlarge_v1": _released(4096, 12, 0.0),
    "albert_base_v2": _released(768, 12, 0.0),
    "albert_large_v2": _released(1024, 24, 0.0),
    "albert_xlarge_v2": _released(2048, 24, 0.0),
    "albert_xxlarge_v2": _released(4096, 12, 0.0),
    "bert_base": _released(768, 12, 0.1, embedding_size=768).replace(sharing="none"),
    "bert_large": _released(1024, 24, 0.1, embedding_size=1024).replace(sharing="none"),
}
# xlarge has 16 heads of 128 (2048 / 16), as released, not 2048 / 64.
SIZES["albert_xlarge_v1"] = SIZES["albert_xlarge_v1"].replace(num_attention_heads=16)
SIZES["albert_xlarge_v2"] = SIZES["albert_xlarge_v2"].replace(num_attention_heads=16)


def parameter_counts(config: AlbertConfig) -> dict[str, int]:
    """The parameters of the model `config` builds, by part, without building it (milliseconds,
    where building albert xxlarge takes most of a minute): `embeddings` (word, position, token type,
    LayerNorm), `projection` (E -> H, 0 when E == H), `blocks` (distinct transformer blocks, shared
    sublayers counted once), `pooler`, `encoder` (their sum) and `heads` (the masked-LM head with its
    output bias, the decoder being the tied word embeddings, and the sentence-order head).
    tests/albert_tf/models/test_param_counts.py checks it against built models of every sharing mode."""
    h, e, i, v = config.hidden_size, config.embedding_size, config.intermediate_size, config.vocab_size
    attention = 4 * (h * h + h) + 2 * h  # query, key, value, output; LayerNorm
    feed_forward = (h * i + i) + (i * h + h) + 2 * h  # two dense layers; LayerNorm
    n = config.num_hidden_layers
    blocks = {
        "all": len(config.used_groups) * config.inner_group_num * (attention + feed_forward),
        "attention": attention + n * feed_forward,
        "ffn": n * attention + feed_forward,
        "none": n * (attention + feed_forward),
    }[config.sharing]
    counts = {
        "embeddings": (v + config.max_position_embeddings + config.type_vocab_size) * e + 2 * e,
        "projection": (e * h + h) if e != h else 0,
        "blocks": blocks,
        "pooler": h * h + h,
    }
    counts["encoder"] = sum(counts.values())
    counts["heads"] = (h * e + e) + 2 * e + v + (h * 2 + 2)  # MLM dense, LayerNorm, output bias; SOP
    return counts
