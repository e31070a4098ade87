"""SQuAD's official metrics, as the evaluate-v1.1.py and evaluate-v2.0.py scripts define them.

Exact match (EM) and F1 compare an answer with each gold answer after `normalize_answer` (lower
case, punctuation and the articles a/an/the removed, whitespace collapsed) and keep the best.
The two scripts differ in three places, kept here:

- v1.1 counts a question without a prediction as 0 in the total; v2.0 prints it as missing and
  then fails, which `evaluate_v2` does as an error naming the questions.
- v1.1's F1 is 0 when no token is shared, even for two empty answers; v2.0's F1 of an empty answer
  is 1 if the other is empty too, else 0, and its gold answers that normalise to "" are dropped
  (an unanswerable question's only gold answer is "").
- v2.0 applies a no-answer threshold to the no-answer probabilities (`na_probs`), splits the
  scores into HasAns/NoAns and, given the probabilities, finds the thresholds that maximise EM and
  F1 (best_exact, best_f1 and their thresholds).
"""

from __future__ import annotations

import collections
import re
import string
from typing import Iterable, Mapping

from albert_tf.utils.errors import UserError

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = frozenset(string.punctuation)


def normalize_answer(text: str) -> str:
    """Lower case, drop punctuation, drop the articles a/an/the, collapse whitespace."""
    text = text.lower()
    text = "".join(c for c in text if c not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def _overlap_f1(prediction_tokens: list[str], gold_tokens: list[str]) -> float:
    common = collections.Counter(prediction_tokens) & collections.Counter(gold_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0.0
    precision = num_same / len(prediction_tokens)
    recall = num_same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def exact_match_score(prediction: str, gold: str) -> int:
    """1 if the two answers are equal after `normalize_answer`, else 0 (both scripts)."""
    return int(normalize_answer(prediction) == normalize_answer(gold))


def f1_score_v1(prediction: str, gold: str) -> float:
    """evaluate-v1.1's token F1: 0 when no normalised token is shared (even both empty)."""
    return _overlap_f1(normalize_answer(prediction).split(), normalize_answer(gold).split())


def f1_score_v2(prediction: str, gold: str) -> float:
    """evaluate-v2.0's token F1: an empty answer scores 1 against an empty one, else 0."""
    prediction_tokens = normalize_answer(prediction).split() if prediction else []
    gold_tokens = normalize_answer(gold).split() if gold else []
    if not prediction_tokens or not gold_tokens:
        return float(prediction_tokens == gold_tokens)
    return _overlap_f1(prediction_tokens, gold_tokens)


def _questions(dataset: Iterable[Mapping]) -> Iterable[Mapping]:
    for article in dataset:
        for paragraph in article["paragraphs"]:
            yield from paragraph["qas"]


def evaluate_v1(dataset: Iterable[Mapping], predictions: Mapping[str, str]) -> dict[str, float]:
    """evaluate-v1.1: `{"exact_match", "f1"}` in percent over every question of `dataset`.

    `dataset` is the JSON's "data" list; a question without a prediction scores 0.
    """
    exact = f1 = 0.0
    total = 0
    for qa in _questions(dataset):
        total += 1
        if qa["id"] not in predictions:
            continue
        prediction = predictions[qa["id"]]
        golds = [answer["text"] for answer in qa["answers"]]
        exact += max(exact_match_score(prediction, gold) for gold in golds)
        f1 += max(f1_score_v1(prediction, gold) for gold in golds)
    return {"exact_match": 100.0 * exact / total, "f1": 100.0 * f1 / total}


def raw_scores_v2(dataset: Iterable[Mapping], predictions: Mapping[str, str]) -> tuple[dict, dict, dict]:
    """Per question: EM, F1 (before any threshold) and whether it has an answer.

    Questions without a prediction are left out of the scores (as evaluate-v2.0 does).
    """
    exact, f1, has_answer = {}, {}, {}
    for qa in _questions(dataset):
        qid = qa["id"]
        has_answer[qid] = bool(qa["answers"])
        golds = [a["text"] for a in qa["answers"] if normalize_answer(a["text"])] or [""]
        if qid not in predictions:
            continue
        prediction = predictions[qid]
        exact[qid] = max(exact_match_score(prediction, gold) for gold in golds)
        f1[qid] = max(f1_score_v2(prediction, gold) for gold in golds)
    return exact, f1, has_answer


def apply_no_answer_threshold(scores, na_probs, has_answer, threshold: float) -> dict[str, float]:
    """A question whose no-answer probability exceeds `threshold` scores 1 if unanswerable, else 0."""
    return {
        qid: float(not has_answer[qid]) if na_probs[qid] > threshold else score
        for qid, score in scores.items()
    }


def _summary(exact, f1, qids) -> dict[str, float]:
    total = len(qids)
    return {
        "exact": 100.0 * sum(exact[q] for q in qids) / total,
        "f1": 100.0 * sum(f1[q] for q in qids) / total,
        "total": total,
    }


def find_best_threshold(predictions, scores, na_probs, has_answer) -> tuple[float, float]:
    """The score (percent) and threshold of the best no-answer cut, as evaluate-v2.0 finds them.

    Starting from "every question unanswered" (the unanswerable ones right), the questions are
    taken in increasing no-answer probability and each one's answer is let through in turn.
    """
    score = best = sum(1 for q in has_answer if not has_answer[q])
    best_threshold = 0.0
    for qid in sorted(na_probs, key=lambda q: na_probs[q]):
        if qid not in scores:
            continue
        if has_answer[qid]:
            score += scores[qid]
        elif predictions[qid]:
            score -= 1
        if score > best:
            best, best_threshold = score, na_probs[qid]
    return 100.0 * best / len(scores), best_threshold


def evaluate_v2(
    dataset: Iterable[Mapping],
    predictions: Mapping[str, str],
    na_probs: Mapping[str, float] | None = None,
    na_prob_thresh: float = 1.0,
) -> dict[str, float]:
    """evaluate-v2.0: exact, f1, total, HasAns_* and NoAns_* and, given `na_probs`, best_*.

    Args:
        dataset: the JSON's "data" list.
        predictions: question id -> answer text ("" for "no answer").
        na_probs: question id -> no-answer probability (the script's --na-prob-file); without
            it every probability is 0 and no best thresholds are searched.
        na_prob_thresh: predict "no answer" above this probability (the script's default 1.0).

    Raises:
        UserError: a question of `dataset` has no prediction; the message names them. The
            official script prints "Missing prediction for <id>" and then fails (a KeyError in its
            HasAns/NoAns sums): a score over the other questions is not evaluate-v2.0's.
    """
    dataset = list(dataset)
    exact_raw, f1_raw, has_answer = raw_scores_v2(dataset, predictions)
    missing = [qid for qid in has_answer if qid not in exact_raw]
    if missing:
        shown = ", ".join(missing[:10]) + (f" and {len(missing) - 10} more" if len(missing) > 10 else "")
        raise UserError(f"{len(missing)} of {len(has_answer)} questions have no prediction (evaluate-v2.0 "
                        f"scores none then): {shown}")
    searched = na_probs is not None
    if na_probs is None:
        na_probs = {qid: 0.0 for qid in predictions}
    exact = apply_no_answer_threshold(exact_raw, na_probs, has_answer, na_prob_thresh)
    f1 = apply_no_answer_threshold(f1_raw, na_probs, has_answer, na_prob_thresh)
    result = _summary(exact, f1, list(exact))
    for prefix, wanted in (("HasAns", True), ("NoAns", False)):
        qids = [q for q, has in has_answer.items() if has == wanted and q in exact]
        if qids:
            for key, value in _summary(exact, f1, qids).items():
                result[f"{prefix}_{key}"] = value
    if searched:
        result["best_exact"], result["best_exact_thresh"] = find_best_threshold(predictions, exact_raw, na_probs, has_answer)
        result["best_f1"], result["best_f1_thresh"] = find_best_threshold(predictions, f1_raw, na_probs, has_answer)
    return result


def no_answer_baseline(dataset: Iterable[Mapping], version_2: bool) -> dict:
    """What the scores are compared with: the official EM and F1 (and `predictor`) of answering
    nothing ("") to every question of `dataset`: 0 on v1.1, the share of unanswerable questions on
    v2.0."""
    dataset = list(dataset)
    nothing = {qa["id"]: "" for qa in _questions(dataset)}
    if version_2:
        scores = evaluate_v2(dataset, nothing)
        return {"predictor": "no answer to any question", "exact": scores["exact"], "f1": scores["f1"]}
    scores = evaluate_v1(dataset, nothing)
    return {"predictor": "no answer to any question", "exact_match": scores["exact_match"], "f1": scores["f1"]}
