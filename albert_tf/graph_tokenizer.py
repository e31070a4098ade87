"""ALBERT's tokenizer as TensorFlow ops, for tf.data pipelines and SavedModels that take raw text.

It reproduces `albert_tf.tokenizer.AlbertTokenizer` id for id: the same normalisation is written
with tensorflow-text and RE2 ops, SentencePiece runs through tensorflow_text's kernels, and the
release's digit-comma re-split is a lookup in a per-id table of replacement ids.

Two SentencePiece kernels, because they break ties differently. When two segmentations score the
same (`666` as `6` `66` or `66` `6`), the release's sentencepiece (its lattice Viterbi) keeps the one
whose last piece starts first, at every position (`6` `66`); so do sentencepiece >= 0.2.2 and
tensorflow-text's `FastSentencepieceTokenizer`, which gives the ids of `tokenize` (it is also the
quicker one). The older kernel, `SentencepieceTokenizer` (like sentencepiece 0.1.9x to 0.2.1), keeps
the other one, but it is the one with byte spans: `tokenize_with_offsets` takes its pieces and puts
tied ones in the release's order as the Python tokenizer does (`albert_tf.tokenizer.tie_runs`).
docs/data.md gives the measurement.
"""

from __future__ import annotations

import os
from typing import Sequence

import tensorflow as tf
import tensorflow_text as tf_text

from albert_tf.length_buckets import bucket_length
from albert_tf.tokenizer import (
    AlbertTokenizer,
    combining_ranges,
    whitespace_ranges,
)


def _regex_class(ranges: list[tuple[int, int]]) -> str:
    parts = []
    for first, last in ranges:
        parts.append(f"\\x{{{first:X}}}" if first == last else f"\\x{{{first:X}}}-\\x{{{last:X}}}")
    return "[" + "".join(parts) + "]"


