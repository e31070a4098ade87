"""GLUE examples -> fixed-length features -> cached TFRecords -> tf.data batches.

Features follow `albert_tf.features.classification_feature_spec`, the one spec that the writer,
the reader and serving share. Tokenizing is the same work for every run on a split, so each split
is written once to a cache file whose name carries a fingerprint of everything the records depend
on (the source file, the SentencePiece model, the sequence length, the conversion code's version):
a changed input gets a new file instead of stale features.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import pathlib
from typing import Iterable, Iterator

import tensorflow as tf

from albert_tf.features import classification_feature_spec, serialize_example
from albert_tf.tokenizer import AlbertTokenizer
from finetune.glue.readers import Example, read_examples, split_path
from finetune.glue.tasks import Task, get_task

# Bump when the conversion changes what a record holds, so that old caches are not reused.
FEATURE_FORMAT_VERSION = 1

# Examples tokenized per SentencePiece call: batching is several times faster than one call per
# text, and this many keeps memory flat however large the split.
_ENCODE_CHUNK = 2048


def convert_examples(
    examples: Iterable[Example],
    task: Task | str,
    tokenizer: AlbertTokenizer,
    max_seq_length: int,
) -> Iterator[dict[str, list[int] | int | float]]:
    """Features of each example, in order: `[CLS] a [SEP]` or `[CLS] a [SEP] b [SEP]`, padded.

    Too-long input loses tokens from the end of its longer segment (`AlbertTokenizer.pack`).
    `label_ids` is the label's index in `task.labels`, the score for STS-B, or 0 for an
    unlabelled (prediction) example; `is_real_example` is 1 (0 marks the padding of eval sets).
    """
    for features, _ in _convert(examples, task, tokenizer, max_seq_length):
        yield features


def _convert(
    examples: Iterable[Example],
    task: Task | str,
    tokenizer: AlbertTokenizer,
    max_seq_length: int,
) -> Iterator[tuple[dict[str, list[int] | int | float], bool]]:
    """`convert_examples`, with whether each example lost tokens to fit."""
    task = get_task(task) if isinstance(task, str) else task
    chunk: list[Example] = []
    for example in examples:
        chunk.append(example)
        if len(chunk) == _ENCODE_CHUNK:
            yield from _convert_chunk(chunk, task, tokenizer, max_seq_length)
            chunk = []
    if chunk:
        yield from _convert_chunk(chunk, task, tokenizer, max_seq_length)


def _convert_chunk(
    chunk: list[Example], task: Task, tokenizer: AlbertTokenizer, max_seq_length: int
) -> Iterator[tuple[dict[str, list[int] | int | float], bool]]:
    a_ids = tokenizer.encode_batch([e.text_a for e in chunk])
    pairs = [e.text_b for e in chunk if e.text_b is not None]
    b_ids = iter(tokenizer.encode_batch(pairs)) if pairs else iter(())
    for example, a in zip(chunk, a_ids):
        b = next(b_ids) if example.text_b is not None else None
        features: dict[str, list[int] | int | float] = dict(
            tokenizer.pack(a, b, max_seq_length=max_seq_length)
        )
        features["label_ids"] = _label_value(example, task)
        features["is_real_example"] = 1
        needed = len(a) + 2 if b is None else len(a) + len(b) + 3
        yield features, needed > max_seq_length


def _label_value(example: Example, task: Task) -> int | float:
    if task.is_regression:
        return 0.0 if example.label is None else float(example.label)
    return 0 if example.label is None else task.label_id(example.label)


def padding_features(max_seq_length: int, regression: bool) -> dict[str, list[int] | int | float]:
    """An all-padding record with `is_real_example` 0: what fills the last evaluation batch."""
    zeros = [0] * max_seq_length
    return {
        "input_ids": zeros,
        "input_mask": zeros,
        "segment_ids": zeros,
        "label_ids": 0.0 if regression else 0,
        "is_real_example": 0,
    }


@dataclasses.dataclass(frozen=True)
class CachedFeatures:
    """A split's features in a TFRecord file, with what is known about them.

    Args:
        path: the TFRecord file, one record per example in the order of the source file.
        task: the task's name.
        split: the split's name.
        max_seq_length: length of every sequence feature.
        regression: whether `label_ids` is a float score.
        num_examples: records in the file.
        num_skipped: malformed source rows skipped (with `skip_bad_rows`).
        num_truncated: examples that lost tokens to fit `max_seq_length`.
    """

    path: pathlib.Path
    task: str
    split: str
    max_seq_length: int
    regression: bool
    num_examples: int
    num_skipped: int
    num_truncated: int

    def to_json(self) -> str:
        fields = dataclasses.asdict(self)
        fields["path"] = self.path.name
        return json.dumps(fields, indent=2, sort_keys=True)

    @classmethod
    def from_json_file(cls, path: pathlib.Path) -> "CachedFeatures":
        fields = json.loads(path.read_text(encoding="utf-8"))
        fields["path"] = path.with_name(fields["path"])
        return cls(**fields)


def _fingerprint(
    task: Task,
    split: str,
    source: pathlib.Path,
    tokenizer: AlbertTokenizer,
    max_seq_length: int,
    skip_bad_rows: bool,
) -> str:
    digest = hashlib.sha256()
    settings = (
        FEATURE_FORMAT_VERSION,
        task.name,
        split,
        max_seq_length,
        tokenizer.do_lower_case,
        skip_bad_rows,
    )
    digest.update(repr(settings).encode("utf-8"))
    digest.update(hashlib.sha256(tokenizer.model_proto).digest())
    with open(source, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def cache_features(
    task: Task | str,
    data_dir: str | os.PathLike,
    split: str,
    tokenizer: AlbertTokenizer,
    max_seq_length: int,
    cache_dir: str | os.PathLike,
    *,
    skip_bad_rows: bool = False,
) -> CachedFeatures:
    """Features of one split as a TFRecord file in `cache_dir`, written only if not already there.

    The file is written under a temporary name and renamed when complete, and its JSON description
    (`CachedFeatures`) is written after that, so a killed run leaves no file that a rerun trusts.

    Example:
        >>> cached = cache_features("MRPC", "glue_data", "dev", tokenizer, 128, "/tmp/cache")
        >>> cached.num_examples
        408
    """
    task = get_task(task) if isinstance(task, str) else task
    source = split_path(task, data_dir, split)
    fingerprint = _fingerprint(task, split, source, tokenizer, max_seq_length, skip_bad_rows)
    cache_dir = pathlib.Path(cache_dir)
    stem = f"{task.name}-{split}-len{max_seq_length}-{fingerprint[:16]}"
    record_path = cache_dir / f"{stem}.tfrecord"
    description_path = cache_dir / f"{stem}.json"
    if description_path.is_file() and record_path.is_file():
        return CachedFeatures.from_json_file(description_path)

    result = read_examples(task, data_dir, split, skip_bad_rows=skip_bad_rows)
    cache_dir.mkdir(parents=True, exist_ok=True)
    spec = classification_feature_spec(max_seq_length, regression=task.is_regression)
    partial = record_path.with_name(f"{record_path.name}.partial-{os.getpid()}")
    num_truncated = 0
    try:
        with tf.io.TFRecordWriter(str(partial)) as writer:
            for features, truncated in _convert(result.examples, task, tokenizer, max_seq_length):
                writer.write(serialize_example(features, spec))
                num_truncated += truncated
        os.replace(partial, record_path)
    finally:
        partial.unlink(missing_ok=True)
    cached = CachedFeatures(
        path=record_path,
        task=task.name,
        split=split,
        max_seq_length=max_seq_length,
        regression=task.is_regression,
        num_examples=len(result.examples),
        num_skipped=len(result.skipped),
        num_truncated=num_truncated,
    )
    partial = description_path.with_name(f"{description_path.name}.partial-{os.getpid()}")
    partial.write_text(cached.to_json(), encoding="utf-8")
    os.replace(partial, description_path)
    return cached


def make_dataset(
    cached: CachedFeatures,
    *,
    global_batch_size: int,
    training: bool,
    input_context: tf.distribute.InputContext | None = None,
    seed: int | None = None,
    shuffle_buffer_size: int = 10_000,
    max_examples: int | None = None,
    with_index: bool = False,
) -> tf.data.Dataset:
    """Batches of `(inputs, label_ids, weights)` from cached features, as Keras and the custom loop
    take them.

    `inputs` holds int32 `input_ids`, `input_mask` and `segment_ids` of shape
    [per-replica batch, max_seq_length]; `weights` is `is_real_example` as float32. Every batch is
    full (`drop_remainder=True`, static shapes for XLA and TPUs): training repeats a shuffled
    stream forever; evaluation appends padding records of weight 0 up to a multiple of
    `global_batch_size`, so that no real example is dropped and none is counted twice.

    Args:
        cached: the output of `cache_features`.
        global_batch_size: batch size over all replicas.
        training: shuffle and repeat (True) or one pass in file order (False).
        input_context: from `distribute_datasets_from_function`; gives the per-replica batch
            size and this input pipeline's shard of the records. None for one device.
        seed: shuffle seed, for a reproducible order.
        shuffle_buffer_size: records held by the shuffle buffer.
        max_examples: use only the first this many records (a subset for short runs).
        with_index: add a fourth element, each record's int64 position in the file (padding
            records continue the count): with several input pipelines the records reach the
            replicas interleaved, and predictions must be put back in file order.
    """
    if global_batch_size < 1:
        raise ValueError(f"global_batch_size must be at least 1, got {global_batch_size}")
    num_pipelines, pipeline_id, batch_size = 1, 0, global_batch_size
    if input_context is not None:
        num_pipelines = input_context.num_input_pipelines
        pipeline_id = input_context.input_pipeline_id
        batch_size = input_context.get_per_replica_batch_size(global_batch_size)
    spec = classification_feature_spec(cached.max_seq_length, regression=cached.regression)

    records = tf.data.TFRecordDataset(str(cached.path))
    num_examples = cached.num_examples
    if max_examples is not None:
        records = records.take(max_examples)
        num_examples = min(num_examples, max_examples)
    if not training:
        num_padding = -num_examples % global_batch_size
        padding = padding_features(cached.max_seq_length, cached.regression)
        padding_records = tf.data.Dataset.from_tensors(serialize_example(padding, spec))
        records = records.concatenate(padding_records.repeat(num_padding))
    if with_index:
        records = records.enumerate()
    if num_pipelines > 1:
        records = records.shard(num_pipelines, pipeline_id)
    if training:
        records = records.shuffle(shuffle_buffer_size, seed=seed, reshuffle_each_iteration=True)
        records = records.repeat()
    records = records.batch(batch_size, drop_remainder=True)

    def parse(*element):
        index, serialized = element if with_index else (None, element[0])
        features = tf.io.parse_example(serialized, spec)
        inputs = {
            name: tf.cast(features[name], tf.int32)
            for name in ("input_ids", "input_mask", "segment_ids")
        }
        weights = tf.cast(features["is_real_example"], tf.float32)
        if with_index:
            return inputs, features["label_ids"], weights, index
        return inputs, features["label_ids"], weights

    return records.map(parse, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)
