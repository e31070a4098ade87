"""SQuAD examples -> model features, windowed as the release builds them.

Each example becomes one record per window of its context: `[CLS] question [SEP] window [SEP]`,
padded to `max_seq_length`. The question keeps its first `max_query_length` pieces; the context's
pieces are cut into windows of at most `max_seq_length - len(question) - 3` pieces that start
`doc_stride` pieces apart (the last window ends at the last piece). A piece seen by several
windows is scored, for answers starting there, only in the window where it has the most context
(the larger of its smaller side, ties to the longer window): `max_context` marks it.

Where the release aligns pieces with the context by a longest-common-subsequence search, pieces
here carry the character span they came from (`AlbertTokenizer.encode_with_offsets`), so the gold
answer is mapped onto pieces exactly. Predicted pieces are mapped back onto the context as the
release maps them (`release_answer_spans`), which differs at the edges: a lone "▁" that opens a
context stands for its first character, and a character SentencePiece drops (U+200E, a byte-order
mark) before a space is left out of the next piece, so the n-best lists are the release's.

A record's features (numpy arrays of fixed shape; T = max_seq_length):
    input_ids, input_mask, segment_ids [T]: the encoder's inputs.
    p_mask [T]: 1 where no answer can start or end (question, [SEP], padding), 0 on the
        window's pieces and on [CLS] (the v2.0 head's "no answer" position), as the release has it.
    start_positions, end_positions: the gold span's pieces in the record; 0 ([CLS]) when the
        example has no answer or the answer is not inside this window.
    is_impossible: 1 when the example is unanswerable or its answer lies outside the window.
    example_index, window_index: which example and which of its windows.
    char_starts, char_ends [T]: the character span in the context of each window piece as the
        release maps it for answers (`release_answer_spans`), -1 elsewhere (post-processing cuts
        answers from the context with them).
    max_context [T]: 1 on the pieces that have their maximum context in this window.
"""

from __future__ import annotations

import dataclasses
from typing import Iterable, Iterator, Sequence

import unicodedata

import numpy as np

from albert_tf.data.windows import FeatureSettings, max_context_windows, window_spans
from albert_tf.tokenizers.tokenizer import SPIECE_UNDERLINE
from finetune.squad.readers import Answer, Example

SEQUENCE_FEATURES = ("input_ids", "input_mask", "segment_ids", "p_mask", "char_starts", "char_ends", "max_context")
SCALAR_FEATURES = ("start_positions", "end_positions", "is_impossible", "example_index", "window_index")


@dataclasses.dataclass(frozen=True)
class ContextPieces:
    """A context's piece ids, each piece's character span `[starts[i], ends[i])`, and the span that
    answers cut from it (`[answer_starts[i], answer_ends[i])`, the release's, see `release_answer_spans`)."""

    ids: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    answer_starts: np.ndarray
    answer_ends: np.ndarray


def tokenize_context(tokenizer, context: str) -> ContextPieces:
    ids, starts, ends = tokenizer.encode_with_offsets(context)
    pieces = tokenizer.tokenize(context)  # the text of unknown pieces, not "<unk>", as the release
    answer_starts, answer_ends = release_answer_spans(context, pieces, starts, ends, tokenizer.do_lower_case)
    as_array = lambda values: np.asarray(values, np.int32)  # noqa: E731
    return ContextPieces(*map(as_array, (ids, starts, ends, answer_starts, answer_ends)))


def _release_character(char: str, lower: bool) -> str:
    """What the release compares a context character as (its preprocess_text of one character)."""
    if not char.isascii():
        char = "".join(c for c in unicodedata.normalize("NFKD", char) if not unicodedata.combining(c))
    return char.lower() if lower else char


def _convert_index(index: list, position: int, count: int | None = None, is_start: bool = True) -> int:
    """The release's `_convert_index` (squad_utils.py): a piece character with no context character
    takes the nearest ones' neighbour."""
    if index[position] is not None:
        return index[position]
    rear = position
    while rear < len(index) - 1 and index[rear] is None:
        rear += 1
    front = position
    while front > 0 and index[front] is None:
        front -= 1
    if index[front] is None:
        if index[rear] >= 1:
            return 0 if is_start else index[rear] - 1
        return index[rear]
    if index[rear] is None:
        if count is not None and index[front] < count - 1:
            return index[front] + 1 if is_start else count - 1
        return index[front]
    if is_start:
        return index[front] + 1 if index[rear] > index[front] + 1 else index[rear]
    return index[rear] - 1 if index[rear] > index[front] + 1 else index[front]


