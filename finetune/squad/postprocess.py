"""Model outputs of every record -> one answer per question, cut from the original context.

As the release does it (`squad_utils.write_predictions_v1/v2`):

- A candidate span starts and ends on pieces of a record's window, starts on a piece that has its
  maximum context in that window, ends at or after its start and is at most `max_answer_length`
  pieces long.
- v1.1: the `n_best_size` highest start and end logits of each record are paired; a span's score
  is start logit + end logit.
- v2.0: the head's beam gives `start_n_top` starts and, for each, `end_n_top` ends with their log
  probabilities; a span's score is their sum. The question's null odds are the smallest
  answer-class logit over its records; with a threshold, a question whose null odds reach it is
  answered "" (no answer).
- Candidates are sorted by score; the first `n_best_size` distinct texts form the n-best list,
  whose probabilities are a softmax of the scores. The answer text is the context's characters
  from the first piece's start to the last piece's end, stripped of surrounding whitespace.

A span labeler trained in transformers (`hf_heads.answer_rule` "huggingface") answers by its
question-answering pipeline's rule instead, `postprocess_hf`: the span scores and the words are the
SavedModel's own functions (`albert_tf.serving.question_answering.hf_span_scores`, `word_bounds`),
so the offline answers are the served ones.
"""

from __future__ import annotations

import collections
import dataclasses
import math
from typing import Mapping, Sequence

import numpy as np

from finetune.squad.readers import Example


@dataclasses.dataclass(frozen=True)
class Candidate:
    """One answer of the n-best list."""

    text: str
    start: int  # character offsets in the context, [start, end)
    end: int
    start_log_prob: float
    end_log_prob: float

    @property
    def score(self) -> float:
        return self.start_log_prob + self.end_log_prob


@dataclasses.dataclass(frozen=True)
class Predictions:
    """What post-processing gives for a set of questions (keyed by question id)."""

    answers: dict[str, str]
    nbest: dict[str, list[dict]]
    null_odds: dict[str, float] | None = None  # v2.0 only

    def best(self, qas_id: str) -> dict:
        return self.nbest[qas_id][0]


def _span_text(context: str, start: int, end: int) -> tuple[str, int, int]:
    text = context[start:end]
    stripped = text.lstrip()
    start += len(text) - len(stripped)
    text = stripped.rstrip()
    return text, start, start + len(text)


def _softmax(scores: Sequence[float]) -> list[float]:
    if not scores:
        return []
    top = max(scores)
    exps = [math.exp(s - top) for s in scores]
    total = sum(exps)
    return [e / total for e in exps]


def _valid(record: Mapping[str, np.ndarray], starts: np.ndarray, ends: np.ndarray, max_answer_length: int) -> np.ndarray:
    """Which (start, end) position pairs are answer spans of this record's window."""
    in_window = record["char_starts"] >= 0
    return (
        in_window[starts]
        & in_window[ends]
        & (record["max_context"][starts] == 1)
        & (ends >= starts)
        & (ends - starts + 1 <= max_answer_length)
    )


def _nbest(example: Example, prelim: list, records, n_best_size: int, empty: Candidate) -> list[Candidate]:
    prelim.sort(key=lambda item: item[0], reverse=True)
    seen = set()
    nbest = []
    for _, record_number, start, end, start_score, end_score in prelim:
        if len(nbest) >= n_best_size:
            break
        record = records[record_number]
        text, char_start, char_end = _span_text(
            example.context, int(record["char_starts"][start]), int(record["char_ends"][end])
        )
        if text in seen:
            continue
        seen.add(text)
        nbest.append(Candidate(text, char_start, char_end, float(start_score), float(end_score)))
    return nbest or [empty]


def _nbest_json(nbest: list[Candidate]) -> list[dict]:
    probabilities = _softmax([c.score for c in nbest])
    return [
        {
            "text": c.text,
            "probability": p,
            "start_log_prob": c.start_log_prob,
            "end_log_prob": c.end_log_prob,
            "char_start": c.start,
            "char_end": c.end,
        }
        for c, p in zip(nbest, probabilities)
    ]


def _records_by_example(records: Mapping[str, np.ndarray]) -> dict[int, list[int]]:
    by_example = collections.defaultdict(list)
    for number, example_index in enumerate(records["example_index"]):
        by_example[int(example_index)].append(number)
    return by_example


def _record(records, number) -> dict[str, np.ndarray]:
    return {name: records[name][number] for name in ("char_starts", "char_ends", "max_context")}


def postprocess_v1(
    examples: Sequence[Example],
    records: Mapping[str, np.ndarray],
    start_logits: np.ndarray,
    end_logits: np.ndarray,
    n_best_size: int = 20,
    max_answer_length: int = 30,
) -> Predictions:
    """SQuAD v1.1 answers from the span head's logits [num_records, T] (see the module docstring).

    `records` holds at least `example_index`, `char_starts`, `char_ends` and `max_context` of
    every record, in the order of the logits.
    """
    by_example = _records_by_example(records)
    answers, nbest_json = {}, {}
    for example_index, example in enumerate(examples):
        prelim, record_list = [], {}
        for number in by_example.get(example_index, []):
            record = record_list[number] = _record(records, number)
            starts_logit, ends_logit = start_logits[number], end_logits[number]
            # The release sorts all positions by logit (a stable sort: ties keep position order).
            top_starts = np.argsort(-starts_logit, kind="stable")[:n_best_size]
            top_ends = np.argsort(-ends_logit, kind="stable")[:n_best_size]
            starts, ends = np.meshgrid(top_starts, top_ends, indexing="ij")
            starts, ends = starts.ravel(), ends.ravel()
            keep = _valid(record, starts, ends, max_answer_length)
            for start, end in zip(starts[keep], ends[keep]):
                s, e = float(starts_logit[start]), float(ends_logit[end])
                prelim.append((s + e, number, start, end, s, e))
        nbest = _nbest(example, prelim, record_list, n_best_size, Candidate("empty", 0, 0, 0.0, 0.0))
        nbest_json[example.qas_id] = _nbest_json(nbest)
        answers[example.qas_id] = nbest[0].text
    return Predictions(answers, nbest_json)


