"""Encoder parameter counts (embeddings + projection + blocks + pooler) against ALBERT.md §1.

The models are built under `shapes_only`: the real layers create their real variables, without
drawing their random values (seconds for the large sizes); the last test checks that this builds
the same variables as a real build.
"""

import pytest

from albert_tf import AlbertConfig, AlbertEncoder, AlbertPretrainer
from albert_tf.models.base import shapes_only


def encoder_params(config: AlbertConfig) -> int:
    with shapes_only():
        encoder = AlbertEncoder(config)
        encoder.build()
    return encoder.count_params()


def test_albert_base_components_are_exact():
    with shapes_only():
        encoder = AlbertEncoder(AlbertConfig.named("albert_base_v2"))
        encoder.build()
        pretrainer = AlbertPretrainer(AlbertConfig.named("albert_base_v2"))
        pretrainer.build()
    emb = encoder.embeddings
    projection = emb.projection.count_params()
    assert emb.count_params() - projection == 3_906_048
    assert projection == 99_072
    assert len(encoder.blocks) == 1 and encoder.blocks[0].count_params() == 7_087_872
    assert encoder.pooler.count_params() == 590_592
    assert encoder.count_params() == 11_683_584
    assert pretrainer.count_params() - 11_683_584 == 130_226  # the cls/* heads


@pytest.mark.parametrize(
    "preset, expected",
    [
        ("albert_large_v2", 17_683_968),
        ("albert_xlarge_v2", 58_724_864),
        ("albert_xxlarge_v2", 222_595_584),
    ],
)
def test_released_sizes_are_exact(preset, expected):
    assert encoder_params(AlbertConfig.named(preset)) == expected


@pytest.mark.parametrize("preset, paper", [("bert_base", 108e6), ("bert_large", 334e6)])
def test_bert_sizes_match_the_paper(preset, paper):
    assert abs(encoder_params(AlbertConfig.named(preset)) - paper) <= 1.3e6


# The paper's ablation table (base shape, V = 30,000); configs differ only in E and sharing.
ABLATION = [
    (64, "all", 10e6), (64, "none", 87e6),
    (128, "all", 12e6), (128, "attention", 64e6), (128, "ffn", 38e6), (128, "none", 89e6),
    (256, "all", 16e6), (256, "none", 93e6),
    (768, "all", 31e6), (768, "attention", 83e6), (768, "ffn", 57e6), (768, "none", 108e6),
]


@pytest.mark.parametrize("embedding_size, sharing, paper", ABLATION)
def test_paper_ablation_counts(embedding_size, sharing, paper):
    config = AlbertConfig.named("albert_base_v2").replace(embedding_size=embedding_size, sharing=sharing)
    assert abs(encoder_params(config) - paper) <= 1.3e6


SMALL = AlbertConfig(vocab_size=97, embedding_size=8, hidden_size=12, num_hidden_layers=4, num_attention_heads=2,
                     intermediate_size=20, max_position_embeddings=16, type_vocab_size=3)


@pytest.mark.parametrize("changes", [
    {}, {"embedding_size": 12}, {"num_hidden_groups": 2}, {"num_hidden_groups": 2, "inner_group_num": 2},
    {"num_hidden_layers": 3, "num_hidden_groups": 3, "inner_group_num": 2},
    {"sharing": "attention"}, {"sharing": "ffn"}, {"sharing": "none"}, {"sharing": "none", "embedding_size": 12},
])
def test_computed_counts_are_those_of_the_built_model(changes):
    """albert-presets prints parameter_counts; it must equal what building the model gives."""
    from albert_tf.cli.presets import parameter_table
    from albert_tf.config import parameter_counts

    config = SMALL.replace(**changes)
    model = AlbertPretrainer(config)
    model.build()
    encoder = model.encoder
    projection = encoder.embeddings.projection.count_params() if encoder.embeddings.projection else 0
    counts = parameter_counts(config)
    assert counts == {
        "embeddings": encoder.embeddings.count_params() - projection,
        "projection": projection,
        "blocks": encoder.count_params() - encoder.embeddings.count_params() - encoder.pooler.count_params(),
        "pooler": encoder.pooler.count_params(),
        "encoder": encoder.count_params(),
        "heads": model.count_params() - encoder.count_params(),
    }
    # And the table's two ways agree on a real preset.
    if not changes:
        assert parameter_table(["albert_base_v2"]) == parameter_table(["albert_base_v2"], build=True)


def test_a_shapes_only_build_makes_the_variables_of_a_real_build():
    """The counts above come from the model's own variables: shapes_only changes only whether their
    values are drawn, and leaves none for Keras to draw later."""
    import keras
    import numpy as np

    config = SMALL.replace(num_hidden_groups=2, inner_group_num=2)
    real = AlbertPretrainer(config)
    real.build()
    with shapes_only():
        counted = AlbertPretrainer(config)
        counted.build()

    def variables(model):  # paths below the model's own (uniquified) name
        return [(v.path.split("/", 1)[1], tuple(v.shape)) for v in model.weights]

    assert variables(counted) == variables(real)
    assert counted.count_params() == real.count_params()
    assert all(v._value is None for v in counted.weights)  # never drawn
    # Leaving any StatelessScope (every symbolic call does) draws the values Keras still owes.
    with keras.StatelessScope():
        pass
    assert all(v._value is None for v in counted.weights)
    assert np.asarray(real.weights[0].value).shape == tuple(real.weights[0].shape)
