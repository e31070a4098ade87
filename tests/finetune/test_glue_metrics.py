"""The GLUE metrics against hand-computed values and against scikit-learn / SciPy."""

import math

import numpy as np
import pytest
import scipy.stats
import sklearn.metrics

from finetune.glue import metrics


def test_accuracy_by_hand():
    assert metrics.accuracy([1, 0, 1, 1], [1, 0, 0, 1]) == 0.75
    assert metrics.accuracy([2, 0, 1], [2, 0, 1]) == 1.0


def test_f1_by_hand():
    # TP = 2 (rows 0, 4), FP = 1 (row 2), FN = 1 (row 1): F1 = 2*2 / (2*2 + 1 + 1).
    assert metrics.f1([1, 1, 0, 0, 1], [1, 0, 1, 0, 1]) == pytest.approx(2 / 3, abs=1e-15)
    # The positive class is class 1 whatever the counts of class 0.
    assert metrics.f1([0, 0, 0, 1], [0, 0, 0, 0]) == 0.0
    assert metrics.f1([0, 0], [0, 0]) == 0.0


def test_matthews_by_hand():
    # TP = 2, TN = 2, FP = 1, FN = 1: (2*2 - 1*1) / sqrt(3 * 3 * 3 * 3) = 1/3.
    assert metrics.matthews_corr([1, 1, 1, 0, 0, 0], [1, 1, 0, 0, 0, 1]) == pytest.approx(1 / 3)
    assert metrics.matthews_corr([1, 0, 1, 0], [1, 0, 1, 0]) == 1.0
    assert metrics.matthews_corr([1, 0, 1, 0], [0, 1, 0, 1]) == -1.0
    # One predicted class everywhere: the denominator vanishes and CoLA scores it 0.
    assert metrics.matthews_corr([1, 0, 1, 1], [1, 1, 1, 1]) == 0.0


def test_matthews_multiclass_by_hand():
    # Confusion rows (true) / columns (predicted): [[2,0,0],[1,0,1],[0,1,1]]; correct 3 of 6,
    # true counts (2,2,2), predicted counts (3,1,2):
    # (3*6 - (2*3 + 2*1 + 2*2)) / sqrt((36 - (9+1+4)) * (36 - (4+4+4))) = 6 / sqrt(22 * 24).
    value = metrics.matthews_corr([0, 1, 2, 0, 1, 2], [0, 2, 1, 0, 0, 2])
    assert value == pytest.approx(0.2611164839335468, abs=1e-15)


def test_pearson_and_spearman_by_hand():
    # Centered [-1, 0, 1] and [-1, 1, 0]: 1 / (sqrt(2) * sqrt(2)).
    assert metrics.pearson([1, 2, 3], [1, 3, 2]) == pytest.approx(0.5, abs=1e-15)
    # Ranks (1, 2.5, 2.5, 4) and (1, 3, 2, 4): 4.5 / sqrt(4.5 * 5) = 3 / sqrt(10).
    assert metrics.spearman([1, 2, 2, 3], [1, 3, 2, 4]) == pytest.approx(3 / math.sqrt(10))
    # Monotone but not linear: Spearman is exactly 1, Pearson is not. Centered x (-1.5, -.5, .5,
    # 1.5) and y (-24, -17, 2, 39): 104 / sqrt(5 * 2390).
    assert metrics.spearman([1, 2, 3, 4], [1, 8, 27, 64]) == 1.0
    assert metrics.pearson([1, 2, 3, 4], [1, 8, 27, 64]) == pytest.approx(104 / math.sqrt(11950))
    assert math.isnan(metrics.pearson([1, 2, 3], [2, 2, 2]))


@pytest.mark.parametrize("seed", range(5))
def test_classification_metrics_match_sklearn(seed):
    rng = np.random.default_rng(seed)
    num_classes = 2 if seed < 3 else 3
    labels = rng.integers(0, num_classes, size=500)
    # Correlated with the labels so that the values are not all near 0.
    predictions = np.where(rng.random(500) < 0.7, labels, rng.integers(0, num_classes, size=500))
    assert metrics.accuracy(labels, predictions) == pytest.approx(
        sklearn.metrics.accuracy_score(labels, predictions), abs=1e-12
    )
    assert metrics.matthews_corr(labels, predictions) == pytest.approx(
        sklearn.metrics.matthews_corrcoef(labels, predictions), abs=1e-12
    )
    if num_classes == 2:
        assert metrics.f1(labels, predictions) == pytest.approx(
            sklearn.metrics.f1_score(labels, predictions), abs=1e-12
        )