def postprocess_v2(
    examples: Sequence[Example],
    records: Mapping[str, np.ndarray],
    outputs: Mapping[str, np.ndarray],
    n_best_size: int = 20,
    max_answer_length: int = 30,
    null_score_diff_threshold: float | None = None,
) -> Predictions:
    """SQuAD v2.0 answers from the answerability head's beam (see the module docstring).

    `outputs` holds `start_top_log_probs`, `start_top_index` [N, start_n_top],
    `end_top_log_probs`, `end_top_index` [N, start_n_top * end_n_top] and `cls_logits` [N].
    With `null_score_diff_threshold` None every question gets its best span (the release's first
    pass, which then picks the threshold on the evaluation set).
    """
    by_example = _records_by_example(records)
    start_n_top = outputs["start_top_index"].shape[1]
    end_n_top = outputs["end_top_index"].shape[1] // start_n_top
    answers, nbest_json, null_odds = {}, {}, {}
    for example_index, example in enumerate(examples):
        prelim, record_list = [], {}
        score_null = 1e6
        for number in by_example.get(example_index, []):
            record = record_list[number] = _record(records, number)
            score_null = min(score_null, float(outputs["cls_logits"][number]))
            starts = np.repeat(outputs["start_top_index"][number], end_n_top)
            start_scores = np.repeat(outputs["start_top_log_probs"][number], end_n_top)
            ends = outputs["end_top_index"][number]
            end_scores = outputs["end_top_log_probs"][number]
            keep = _valid(record, starts, ends, max_answer_length)
            for start, end, s, e in zip(starts[keep], ends[keep], start_scores[keep], end_scores[keep]):
                prelim.append((float(s) + float(e), number, start, end, float(s), float(e)))
        nbest = _nbest(example, prelim, record_list, n_best_size, Candidate("", 0, 0, -1e6, -1e6))
        nbest_json[example.qas_id] = _nbest_json(nbest)
        null_odds[example.qas_id] = score_null
        if null_score_diff_threshold is None or score_null < null_score_diff_threshold:
            answers[example.qas_id] = nbest[0].text
        else:
            answers[example.qas_id] = ""
    return Predictions(answers, nbest_json, null_odds)


def postprocess_hf(
    examples: Sequence[Example],
    records: Mapping[str, np.ndarray],
    start_logits: np.ndarray,
    end_logits: np.ndarray,
    word_pieces: tuple[np.ndarray, np.ndarray],
    n_best_size: int = 20,
    max_answer_length: int = 15,
    handle_impossible_answer: bool = False,
) -> Predictions:
    """SQuAD v1.1 answers by transformers' question-answering pipeline's rule (the module
    docstring), as the SavedModel of a Hugging Face AlbertForQuestionAnswering answers: each
    window's logits a log-softmax over its context and [CLS], a span's score the sum of its start and
    end log probabilities (its probability their product), the span widened to the whole words it
    touches; with `handle_impossible_answer`, "" where the smallest [CLS] probability of the
    question's windows is higher than its best span's.

    `records` holds besides `postprocess_v1`'s features `input_ids` and `p_mask`; `word_pieces` is
    `question_answering.word_pieces` of the vocabulary.
    """
    from albert_tf.serving.question_answering import hf_span_scores, word_bounds

    first, last = (t.numpy() for t in word_bounds(records["input_ids"], records["char_starts"] >= 0, *word_pieces))
    starts, ends, start_scores, end_scores, null = (t.numpy() for t in hf_span_scores(
        start_logits, end_logits, records["p_mask"], max_answer_length))
    by_example = _records_by_example(records)
    answers, nbest_json = {}, {}
    for example_index, example in enumerate(examples):
        prelim, record_list, null_score = [], {}, math.inf
        for number in by_example.get(example_index, []):
            record = record_list[number] = _record(records, number)
            null_score = min(null_score, float(null[number]))
            keep = _valid(record, starts[number], ends[number], max_answer_length)
            for start, end, s, e in zip(starts[number][keep], ends[number][keep], start_scores[number][keep],
                                        end_scores[number][keep]):
                widened = first[number][start], last[number][end]
                prelim.append((float(s) + float(e), number, *widened, float(s), float(e)))
        nbest = _nbest(example, prelim, record_list, n_best_size, Candidate("", 0, 0, -1e6, -1e6))
        nbest_json[example.qas_id] = _nbest_json(nbest)
        no_answer = handle_impossible_answer and math.exp(null_score) > math.exp(nbest[0].score)
        answers[example.qas_id] = "" if no_answer else nbest[0].text
    return Predictions(answers, nbest_json)
