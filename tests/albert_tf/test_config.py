import json

import pytest

from albert_tf import SIZES, AlbertConfig
from tests.conftest import REPO_ROOT

RELEASED_BASE_V2 = REPO_ROOT / "tests" / "fixtures" / "albert_base_v2_config.json"


def test_released_base_v2_config_loads_as_the_preset():
    # The file as released, legacy keys (net_structure_type, gap_size, ...) included.
    assert AlbertConfig.from_json_file(RELEASED_BASE_V2) == AlbertConfig.named("albert_base_v2")


def test_json_round_trip_keeps_every_field(tmp_path):
    config = AlbertConfig(vocab_size=123, embedding_size=8, hidden_size=16, num_hidden_layers=4,
                          num_attention_heads=2, intermediate_size=32, num_hidden_groups=2,
                          inner_group_num=3, hidden_dropout_prob=0.1, hidden_act="relu")
    path = tmp_path / "albert_config.json"
    config.to_json_file(path)
    assert AlbertConfig.from_json_file(path) == config
    # The file uses the original key names.
    assert set(json.loads(path.read_text())) >= set(json.loads(RELEASED_BASE_V2.read_text())) - {
        "net_structure_type", "gap_size", "num_memory_blocks", "down_scale_factor"}


def test_presets_have_the_released_shapes():
    assert set(SIZES) == {f"albert_{s}_{v}" for s in ("base", "large", "xlarge", "xxlarge")
                            for v in ("v1", "v2")} | {"bert_base", "bert_large"}
    xxl = AlbertConfig.named("albert_xxlarge_v1")
    assert (xxl.hidden_size, xxl.num_attention_heads, xxl.intermediate_size, xxl.num_hidden_layers) == (
        4096, 64, 16384, 12)
    assert xxl.hidden_dropout_prob == 0.0  # v1 xxlarge was released without dropout
    assert AlbertConfig.named("albert_large_v1").hidden_dropout_prob == 0.1
    assert AlbertConfig.named("albert_large_v2").attention_probs_dropout_prob == 0.0
    bert = AlbertConfig.named("bert_base")
    assert (bert.embedding_size, bert.sharing, bert.has_projection) == (768, "none", False)


def test_unknown_preset_lists_the_known_ones():
    with pytest.raises(ValueError, match="albert_base_v2"):
        AlbertConfig.named("albert_huge")


@pytest.mark.parametrize(
    "changes, field",
    [
        ({"hidden_size": 100, "num_attention_heads": 12}, "hidden_size"),
        ({"num_hidden_layers": 12, "num_hidden_groups": 5}, "num_hidden_groups"),
        ({"num_hidden_groups": 13}, "num_hidden_groups"),
        ({"sharing": "some"}, "sharing"),
        ({"sharing": "attention", "inner_group_num": 2}, "inner_group_num"),
        ({"vocab_size": 0}, "vocab_size"),
        ({"embedding_size": -1}, "embedding_size"),
        ({"intermediate_size": 3.5}, "intermediate_size"),
        ({"hidden_dropout_prob": 1.0}, "hidden_dropout_prob"),
        ({"attention_probs_dropout_prob": -0.1}, "attention_probs_dropout_prob"),
        ({"hidden_act": "gelu_fast"}, "hidden_act"),
        ({"initializer_range": 0}, "initializer_range"),
    ],
)
def test_invalid_values_name_the_field(changes, field):
    with pytest.raises(ValueError, match=f"AlbertConfig.{field}"):
        AlbertConfig(**changes)


def test_config_is_frozen():
    with pytest.raises(Exception):
        AlbertConfig().hidden_size = 5


def test_a_config_that_is_not_albert_is_rejected(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "bert", "hidden_size": 768}))
    with pytest.raises(ValueError, match="unknown ALBERT config keys.*model_type"):
        AlbertConfig.from_json_file(path)
    path.write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        AlbertConfig.from_json_file(path)


def test_group_of_layer_follows_the_release():
    config = AlbertConfig(num_hidden_layers=12, num_hidden_groups=3)
    assert [config.group_of_layer(i) for i in range(12)] == [0] * 4 + [1] * 4 + [2] * 4
    # The release's modeling.py computes the group in floating point; for every valid config with
    # up to 64 layers ours is that, and in 39 layers of 18 configs it is not i * G // L.
    differing_layers, differing_configs = 0, set()
    for layers in range(1, 65):
        for groups in (g for g in range(1, layers + 1) if layers % g == 0):
            config = AlbertConfig(num_hidden_layers=layers, num_hidden_groups=groups, hidden_size=8,
                                  num_attention_heads=1, intermediate_size=8, embedding_size=8)
            release = [int(i / layers * groups) for i in range(layers)]
            assert [config.group_of_layer(i) for i in range(layers)] == release, (layers, groups)
            assert config.used_groups == tuple(sorted(set(release)))
            floor = [i * groups // layers for i in range(layers)]
            differing_layers += sum(a != b for a, b in zip(release, floor))
            differing_configs |= {(layers, groups)} if release != floor else set()
    assert (differing_layers, len(differing_configs)) == (39, 18)
    l22 = AlbertConfig(num_hidden_layers=22, num_hidden_groups=22)
    assert l22.group_of_layer(15) == 14 and 15 not in l22.used_groups and len(l22.used_groups) == 21


def test_public_names_resolve_on_tensorflows_backend_and_tensorflow_text_loads_lazily():
    import os
    import subprocess
    import sys

    code = (
        "import sys, albert_tf\n"
        "assert 'tensorflow_text' not in sys.modules\n"
        "missing = [n for n in albert_tf.__all__ if getattr(albert_tf, n, None) is None]\n"
        "assert not missing, missing\n"
        "assert 'tensorflow_text' in sys.modules\n"
        "import keras\n"
        "assert keras.config.backend() == 'tensorflow', keras.config.backend()\n"
        "assert 'jax' not in sys.modules\n"
    )
    # A shell with KERAS_BACKEND=jax exported for the user's other Keras work (jax is not even installed
    # here): the package runs on TensorFlow's (albert_tf.utils.backend).
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env={**os.environ, "KERAS_BACKEND": "jax"})
    assert result.returncode == 0, result.stderr[-2000:]


def test_sizes_refuse_bools_everywhere():
    from albert_tf.data.features import pretraining_feature_spec
    from albert_tf.training.pretraining import PretrainingOptions

    with pytest.raises(ValueError, match=r"AlbertConfig.vocab_size must be a positive integer, got True"):
        AlbertConfig(vocab_size=True)
    with pytest.raises(ValueError, match=r"^train_batch_size must be a positive integer, got True"):
        PretrainingOptions(output_dir="/tmp/x", train_batch_size=True)
    with pytest.raises(ValueError, match=r"max_predictions_per_seq must be a positive integer, got 0"):
        pretraining_feature_spec(128, 0)
