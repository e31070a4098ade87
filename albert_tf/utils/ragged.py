"""Ragged tensors in few graph ops, for the graphs that tokenize and serve text.

The serving signatures (`serve_text` of every task) and the graph tokenizer build their ragged
tensors from partitions they computed, right by construction. TensorFlow's own ragged ops are
general, and in a graph that costs: a constructor checks its partition by default (assertions, each
in a tf.cond: 60-140 ops), `value_rowids()` of a tensor made from its splits and `tf.repeat` build
a [rows, longest row] mask (70 ops, and memory of every row padded to the longest),
`tf.ragged.boolean_mask` and `tf.concat` of ragged rows are 120-150 ops each, and `tf.boolean_mask`
27 for each tensor it cuts. A graph's ops are traced as it is exported, written, read again as it is
loaded, and run at every request: these functions make the same tensors in a few ops each, without
the padding (`python bench/serving_graphs.py`: the tagger's and SQuAD's `serve_text` in half the
nodes, loaded in half the CPU).
"""

from __future__ import annotations

from typing import Sequence

import tensorflow as tf


def from_row_lengths(values, lengths) -> tf.RaggedTensor:
    """`tf.RaggedTensor.from_row_lengths` of a partition known to be right (unchecked)."""
    return tf.RaggedTensor.from_row_lengths(values, lengths, validate=False)


def from_value_rowids(values, rowids, nrows) -> tf.RaggedTensor:
    """`tf.RaggedTensor.from_value_rowids` of sorted row ids known to be below `nrows` (unchecked)."""
    return tf.RaggedTensor.from_value_rowids(values, rowids, nrows=nrows, validate=False)


def from_tensor(tensor, lengths) -> tf.RaggedTensor:
    """`tf.RaggedTensor.from_tensor(tensor, lengths=lengths)` of a [B, N] tensor: row b its first
    `lengths[b]` values."""
    lengths = tf.cast(lengths, tf.int64)
    keep = tf.sequence_mask(lengths, tf.shape(tensor, out_type=tf.int64)[1])
    return from_row_lengths(tf.boolean_mask(tensor, keep), lengths)


def row_ids(splits) -> tf.Tensor:
    """Each value's row (`value_rowids()`) from the row splits, by a search."""
    splits = tf.convert_to_tensor(splits)
    # tf.searchsorted's kernel, without its wrapper's reshapes of 1-D input to 2-D and back.
    values = tf.range(splits[-1], dtype=splits.dtype)
    return tf.raw_ops.UpperBound(sorted_inputs=splits[None, 1:], values=values[None], out_type=splits.dtype)[0]


def lengths_row_ids(lengths) -> tf.Tensor:
    """`row_ids` of rows of `lengths` values: [0] * lengths[0] + [1] * lengths[1] + ..."""
    lengths = tf.convert_to_tensor(lengths)
    return row_ids(tf.pad(tf.math.cumsum(lengths), [[1, 0]]))


def repeat(values, counts) -> tf.Tensor:
    """`tf.repeat(values, counts)` along the first axis."""
    return tf.gather(values, lengths_row_ids(counts))


def boolean_mask(rt: tf.RaggedTensor, keep, rows=None) -> tf.RaggedTensor:
    """`tf.ragged.boolean_mask(rt, rt.with_flat_values(keep))` of a [B, None] `rt`: each row's
    values where `keep` (flat, a bool per value) holds; `rows`: `rt`'s `row_ids`, if at hand."""
    rows = row_ids(rt.row_splits) if rows is None else rows
    lengths = tf.math.unsorted_segment_sum(tf.cast(keep, rows.dtype), rows, rt.nrows(out_type=rows.dtype))
    (values,) = masked(keep, rt.flat_values)
    return from_row_lengths(values, lengths)


def masked(keep, *tensors) -> list[tf.Tensor]:
    """`tf.boolean_mask(tensor, keep)` of each tensor by a 1-D `keep` over their first axis (flat
    values, say), the kept places found once."""
    places = tf.where(keep)[:, 0]
    return [tf.gather(tensor, places) for tensor in tensors]


def concat_rows(*columns: Sequence[tf.RaggedTensor]) -> list[tf.RaggedTensor]:
    """Each of `columns` (a sequence of [B, None] ragged tensors) joined row by row, as
    `tf.concat(column, axis=1)`: the k-th part of every column has the k-th part of the first's row
    lengths, so that one order of the values serves them all."""
    parts = columns[0]
    lengths = [part.row_lengths() for part in parts]
    total = tf.add_n(lengths)
    offset = tf.math.cumsum(total, exclusive=True)  # where each output row starts
    places = []
    for part, length in zip(parts, lengths):
        values = tf.range(tf.size(part.flat_values, out_type=offset.dtype))
        places.append(tf.gather(offset - part.row_starts(), row_ids(part.row_splits)) + values)
        offset += length
    order = tf.math.invert_permutation(tf.concat(places, 0))
    return [from_row_lengths(tf.gather(tf.concat([part.flat_values for part in column], 0), order), total)
            for column in columns]
