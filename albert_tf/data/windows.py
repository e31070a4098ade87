"""Windows over a run of pieces longer than a record holds, and the window where each piece has
the most context: the release's rule for SQuAD's contexts (run_squad_v1/v2's doc spans), which
token tagging (albert_tf.data.tagging) follows for long sentences.

A window starts `doc_stride` pieces after the previous one (or right after its end, if shorter);
a piece's score in a window is min(pieces left of it, pieces right of it) + 0.01 * the window's
length, and the first window with the highest score wins: the larger of its smaller side, ties to
the longer window.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np

# How a span labeler's logits become an answer, kept in task.json (`ANSWER_RULE`) beside the class:
# the release's (`squad_utils.write_predictions`: start + end logit, the n-best list) for a model of
# ours, transformers' question-answering pipeline's (a softmax over each window's context and
# [CLS], the span of the highest start x end probability aligned to whole words, the null answer
# from [CLS]) for a model trained in transformers. `albert_tf.serving.question_answering` answers by it.
ANSWER_RULE = "answer_rule"
RELEASE_ANSWERS, HF_ANSWERS = "release", "huggingface"
ANSWER_RULES = (RELEASE_ANSWERS, HF_ANSWERS)


def window_spans(num_pieces: int, max_pieces: int, doc_stride: int) -> list[tuple[int, int]]:
    """`(start, length)` of each window over `num_pieces` pieces (one empty window for none)."""
    spans, start = [], 0
    while True:
        length = min(num_pieces - start, max_pieces)
        spans.append((start, length))
        if start + length >= num_pieces:
            return spans
        start += min(length, doc_stride)


def max_context_windows(spans: Sequence[tuple[int, int]], num_pieces: int) -> np.ndarray:
    """For each piece, the window where it has the most context: its score in a window is
    min(pieces left of it, pieces right of it) + 0.01 * the window's length; the first best wins."""
    best = np.full(num_pieces, -1, np.int32)
    best_score = np.full(num_pieces, -np.inf)
    positions = np.arange(num_pieces)
    for index, (start, length) in enumerate(spans):
        inside = (positions >= start) & (positions < start + length)
        score = np.minimum(positions - start, start + length - 1 - positions) + 0.01 * length
        better = inside & (score > best_score)
        best[better] = index
        best_score[better] = score[better]
    return best


@dataclasses.dataclass(frozen=True)
class FeatureSettings:
    """How a question and its context are cut into records (the release's SQuAD defaults): the
    question's first `max_query_length` pieces, then windows of the context `doc_stride` pieces
    apart, `max_seq_length` positions a record. The offline features (finetune.squad.features) and
    the in-graph ones (albert_tf.serving.question_answering) cut by it."""

    max_seq_length: int = 384
    doc_stride: int = 128
    max_query_length: int = 64

    def __post_init__(self):
        for name in ("max_seq_length", "doc_stride", "max_query_length"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.max_seq_length - self.max_query_length - 3 < 1:
            raise ValueError(
                f"max_seq_length={self.max_seq_length} leaves no room for the context after a "
                f"question of max_query_length={self.max_query_length} pieces and 3 special tokens"
            )
