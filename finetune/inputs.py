"""tf.data batches of cached features: the one place where fine-tuning input is batched.

Every task's records go through `make_dataset`: parsed with the spec that the cache recorded,
integer features as int32, each batch a dict. Every batch is full (`drop_remainder=True`: static
shapes for XLA and TPUs). Training shuffles and repeats forever; evaluation and prediction make one
pass in file order and append filler records (all zeros) up to a multiple of the global batch, so
that no real record is dropped and none is counted twice. Each record carries `example_weight`
(1.0 for a record of the file, 0.0 for a filler) and, on request, `record_index`, its position in
the file, with which predictions are put back in file order after several input pipelines
interleaved them.

With `length_buckets` (evaluation and prediction of the tasks that ask for it), each batch's
`input_ids`, `input_mask` and `segment_ids` are cut to the smallest bucket length that holds the
batch's longest row (`albert_tf.tokenizers.length_buckets`): the same rows without padding columns, a handful
of shapes for XLA to compile, and the outputs of padding to `max_seq_length`. With `sort_window`
as well (evaluation and prediction), the records of each window of that many batches are put in
order of length before they are batched, so that short rows share batches with short rows and a
batch's bucket is set by rows like its own rather than by the longest of a random draw; the records
keep their `record_index`, by which prediction puts the outputs back in file order. Training with
`sort_window` groups by length the same way, after the shuffle: each window of shuffled records is
sorted and batched, and the batches of a window are shuffled among themselves, so that a batch costs
about what its tokens cost while the order of lengths stays random (Hugging Face's
`group_by_length`, tf.data's `bucket_by_sequence_length`).
"""

from __future__ import annotations

from typing import Optional, Sequence

import tensorflow as tf

from albert_tf.data.datasets import traced_as_written
from albert_tf.data.features import EXAMPLE_WEIGHT, serialize_example
from albert_tf.tokenizers.length_buckets import bucket_length
from finetune.cache import CachedFeatures

RECORD_INDEX = "record_index"
SEQUENCE_INPUTS = ("input_ids", "input_mask", "segment_ids")


def longest_rows(input_mask: tf.Tensor) -> tf.Tensor:
    """Per record of a batch `[B, ..., T]` (several rows for multiple choice), its longest row's length."""
    lengths = tf.reduce_sum(tf.cast(input_mask, tf.int32), -1)
    return tf.reduce_max(tf.reshape(lengths, [tf.shape(input_mask)[0], -1]), -1)


def filler_features(spec) -> dict:
    """An all-zero record of `spec`: what completes the last evaluation batch."""
    fillers = {}
    for name, feature in spec.items():
        size = 1
        for dim in feature.shape:
            size *= dim
        zero = 0.0 if feature.dtype == tf.float32 else 0
        fillers[name] = [zero] * size if feature.shape else zero
    return fillers


def make_dataset(
    cached: CachedFeatures,
    *,
    global_batch_size: int,
    training: bool,
    input_context: Optional[tf.distribute.InputContext] = None,
    seed: Optional[int] = None,
    shuffle_buffer_size: int = 10_000,
    max_records: Optional[int] = None,
    with_index: bool = False,
    length_buckets: Optional[Sequence[int]] = None,
    sort_window: Optional[int] = None,
) -> tf.data.Dataset:
    """Batches of dicts of the cached features, plus `example_weight` (and `record_index`).

    Args:
        cached: the output of `finetune.cache.cache_features`.
        global_batch_size: batch size over all replicas.
        training: shuffle and repeat (True) or one pass in file order (False).
        input_context: from `distribute_datasets_from_function`; gives the per-replica batch
            size and this input pipeline's shard of the records. None for one device.
        seed: shuffle seed, for a reproducible order.
        shuffle_buffer_size: records held by the shuffle buffer.
        max_records: use only the first this many records (a subset for short runs).
        with_index: add `record_index`, each record's int64 position in the file (fillers
            continue the count).
        length_buckets: sorted lengths, the largest the features' length: each batch's sequence
            inputs (last axis) are cut to the smallest that holds its longest row (`input_mask`).
        sort_window: with `length_buckets`: order the records of each window of this many batches
            by length (the longest row of a record; stable) before batching. Only the order within
            a window changes: the batches and their count stay full. In training the batches of a
            window are then shuffled among themselves (seeded by `seed`). A window counts global
            batches (this pipeline's share of each), so that replicas taking batches in turn get
            the records of one device's batches.
    """
    if global_batch_size < 1:
        raise ValueError(f"global_batch_size must be at least 1, got {global_batch_size}")
    if sort_window is not None and (sort_window < 1 or length_buckets is None):
        raise ValueError(f"sort_window must be a positive number of batches and needs length_buckets, "
                         f"got sort_window={sort_window}, length_buckets={length_buckets}")
    num_pipelines, pipeline_id, batch_size = 1, 0, global_batch_size
    if input_context is not None:
        num_pipelines = input_context.num_input_pipelines
        pipeline_id = input_context.input_pipeline_id
        batch_size = input_context.get_per_replica_batch_size(global_batch_size)
    spec = cached.feature_spec()

    records = tf.data.TFRecordDataset(str(cached.path))
    num_records = cached.num_records
    if max_records is not None:
        records = records.take(max_records)
        num_records = min(num_records, max_records)
    if not training:
        num_fillers = -num_records % global_batch_size
        filler = tf.data.Dataset.from_tensors(serialize_example(filler_features(spec), spec))
        records = records.concatenate(filler.repeat(num_fillers))
    records = records.enumerate()
    if num_pipelines > 1:
        records = records.shard(num_pipelines, pipeline_id)
    if training:
        records = records.shuffle(shuffle_buffer_size, seed=seed, reshuffle_each_iteration=True)
        records = records.repeat()
    if sort_window is not None:
        mask_spec = {"input_mask": spec["input_mask"]}

        @traced_as_written
        def by_length(index, serialized):
            order = tf.argsort(longest_rows(tf.io.parse_example(serialized, mask_spec)["input_mask"]), stable=True)
            return tf.gather(index, order), tf.gather(serialized, order)

        # What this pipeline supplies to one step (one batch or, for several replicas, theirs in
        # turn): the unit sorted windows are counted in and training shuffles, so that a step
        # takes the same records however many replicas share it.
        step_records = global_batch_size // num_pipelines
        records = records.batch(sort_window * step_records).map(by_length).unbatch()
        if training:
            # A window's steps run from its shortest to its longest: shuffled, a window at a time.
            records = (records.batch(step_records, drop_remainder=True)
                       .shuffle(sort_window, seed=None if seed is None else seed + 1).unbatch())
    records = records.batch(batch_size, drop_remainder=True)

    @traced_as_written
    def parse(index, serialized):
        features = tf.io.parse_example(serialized, spec)
        batch = {k: tf.cast(v, tf.int32) if v.dtype == tf.int64 else v for k, v in features.items()}
        batch[EXAMPLE_WEIGHT] = tf.cast(index < num_records, tf.float32)
        if with_index:
            batch[RECORD_INDEX] = index
        if length_buckets is not None:
            length = bucket_length(tf.reduce_max(longest_rows(batch["input_mask"])), length_buckets)
            for name in SEQUENCE_INPUTS:
                batch[name] = batch[name][..., :length]
        return batch

    return records.map(parse, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)