def release_answer_spans(context: str, pieces, starts, ends, lower: bool = True) -> tuple[list[int], list[int]]:
    """Each piece's character span in `context` as the release maps predicted pieces back.

    The release lays the pieces end to end ("▁" read as a space), matches their characters with the
    context's (a longest common subsequence, characters compared after its normalisation) and
    gives a piece the context characters matched by its first and last characters, or, where one
    has no match, the neighbour its `_convert_index` picks; the answer is the text between, with
    whitespace stripped. Here the pieces' exact spans (`starts`, `ends`) say which context
    characters each piece came from, so each piece's characters are matched within its own span
    (its "▁" with the character just before it), which is the alignment the release's search finds,
    and `_convert_index` does the rest. Differences from the exact spans: a lone "▁" opening the
    context stands for the first character, and a character SentencePiece dropped before a space
    (U+200E, a byte-order mark) stays out of the next piece. Returns starts and exclusive ends.
    """
    to_context: list[int | None] = []
    first, last = [], []
    for piece, start, end in zip(pieces, starts, ends):
        text = piece.replace(SPIECE_UNDERLINE, " ")
        first.append(len(to_context))
        at = start - 1 if text.startswith(" ") else start
        for char in text:
            match = next((k for k in range(max(at, 0), end) if _release_character(context[k], lower) == char), None)
            if match is not None:
                at = match + 1
            to_context.append(match)
        last.append(len(to_context) - 1)
    if not to_context or all(i is None for i in to_context):
        return list(starts), list(ends)
    count = len(context)
    answer_starts = [_convert_index(to_context, i, count, is_start=True) for i in first]
    answer_ends = [_convert_index(to_context, i, count, is_start=False) + 1 for i in last]
    return answer_starts, answer_ends


def answer_piece_span(pieces: ContextPieces, answer: Answer) -> tuple[int, int] | None:
    """The first and last piece of the answer's characters; None if no piece covers any of them.

    The first piece is the first that ends after the answer's start, the last is the last that
    starts before its end (pieces that cover nothing, a lone "▁", are never chosen).
    """
    covering = (pieces.ends > answer.start) & (pieces.starts < answer.end) & (pieces.ends > pieces.starts)
    (indices,) = np.nonzero(covering)
    if indices.size == 0:
        return None
    return int(indices[0]), int(indices[-1])


def example_records(
    example: Example,
    example_index: int,
    question_ids: Sequence[int],
    pieces: ContextPieces,
    settings: FeatureSettings,
    cls_id: int,
    sep_id: int,
) -> list[dict[str, np.ndarray]]:
    """The records of one example (see the module docstring for their features)."""
    length = settings.max_seq_length
    question_ids = list(question_ids)[: settings.max_query_length]
    offset = len(question_ids) + 2  # the first window piece's position
    max_pieces = length - len(question_ids) - 3
    num_pieces = len(pieces.ids)
    spans = window_spans(num_pieces, max_pieces, settings.doc_stride)
    best_window = max_context_windows(spans, num_pieces)
    answer = example.train_answer
    gold = answer_piece_span(pieces, answer) if answer is not None else None

    records = []
    for window_index, (start, count) in enumerate(spans):
        used = offset + count + 1
        input_ids = np.zeros(length, np.int32)
        input_ids[0] = cls_id
        input_ids[1 : offset - 1] = question_ids
        input_ids[offset - 1] = sep_id
        input_ids[offset : offset + count] = pieces.ids[start : start + count]
        input_ids[offset + count] = sep_id
        input_mask = np.zeros(length, np.int32)
        input_mask[:used] = 1
        segment_ids = np.zeros(length, np.int32)
        segment_ids[offset:used] = 1
        p_mask = np.ones(length, np.int32)
        p_mask[0] = 0
        p_mask[offset : offset + count] = 0
        char_starts = np.full(length, -1, np.int32)
        char_ends = np.full(length, -1, np.int32)
        char_starts[offset : offset + count] = pieces.answer_starts[start : start + count]
        char_ends[offset : offset + count] = pieces.answer_ends[start : start + count]
        max_context = np.zeros(length, np.int32)
        max_context[offset : offset + count] = best_window[start : start + count] == window_index
        if gold is not None and start <= gold[0] and gold[1] < start + count:
            start_position, end_position, impossible = gold[0] - start + offset, gold[1] - start + offset, 0
        else:
            start_position, end_position, impossible = 0, 0, 1
        records.append(
            {
                "input_ids": input_ids,
                "input_mask": input_mask,
                "segment_ids": segment_ids,
                "p_mask": p_mask,
                "char_starts": char_starts,
                "char_ends": char_ends,
                "max_context": max_context,
                "start_positions": np.int32(start_position),
                "end_positions": np.int32(end_position),
                "is_impossible": np.int32(impossible),
                "example_index": np.int32(example_index),
                "window_index": np.int32(window_index),
            }
        )
    return records


def convert_examples(
    examples: Iterable[Example],
    tokenizer,
    settings: FeatureSettings = FeatureSettings(),
) -> Iterator[dict[str, np.ndarray]]:
    """The records of every example, in order (a context shared by questions is tokenized once)."""
    context_cache: dict[str, ContextPieces] = {}
    examples = iter(examples)
    example_index = 0
    while True:
        # Questions are encoded a chunk at a time: one SentencePiece call instead of hundreds.
        chunk = [e for _, e in zip(range(256), examples)]
        if not chunk:
            return
        question_ids = tokenizer.encode_batch([e.question for e in chunk], num_threads=1)
        for example, ids in zip(chunk, question_ids):
            pieces = context_cache.get(example.context)
            if pieces is None:
                if len(context_cache) > 64:
                    context_cache.clear()
                pieces = context_cache[example.context] = tokenize_context(tokenizer, example.context)
            yield from example_records(
                example, example_index, ids, pieces, settings, tokenizer.cls_id, tokenizer.sep_id
            )
            example_index += 1


def stack_records(records: Iterable[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Records as one dict of arrays with a leading record axis."""
    records = list(records)
    names = SEQUENCE_FEATURES + SCALAR_FEATURES
    return {name: np.stack([r[name] for r in records]) for name in names}
