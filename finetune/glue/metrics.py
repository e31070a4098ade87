"""The GLUE metrics in NumPy: accuracy, F1, Matthews correlation, Pearson and Spearman.

Classification metrics take class ids (the argmax of the logits); the correlations take float
scores. Degenerate inputs follow scikit-learn and SciPy, the references the tests compare against:
Matthews correlation and F1 are 0.0 where their denominator vanishes, and a correlation with a
constant input is NaN (it is undefined, and a silent 0 would read as a real result).
`task_metrics` turns a model's outputs on an evaluation split into the task's metrics, and
`majority_baseline` gives the same metrics of the answer a model that ignores its input can give.
"""

from __future__ import annotations

from typing import Callable, Iterable, Mapping

import numpy as np

from finetune.glue.definitions import Task, get_task


def _pair(labels, predictions, dtype) -> tuple[np.ndarray, np.ndarray]:
    labels = np.asarray(labels, dtype=dtype).reshape(-1)
    predictions = np.asarray(predictions, dtype=dtype).reshape(-1)
    if labels.shape != predictions.shape:
        raise ValueError(
            f"labels and predictions differ in length: {labels.size} and {predictions.size}"
        )
    if labels.size == 0:
        raise ValueError("a metric needs at least one example")
    return labels, predictions


def accuracy(labels, predictions) -> float:
    """The fraction of predictions equal to their label."""
    labels, predictions = _pair(labels, predictions, np.int64)
    return float(np.mean(labels == predictions))


def f1(labels, predictions, positive: int = 1) -> float:
    """F1 of the `positive` class (MRPC and QQP score the paraphrase / duplicate class, 1)."""
    labels, predictions = _pair(labels, predictions, np.int64)
    true_positives = np.sum((predictions == positive) & (labels == positive))
    denominator = np.sum(predictions == positive) + np.sum(labels == positive)
    return float(2 * true_positives / denominator) if denominator else 0.0


def matthews_corr(labels, predictions) -> float:
    """Matthews correlation coefficient, in its multiclass form (Gorodkin 2004).

    For two classes it is (TP*TN - FP*FN) / sqrt((TP+FP)(TP+FN)(TN+FP)(TN+FN)).
    """
    labels, predictions = _pair(labels, predictions, np.int64)
    classes, ids = np.unique(np.concatenate([labels, predictions]), return_inverse=True)
    label_ids, prediction_ids = ids[: labels.size], ids[labels.size :]
    confusion = np.zeros((classes.size, classes.size), dtype=np.float64)
    np.add.at(confusion, (label_ids, prediction_ids), 1.0)
    true_per_class = confusion.sum(axis=1)
    predicted_per_class = confusion.sum(axis=0)
    correct = np.trace(confusion)
    total = confusion.sum()
    covariance = correct * total - true_per_class @ predicted_per_class
    variance_predicted = total**2 - predicted_per_class @ predicted_per_class
    variance_true = total**2 - true_per_class @ true_per_class
    denominator = np.sqrt(variance_predicted * variance_true)
    return float(covariance / denominator) if denominator else 0.0


def pearson(labels, predictions) -> float:
    """Pearson correlation of two score vectors; NaN where either is constant."""
    labels, predictions = _pair(labels, predictions, np.float64)
    labels = labels - labels.mean()
    predictions = predictions - predictions.mean()
    denominator = np.sqrt((labels @ labels) * (predictions @ predictions))
    if denominator == 0:
        return float("nan")
    # Rounding can push a perfect correlation a hair past 1.
    return float(np.clip((labels @ predictions) / denominator, -1.0, 1.0))


