"""The one feature cache of every fine-tuning task: a split's features, written once as TFRecords.

Tokenizing is the same work for every run on a split, so each split is written once to a cache
file whose name carries a fingerprint of everything the records depend on (the source files, the
SentencePiece model, the task's settings, its feature format version): a changed input gets a new
file instead of stale features. The cache folder may be local or on any filesystem TensorFlow knows
(gs://, ram://): a TPU pod's workers read their input from gs:// only. Every file goes through
`albert_tf.utils.atomic` (written aside and renamed when complete, which TensorFlow does on gs:// by
copying the finished object), the record file first and its JSON description (`CachedFeatures`,
which carries the feature spec, so a reader needs nothing else) last, so a killed run leaves no
file that a rerun trusts; a record file whose count disagrees with its description is rebuilt.

A task gives `cache_features` its records as a function of a `ConversionReport`, which it fills in
while converting (examples read, rows skipped, examples truncated; anything else in `details`).

Example:
    >>> def convert(report):
    ...     for example in read_my_examples(path):
    ...         report.num_examples += 1
    ...         yield {"input_ids": ..., "input_mask": ..., "segment_ids": ..., "label_ids": 1}
    >>> cached = cache_features(task="MyTask", split="dev", spec=spec, max_seq_length=128,
    ...                         sources=[path], settings={"version": 1}, tokenizer=tokenizer,
    ...                         convert=convert, cache_dir="gs://bucket/run/features")
    >>> cached.num_records
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from typing import Callable, Iterable, Mapping, Optional, Sequence

import tensorflow as tf
from absl import logging

from albert_tf.data.features import serialize_example
from albert_tf.utils.atomic import atomic_open, atomic_path
from albert_tf.utils.files import files_for
from albert_tf.tokenizers.tokenizer import AlbertTokenizer

_DTYPES = {"int64": tf.int64, "float32": tf.float32, "string": tf.string}


def spec_to_json(spec: Mapping[str, tf.io.FixedLenFeature]) -> dict:
    return {name: {"shape": list(feature.shape), "dtype": feature.dtype.name} for name, feature in spec.items()}


def spec_from_json(values: Mapping) -> dict[str, tf.io.FixedLenFeature]:
    return {name: tf.io.FixedLenFeature(v["shape"], _DTYPES[v["dtype"]]) for name, v in values.items()}


@dataclasses.dataclass
class ConversionReport:
    """What a task's conversion tells besides its records; it fills this in while it yields them.

    Args:
        num_examples: source examples converted (None: one example per record).
        num_skipped: malformed source rows skipped.
        num_truncated: examples that lost tokens to fit.
        details: anything else the task wants recorded (JSON values), readable as attributes of
            the `CachedFeatures`.
    """

    num_examples: Optional[int] = None
    num_skipped: int = 0
    num_truncated: int = 0
    details: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class CachedFeatures:
    """A split's features in a TFRecord file, with what is known about them.

    Args:
        path: the TFRecord file (a local path or a URL), its records in the order of the source.
        task: the task's name.
        split: the split's name.
        max_seq_length: the sequence length of the features.
        spec: the feature spec as JSON (`feature_spec()` gives the `tf.io.FixedLenFeature`s).
        num_records: records in the file (features; several per example for windowed tasks).
        num_examples: source examples they came from.
        num_skipped: malformed source rows skipped.
        num_truncated: examples that lost tokens to fit.
        details: what else the task recorded; each key reads as an attribute (`cached.regression`).
    """

    path: str
    task: str
    split: str
    max_seq_length: int
    spec: dict
    num_records: int
    num_examples: int
    num_skipped: int = 0
    num_truncated: int = 0
    details: dict = dataclasses.field(default_factory=dict)

    def __getattr__(self, name):
        # Only reached for names that are not fields: a task's details.
        details = self.__dict__.get("details", {})
        if name in details:
            return details[name]
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")

    def feature_spec(self) -> dict[str, tf.io.FixedLenFeature]:
        return spec_from_json(self.spec)

    def to_json(self) -> str:
        fields = dataclasses.asdict(self)
        fields["path"] = os.path.basename(self.path)  # beside the description: the folder may move
        return json.dumps(fields, indent=2, sort_keys=True)

    @classmethod
    def from_json_file(cls, path: str, fs=None) -> "CachedFeatures":
        with (fs or files_for(path)).open(path, "rb") as f:
            fields = json.loads(f.read().decode("utf-8"))
        fields["path"] = os.path.join(os.path.dirname(path), fields["path"])
        return cls(**fields)


def fingerprint(sources: Sequence[str | os.PathLike], tokenizer: AlbertTokenizer, settings) -> str:
    """A digest of the source files' bytes, the SentencePiece model and `repr(settings)`."""
    digest = hashlib.sha256()
    digest.update(repr((settings, tokenizer.do_lower_case)).encode("utf-8"))
    digest.update(hashlib.sha256(tokenizer.model_proto).digest())
    for source in sources:
        with files_for(source).open(os.fspath(source), "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def _damage(record_path: str, num_records: int) -> str | None:
    """Why the cached record file is not the one its description counts, or None when it is."""
    from albert_tf.data.datasets import count_records

    try:
        found = count_records(record_path)
    except ValueError as error:
        return str(error)
    return None if found == num_records else f"{found} records, its description says {num_records}"


def cache_features(
    *,
    task: str,
    split: str,
    spec: Mapping[str, tf.io.FixedLenFeature],
    max_seq_length: int,
    sources: Sequence[str | os.PathLike],
    settings,
    tokenizer: AlbertTokenizer,
    convert: Callable[[ConversionReport], Iterable[Mapping]],
    cache_dir: str | os.PathLike,
) -> CachedFeatures:
    """Features of one split as a TFRecord file in `cache_dir`, written only if not already there.

    Args:
        task, split: names, used in the file name.
        spec: the records' feature spec (`albert_tf.data.features`' conventions).
        max_seq_length: the features' sequence length (in the file name too).
        sources: the files the features come from; their bytes are fingerprinted.
        settings: everything else the records depend on (a task's format version, its options);
            its `repr` is fingerprinted.
        tokenizer: the tokenizer (its model is fingerprinted).
        convert: `convert(report)` yields the records' feature dicts in order and fills `report`;
            it runs only when the cache has no file for this fingerprint.
        cache_dir: where the files go (created if needed): a local folder or a URL (gs://...).
    """
    key = fingerprint(sources, tokenizer, (task, split, max_seq_length, settings))
    cache_dir = os.fspath(cache_dir)
    fs = files_for(cache_dir)
    stem = f"{task}-{split}-len{max_seq_length}-{key[:16]}"
    record_path = os.path.join(cache_dir, f"{stem}.tfrecord")
    description_path = os.path.join(cache_dir, f"{stem}.json")
    if fs.exists(description_path) and fs.exists(record_path):
        cached = CachedFeatures.from_json_file(description_path, fs)
        damage = _damage(record_path, cached.num_records)
        if damage is None:
            return cached
        # A cache is only a copy: a damaged one (a copy cut short, a full disk) is made again.
        logging.warning("feature cache %s is damaged (%s): rebuilding it", record_path, damage)

    report = ConversionReport()
    records = convert(report)
    fs.makedirs(cache_dir)
    num_records = 0
    with atomic_path(record_path, fs) as partial, tf.io.TFRecordWriter(partial) as writer:
        for features in records:
            writer.write(serialize_example(features, spec))
            num_records += 1
    cached = CachedFeatures(
        path=record_path,
        task=task,
        split=split,
        max_seq_length=max_seq_length,
        spec=spec_to_json(spec),
        num_records=num_records,
        num_examples=num_records if report.num_examples is None else report.num_examples,
        num_skipped=report.num_skipped,
        num_truncated=report.num_truncated,
        details=dict(report.details),
    )
    with atomic_open(description_path, "w", fs) as f:
        f.write(cached.to_json())
    return cached
