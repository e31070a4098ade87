"""ALBERT's tokenizer as TensorFlow ops, for tf.data pipelines and SavedModels that take raw text.

It reproduces `albert_tf.tokenizer.AlbertTokenizer` id for id: the same normalisation is written
with tensorflow-text and RE2 ops, and SentencePiece runs through tensorflow_text's kernel.
"""

from __future__ import annotations

import os

import tensorflow as tf
import tensorflow_text as tf_text

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
        self._sentencepiece = tf_text.SentencepieceTokenizer(model=model_bytes, out_type=tf.int32)

    def normalize(self, texts: tf.Tensor) -> tf.Tensor:
        """ALBERT's normalisation of a string tensor (any shape), in the Python tokenizer's order."""
        texts = tf.strings.regex_replace(texts, self._whitespace, " ")
        texts = tf.strings.strip(texts)
        texts = tf.strings.regex_replace(texts, "``|''", '"')
        texts = tf_text.normalize_utf8(texts, "NFKD")
        texts = tf.strings.regex_replace(texts, self._combining, "")
        if self.do_lower_case:
            texts = tf.strings.lower(texts, encoding="utf-8")
        return texts

    def tokenize(self, texts: tf.Tensor) -> tf.RaggedTensor:
        """Ids of a batch of strings `[B]` as an int32 RaggedTensor `[B, None]`."""
        return self._sentencepiece.tokenize(self.normalize(tf.convert_to_tensor(texts, tf.string)))

    def pack(
        self,
        a_ids: tf.RaggedTensor,
        b_ids: tf.RaggedTensor | None = None,
        *,
        max_seq_length: int,
    ) -> dict[str, tf.Tensor]:
        """`[CLS] A [SEP] (B [SEP])` padded to `max_seq_length`: int32 `[B, max_seq_length]` tensors.

        Truncation matches `AlbertTokenizer.pack`: the longer segment loses tokens from its end,
        B on ties.
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
        shape = [None, max_seq_length]
        return {
            "input_ids": input_ids.to_tensor(self.pad_id, shape=shape),
            "input_mask": tf.ones_like(input_ids).to_tensor(0, shape=shape),
            "segment_ids": segment_ids.to_tensor(0, shape=shape),
        }

    def __call__(self, texts_a, texts_b=None, *, max_seq_length: int) -> dict[str, tf.Tensor]:
        """Tokenizes one or two batches of strings and packs them (see `pack`)."""
        a_ids = self.tokenize(texts_a)
        b_ids = None if texts_b is None else self.tokenize(texts_b)
        return self.pack(a_ids, b_ids, max_seq_length=max_seq_length)
