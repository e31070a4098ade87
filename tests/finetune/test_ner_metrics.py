"""Entity-level metrics equal seqeval's (the default, conlleval-compatible mode) on real WNUT-17
tags and on random, ill-formed tag sequences (I- after O, type switches inside a chunk), and equal
the counts worked out by hand on a small case."""

import random

import pytest

from finetune.ner import readers
from finetune.ner.metrics import all_outside_baseline, ner_metrics

seqeval = pytest.importorskip("seqeval.metrics")  # the ner and test extras install it


def _seqeval(gold, predicted):
    report = seqeval.classification_report(gold, predicted, output_dict=True, zero_division=0)
    per_type = {k: v for k, v in report.items() if not k.endswith(" avg")}
    return {
        "precision": seqeval.precision_score(gold, predicted, zero_division=0),
        "recall": seqeval.recall_score(gold, predicted, zero_division=0),
        "f1": seqeval.f1_score(gold, predicted, zero_division=0),
        "accuracy": seqeval.accuracy_score(gold, predicted),
        "per_type": {k: {"precision": v["precision"], "recall": v["recall"], "f1": v["f1-score"],
                         "support": int(v["support"])} for k, v in per_type.items()},
    }


def _assert_equal(ours, theirs):
    for name in ("precision", "recall", "f1", "accuracy"):
        assert ours[name] == pytest.approx(theirs[name], abs=1e-12), name
    assert set(ours["per_type"]) == set(theirs["per_type"])
    for kind, scores in theirs["per_type"].items():
        assert ours["per_type"][kind] == pytest.approx(scores, abs=1e-12), kind


def test_by_hand():
    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "O"]]
    guess = [["B-PER", "I-PER", "O", "B-PER"], ["I-ORG", "O"]]  # I-ORG after nothing opens ORG (conlleval)
    result = ner_metrics(gold, guess)
    assert (result["entities"], result["predicted_entities"]) == (3, 3)
    assert result["precision"] == result["recall"] == result["f1"] == pytest.approx(2 / 3)
    assert result["accuracy"] == pytest.approx(4 / 6)
    assert result["per_type"]["LOC"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 1}
    assert result["per_type"]["PER"] == pytest.approx({"precision": 0.5, "recall": 1.0, "f1": 2 / 3, "support": 1})


def test_the_all_outside_baseline_by_hand():
    # No entity found: F1 0, and the words outside any entity (3 of 6) are the token accuracy.
    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["O", "O"]]
    assert all_outside_baseline(gold) == {"predictor": "O for every word (no entity)", "f1": 0.0, "accuracy": 0.5}


def test_equal_to_seqeval_on_wnut17_tags_with_errors(small_data_dir):
    gold = [list(s.tags) for s in readers.read_conll(small_data_dir / "ner" / "wnut17" / "emerging.dev.conll")]
    rng = random.Random(0)
    labels = readers.labels_of(readers.read_conll(small_data_dir / "ner" / "wnut17" / "wnut17train.conll"))
    # A tagger's mistakes: a fifth of the tags replaced by any label.
    guess = [[rng.choice(labels) if rng.random() < 0.2 else tag for tag in tags] for tags in gold]
    _assert_equal(ner_metrics(gold, guess), _seqeval(gold, guess))
    assert ner_metrics(gold, gold)["f1"] == 1.0


def test_equal_to_seqeval_on_random_ill_formed_tags():
    rng = random.Random(1)
    tags = ["O", "O", "O", "B-A", "I-A", "B-B", "I-B", "I-C"]
    gold = [[rng.choice(tags) for _ in range(rng.randint(0, 12))] for _ in range(300)]
    guess = [[rng.choice(tags) for _ in sentence] for sentence in gold]
    _assert_equal(ner_metrics(gold, guess), _seqeval(gold, guess))
