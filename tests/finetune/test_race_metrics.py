"""RACE accuracy overall and per level, against hand-computed values."""

import math

import numpy as np
import pytest

from finetune.race import metrics


def test_accuracy_overall_and_per_level_by_hand():
    levels = ["middle", "middle", "high", "high", "high"]
    labels = [0, 3, 1, 2, 0]
    probabilities = [
        [0.7, 0.1, 0.1, 0.1],  # middle, right
        [0.4, 0.2, 0.2, 0.2],  # middle, wrong (D is the answer)
        [0.1, 0.6, 0.2, 0.1],  # high, right
        [0.25, 0.25, 0.25, 0.25],  # high, a tie goes to A: wrong
        [0.5, 0.5, 0.0, 0.0],  # high, a tie between A and B goes to A: right
    ]
    result = metrics.race_metrics(levels, labels, probabilities)
    assert result["accuracy"] == pytest.approx(3 / 5)
    assert result["accuracy_middle"] == pytest.approx(1 / 2)
    assert result["accuracy_high"] == pytest.approx(2 / 3)
    assert (result["num_questions"], result["num_middle"], result["num_high"]) == (5, 2, 3)
    # Question-weighted, not the mean of the levels' accuracies (7/12).
    assert result["accuracy"] != pytest.approx((1 / 2 + 2 / 3) / 2)
    expected_loss = -(math.log(0.7) + math.log(0.2) + math.log(0.6) + math.log(0.25) + math.log(0.5)) / 5
    assert result["loss"] == pytest.approx(expected_loss)


def test_the_majority_letter_baseline_by_hand():
    assert metrics.majority_letter_baseline([2, 2, 1, 0, 3]) == {
        "predictor": "the majority letter, C, every time", "accuracy": 0.4}
    assert metrics.majority_letter_baseline([3, 1])["predictor"] == "the majority letter, B, every time"


def test_a_level_absent_is_not_reported_and_bad_shapes_are_named():
    result = metrics.race_metrics(["middle"] * 3, [1, 1, 2], np.eye(4)[[1, 2, 2]])
    assert result["accuracy"] == pytest.approx(2 / 3) and "accuracy_high" not in result
    with pytest.raises(ValueError, match=r"must be \[N, 4\], got shape \[3, 3\]"):
        metrics.race_metrics(["middle"] * 3, [1, 1, 2], np.eye(3))
    with pytest.raises(ValueError, match="3 levels, 2 labels and 3 rows"):
        metrics.race_metrics(["middle"] * 3, [1, 1], np.eye(4)[:3])
    with pytest.raises(ValueError, match="no questions"):
        metrics.race_metrics([], [], np.zeros((0, 4)))


def test_majority_letter_baseline():
    assert metrics.majority_letter_accuracy([2, 2, 1, 0], [2, 1, 2, 2]) == ("C", 0.75)
    # Ties go to the first letter.
    assert metrics.majority_letter_accuracy([1, 3], [1, 3, 0, 0]) == ("B", 0.25)
