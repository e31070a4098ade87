"""GLUE examples -> fixed-length features, cached by `finetune.cache` and batched by
`finetune.inputs` as every task's are.

Features follow `albert_tf.data.features.classification_feature_spec`, the one spec that the writer,
the reader and serving share. The cache file's name carries a fingerprint of everything the records
depend on (the source file, the SentencePiece model, the sequence length, the conversion code's
version): a changed input gets a new file instead of stale features.
"""

from __future__ import annotations

import os
from typing import Iterable, Iterator

import tensorflow as tf

from albert_tf.data.datasets import traced_as_written
from albert_tf.data.features import EXAMPLE_WEIGHT, classification_feature_spec
from albert_tf.tokenizers.tokenizer import AlbertTokenizer
from finetune import cache, inputs
from finetune.cache import CachedFeatures
from finetune.glue.readers import Example, read_examples, split_path
from finetune.glue.definitions import Task, get_task

# Bump when the conversion changes what a record holds, so that old caches are not reused
# (2: the cache's description moved to finetune.cache, with the spec in it).
FEATURE_FORMAT_VERSION = 2

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


def cache_features(
    task: Task | str,
    data_dir: str | os.PathLike,
    split: str,
    tokenizer: AlbertTokenizer,
    max_seq_length: int,
    cache_dir: str | os.PathLike,
    *,
    skip_bad_rows: bool = False,
    max_examples: int | None = None,
) -> CachedFeatures:
    """Features of one split as a TFRecord file in `cache_dir`, written only if not already there
    (`finetune.cache.cache_features`); `regression` is recorded among its details. `max_examples`
    keeps the split's first N examples only.

    Example:
        >>> cached = cache_features("MRPC", "glue_data", "dev", tokenizer, 128, "/tmp/cache")
        >>> cached.num_examples
        408
    """
    task = get_task(task) if isinstance(task, str) else task
    source = split_path(task, data_dir, split)

    def convert(report):
        # Read at once, so that a malformed row stops the run before anything is written.
        result = read_examples(task, data_dir, split, skip_bad_rows=skip_bad_rows)
        report.num_skipped = len(result.skipped)
        report.details["regression"] = task.is_regression

        def records():
            for features, truncated in _convert(result.examples[:max_examples], task, tokenizer, max_seq_length):
                report.num_truncated += truncated
                yield features

        return records()

    return cache.cache_features(
        task=task.name, split=split, spec=classification_feature_spec(max_seq_length, task.is_regression),
        max_seq_length=max_seq_length, sources=[source],
        settings=(FEATURE_FORMAT_VERSION, skip_bad_rows) + ((("max_examples", max_examples),) if max_examples else ()),
        tokenizer=tokenizer, convert=convert, cache_dir=cache_dir,
    )


def make_dataset(cached: CachedFeatures, *, global_batch_size: int, training: bool, input_context=None,
                 seed=None, shuffle_buffer_size: int = 10_000, max_examples=None,
                 with_index: bool = False) -> tf.data.Dataset:
    """`finetune.inputs.make_dataset`'s batches as the tuples `(inputs, label_ids, weights)` (and
    `index` with `with_index`) that Keras's `fit` takes; the arguments are the same (`max_examples`
    is `max_records`)."""
    dataset = inputs.make_dataset(cached, global_batch_size=global_batch_size, training=training,
                                  input_context=input_context, seed=seed, shuffle_buffer_size=shuffle_buffer_size,
                                  max_records=max_examples, with_index=with_index)

    @traced_as_written
    def as_tuple(batch):
        # Class ids as the records hold them (int64), as this API always gave them.
        labels = batch["label_ids"] if cached.regression else tf.cast(batch["label_ids"], tf.int64)
        parts = ({k: batch[k] for k in ("input_ids", "input_mask", "segment_ids")}, labels, batch[EXAMPLE_WEIGHT])
        return (*parts, batch[inputs.RECORD_INDEX]) if with_index else parts

    return dataset.map(as_tuple)
