"""ALBERT's tokenizer as TensorFlow ops, for tf.data pipelines and SavedModels that take raw text.

It reproduces `albert_tf.tokenizers.tokenizer.AlbertTokenizer` id for id: the same normalisation is written
with tensorflow-text and RE2 ops, SentencePiece runs through tensorflow_text's kernels, and the
release's digit-comma re-split is a lookup in a per-id table of replacement ids.

Two SentencePiece kernels, because they break ties differently. Where two segmentations have the
same real score (`888` as `8` `88` or `88` `8`), the release's sentencepiece decided by their float32
path scores, rounded at each step, and kept the one whose last piece starts first where those are
equal (`albert_tf.tokenizers.segmentation.ReleaseViterbi`); tensorflow-text's `FastSentencepieceTokenizer` does
the same and gives the ids of `tokenize` (it is also the quicker one). The older kernel,
`SentencepieceTokenizer` (like sentencepiece 0.2.0 and 0.2.1), decides some of those ties the other
way, but it is the one with byte spans: `tokenize_with_offsets` takes the fast kernel's ids and lays
the span kernel's spans on them, piece by piece within each run of pieces that repeat one string
(`albert_tf.tokenizers.segmentation.tie_runs`). docs/data.md gives the measurement.

The tables drawn from the vocabulary (`GraphTables`) are built once per distinct model and shared;
each tokenizer makes its own tensors of them, which belong to the graph or layer that holds it.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from types import MappingProxyType
from typing import Mapping, Sequence

import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text
from tensorflow_text.core.pybinds import pywrap_model_converter

from albert_tf.tokenizers.length_buckets import bucket_length
from albert_tf.tokenizers.segmentation import SPIECE_UNDERLINE, release_tables
from albert_tf.tokenizers.tokenizer import (
    AlbertTokenizer,
    combining_ranges,
    whitespace_ranges,
)
from albert_tf.utils import ragged


def _regex_class(ranges: list[tuple[int, int]]) -> str:
    parts = []
    for first, last in ranges:
        parts.append(f"\\x{{{first:X}}}" if first == last else f"\\x{{{first:X}}}-\\x{{{last:X}}}")
    return "[" + "".join(parts) + "]"


def _lower(texts: tf.Tensor) -> tf.Tensor:
    """Unicode lower case of a string tensor (any shape), every character kept.

    `tf.strings.lower(..., encoding="utf-8")` ends a string at its first NUL, which Python's
    `str.lower` keeps (and the release's SentencePiece then reads as `<unk>`): the parts between
    NULs are lowered apart and joined again. A NUL is neither cased nor case-ignorable, so no
    part's case depends on another's. (A join's separator is a C string, so each part
    carries its NUL and the last one is cut off.)
    """
    flat = tf.reshape(texts, [-1])
    # tf.strings.split's kernel and a join by row: the checked RaggedTensor between them was 100 ops.
    parts = tf.raw_ops.StringSplitV2(input=flat, sep="\x00")
    ended = tf.strings.lower(parts.values, encoding="utf-8") + "\x00"
    joined = tf.strings.unsorted_segment_join(ended, parts.indices[:, 0], tf.size(flat))
    length = tf.strings.length(joined)
    return tf.reshape(tf.strings.substr(joined, tf.zeros_like(length), length - 1), tf.shape(texts))


@dataclasses.dataclass(frozen=True)
class GraphTables:
    """The graph tokenizer's tables of one model (`graph_tables`): tensorflow-text's conversion of
    the model for its fast kernel, and read-only numpy arrays of which each `AlbertGraphTokenizer`
    makes its own tensors, each named as the attribute that holds it (`_tie_strings`, ...)."""

    fast_model: bytes
    fast_decoder: bytes
    tie_longest: int
    arrays: Mapping[str, np.ndarray]


@functools.lru_cache(maxsize=8)
def graph_tables(model_proto: bytes) -> GraphTables:
    """The `GraphTables` of a serialized SentencePiece model, built once per distinct model (the
    fast kernel's conversion alone took 0.07 s for 30,000 pieces, every tokenizer again)."""
    tables = release_tables(model_proto)
    pieces, runs = tables.vocabulary.pieces, tables.id_runs
    strings = {root: number for number, root in enumerate(sorted({root for root, _ in runs.values()}), 1)}
    longest = max([length for _, length in runs.values()], default=1)
    # For `_release_ties`: per string and length, the piece's float32 score in the release's search and its id.
    score_table = np.full([len(strings) + 1, longest + 1], -np.inf, np.float32)
    id_table = np.zeros([len(strings) + 1, longest + 1], np.int64)
    for piece_id, (root, length) in runs.items():
        score_table[strings[root], length] = tables.viterbi.pieces[pieces[piece_id]][1]
        id_table[strings[root], length] = piece_id
    # Row i is what id i becomes and, for offsets, how many characters each part takes ([i] and
    # "all of them", or the release's digit-comma re-split of `▁2012,`).
    rows = [tables.id_resplits.get(i, (i,)) for i in range(len(pieces))]
    widths = [[len(pieces[p].lstrip(SPIECE_UNDERLINE)) for p in row] if len(row) > 1 else [1 << 30] for row in rows]
    arrays = {
        # Per id, for the span kernel's ties: which string the piece repeats (0: none that can tie)
        # and its UTF-8 bytes; for `_release_ties`, its score and how many times it repeats its string.
        "tie_strings": np.array([strings[runs[i][0]] if i in runs else 0 for i in range(len(pieces))], np.int64),
        "tie_bytes": np.array([len(p.encode("utf-8")) if i in runs else 0 for i, p in enumerate(pieces)], np.int64),
        "release_scores": tables.viterbi.scores_by_id(len(pieces)),
        "tie_lengths": np.array([runs[i][1] if i in runs else 0 for i in range(len(pieces))], np.int64),
        "run_scores": score_table,
        "run_ids": id_table,
        "part_ids": np.array([p for row in rows for p in row], np.int32),
        "part_widths": np.array([w for row in widths for w in row], np.int64),
        "part_counts": np.array([len(row) for row in rows], np.int64),
    }
    for array in arrays.values():
        array.flags.writeable = False
    return GraphTables(
        fast_model=pywrap_model_converter.convert_sentencepiece_model(model_proto),
        fast_decoder=pywrap_model_converter.convert_sentencepiece_model_for_decoder(model_proto),
        tie_longest=longest,
        arrays=MappingProxyType(arrays),
    )


class _FastSentencepiece(tf_text.FastSentencepieceTokenizer):
    """tensorflow-text's fast kernel on a model converted once (`graph_tables`): the attributes that
    the parent's __init__ (tensorflow-text 2.21's) sets after converting the model, tensors its own."""

    def __init__(self, tables: GraphTables):  # in place of the parent's, which converts again
        self._converted_model = tf.constant(np.frombuffer(tables.fast_model, np.uint8))
        self._converted_model_detokenizer = tf.constant(np.frombuffer(tables.fast_decoder, np.uint8))
        self._vocab_size = pywrap_model_converter.get_vocabulary_size(tables.fast_model)
        self._reverse = self._add_bos = self._add_eos = False


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
        # The tables are shared by every tokenizer of the model; the tensors are this one's.
        tables = graph_tables(model_bytes)
        self._sentencepiece = _FastSentencepiece(tables)
        self._sentencepiece_spans = tf_text.SentencepieceTokenizer(model=model_bytes, out_type=tf.int32)
        self._tie_longest = tables.tie_longest
        for name, array in tables.arrays.items():
            setattr(self, f"_{name}", tf.constant(array))

    def normalize(self, texts: tf.Tensor) -> tf.Tensor:
        """ALBERT's normalisation of a string tensor (any shape), in the Python tokenizer's order."""
        texts = tf.strings.regex_replace(texts, self._whitespace, " ")
        texts = tf.strings.strip(texts)
        texts = tf_text.normalize_utf8(texts, "NFKD")
        texts = tf.strings.regex_replace(texts, self._combining, "")
        if self.do_lower_case:
            texts = _lower(texts)
        return texts

    def tokenize(self, texts: tf.Tensor) -> tf.RaggedTensor:
        """Ids of a batch of strings `[B]` as an int32 RaggedTensor `[B, None]`."""
        ids = self._sentencepiece.tokenize(self.normalize(tf.convert_to_tensor(texts, tf.string)))
        ids = self._release_ties(ids.with_row_splits_dtype(tf.int64))
        table = ragged.from_row_lengths(self._part_ids, self._part_counts)
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
            normalized = _lower(normalized)
        # origin[b, j]: the original character of normalised character j.
        positions = tf.broadcast_to(tf.range(width, dtype=tf.int32)[None], tf.shape(dense))
        origin = ragged.from_row_lengths(
            ragged.repeat(tf.reshape(positions, [-1]), tf.reshape(counts, [-1])),
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
        begin = ragged.from_tensor(begin, ids.row_lengths())
        end = ragged.from_tensor(end, ids.row_lengths())

        # Re-split pieces: each part takes the next `width` characters of its piece.
        part_counts = tf.gather(self._part_counts, ids)
        part_rows = ragged.from_row_lengths(self._part_ids, self._part_counts)
        width_rows = ragged.from_row_lengths(self._part_widths, self._part_counts)
        part_ids = tf.gather(part_rows, ids)  # [B, P, parts]
        part_widths = tf.gather(width_rows, ids).flat_values
        piece_of_part = ragged.lengths_row_ids(tf.cast(part_counts.flat_values, tf.int64))
        taken = tf.math.cumsum(part_widths, exclusive=True)
        taken -= tf.gather(tf.math.segment_min(taken, piece_of_part), piece_of_part)
        piece_begin = tf.gather(begin.flat_values, piece_of_part)
        piece_end = tf.gather(end.flat_values, piece_of_part)
        part_begin = tf.minimum(piece_begin + taken, piece_end)
        part_end = tf.minimum(part_begin + part_widths, piece_end)
        row_of_part = tf.gather(ragged.row_ids(ids.row_splits), piece_of_part)

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
            ragged.from_row_lengths(tf.cast(starts, tf.int64), rows),
            ragged.from_row_lengths(tf.cast(ends, tf.int64), rows),
        )

    def _pieces_with_byte_spans(
        self, normalized: tf.Tensor
    ) -> tuple[tf.RaggedTensor, tf.RaggedTensor, tf.RaggedTensor]:
        """The fast kernel's ids of normalised strings `[B]` (the release's), with byte spans.

        The two kernels differ only in the order of a run of adjacent pieces that repeat one string
        (`88` `8` for `8` `88`): each piece keeps the span kernel's span where the two agree, and
        within a run where they do not, the spans are laid again from the run's start, each piece
        as wide as its bytes. A batch where the kernels give a row different numbers of pieces
        fails (not seen on any text; see tests/albert_tf/tokenizers/test_release_tokenization.py).
        """
        ids, begin, end = self._sentencepiece_spans.tokenize_with_offsets(normalized)
        ids = ids.with_row_splits_dtype(tf.int64)
        release = self._release_ties(self._sentencepiece.tokenize(normalized).with_row_splits_dtype(tf.int64))
        with tf.control_dependencies([
            tf.debugging.assert_equal(ids.row_splits, release.row_splits,
                                      message="the two SentencePiece kernels split a text into different numbers of pieces")
        ]):
            new_ids = tf.identity(tf.cast(release.flat_values, ids.flat_values.dtype))
        flat = ids.flat_values
        begin, end = tf.cast(begin.flat_values, tf.int64), tf.cast(end.flat_values, tf.int64)
        string = tf.gather(self._tie_strings, flat)
        rows = ragged.row_ids(ids.row_splits)
        continues = (string[1:] == string[:-1]) & (string[1:] > 0) & (rows[1:] == rows[:-1])
        continues = tf.concat([[False], continues], axis=0)[: tf.size(flat)]
        run = tf.math.cumsum(tf.cast(~continues, tf.int64)) - 1
        widths = tf.where(new_ids == flat, end - begin, tf.gather(self._tie_bytes, new_ids))
        taken = tf.math.cumsum(widths, exclusive=True)
        new_begin = tf.gather(tf.math.segment_min(begin, run) - tf.math.segment_min(taken, run), run) + taken
        return ids.with_flat_values(new_ids), ids.with_flat_values(new_begin), ids.with_flat_values(new_begin + widths)

    def _release_ties(self, ids: tf.RaggedTensor) -> tf.RaggedTensor:
        """The fast kernel's ids `[B, None]` with each run of pieces that repeat one string decided
        as the release's search decided it.

        The fast kernel scores a user-defined piece (`(`, `.`, ...) `length * max_score - 0.1` where
        the release's sentencepiece gave `+ 1`, and decides some ties otherwise too, so a run such as
        `!!!!` after `(` can come out `!!!` `!` where the release has `!` `!!!`. Each run of two or
        more such pieces is searched again as `albert_tf.tokenizers.segmentation.ReleaseViterbi` would: from the
        float32 score of the pieces before it (added one at a time), over the pieces of its string,
        keeping at each node the first predecessor by start of the highest float32 sum, up to the
        piece after it (or the end). A run whose new pieces are not as many as the old keeps its
        old ones. An unknown piece before a run counts as one unknown character.
        """
        flat = tf.cast(ids.flat_values, tf.int64)
        rows = ragged.row_ids(ids.row_splits)
        string = tf.gather(self._tie_strings, flat)
        continues = (string[1:] == string[:-1]) & (string[1:] > 0) & (rows[1:] == rows[:-1])
        continues = tf.concat([[False], continues], axis=0)[: tf.size(flat)]
        run = tf.math.cumsum(tf.cast(~continues, tf.int64)) - 1
        run_size = tf.math.segment_sum(tf.ones_like(run), run)
        decided = tf.cond(
            tf.reduce_any(run_size > 1),
            lambda: self._decide_runs(ids, flat, rows, string, run, run_size),
            lambda: flat,
        )
        return ids.with_flat_values(tf.cast(decided, ids.flat_values.dtype))

    def _decide_runs(self, ids, flat, rows, string, run, run_size):
        longest = self._tie_longest
        scores = tf.gather(self._release_scores, flat)
        # Each piece's path score before it: the row's scores summed in order, in float32.
        dense = ids.with_flat_values(scores).to_tensor(0.0)
        inclusive = tf.scan(lambda total, score: total + score, tf.transpose(dense),
                            initializer=tf.zeros([tf.shape(dense)[0]], tf.float32))
        exclusive = tf.concat([tf.zeros_like(inclusive[:1]), inclusive[:-1]], axis=0)
        position = tf.range(tf.size(flat, out_type=tf.int64))
        in_row = position - tf.gather(ids.row_splits, rows)
        before = tf.gather_nd(exclusive, tf.stack([in_row, rows], axis=1))

        # The runs of two pieces or more: where they start and end, their string, length in units,
        # score before them and the score of the piece after them (0 at the end of the text).
        runs = tf.where(run_size > 1)[:, 0]
        first = tf.gather(tf.math.segment_min(position, run), runs)
        last = tf.gather(tf.math.segment_max(position, run), runs)
        root = tf.gather(string, first)
        units = tf.gather(tf.math.segment_sum(tf.gather(self._tie_lengths, flat), run), runs)
        start_score = tf.gather(before, first)
        after = tf.minimum(last + 1, tf.size(flat, out_type=tf.int64) - 1)
        has_after = (last + 1 < tf.size(flat, out_type=tf.int64)) & (tf.gather(rows, after) == tf.gather(rows, last))
        after_score = tf.where(has_after, tf.gather(scores, after), 0.0)
        piece_scores = tf.gather(self._run_scores, root)  # [R, longest + 1], -inf where no piece
        count = tf.size(runs)
        most = tf.reduce_max(units)
        minus_inf = tf.constant(-np.inf, tf.float32)

        def first_best(totals):
            # The highest float32 sum, the first in order of start: lengths from the longest down.
            reversed_totals = tf.reverse(totals, axis=[-1])
            best = tf.reduce_max(reversed_totals, axis=-1)
            index = tf.range(longest + 1, dtype=tf.int64)
            at = tf.reduce_min(tf.where(reversed_totals == best[..., None], index, longest + 1), axis=-1)
            return best, longest - at

        # The runs longest first: the nodes ending at unit j are those of the first `alive[j]` runs
        # (the runs of j units or more), so the search keeps sum(units) nodes, not most * count
        # (one run of 30,000 "!" beside 20,000 short ones took 4.6 GB).
        order = tf.argsort(units, direction="DESCENDING", stable=True)
        units, root, last = tf.gather(units, order), tf.gather(root, order), tf.gather(last, order)
        start_score, after_score = tf.gather(start_score, order), tf.gather(after_score, order)
        piece_scores = tf.gather(piece_scores, order)
        alive = tf.cast(count, tf.int64) - tf.searchsorted(tf.reverse(units, [0]), tf.range(most + 2), side="left",
                                                                   out_type=tf.int64)
        offsets = tf.math.cumsum(alive, exclusive=True)  # where each unit's nodes start, flat

        # best[j][r, L]: path score of run r's node of length L ending at unit j; column 0 at
        # unit 0 is the path before the run.
        start = tf.concat([start_score[:, None], tf.fill([count, longest], minus_inf)], axis=1)
        size = tf.cast(most + 1, tf.int32)
        array = lambda dtype: tf.TensorArray(dtype, size=size, element_shape=[None, longest + 1],  # noqa: E731
                                             infer_shape=False, clear_after_read=False)
        best_scores = array(tf.float32).write(0, start)
        best_previous = array(tf.int64).write(0, tf.zeros([count, longest + 1], tf.int64))

        def step(j, best_scores, best_previous):
            n = alive[j]
            # Each length's node starts at j - length: the rows of the runs still alive at j.
            lefts = tf.stack([best_scores.read(tf.cast(tf.maximum(j - length, 0), tf.int32))[:n]
                              for length in range(1, longest + 1)])  # [longest, n, longest + 1]
            begins = j - tf.range(1, longest + 1, dtype=tf.int64)
            lefts = tf.where((begins >= 0)[:, None, None], lefts, minus_inf)
            totals = tf.transpose(lefts, [1, 0, 2]) + piece_scores[:n, 1:, None]  # [n, L, L']
            best, previous = first_best(totals)
            best = tf.concat([tf.fill([n, 1], minus_inf), best], axis=1)
            previous = tf.concat([tf.zeros([n, 1], tf.int64), previous], axis=1)
            return j + 1, best_scores.write(tf.cast(j, tf.int32), best), best_previous.write(tf.cast(j, tf.int32), previous)

        _, best_scores, best_previous = tf.while_loop(
            lambda j, *_: j <= most, step, (tf.constant(1, tf.int64), best_scores, best_previous))
        # [sum(alive[:most + 1]), longest + 1]: unit j's nodes from offsets[j]
        best_scores, best_previous = best_scores.concat(), best_previous.concat()
        ranks = tf.range(count, dtype=tf.int64)
        ending = tf.gather(best_scores, tf.gather(offsets, units) + ranks)
        _, length = first_best(ending + after_score[:, None])

        # Back from the end of each run: its pieces, last first; at step k only the runs of more
        # than k units may have a piece left.
        def back(k, j, length, pieces):
            n = alive[k + 1]
            j_alive, length_alive = j[:n], length[:n]
            live = j_alive > 0
            piece = tf.gather_nd(self._run_ids, tf.stack([root[:n], length_alive], axis=1))
            pieces = pieces.write(tf.cast(k, tf.int32), tf.where(live, piece, -1))
            rows = tf.gather(best_previous, tf.gather(offsets, tf.maximum(j_alive, 0)) + ranks[:n])
            previous = tf.gather(rows, length_alive, batch_dims=1)
            j = tf.concat([tf.where(live, j_alive - length_alive, j_alive), j[n:]], axis=0)
            length = tf.concat([tf.where(live, previous, length_alive), length[n:]], axis=0)
            return k + 1, j, length, pieces

        _, _, _, pieces = tf.while_loop(
            lambda k, *_: k < most, back,
            (tf.constant(0, tf.int64), units, length,
             tf.TensorArray(tf.int64, size=tf.cast(most, tf.int32), element_shape=[None], infer_shape=False)))
        pieces = pieces.concat()  # step k's pieces of the first alive[k + 1] runs, -1 past a run's first piece
        steps = tf.ragged.range(alive[1:most + 1])
        r = steps.flat_values
        k = ragged.row_ids(steps.row_splits)  # each value's step
        new_count = tf.math.unsorted_segment_sum(tf.cast(pieces >= 0, tf.int64), r, count)
        kept = new_count == tf.gather(tf.gather(run_size, runs), order)
        write = (pieces >= 0) & tf.gather(kept, r)
        targets = tf.boolean_mask(tf.gather(last, r) - k, write)
        return tf.tensor_scatter_nd_update(flat, targets[:, None], tf.boolean_mask(pieces, write))

    def pack(
        self,
        a_ids: tf.RaggedTensor,
        b_ids: tf.RaggedTensor | None = None,
        *,
        max_seq_length: int,
        length_buckets: Sequence[int] | None = None,
        pair: tf.Tensor | None = None,
    ) -> dict[str, tf.Tensor]:
        """`[CLS] A [SEP] (B [SEP])` padded to `max_seq_length`: int32 `[B, max_seq_length]` tensors.

        Truncation matches `AlbertTokenizer.pack`: the longer segment loses tokens from its end,
        B on ties. With `length_buckets` (sorted, the largest `max_seq_length`, see
        `albert_tf.tokenizers.length_buckets`) the batch is padded only to the smallest bucket that holds its
        longest row: `[B, T]` with T one of the buckets, the same rows with less padding.
        `pair`, a boolean scalar tensor, is for a batch known to be pairs or single texts only when
        it runs (`pack_rows`): where it is False, `b_ids` is left out as if it were None.
        """
        len_a = tf.cast(a_ids.row_lengths(), tf.int64)
        keep_a = tf.minimum(len_a, max_seq_length - 2)
        keep_b, closing = tf.zeros_like(len_a), tf.zeros_like(len_a)
        if b_ids is not None:
            len_b = tf.cast(b_ids.row_lengths(), tf.int64)
            budget = tf.constant(max_seq_length - 3, tf.int64)
            half_up = (budget + 1) // 2
            pair_a = tf.minimum(len_a, tf.maximum(half_up, budget - len_b))
            pair_b = tf.minimum(len_b, budget - pair_a)
            fits = len_a + len_b <= budget
            pair_a, pair_b = tf.where(fits, len_a, pair_a), tf.where(fits, len_b, pair_b)
            if pair is None:
                keep_a, keep_b, closing = pair_a, pair_b, closing + 1
            else:
                keep_a, keep_b = tf.where(pair, pair_a, keep_a), tf.where(pair, pair_b, keep_b)
                closing += tf.cast(pair, tf.int64)
        # Row r: [CLS], keep_a[r] ids of A, [SEP], keep_b[r] ids of B, and [SEP] if a pair; then padding.
        lengths = keep_a + keep_b + 2 + closing
        if length_buckets is None:
            width = max_seq_length
        else:
            width = bucket_length(tf.reduce_max(tf.concat([lengths, [0]], axis=0)), length_buckets)
        position = tf.range(tf.cast(width, tf.int64))[None, :]
        keep_a, b_start, length = keep_a[:, None], (keep_a + 2)[:, None], lengths[:, None]

        def taken(ids, first):
            """At each position, the id of its row of `ids` that starts at `first` [B, 1] (clipped to
            the row; a column of padding keeps a batch of empty rows one to gather from)."""
            dense = tf.pad(tf.cast(ids, tf.int32).to_tensor(0), [[0, 0], [0, 1]])
            index = tf.clip_by_value(position - first, 0, tf.cast(tf.shape(dense)[1] - 1, tf.int64))
            return tf.gather(dense, index, batch_dims=1)

        in_b = (position >= b_start) & (position < b_start + keep_b[:, None])
        input_ids = tf.where(position < length, self.sep_id, self.pad_id)
        if b_ids is not None:
            input_ids = tf.where(in_b, taken(b_ids, b_start), input_ids)
        input_ids = tf.where((position >= 1) & (position <= keep_a), taken(a_ids, tf.ones_like(keep_a)), input_ids)
        input_ids = tf.where(position == 0, self.cls_id, input_ids)
        return {
            "input_ids": input_ids,
            "input_mask": tf.cast(position < length, tf.int32),
            "segment_ids": tf.cast((position >= b_start) & (position < length), tf.int32),
        }

    def __call__(self, texts_a, texts_b=None, *, max_seq_length: int,
                 length_buckets: Sequence[int] | None = None) -> dict[str, tf.Tensor]:
        """Tokenizes one or two batches of strings `[B]` and packs them (see `pack_rows`)."""
        segments = [texts_a] if texts_b is None else [texts_a, texts_b]
        texts = tf.stack([tf.convert_to_tensor(t, tf.string) for t in segments], axis=1)
        return self.pack_rows(texts, max_seq_length=max_seq_length, length_buckets=length_buckets)

    def pack_rows(self, texts, *, max_seq_length: int,
                  length_buckets: Sequence[int] | None = None) -> dict[str, tf.Tensor]:
        """Rows of one text or a pair, `texts` `[B, 1]` or `[B, 2]` (the width may be known only
        when it runs), packed as `pack` packs them. Every segment of the batch goes through the
        tokenizer in one pass, so a traced function holds one tokenizer, not one per segment."""
        texts = tf.convert_to_tensor(texts, tf.string)
        ids = self.tokenize(tf.reshape(texts, [-1]))  # row by row: a row's segments are adjacent
        width = texts.shape[1]
        if width == 1:
            return self.pack(ids, max_seq_length=max_seq_length, length_buckets=length_buckets)
        shape = tf.shape(texts, out_type=tf.int64)
        first = tf.range(shape[0]) * shape[1]
        return self.pack(tf.gather(ids, first), tf.gather(ids, first + shape[1] - 1), max_seq_length=max_seq_length,
                         length_buckets=length_buckets, pair=None if width == 2 else tf.equal(shape[1], 2))
