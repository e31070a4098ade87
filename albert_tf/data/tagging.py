"""Token tagging (named entities) without TensorFlow: words to pieces, windows, records, entities.

Shared by the fine-tuning task (finetune/ner) and the Keras task class
(`albert_tf.tasks.entity_recognizer`), and the Python twin of the SavedModel's graph
(`albert_tf.serving.tagging`):

- A sentence's words are joined by single spaces and tokenized as one text
  (`AlbertTokenizer.encode_with_offsets`), so that training sees the pieces that raw text gives
  when served; a piece belongs to the word its first character is in (a lone "▁" to the word it
  opens). A word is a run of non-whitespace characters (`str.isspace`, the tokenizers' rule).
- The word's tag is learnt and read on its first piece; the other pieces are not scored. A word
  whose characters all vanish in the normalisation (a lone combining mark) has no piece: it is
  tagged "O".
- A sentence of more pieces than fit one record (`max_seq_length` - 2) is cut into windows that
  start `doc_stride` pieces apart, as SQuAD cuts contexts; training scores a word's first piece in
  every window holding it, evaluation and serving read it in the window where it has the most
  context (the release's rule: the larger of its smaller side, ties to the longer window).
- Tags are BIO (IOB2); entities are read from them as CoNLL's conlleval and seqeval read them: a
  chunk starts at B-X, or at I-X after O or another type, and runs over the following I-X.
"""

from __future__ import annotations

import bisect
import re
from typing import Optional, Sequence

import numpy as np

from albert_tf.data.windows import max_context_windows, window_spans

OUTSIDE = "O"
DOC_STRIDE = 128  # pieces between two windows' starts: SQuAD's default, every tagger's
_WORD = re.compile(r"\S+")  # \s is exactly str.isspace for str patterns, as the tokenizers split


def word_spans(text: str) -> list[tuple[int, int]]:
    """The `[start, end)` characters of each word (non-whitespace run) of `text`."""
    return [match.span() for match in _WORD.finditer(text)]


def split_tag(tag: str) -> tuple[str, Optional[str]]:
    """`("B", "PER")` of "B-PER", `("O", None)` of "O"."""
    if tag == OUTSIDE:
        return OUTSIDE, None
    prefix, _, kind = tag.partition("-")
    return prefix, kind


def bio_labels(types: Sequence[str]) -> list[str]:
    """The label list of entity `types`: "O", then B- and I- of each type in the order given."""
    return [OUTSIDE] + [f"{prefix}-{kind}" for kind in types for prefix in ("B", "I")]


def entity_types(labels: Sequence[str]) -> list[str]:
    """The entity types of a BIO label list, in order of first appearance."""
    types: list[str] = []
    for label in labels:
        kind = split_tag(label)[1]
        if kind is not None and kind not in types:
            types.append(kind)
    return types


def check_labels(labels: Sequence[str]) -> list[str]:
    """`labels` as a list, once it is a BIO label list: "O" among them, every other "B-X" or "I-X",
    no repeat; a ValueError naming the first that is not."""
    labels = [str(label) for label in labels]
    if OUTSIDE not in labels:
        raise ValueError(f"the labels {labels} have no {OUTSIDE!r}: a tagger needs the tag of words outside entities")
    seen = set()
    for label in labels:
        prefix, kind = split_tag(label)
        if label != OUTSIDE and (prefix not in ("B", "I") or not kind):
            raise ValueError(f"label {label!r} is not a BIO tag (O, B-<type>, I-<type>)")
        if label in seen:
            raise ValueError(f"label {label!r} is given twice")
        seen.add(label)
    return labels


def entities(tags: Sequence[str]) -> list[tuple[str, int, int]]:
    """The entities of BIO tags as `(type, first word, end word)` (end exclusive), conlleval's
    chunks: B-X starts one, I-X after O or another type starts one, I-X of the same type goes on."""
    found = []
    start, current = None, None
    for index, tag in enumerate(list(tags) + [OUTSIDE]):
        prefix, kind = split_tag(tag)
        if start is not None and (prefix != "I" or kind != current):
            found.append((current, start, index))
            start = None
        if prefix in ("B", "I") and start is None:
            start, current = index, kind
    return found


