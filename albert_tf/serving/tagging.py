"""A token tagger (named entities) as a SavedModel that takes raw text and returns entities.

Signatures:

- `serve_text`: strings `text` [B] or [B, 1], each of at most `MAX_TEXT_BYTES` bytes (another shape
  or a longer text is refused in one line) -> per text its entities, padded to the most entities of the
  batch (E): `entity_text` [B, E] (the input's characters `[entity_start, entity_end)`, "" past
  the last), `entity_type` [B, E] ("" past the last), `entity_start`, `entity_end` [B, E] int64
  (character, i.e. code point, offsets into the input string; -1 past the last), `entity_score`
  [B, E] float32 (the mean of its words' tag probabilities; 0 past the last) and `num_entities`
  [B]; and its words (runs of non-whitespace), padded to W: `word_text`, `word_start`,
  `word_end`, `tags` (BIO; "" past the last), `tag_probability` [B, W] and `num_words` [B];
- `serving_default`: int32 `input_ids`, `input_mask`, `segment_ids` [B, T] -> `logits` and
  `probabilities` [B, T, num_tags].

Inside the graph the text is tokenized as `albert_tf.data.tagging` tokenizes a sentence's words
joined by spaces (the same pieces, each piece belonging to the word its first character is in),
cut into windows of `max_seq_length` - 2 pieces `doc_stride` apart, every window runs through the
model, each word's tag is read on its first piece in the window where that piece has the most
context, and entities are read from the tags as conlleval reads them
(`albert_tf.data.tagging.entities`). A word without a piece (it vanished in the normalisation) is
tagged "O" with probability 0. The memory of a call is linear in its texts' characters (no step
copies a text once a word or weighs every window against every other), and the windows go through
the model `WINDOW_TOKENS` tokens at a time. The consumer needs only tensorflow and tensorflow_text.
"""

from __future__ import annotations

import os
from typing import Sequence

import tensorflow as tf

from albert_tf.data.tagging import check_labels, entity_types, split_tag
from albert_tf.serving import export
from albert_tf.tokenizers.graph_tokenizer import AlbertGraphTokenizer
from albert_tf.utils import ragged

SEQUENCE_INPUTS = ("input_ids", "input_mask", "segment_ids")
# The longest text `serve_text` takes, in UTF-8 bytes (a longer one is refused in one line): the
# memory of a call grows in proportion to its texts' bytes (tests/albert_tf/serving/test_tagging_limits.py
# measures it), so this bounds what one request can take.
MAX_TEXT_BYTES = 100_000
# Tokens of windows the model reads in one call: a long text's windows go through in turn.
WINDOW_TOKENS = 8192


def _ragged_dense(values, rows, batch, default):
    return ragged.from_value_rowids(values, rows, batch).to_tensor(default)


