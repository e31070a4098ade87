"""RACE's scores as the release reports them: the share of questions whose most probable option is
the answer, over all questions and within each level (the paper's RACE, Middle and High columns),
and the mean cross-entropy of the answer. Every question weighs the same, so the overall accuracy
is the question-weighted mean of the levels', not the mean of the two."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from finetune.race.readers import LETTERS, LEVELS


def race_metrics(levels: Sequence[str], labels: Sequence[int], probabilities) -> dict[str, float]:
    """Scores of one evaluation.

    Args:
        levels: each question's level ("middle", "high", or "" when unknown).
        labels: each question's answer index (0 for A ... 3 for D).
        probabilities: [N, 4] the options' probabilities (or any scores whose argmax is the
            prediction; the loss needs probabilities).

    Returns `accuracy`, `loss` and `num_questions`, then `accuracy_<level>` and `num_<level>` for
    each level present. Ties go to the first option, as `argmax` does in the release.
    """
    probabilities = np.asarray(probabilities, np.float64)
    labels = np.asarray(labels, np.int64)
    levels = np.asarray(levels, dtype=object)
    if probabilities.ndim != 2 or probabilities.shape[1] != len(LETTERS):
        raise ValueError(f"probabilities must be [N, {len(LETTERS)}], got shape {list(probabilities.shape)}")
    if not len(levels) == len(labels) == len(probabilities):
        raise ValueError(f"{len(levels)} levels, {len(labels)} labels and {len(probabilities)} rows of "
                         "probabilities: they must be as many")
    if len(labels) == 0:
        raise ValueError("no questions to score")
    hits = probabilities.argmax(axis=1) == labels
    chosen = probabilities[np.arange(len(labels)), labels]
    result = {
        "accuracy": float(hits.mean()),
        "loss": float(-np.log(np.maximum(chosen, 1e-30)).mean()),
        "num_questions": int(len(labels)),
    }
    for level in LEVELS:
        at_level = levels == level
        if at_level.any():
            result[f"accuracy_{level}"] = float(hits[at_level].mean())
            result[f"num_{level}"] = int(at_level.sum())
    return result


def majority_letter_accuracy(train_labels: Sequence[int], eval_labels: Sequence[int]) -> tuple[str, float]:
    """The baseline that always answers the letter most frequent in training (the first on ties):
    that letter and its accuracy on `eval_labels`."""
    counts = np.bincount(np.asarray(train_labels, np.int64), minlength=len(LETTERS))
    letter = int(counts.argmax())
    return LETTERS[letter], float(np.mean(np.asarray(eval_labels) == letter))


def majority_letter_baseline(labels: Sequence[int]) -> dict:
    """What an evaluation's accuracy is compared with: the `accuracy` (and `predictor`) of always
    answering the letter most frequent among `labels` (the first on ties), the best constant
    answer on them."""
    counts = np.bincount(np.asarray(labels, np.int64), minlength=len(LETTERS))
    letter = int(counts.argmax())
    return {"predictor": f"the majority letter, {LETTERS[letter]}, every time",
            "accuracy": float(counts[letter] / counts.sum())}