def word_pieces(tokenizer, words: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """The piece ids of `words` joined by spaces, and the word of each piece (int32 arrays)."""
    text = " ".join(words)
    starts, position = [], 0
    for word in words:
        starts.append(position)
        position += len(word) + 1
    ids, piece_starts, _ = tokenizer.encode_with_offsets(text)
    piece_words = [max(bisect.bisect_right(starts, start) - 1, 0) for start in piece_starts]
    return np.asarray(ids, np.int32), np.asarray(piece_words, np.int32)


def tagging_records(ids: np.ndarray, piece_words: np.ndarray, word_labels: Optional[Sequence[int]],
                    max_seq_length: int, doc_stride: int, cls_id: int, sep_id: int,
                    example_index: int = 0) -> list[dict[str, np.ndarray]]:
    """The records of one sentence, `[CLS] window [SEP]` padded to `max_seq_length`:

    input_ids, input_mask, segment_ids [T]: the encoder's inputs;
    label_ids [T]: the word's label id on each word's first piece (every window holding it), -1
        elsewhere (0 on those pieces when `word_labels` is None: nothing to learn);
    word_ids [T]: the word's index on its first piece in the window where that piece has the most
        context, -1 elsewhere: each word read once;
    example_index, window_index: the sentence and the window.
    """
    if max_seq_length < 3:
        raise ValueError(f"max_seq_length must be at least 3 ([CLS] a piece [SEP]), got {max_seq_length}")
    if doc_stride < 1:
        raise ValueError(f"doc_stride must be positive, got {doc_stride}")
    num_pieces = len(ids)
    first = np.ones(num_pieces, bool)
    first[1:] = piece_words[1:] != piece_words[:-1]
    spans = window_spans(num_pieces, max_seq_length - 2, doc_stride)
    best = max_context_windows(spans, num_pieces)
    records = []
    for window_index, (start, count) in enumerate(spans):
        piece = slice(start, start + count)
        row = slice(1, 1 + count)
        input_ids = np.zeros(max_seq_length, np.int32)
        input_ids[0], input_ids[row], input_ids[1 + count] = cls_id, ids[piece], sep_id
        input_mask = np.zeros(max_seq_length, np.int32)
        input_mask[: count + 2] = 1
        label_ids = np.full(max_seq_length, -1, np.int32)
        labels = (np.zeros(count, np.int32) if word_labels is None
                  else np.asarray(word_labels, np.int32)[piece_words[piece]])
        label_ids[row] = np.where(first[piece], labels, -1)
        word_ids = np.full(max_seq_length, -1, np.int32)
        word_ids[row] = np.where(first[piece] & (best[piece] == window_index), piece_words[piece], -1)
        records.append({
            "input_ids": input_ids, "input_mask": input_mask, "segment_ids": np.zeros(max_seq_length, np.int32),
            "label_ids": label_ids, "word_ids": word_ids,
            "example_index": np.int32(example_index), "window_index": np.int32(window_index),
        })
    return records


def word_tags(num_words: Sequence[int], example_index: np.ndarray, word_ids: np.ndarray,
              tag_ids: np.ndarray, labels: Sequence[str]) -> list[list[str]]:
    """Each sentence's word tags from the records' predictions: `tag_ids` [R, T] read where
    `word_ids` [R, T] >= 0 (each word once), "O" for a word that has no piece."""
    tags = [[OUTSIDE] * n for n in num_words]
    rows, positions = np.nonzero(word_ids >= 0)
    for row, position in zip(rows.tolist(), positions.tolist()):
        tags[int(example_index[row])][int(word_ids[row, position])] = labels[int(tag_ids[row, position])]
    return tags