class AlbertGraphTokenizer(tf.Module):
    """Tokenizes and packs batches of strings inside a TensorFlow graph.

    Args:
        spm_model: the SentencePiece model as serialized bytes, a file path, or a
            `tf.saved_model.Asset` (so that a SavedModel can ship the model file as an asset).
        do_lower_case: lowercase after stripping accents, as the Python tokenizer does.

    Example:
        >>> tokenizer = AlbertGraphTokenizer(open("30k-clean.model", "rb").read())
        >>> ids = tokenizer.tokenize(tf.constant(["Hello world"]))   # RaggedTensor [B, None]
        >>> packed = tokenizer.pack(ids, max_seq_length=128)          # dict of int32 [B, 128]
    """

    def __init__(self, spm_model, do_lower_case: bool = True, name: str | None = None):
        super().__init__(name=name)
        self.model_asset = None
        if isinstance(spm_model, tf.saved_model.Asset):
            self.model_asset = spm_model
            model_bytes = tf.io.read_file(spm_model.asset_path).numpy()
        elif isinstance(spm_model, (str, os.PathLike)):
            self.model_asset = tf.saved_model.Asset(os.fspath(spm_model))
            with tf.io.gfile.GFile(os.fspath(spm_model), "rb") as f:
                model_bytes = f.read()
        else:
            model_bytes = bytes(spm_model)
        # Loading through the Python tokenizer applies the same special-piece checks and gives the ids.
        reference = AlbertTokenizer(model_bytes, do_lower_case=do_lower_case)
        self.do_lower_case = do_lower_case
        self.vocab_size = reference.vocab_size
        self.pad_id, self.unk_id = reference.pad_id, reference.unk_id
        self.cls_id, self.sep_id, self.mask_id = reference.cls_id, reference.sep_id, reference.mask_id
        self._whitespace = _regex_class(whitespace_ranges()) + "+"
        self._combining = _regex_class(combining_ranges())
        self._sentencepiece = tf_text.FastSentencepieceTokenizer(model_bytes)
        self._sentencepiece_spans = tf_text.SentencepieceTokenizer(model=model_bytes, out_type=tf.int32)
        # Per id, for the span kernel's ties: which string the piece repeats (0: none that can tie)
        # and how many times.
        runs = reference.id_tie_runs
        strings = {root: number for number, root in enumerate(sorted({root for root, _ in runs.values()}), 1)}
        self._tie_strings = tf.constant(
            [strings[runs[i][0]] if i in runs else 0 for i in range(self.vocab_size)], tf.int64
        )
        self._tie_lengths = tf.constant([runs[i][1] if i in runs else 0 for i in range(self.vocab_size)], tf.int64)
        self._tie_longest = max([length for _, length in runs.values()], default=0)
        # Row i of this table is what id i becomes and, for offsets, how many characters each part
        # takes ([i] and "all of them", or the release's digit-comma re-split of `▁2012,`).
        resplits = reference.id_resplits
        rows = [resplits.get(i, [i]) for i in range(self.vocab_size)]
        widths = [
            [len(reference.convert_ids_to_tokens([p])[0].lstrip("\u2581")) for p in row] if len(row) > 1 else [1 << 30]
            for row in rows
        ]
        self._part_ids = tf.constant([p for row in rows for p in row], tf.int32)
        self._part_widths = tf.constant([w for row in widths for w in row], tf.int64)
        self._part_counts = tf.constant([len(row) for row in rows], tf.int64)

    def normalize(self, texts: tf.Tensor) -> tf.Tensor:
        """ALBERT's normalisation of a string tensor (any shape), in the Python tokenizer's order."""
        texts = tf.strings.regex_replace(texts, self._whitespace, " ")
        texts = tf.strings.strip(texts)
        texts = tf_text.normalize_utf8(texts, "NFKD")
        texts = tf.strings.regex_replace(texts, self._combining, "")
        if self.do_lower_case:
            texts = tf.strings.lower(texts, encoding="utf-8")
        return texts

    def tokenize(self, texts: tf.Tensor) -> tf.RaggedTensor:
        """Ids of a batch of strings `[B]` as an int32 RaggedTensor `[B, None]`."""
        ids = self._sentencepiece.tokenize(self.normalize(tf.convert_to_tensor(texts, tf.string)))
        ids = ids.with_row_splits_dtype(tf.int64)
        table = tf.RaggedTensor.from_row_lengths(self._part_ids, self._part_counts, validate=False)
        return tf.gather(table, ids).merge_dims(1, 2)

    def tokenize_with_offsets(self, texts: tf.Tensor) -> tuple[tf.RaggedTensor, tf.RaggedTensor, tf.RaggedTensor]:
        """Ids of a batch of strings `[B]` and each piece's character span in its string.

        The graph twin of `AlbertTokenizer.encode_with_offsets`: returns int32 ids and int64
        `starts`, `ends`, RaggedTensors `[B, None]`, in characters (code points) of the original
        strings. The normalisation runs per character so that each normalised character knows
        the original one it came from; lower case is applied to the whole string as Python does.
        """
        texts = tf.convert_to_tensor(texts, tf.string)
        chars = tf.strings.unicode_split(texts, "UTF-8")
        dense = chars.to_tensor("")
        valid = tf.ones_like(chars, tf.bool).to_tensor(False)
        width = tf.shape(dense)[1]
        is_space = tf.strings.regex_full_match(dense, self._whitespace) & valid
        solid = valid & ~is_space
        solid_int = tf.cast(solid, tf.int32)
        solid_before = tf.math.cumsum(solid_int, axis=1, exclusive=True) > 0
        solid_after = tf.math.cumsum(solid_int, axis=1, exclusive=True, reverse=True) > 0
        space_before = tf.pad(is_space[:, :-1], [[0, 0], [1, 0]])
        # One space stands for an inner whitespace run (its first character); ends are dropped.
        kept_space = is_space & ~space_before & solid_before & solid_after
        pieces = tf_text.normalize_utf8(dense, "NFKD")
        pieces = tf.strings.regex_replace(pieces, self._combining, "")
        pieces = tf.where(kept_space, " ", tf.where(solid, pieces, ""))
        counts = tf.strings.length(pieces, unit="UTF8_CHAR")  # normalised characters per character
        normalized = tf.strings.reduce_join(pieces, axis=1)
        if self.do_lower_case:
            normalized = tf.strings.lower(normalized, encoding="utf-8")
        # origin[b, j]: the original character of normalised character j.
        positions = tf.broadcast_to(tf.range(width, dtype=tf.int32)[None], tf.shape(dense))
        origin = tf.RaggedTensor.from_row_lengths(
            tf.repeat(tf.reshape(positions, [-1]), tf.reshape(counts, [-1])),
            tf.reduce_sum(tf.cast(counts, tf.int64), axis=1),
        )
        origin_dense = tf.pad(origin.to_tensor(-1), [[0, 0], [0, 1]], constant_values=-1)
        num_normalized = origin.row_lengths()

        ids, byte_begin, byte_end = self._pieces_with_byte_spans(normalized)
        # Byte offsets in the normalised strings -> normalised character indices.
        _, char_bytes = tf.strings.unicode_decode_with_offsets(normalized, "UTF-8")
        boundaries = char_bytes.to_tensor(tf.int64.max)
        begin = tf.searchsorted(boundaries, tf.cast(byte_begin.to_tensor(0), tf.int64), side="left", out_type=tf.int64)
        end = tf.searchsorted(boundaries, tf.cast(byte_end.to_tensor(0), tf.int64), side="left", out_type=tf.int64)
        normalized_chars = tf.pad(tf.strings.unicode_split(normalized, "UTF-8").to_tensor(""), [[0, 0], [0, 1]])
        first = tf.gather(normalized_chars, begin, batch_dims=1)
        # A piece's leading "▁" stands for the space before it: its span leaves the space out.
        begin = tf.where((first == " ") & (begin < end), begin + 1, begin)
        begin = tf.RaggedTensor.from_tensor(begin, lengths=ids.row_lengths())
        end = tf.RaggedTensor.from_tensor(end, lengths=ids.row_lengths())

        # Re-split pieces: each part takes the next `width` characters of its piece.
        part_counts = tf.gather(self._part_counts, ids)
        part_rows = tf.RaggedTensor.from_row_lengths(self._part_ids, self._part_counts, validate=False)
        width_rows = tf.RaggedTensor.from_row_lengths(self._part_widths, self._part_counts, validate=False)
        part_ids = tf.gather(part_rows, ids)  # [B, P, parts]
        part_widths = tf.gather(width_rows, ids).flat_values
        piece_of_part = tf.repeat(tf.range(tf.size(ids.flat_values, tf.int64)), part_counts.flat_values)
        taken = tf.math.cumsum(part_widths, exclusive=True)
        taken -= tf.gather(tf.math.segment_min(taken, piece_of_part), piece_of_part)
        piece_begin = tf.gather(begin.flat_values, piece_of_part)
        piece_end = tf.gather(end.flat_values, piece_of_part)
        part_begin = tf.minimum(piece_begin + taken, piece_end)
        part_end = tf.minimum(part_begin + part_widths, piece_end)
        row_of_part = tf.gather(ids.value_rowids(), piece_of_part)

        # Normalised character spans -> original character spans.
        n = tf.gather(num_normalized, row_of_part)
        last_solid = tf.gather(
            tf.reduce_max(tf.where(solid, positions + 1, 0), axis=1), row_of_part
        )
        start_char = tf.gather_nd(origin_dense, tf.stack([row_of_part, part_begin], 1))
        end_char = tf.gather_nd(origin_dense, tf.stack([row_of_part, tf.maximum(part_end - 1, 0)], 1)) + 1
        empty_at = tf.where(part_begin < n, start_char, tf.cast(last_solid, tf.int32))
        starts = tf.where(part_begin < part_end, start_char, empty_at)
        ends = tf.where(part_begin < part_end, end_char, empty_at)
        rows = part_ids.merge_dims(1, 2).row_lengths()
        return (
            part_ids.merge_dims(1, 2),
            tf.RaggedTensor.from_row_lengths(tf.cast(starts, tf.int64), rows),
            tf.RaggedTensor.from_row_lengths(tf.cast(ends, tf.int64), rows),
        )

    def _pieces_with_byte_spans(
        self, normalized: tf.Tensor
    ) -> tuple[tf.RaggedTensor, tf.RaggedTensor, tf.RaggedTensor]:
        """The span kernel's ids of normalised strings `[B]`, ties in the release's order, and byte spans.

        A run of adjacent pieces that repeat one string (`66` `6`) is sorted by length, stably, as
        `AlbertTokenizer` does; each piece keeps its width and the spans are laid again from the
        start of the run. Every other piece is a run of its own and keeps its span.
        """
        ids, begin, end = self._sentencepiece_spans.tokenize_with_offsets(normalized)
        ids = ids.with_row_splits_dtype(tf.int64)
        flat = ids.flat_values
        begin, end = tf.cast(begin.flat_values, tf.int64), tf.cast(end.flat_values, tf.int64)
        string = tf.gather(self._tie_strings, flat)
        rows = ids.value_rowids()
        continues = (string[1:] == string[:-1]) & (string[1:] > 0) & (rows[1:] == rows[:-1])
        continues = tf.concat([[False], continues], axis=0)[: tf.size(flat)]
        run = tf.math.cumsum(tf.cast(~continues, tf.int64)) - 1
        order = tf.argsort(run * (self._tie_longest + 1) + tf.gather(self._tie_lengths, flat), stable=True)
        widths = tf.gather(end - begin, order)
        taken = tf.math.cumsum(widths, exclusive=True)
        new_begin = tf.gather(tf.math.segment_min(begin, run) - tf.math.segment_min(taken, run), run) + taken
        new_ids = tf.gather(flat, order)
        return ids.with_flat_values(new_ids), ids.with_flat_values(new_begin), ids.with_flat_values(new_begin + widths)

    def pack(
        self,
        a_ids: tf.RaggedTensor,
        b_ids: tf.RaggedTensor | None = None,
        *,
        max_seq_length: int,
        length_buckets: Sequence[int] | None = None,
    ) -> dict[str, tf.Tensor]:
        """`[CLS] A [SEP] (B [SEP])` padded to `max_seq_length`: int32 `[B, max_seq_length]` tensors.

        Truncation matches `AlbertTokenizer.pack`: the longer segment loses tokens from its end,
        B on ties. With `length_buckets` (sorted, the largest `max_seq_length`, see
        `albert_tf.length_buckets`) the batch is padded only to the smallest bucket that holds its
        longest row: `[B, T]` with T one of the buckets, the same rows with less padding.
        """
        a_ids = tf.cast(a_ids, tf.int32)
        batch = a_ids.nrows()
        len_a = a_ids.row_lengths()
        if b_ids is None:
            keep_a = tf.minimum(len_a, max_seq_length - 2)
            segments = [a_ids]
            kept = [keep_a]
        else:
            b_ids = tf.cast(b_ids, tf.int32)
            len_b = b_ids.row_lengths()
            budget = tf.constant(max_seq_length - 3, tf.int64)
            half_up = (budget + 1) // 2
            keep_a = tf.minimum(len_a, tf.maximum(half_up, budget - len_b))
            keep_b = tf.minimum(len_b, budget - keep_a)
            fits = len_a + len_b <= budget
            keep_a = tf.where(fits, len_a, keep_a)
            keep_b = tf.where(fits, len_b, keep_b)
            segments = [a_ids, b_ids]
            kept = [keep_a, keep_b]

        def column(value):
            return tf.RaggedTensor.from_row_lengths(tf.fill([batch], value), tf.ones([batch], tf.int64))

        pieces, segment_pieces = [column(self.cls_id)], [column(0)]
        for index, (ids, keep) in enumerate(zip(segments, kept)):
            trimmed = tf.ragged.boolean_mask(ids, tf.ragged.range(ids.row_lengths()) < keep[:, None])
            pieces += [trimmed, column(self.sep_id)]
            segment_pieces += [tf.zeros_like(trimmed) + index, column(index)]
        input_ids = tf.concat(pieces, axis=1)
        segment_ids = tf.concat(segment_pieces, axis=1)
        if length_buckets is None:
            shape = [None, max_seq_length]
        else:
            longest = tf.reduce_max(tf.concat([input_ids.row_lengths(), [0]], axis=0))
            shape = tf.stack([batch, tf.cast(bucket_length(longest, length_buckets), tf.int64)])
        return {
            "input_ids": input_ids.to_tensor(self.pad_id, shape=shape),
            "input_mask": tf.ones_like(input_ids).to_tensor(0, shape=shape),
            "segment_ids": segment_ids.to_tensor(0, shape=shape),
        }

    def __call__(self, texts_a, texts_b=None, *, max_seq_length: int,
                 length_buckets: Sequence[int] | None = None) -> dict[str, tf.Tensor]:
        """Tokenizes one or two batches of strings and packs them (see `pack`)."""
        a_ids = self.tokenize(texts_a)
        b_ids = None if texts_b is None else self.tokenize(texts_b)
        return self.pack(a_ids, b_ids, max_seq_length=max_seq_length, length_buckets=length_buckets)
