"""Sequence lengths to pad batches to: a few static shapes instead of `max_seq_length` every time.

A batch of short texts padded to 512 spends nearly all its work on padding; padded to its own
longest row it would make every batch a new shape, and XLA (or a SavedModel's graph caches)
would compile one program per length. Rounding the longest row up to one of a few bucket lengths
keeps both costs small: powers of two from `smallest` up, then `max_seq_length` itself, e.g.
16, 32, 64, 128, 256, 512. Serving (`albert_tf.serving.export`) and fine-tuning batches share these.

Padding never changes a real token's output: attention masks the padded keys, so a row packed to
any bucket length gives the outputs of the same row packed to `max_seq_length` at its real positions.
"""

from __future__ import annotations

from typing import Sequence

import tensorflow as tf

SMALLEST_BUCKET = 16


def bucket_lengths(max_seq_length: int, smallest: int = SMALLEST_BUCKET, steps_per_octave: int = 1) -> tuple[int, ...]:
    """Powers of two from `smallest` below `max_seq_length`, then `max_seq_length`; with
    `steps_per_octave` n > 1, each octave [L, 2L) split into n equal steps (L, L + L/n, ...).

    Finer steps waste less on padding (a batch pads to at most 1 + 1/n times its longest row,
    not twice) at the price of more shapes for XLA to compile: 11 instead of 6 at 512 with n = 2.

    >>> bucket_lengths(512)
    (16, 32, 64, 128, 256, 512)
    >>> bucket_lengths(200)
    (16, 32, 64, 128, 200)
    >>> bucket_lengths(512, steps_per_octave=2)
    (16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512)
    """
    if not isinstance(max_seq_length, int) or max_seq_length < 1:
        raise ValueError(f"max_seq_length must be a positive integer, got {max_seq_length!r}")
    if not isinstance(smallest, int) or smallest < 1:
        raise ValueError(f"the smallest bucket must be a positive integer, got {smallest!r}")
    if not isinstance(steps_per_octave, int) or steps_per_octave < 1:
        raise ValueError(f"steps_per_octave must be a positive integer, got {steps_per_octave!r}")
    lengths = []
    octave = smallest
    while octave < max_seq_length:
        for step in range(steps_per_octave):
            length = octave + -(-octave * step // steps_per_octave)  # rounded up: whole tokens
            if length < max_seq_length and (not lengths or length > lengths[-1]):
                lengths.append(length)
        octave *= 2
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
