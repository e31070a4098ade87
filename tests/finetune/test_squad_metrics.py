"""SQuAD's official metrics on hand-made predictions whose scores were worked out by hand."""

import pytest

from albert_tf.utils.errors import UserError
from finetune.squad import metrics


def _dataset(*questions):
    return [{"title": "t", "paragraphs": [{"context": "c", "qas": list(questions)}]}]


def _qa(qid, *golds):
    return {"id": qid, "question": "?", "answers": [{"text": g, "answer_start": 0} for g in golds]}


@pytest.mark.parametrize(
    "text,expected",
    [
        ("The Eiffel  Tower.", "eiffel tower"),
        ("an Apple, a day", "apple day"),
        ("Theory of the anthem", "theory of anthem"),  # articles only as whole words
        ("U.S.", "us"),
        ("  ", ""),
        ("A", ""),
    ],
)
def test_normalize_answer(text, expected):
    assert metrics.normalize_answer(text) == expected


def test_f1_of_empty_answers_differs_between_the_scripts():
    assert metrics.f1_score_v1("", "") == 0.0
    assert metrics.f1_score_v2("", "") == 1.0
    assert metrics.f1_score_v2("the", "") == 1.0  # normalises to nothing
    assert metrics.f1_score_v2("", "Paris") == 0.0
    assert metrics.f1_score_v1("The Denver Broncos won", "Denver Broncos") == pytest.approx(0.8)
    assert metrics.f1_score_v2("a red dog", "red fox") == pytest.approx(0.5)


def test_evaluate_v1_counts_missing_predictions_as_zero():
    dataset = _dataset(
        _qa("q1", "the Eiffel Tower", "Eiffel Tower."),  # several gold answers: the best counts
        _qa("q2", "Denver Broncos"),
        _qa("q3", "1990s", "in the 1990s"),
        _qa("q4", "nobody answers this"),
        _qa("q5", "U.S."),
    )
    predictions = {"q1": "eiffel tower", "q2": "The Denver Broncos won", "q3": "", "q5": "US"}
    result = metrics.evaluate_v1(dataset, predictions)
    # EM: q1, q5; F1: 1 + 0.8 + 0 + 0 + 1, all over 5 questions (q4 has no prediction).
    assert result == pytest.approx({"exact_match": 40.0, "f1": 56.0})


def test_evaluate_v2_splits_and_thresholds():
    dataset = _dataset(_qa("a", "Paris"), _qa("b", "red fox"), _qa("c"), _qa("d"))
    predictions = {"a": "Paris", "b": "a red dog", "c": "", "d": "London"}
    na_probs = {"a": 0.1, "b": 0.2, "c": 0.9, "d": 0.3}

    plain = metrics.evaluate_v2(dataset, predictions)
    assert plain == pytest.approx(
        {
            "exact": 50.0, "f1": 62.5, "total": 4,
            "HasAns_exact": 50.0, "HasAns_f1": 75.0, "HasAns_total": 2,
            "NoAns_exact": 50.0, "NoAns_f1": 50.0, "NoAns_total": 2,
        }
    )
    # Above 0.25, d (0.3) and c (0.9) are called unanswerable: both right.
    result = metrics.evaluate_v2(dataset, predictions, na_probs, na_prob_thresh=0.25)
    assert result["exact"] == pytest.approx(75.0)
    assert result["f1"] == pytest.approx(87.5)
    assert result["NoAns_exact"] == pytest.approx(100.0)
    # Best cut: from 2 (both unanswerable right), a lifts EM to 3 at 0.1; F1 also takes b's 0.5.
    assert result["best_exact"] == pytest.approx(75.0)
    assert result["best_exact_thresh"] == pytest.approx(0.1)
    assert result["best_f1"] == pytest.approx(87.5)
    assert result["best_f1_thresh"] == pytest.approx(0.2)


def test_best_threshold_stays_zero_when_no_answer_is_always_best():
    dataset = _dataset(_qa("a", "Paris"), _qa("c"))
    result = metrics.evaluate_v2(dataset, {"a": "Rome", "c": "Lyon"}, {"a": 0.4, "c": 0.7})
    # Answering a gains nothing, answering c loses: the best is to answer nothing.
    assert result["best_exact"] == pytest.approx(50.0)
    assert result["best_exact_thresh"] == 0.0


def test_evaluate_v2_refuses_missing_predictions_naming_them():
    # The official script prints "Missing prediction for e" and then fails (KeyError in HasAns).
    dataset = _dataset(_qa("a", "Paris"), _qa("e", "absent"), _qa("f"))
    with pytest.raises(UserError, match=r"^2 of 3 questions have no prediction \(evaluate-v2.0 scores none then\): e, f$"):
        metrics.evaluate_v2(dataset, {"a": "Paris"})
    many = _dataset(*[_qa(f"q{i}", "x") for i in range(13)])
    with pytest.raises(UserError, match=r"13 of 13 .*: q0, q1, q2, q3, q4, q5, q6, q7, q8, q9 and 3 more$"):
        metrics.evaluate_v2(many, {})


def test_the_no_answer_baseline_scores_the_unanswerable_share():
    dataset = _dataset(_qa("a", "Paris"), _qa("b"), _qa("c"), _qa("d", "Lyon"))
    assert metrics.no_answer_baseline(dataset, version_2=True) == {
        "predictor": "no answer to any question", "exact": 50.0, "f1": 50.0}
    assert metrics.no_answer_baseline(_dataset(_qa("a", "Paris")), version_2=False) == {
        "predictor": "no answer to any question", "exact_match": 0.0, "f1": 0.0}