class TaggingServer(export.ServingModule):
    """Raw text -> words, windows, the model, tags and entities in one graph (see the module): the
    tagger's serving module (`albert_tf.serving.export.ServingModule`).

    Args:
        model: a token classifier (the encoder's inputs -> logits [R, T, num_tags]).
        tokenizer: the graph tokenizer.
        max_seq_length: tokens per window, [CLS] and [SEP] included.
        labels: the BIO tags, in the model's output order.
        doc_stride: pieces between the starts of two windows.
    """

    def __init__(self, model, tokenizer: AlbertGraphTokenizer, max_seq_length: int, labels: Sequence[str],
                 doc_stride: int):
        super().__init__()
        labels = check_labels(labels)
        if max_seq_length < 3 or doc_stride < 1:
            raise ValueError(f"max_seq_length must be at least 3 and doc_stride positive, got {max_seq_length} "
                             f"and {doc_stride}")
        # The model is not tracked: its variables are saved once, through the root's lists.
        self._model = model
        self._tokenizer = tokenizer
        self._max_seq_length = max_seq_length
        self._doc_stride = doc_stride
        types = entity_types(labels)
        self._labels = tf.constant(labels)
        self._types = tf.constant([""] + types)
        self._outside = labels.index("O")
        self._label_type = tf.constant([0 if split_tag(l)[1] is None else types.index(split_tag(l)[1]) + 1
                                        for l in labels], tf.int64)
        self._label_begins = tf.constant([split_tag(l)[0] == "B" for l in labels])

    def stored(self):
        return {"max_seq_length": self._max_seq_length, "doc_stride": self._doc_stride,
                "max_text_bytes": MAX_TEXT_BYTES}

    def logits(self, inputs):
        return tf.cast(self._model({k: tf.cast(inputs[k], tf.int32) for k in SEQUENCE_INPUTS}, training=False),
                       tf.float32)

    def signatures(self):
        ids = {k: tf.TensorSpec([None, None], tf.int32, name=k) for k in SEQUENCE_INPUTS}

        # The model traced once, called by both signatures (each tracing it cost an export a trace).
        logits_fn = tf.function(self.logits, autograph=False, input_signature=[ids])

        def serving_default(**inputs):
            logits = logits_fn(inputs)
            return {"logits": logits, "probabilities": tf.nn.softmax(logits, axis=-1)}

        serve_text = tf.function(lambda text: self.tag(text, logits_fn), autograph=False)
        return {
            "serving_default": tf.function(serving_default, autograph=False).get_concrete_function(**ids),
            "serve_text": serve_text.get_concrete_function(tf.TensorSpec(None, tf.string, name="text")),
        }

    def _checked(self, text):
        """`text` [B] or [B, 1] as [B], once each text is at most `MAX_TEXT_BYTES`; any other shape
        or a longer text is the client's error, said in one line."""
        text = tf.convert_to_tensor(text, tf.string)
        shape = tf.shape(text)
        one_a_row = (tf.rank(text) >= 1) & (tf.rank(text) <= 2) & (tf.reduce_prod(shape[1:]) == 1)
        rank = tf.debugging.Assert(one_a_row, [tf.strings.format(
            "serve_text takes text of shape [batch] or [batch, 1] (one text a row), got shape {}", [shape])])
        with tf.control_dependencies([rank]):
            text = tf.reshape(text, [-1])
        size = tf.strings.length(text)
        longest = tf.argmax(tf.pad(size, [[0, 1]]), output_type=tf.int32)  # 0 of an empty batch
        fits = tf.debugging.Assert(tf.reduce_all(size <= MAX_TEXT_BYTES), [tf.strings.format(
            "serve_text takes texts of at most " + f"{MAX_TEXT_BYTES:,}" + " bytes (UTF-8), got one of {} bytes "
            "(row {}): cut it in parts", [tf.reduce_max(tf.pad(size, [[0, 1]])), longest])])
        with tf.control_dependencies([fits]):
            return tf.identity(text)

    def _words(self, text):
        """Each text's characters (ragged [B, C] strings), its words' start and end characters
        (ragged [B, W]), and for every character (flat, in text order) the index in its text of the
        word it is in or follows (-1 before the first). Flat over the batch's characters: the
        memory is theirs, however unequal the texts."""
        chars = tf.strings.unicode_split(text, "UTF-8")
        solid = ~tf.strings.regex_full_match(chars.flat_values, self._tokenizer._whitespace)
        row = ragged.row_ids(chars.row_splits)
        position = tf.range(tf.size(solid, out_type=tf.int64)) - tf.gather(chars.row_starts(), row)
        before = tf.pad(solid[:-1], [[1, 0]]) & (position > 0)
        after = tf.pad(solid[1:], [[0, 1]]) & (position < tf.gather(chars.row_lengths(), row) - 1)
        starts, ends = solid & ~before, solid & ~after
        positions = chars.with_flat_values(position)
        word_starts = ragged.boolean_mask(positions, starts, row)
        word_ends = ragged.boolean_mask(positions + 1, ends, row)
        word_of_char = (tf.math.cumsum(tf.cast(starts, tf.int64)) - 1
                        - tf.gather(word_starts.row_starts(), row))
        return chars, word_starts, word_ends, word_of_char

    def _windows(self, ids, piece_row):
        """The records of every text's pieces (`piece_row`: each piece's text): int32 inputs [R, T],
        and `own` [R, L]: True where a piece is read in this record (its most-context window)."""
        length = self._max_seq_length
        step = min(self._doc_stride, length - 2)
        max_pieces = tf.constant(length - 2, tf.int64)
        num_pieces = ids.row_lengths()
        extra = tf.maximum(num_pieces - max_pieces, 0)
        num_windows = 1 + (extra + step - 1) // step
        example = ragged.lengths_row_ids(num_windows)
        window = tf.ragged.range(num_windows).flat_values
        rows = tf.shape(example, out_type=tf.int64)[0]
        window_start = window * step
        window_length = tf.minimum(tf.gather(num_pieces, example) - window_start, max_pieces)
        first = window_start + tf.gather(ids.row_starts(), example)
        flat = tf.ragged.range(first, first + window_length)  # [R, L] indices of ids.flat_values
        column = lambda value: ragged.from_row_lengths(  # noqa: E731
            tf.fill([rows], tf.cast(value, tf.int64)), tf.ones([rows], tf.int64))
        (input_ids,) = ragged.concat_rows([column(self._tokenizer.cls_id), tf.gather(ids.flat_values, flat),
                                            column(self._tokenizer.sep_id)])
        # Max context, as albert_tf.data.windows.max_context_windows (the first best window wins),
        # decided once a piece among the windows that can hold it: piece p is in no window after
        # p // step, nor in any that starts max_pieces or more before it.
        p = tf.range(tf.size(ids.flat_values, out_type=tf.int64)) - tf.gather(ids.row_starts(), piece_row)
        other = p[:, None] // step - tf.range(-(-(length - 2) // step), dtype=tf.int64)[None, :]  # [P, J]
        other_start = other * step
        other_length = tf.minimum(tf.gather(num_pieces, piece_row)[:, None] - other_start, max_pieces)
        inside = (other >= 0) & (other < tf.gather(num_windows, piece_row)[:, None]) & (
            p[:, None] < other_start + other_length)
        score = tf.cast(tf.minimum(p[:, None] - other_start, other_start + other_length - 1 - p[:, None]), tf.float64)
        score = tf.where(inside, score + 0.01 * tf.cast(other_length, tf.float64), -1e9)
        best = tf.reduce_min(tf.where(score >= tf.reduce_max(score, axis=-1, keepdims=True), other, rows), axis=-1)
        own = tf.gather(best, flat.flat_values) == tf.gather(window, ragged.row_ids(flat.row_splits))
        own = flat.with_flat_values(own).to_tensor(False)
        shape = [None, length]
        inputs = {
            "input_ids": tf.cast(input_ids.to_tensor(0, shape=shape), tf.int32),
            "input_mask": tf.cast(tf.ones_like(input_ids).to_tensor(0, shape=shape), tf.int32),
        }
        inputs["segment_ids"] = tf.zeros_like(inputs["input_ids"])
        return inputs, own

    def _window_logits(self, inputs, logits_fn):
        """`logits_fn` (the model's logits, `self.logits`) of records [R, T], at most `WINDOW_TOKENS`
        tokens a call, one call after the other: the model's memory is one call's, however long the text."""
        rows = tf.shape(inputs["input_ids"])[0]
        most = max(1, WINDOW_TOKENS // self._max_seq_length)
        calls = tf.maximum((rows + most - 1) // most, 1)
        size = (rows + calls - 1) // calls  # as even as can be: fewer than `calls` rows of padding
        padded = {k: tf.reshape(tf.pad(inputs[k], [[0, calls * size - rows], [0, 0]]),
                                [calls, size, self._max_seq_length]) for k in SEQUENCE_INPUTS}
        spec = tf.TensorSpec([None, self._max_seq_length, int(self._labels.shape[0])], tf.float32)
        logits = tf.map_fn(logits_fn, padded, fn_output_signature=spec, parallel_iterations=1)
        return tf.reshape(logits, [-1, self._max_seq_length, int(self._labels.shape[0])])[:rows]

    def tag(self, text, logits_fn=None):
        """The outputs of `serve_text` (see the module) for strings `text` [B] or [B, 1]; `logits_fn`:
        the model's logits (`self.logits` where None)."""
        text = self._checked(text)
        batch = tf.shape(text, out_type=tf.int64)[0]
        ids, starts, _ = self._tokenizer.tokenize_with_offsets(text)
        ids = tf.cast(ids, tf.int64)
        chars, word_starts, word_ends, word_of_char = self._words(text)

        # Each piece's word, and whether it is its word's first piece.
        piece_row = ragged.row_ids(ids.row_splits)
        last_char = tf.maximum(tf.gather(chars.row_lengths(), piece_row) - 1, 0)
        piece_word = tf.gather(word_of_char, tf.minimum(starts.flat_values, last_char)
                               + tf.gather(chars.row_starts(), piece_row))
        piece_word = tf.maximum(piece_word, 0)
        previous = tf.pad(piece_word[:-1], [[1, 0]], constant_values=-1)
        first = (piece_word != previous) | (tf.range(tf.size(piece_word, out_type=tf.int64)) ==
                                            tf.gather(ids.row_starts(), piece_row))

        inputs, own = self._windows(ids, piece_row)
        logits = self._window_logits(inputs, self.logits if logits_fn is None else logits_fn)
        pieces = tf.boolean_mask(logits[:, 1:1 + tf.shape(own)[1]], own)  # [P, num_tags], in piece order
        probabilities = tf.nn.softmax(pieces, axis=-1)
        tag = tf.argmax(probabilities, axis=-1)
        probability = tf.reduce_max(probabilities, axis=-1)

        # Words: the tag of their first piece; "O" with probability 0 for a word without a piece.
        num_words = tf.size(word_starts.flat_values, out_type=tf.int64)
        word_index, first_tag, first_probability = ragged.masked(
            first, piece_word + tf.gather(word_starts.row_starts(), piece_row), tag, probability)
        word_tag = tf.tensor_scatter_nd_update(tf.fill([num_words], tf.constant(self._outside, tf.int64)),
                                               word_index[:, None], first_tag)
        word_probability = tf.tensor_scatter_nd_update(tf.zeros([num_words], tf.float32), word_index[:, None],
                                                       first_probability)
        word_row = ragged.row_ids(word_starts.row_splits)
        word_start, word_end = word_starts.flat_values, word_ends.flat_values

        # Entities, conlleval's chunks: B-X opens one, so does I-X after O or another type.
        kind = tf.gather(self._label_type, word_tag)
        opens_row = tf.range(num_words) == tf.gather(word_starts.row_starts(), word_row)
        previous_kind = tf.where(opens_row, tf.zeros_like(kind), tf.pad(kind[:-1], [[1, 0]]))
        begins = (kind > 0) & (tf.gather(self._label_begins, word_tag) | (previous_kind != kind))
        entity = tf.math.cumsum(tf.cast(begins, tf.int64)) - 1
        inside = kind > 0
        segments, start_in, end_in, probability_in = ragged.masked(inside, entity, word_start, word_end,
                                                                   word_probability)
        count = tf.reduce_sum(tf.cast(begins, tf.int64))
        entity_start = tf.math.unsorted_segment_min(start_in, segments, count)
        entity_end = tf.math.unsorted_segment_max(end_in, segments, count)
        entity_score = tf.math.unsorted_segment_mean(probability_in, segments, count)
        entity_row, entity_kind = ragged.masked(begins, word_row, kind)
        entity_type = tf.gather(self._types, entity_kind)

        code_points = tf.strings.unicode_decode(text, "UTF-8").flat_values  # as `chars`: a bad byte is U+FFFD

        def cut(rows, start, end):
            # Each span's characters encoded: a copy of the span's characters only. Linear: substr
            # of the whole text copied the text once a span, and tf.strings.reduce_join and
            # unsorted_segment_join pad every span to the longest (a 50,000-character word beside
            # 15,000 short ones took 5.7 GB), both the square of the text.
            offset = tf.gather(chars.row_starts(), rows)
            spans = tf.ragged.range(start + offset, end + offset)
            return tf.strings.unicode_encode(spans.with_flat_values(tf.gather(code_points, spans.flat_values)), "UTF-8")

        return {
            "entity_text": _ragged_dense(cut(entity_row, entity_start, entity_end), entity_row, batch, ""),
            "entity_type": _ragged_dense(entity_type, entity_row, batch, ""),
            "entity_start": _ragged_dense(entity_start, entity_row, batch, tf.constant(-1, tf.int64)),
            "entity_end": _ragged_dense(entity_end, entity_row, batch, tf.constant(-1, tf.int64)),
            "entity_score": _ragged_dense(entity_score, entity_row, batch, 0.0),
            "num_entities": tf.math.bincount(entity_row, minlength=batch, maxlength=batch, dtype=tf.int64),
            "word_text": _ragged_dense(cut(word_row, word_start, word_end), word_row, batch, ""),
            "word_start": word_starts.to_tensor(-1),
            "word_end": word_ends.to_tensor(-1),
            "tags": _ragged_dense(tf.gather(self._labels, word_tag), word_row, batch, ""),
            "tag_probability": _ragged_dense(word_probability, word_row, batch, 0.0),
            "num_words": word_starts.row_lengths(),
        }


def export_tagger(model, export_dir: str | os.PathLike, spm_model_file: str | os.PathLike, max_seq_length: int,
                  labels: Sequence[str], doc_stride: int, do_lower_case: bool = True) -> str:
    """Writes `model` (the encoder's inputs -> logits [B, T, len(labels)], e.g.
    `albert_tf.models.AlbertTokenClassifier`) as a SavedModel with the signatures of this module's
    docstring; returns `export_dir`."""
    tokenizer = export.prepare(model, spm_model_file, max_seq_length, do_lower_case)
    return export.write(model, export_dir, TaggingServer(model, tokenizer, max_seq_length, labels, doc_stride),
                        tokenizer)
