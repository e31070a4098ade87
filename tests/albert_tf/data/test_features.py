"""Feature specs and tf.train.Example serialisation."""

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.data.features import (
    multiple_choice_feature_spec,
    classification_feature_spec,
    example_serializer,
    pretraining_feature_spec,
    serialize_example,
    to_example,
)


def test_pretraining_spec_is_the_original_schema():
    spec = pretraining_feature_spec(128, 20)
    shapes = {name: (feature.shape, feature.dtype) for name, feature in spec.items()}
    assert shapes == {
        "input_ids": ([128], tf.int64),
        "input_mask": ([128], tf.int64),
        "segment_ids": ([128], tf.int64),
        "token_boundary": ([128], tf.int64),
        "masked_lm_positions": ([20], tf.int64),
        "masked_lm_ids": ([20], tf.int64),
        "masked_lm_weights": ([20], tf.float32),
        "next_sentence_labels": ([1], tf.int64),
    }


def test_classification_spec_regression_switches_the_label_dtype():
    spec = classification_feature_spec(64)
    assert spec["label_ids"].dtype == tf.int64 and spec["label_ids"].shape == []
    assert classification_feature_spec(64, regression=True)["label_ids"].dtype == tf.float32
    assert spec["input_ids"].shape == [64] and spec["is_real_example"].shape == []
    with pytest.raises(ValueError, match="max_seq_length must be a positive integer, got 0"):
        classification_feature_spec(0)


def _pretraining_values(seq=8, preds=3):
    return {
        "input_ids": list(range(2, 2 + seq)),
        "input_mask": [1] * (seq - 2) + [0, 0],
        "segment_ids": [0] * 4 + [1] * (seq - 4),
        "token_boundary": [1, 0] * (seq // 2),
        "masked_lm_positions": [1, 4, 0],
        "masked_lm_ids": np.array([7, 9, 0]),
        "masked_lm_weights": [1.0, 1.0, 0.0],
        "next_sentence_labels": 1,
    }


def test_serialized_example_parses_back_to_the_values():
    spec = pretraining_feature_spec(8, 3)
    values = _pretraining_values()
    parsed = tf.io.parse_single_example(serialize_example(values, spec), spec)
    for name, value in values.items():
        assert np.array_equal(parsed[name].numpy(), np.reshape(value, spec[name].shape)), name
    # Independent check against a tf.train.Example built by hand with the protobuf API.
    manual = tf.train.Example()
    manual.features.feature["next_sentence_labels"].int64_list.value.append(1)
    assert (
        to_example(values, spec).features.feature["next_sentence_labels"]
        == manual.features.feature["next_sentence_labels"]
    )


def test_serialisation_is_byte_stable():
    spec = classification_feature_spec(4, regression=True)
    values = {
        "input_ids": [2, 5, 3, 0],
        "input_mask": [1, 1, 1, 0],
        "segment_ids": [0] * 4,
        "label_ids": 3.5,
        "is_real_example": 1,
    }
    reordered = dict(reversed(list(values.items())))
    assert example_serializer(spec)(values) == serialize_example(reordered, spec)
    parsed = tf.io.parse_single_example(serialize_example(values, spec), spec)
    assert parsed["label_ids"].numpy() == pytest.approx(3.5)


def test_values_that_do_not_match_the_spec_are_refused():
    spec = pretraining_feature_spec(8, 3)
    values = _pretraining_values()
    with pytest.raises(ValueError, match=r"feature 'input_ids' has 7 values, the spec wants 8"):
        serialize_example({**values, "input_ids": list(range(7))}, spec)
    with pytest.raises(ValueError, match=r"missing \['token_boundary'\], unexpected \['extra'\]"):
        serialize_example({**{k: v for k, v in values.items() if k != "token_boundary"}, "extra": [1]}, spec)


def test_multiple_choice_rows_are_written_flat_and_parse_as_choices_by_length():
    spec = multiple_choice_feature_spec(max_seq_length=3, num_choices=4)
    rows = np.arange(12).reshape(4, 3)
    values = {"input_ids": rows.reshape(-1), "input_mask": np.ones(12, np.int64), "segment_ids": np.zeros(12, np.int64),
              "label_ids": 2}
    parsed = tf.io.parse_single_example(serialize_example(values, spec), spec)
    np.testing.assert_array_equal(parsed["input_ids"].numpy(), rows)
    assert parsed["label_ids"].numpy() == 2
    with pytest.raises(ValueError, match="'input_ids' has 4 values, the spec wants 12"):
        serialize_example({**values, "input_ids": rows.tolist()}, spec)
