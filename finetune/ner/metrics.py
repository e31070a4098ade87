"""Entity-level precision, recall and F1, as CoNLL's conlleval and seqeval count them, and token
accuracy.

An entity is right only when its type and its exact words are (`albert_tf.data.tagging.entities`
reads them from BIO tags). Precision is right entities over predicted ones, recall over gold ones,
F1 their harmonic mean, each 0 when its denominator is; per type and overall (micro). seqeval's
`classification_report` (default mode) gives the same numbers (tests/finetune/test_ner_metrics.py).
`all_outside_baseline` gives what a tagger that finds no entity scores: F1 0, and a token accuracy
that is the share of words outside any entity (high, and no sign of learning).
"""

from __future__ import annotations

from collections import Counter
from typing import Sequence

from albert_tf.data.tagging import OUTSIDE, entities


def _ratio(numerator: int, denominator: int) -> float:
    return numerator / denominator if denominator else 0.0


def _scores(right: int, predicted: int, gold: int) -> dict:
    precision, recall = _ratio(right, predicted), _ratio(right, gold)
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1, "support": gold}


def ner_metrics(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]]) -> dict:
    """`precision`, `recall`, `f1` (overall, micro), `accuracy` (words whose tag is right),
    `entities` and `predicted_entities` (counts), and `per_type`: {type: {precision, recall, f1,
    support}} over the sentences' BIO tags."""
    if len(gold) != len(predicted):
        raise ValueError(f"{len(gold)} gold sentences and {len(predicted)} predicted ones")
    right, gold_count, predicted_count = Counter(), Counter(), Counter()
    words = hits = 0
    for index, (truth, guess) in enumerate(zip(gold, predicted)):
        if len(truth) != len(guess):
            raise ValueError(f"sentence {index}: {len(truth)} gold tags and {len(guess)} predicted ones")
        words += len(truth)
        hits += sum(a == b for a, b in zip(truth, guess))
        true_entities, guessed = set(entities(truth)), set(entities(guess))
        gold_count.update(kind for kind, _, _ in true_entities)
        predicted_count.update(kind for kind, _, _ in guessed)
        right.update(kind for kind, _, _ in true_entities & guessed)
    overall = _scores(sum(right.values()), sum(predicted_count.values()), sum(gold_count.values()))
    return {
        "precision": overall["precision"],
        "recall": overall["recall"],
        "f1": overall["f1"],
        "accuracy": _ratio(hits, words),
        "entities": overall["support"],
        "predicted_entities": sum(predicted_count.values()),
        "per_type": {kind: _scores(right[kind], predicted_count[kind], gold_count[kind])
                     for kind in sorted(set(gold_count) | set(predicted_count))},
    }


def all_outside_baseline(gold: Sequence[Sequence[str]]) -> dict:
    """What a tagger's scores are compared with: `f1` and `accuracy` (and `predictor`) of tagging
    every word O, no entity anywhere."""
    scores = ner_metrics(gold, [[OUTSIDE] * len(tags) for tags in gold])
    return {"predictor": f"{OUTSIDE} for every word (no entity)", "f1": scores["f1"], "accuracy": scores["accuracy"]}