@pytest.mark.parametrize("seed", range(5))
def test_correlations_match_scipy(seed):
    rng = np.random.default_rng(seed)
    # STS-B-like scores: few distinct values, so Spearman meets many ties.
    labels = np.round(rng.uniform(0, 5, size=400) * 5) / 5
    predictions = labels + rng.normal(0, 1.5, size=400)
    if seed % 2:
        predictions = np.round(predictions)
    assert metrics.pearson(labels, predictions) == pytest.approx(
        scipy.stats.pearsonr(labels, predictions)[0], abs=1e-12
    )
    assert metrics.spearman(labels, predictions) == pytest.approx(
        scipy.stats.spearmanr(labels, predictions)[0], abs=1e-12
    )


def test_compute_metrics_by_name():
    assert metrics.compute_metrics(("accuracy", "f1"), [1, 0, 1, 1], [1, 0, 0, 1]) == {
        "accuracy": 0.75,
        "f1": pytest.approx(0.8, abs=1e-15),
    }
    with pytest.raises(ValueError, match="unknown metric 'bleu'.*matthews_corr"):
        metrics.compute_metrics(("bleu",), [1], [1])


def test_bad_inputs():
    with pytest.raises(ValueError, match="differ in length: 3 and 2"):
        metrics.accuracy([1, 0, 1], [1, 0])
    with pytest.raises(ValueError, match="at least one example"):
        metrics.pearson([], [])


def test_the_majority_class_baseline_by_hand():
    # RTE: 3 not_entailment of 5, always predicted: accuracy 3/5. CoLA's one metric, Matthews
    # correlation, is 0 for any constant answer.
    assert metrics.majority_baseline("RTE", [1, 0, 1, 1, 0]) == {
        "predictor": "the majority class, not_entailment, every time", "accuracy": 0.6}
    assert metrics.majority_baseline("CoLA", [1, 0, 1, 1, 0]) == {
        "predictor": "the majority class, 1, every time", "matthews_corr": 0.0}
    # MNLI: a tie between entailment and neutral goes to the first class.
    assert metrics.majority_baseline("MNLI", [2, 1, 2, 1])["predictor"] == "the majority class, entailment, every time"
    assert metrics.majority_baseline("STS-B", [0.5, 2.0]) is None


def test_task_metrics_leave_out_padding():
    # MRPC: argmax of the logits is (1, 0, 0, 1); the last row is padding (weight 0) whose
    # prediction would otherwise be wrong. Accuracy 3/4; F1: TP 2, FP 0, FN 1 -> 4/5.
    logits = [[0.1, 0.9], [2.0, -1.0], [0.6, 0.4], [-3.0, 3.0], [5.0, 0.0]]
    result = metrics.task_metrics("MRPC", [1, 0, 1, 1, 1], logits, weights=[1, 1, 1, 1, 0])
    assert result == {"accuracy": 0.75, "f1": pytest.approx(0.8, abs=1e-15)}
    # STS-B takes [N, 1] scores. Centered labels (-11/6, -1/3, 13/6) and scores (-1, 1, 0):
    # Pearson 1.5 / sqrt(49/6 * 2); Spearman, ranks (1, 3, 2) against (1, 2, 3): 1 - 6*2/(3*8).
    stsb = metrics.task_metrics("STS-B", [0.5, 2.0, 4.5], [[1.0], [3.0], [2.0]])
    assert stsb == {
        "pearson": pytest.approx(1.5 / math.sqrt(49 / 3)),
        "spearman": pytest.approx(0.5),
    }
    with pytest.raises(ValueError, match=r"MNLI outputs should be logits of shape \[N, 3\]"):
        metrics.task_metrics("MNLI", [0, 1], [[0.0, 1.0], [1.0, 0.0]])