def _average_ranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks; tied values share the mean of the ranks they span."""
    order = np.argsort(values, kind="stable")
    sorted_values = values[order]
    starts_run = np.concatenate([[True], sorted_values[1:] != sorted_values[:-1]])
    run_of_position = np.cumsum(starts_run) - 1
    run_starts = np.flatnonzero(starts_run)
    run_ends = np.append(run_starts[1:], values.size)
    # Positions run_start .. run_end - 1 hold ranks run_start + 1 .. run_end.
    mean_rank = (run_starts + 1 + run_ends) / 2.0
    ranks = np.empty(values.size, dtype=np.float64)
    ranks[order] = mean_rank[run_of_position]
    return ranks


def spearman(labels, predictions) -> float:
    """Spearman rank correlation: Pearson of the average ranks (ties handled as SciPy does)."""
    labels, predictions = _pair(labels, predictions, np.float64)
    return pearson(_average_ranks(labels), _average_ranks(predictions))


METRICS: Mapping[str, Callable[..., float]] = {
    "accuracy": accuracy,
    "f1": f1,
    "matthews_corr": matthews_corr,
    "pearson": pearson,
    "spearman": spearman,
}


def compute_metrics(names: Iterable[str], labels, predictions) -> dict[str, float]:
    """The named metrics (a task's `metrics`) of one set of predictions, by name.

    Example:
        >>> compute_metrics(("accuracy", "f1"), [1, 0, 1, 1], [1, 0, 0, 1])
        {'accuracy': 0.75, 'f1': 0.8}
    """
    results = {}
    for name in names:
        if name not in METRICS:
            raise ValueError(f"unknown metric {name!r}; the metrics are: {', '.join(METRICS)}")
        results[name] = METRICS[name](labels, predictions)
    return results


def predictions_from_outputs(task: Task | str, outputs) -> np.ndarray:
    """Class ids (the argmax of logits or probabilities, [N, num_labels]) for a classification
    task; float scores ([N] or [N, 1]) for a regression task."""
    task = get_task(task) if isinstance(task, str) else task
    outputs = np.asarray(outputs)
    if task.is_regression:
        if outputs.ndim == 2 and outputs.shape[1] == 1:
            outputs = outputs[:, 0]
        if outputs.ndim != 1:
            raise ValueError(
                f"{task.name} outputs should be scores of shape [N] or [N, 1], got {outputs.shape}"
            )
        return outputs.astype(np.float64)
    if outputs.ndim != 2 or outputs.shape[1] != task.num_labels:
        raise ValueError(
            f"{task.name} outputs should be logits of shape [N, {task.num_labels}], got "
            f"{outputs.shape}"
        )
    return np.argmax(outputs, axis=1)


def task_metrics(task: Task | str, label_ids, outputs, weights=None) -> dict[str, float]:
    """The task's metrics of a model's outputs on an evaluation split.

    Args:
        task: a `Task` or its name.
        label_ids: class ids, or scores for STS-B.
        outputs: logits (or probabilities) [N, num_labels]; scores [N] or [N, 1] for STS-B.
        weights: `is_real_example` of each row; rows of weight 0 (the padding that fills the last
            evaluation batch) are left out. None keeps every row.
    """
    task = get_task(task) if isinstance(task, str) else task
    predictions = predictions_from_outputs(task, outputs)
    label_ids = np.asarray(label_ids).reshape(-1)
    if weights is not None:
        real = np.asarray(weights).reshape(-1) > 0
        if real.shape != label_ids.shape:
            raise ValueError(
                f"weights and labels differ in length: {real.size} and {label_ids.size}"
            )
        label_ids, predictions = label_ids[real], predictions[real]
    return compute_metrics(task.metrics, label_ids, predictions)


def majority_baseline(task: Task | str, label_ids) -> dict | None:
    """What a classification task's scores are compared with: its metrics (and `predictor`, what
    it predicts) of always predicting the class most frequent in `label_ids` (the first on ties),
    the best constant answer on them. None for a regression task (a constant has no correlation).

    Example:
        >>> majority_baseline("RTE", [1, 1, 0])
        {'predictor': 'the majority class, not_entailment, every time', 'accuracy': 0.6666666666666666}
    """
    task = get_task(task) if isinstance(task, str) else task
    if task.is_regression:
        return None
    labels = np.asarray(label_ids, np.int64).reshape(-1)
    majority = int(np.bincount(labels, minlength=task.num_labels).argmax())
    return {"predictor": f"the majority class, {task.labels[majority]}, every time",
            **compute_metrics(task.metrics, labels, np.full_like(labels, majority))}
