"""Sequence lengths to pad batches to: a few static shapes instead of `max_seq_length` every time.

A batch of short texts padded to 512 spends nearly all its work on padding; padded to its own
longest row it would make every batch a new shape, and XLA (or a SavedModel's graph caches)
would compile one program per length. Rounding the longest row up to one of a few bucket lengths
keeps both costs small: powers of two from `smallest` up, then `max_seq_length` itself, e.g.
16, 32, 64, 128, 256, 512. Serving (`albert_tf.export`) and fine-tuning batches share these.

Padding never changes a real token's output: attention masks the padded keys, so a row packed to
any bucket length gives the outputs of the same row packed to `max_seq_length` at its real positions.
"""

from __future__ import annotations

from typing import Sequence

import tensorflow as tf

SMALLEST_BUCKET = 16


def bucket_lengths(max_seq_length: int, smallest: int = SMALLEST_BUCKET) -> tuple[int, ...]:
    """Powers of two from `smallest` below `max_seq_length`, then `max_seq_length`.

    >>> bucket_lengths(512)
    (16, 32, 64, 128, 256, 512)
    >>> bucket_lengths(200)
    (16, 32, 64, 128, 200)
    """
    if not isinstance(max_seq_length, int) or max_seq_length < 1:
        raise ValueError(f"max_seq_length must be a positive integer, got {max_seq_length!r}")
    if not isinstance(smallest, int) or smallest < 1:
        raise ValueError(f"the smallest bucket must be a positive integer, got {smallest!r}")
    lengths = []
    length = smallest
    while length < max_seq_length:
        lengths.append(length)
        length *= 2
    return (*lengths, max_seq_length)


def check_bucket_lengths(lengths: Sequence[int], max_seq_length: int) -> tuple[int, ...]:
    """`lengths` sorted, validated: positive, distinct, the largest equal to `max_seq_length`."""
    lengths = tuple(sorted(int(n) for n in lengths))
    if not lengths or lengths[0] < 1 or len(set(lengths)) != len(lengths) or lengths[-1] != max_seq_length:
        raise ValueError(f"bucket lengths must be distinct positive integers whose largest is "
                         f"max_seq_length ({max_seq_length}), got {list(lengths)}")
    return lengths


def bucket_length(longest, lengths: Sequence[int]):
    """The smallest of the sorted `lengths` that holds `longest` (the last one if none does).

    `longest` is a Python int (returns an int) or a scalar integer tensor (returns an int32 tensor).
    """
    if isinstance(longest, int):
        return next((n for n in lengths if n >= longest), lengths[-1])
    table = tf.constant(lengths, tf.int32)
    index = tf.reduce_sum(tf.cast(table < tf.cast(longest, tf.int32), tf.int32))
    return tf.gather(table, tf.minimum(index, len(lengths) - 1))
