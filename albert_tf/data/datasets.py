"""tf.data readers of pretraining TFRecords, as training consumes them.

Files written by `albert-create-pretraining-data` and by the original ALBERT tool both load
(same feature names, ALBERT.md §3). Damaged files are reported with their name: TensorFlow's own
"corrupted record at N" does not say which file, so each file's record framing is checked when the
dataset is built, and each file's record count is checked again as it is read.
"""

from __future__ import annotations

import gzip
import os
import struct
from typing import Sequence

import tensorflow as tf

from albert_tf.utils.errors import UserError
from albert_tf.utils.compression import tfrecord_compression
from albert_tf.utils.patterns import expand_patterns
from albert_tf.data.features import (
    EXAMPLE_WEIGHT,
    PRETRAINING_METADATA_FILE,
    read_pretraining_metadata,
    pretraining_feature_spec,
    serialize_example,
)
from albert_tf.data.tfrecord import masked_crc32c

# What albert-create-pretraining-data writes beside its shards: how they were made and whether the
# run finished ("complete"); read here so that training never starts on half a dataset.
METADATA_FILE = PRETRAINING_METADATA_FILE
SHUFFLE_BUFFER_RECORDS = 10_000
# Files a training input pipeline reads at once (a read buffer each): all of them, drawn in proportion
# to their records, when there are at most this many; otherwise this many at a time, in turn.
MAX_OPEN_FILES = 64
_COMPRESSIONS = {"auto": None, "none": "", "": "", "gzip": "GZIP"}


def check_complete(files: Sequence[str]) -> None:
    """Refuses files whose folder's pretraining_data.json says the run that wrote them did not finish.

    An interrupted data-prep run leaves its finished shards in place (a rerun completes it); read
    as they are, they would be a silently smaller and differently mixed dataset.
    """
    for folder in sorted({os.path.dirname(f) for f in files}):
        path = os.path.join(folder, METADATA_FILE)
        if not tf.io.gfile.exists(path):
            continue
        complete = read_pretraining_metadata(path).get("complete")
        if complete is False:
            raise UserError(
                f"{path} says the data-prep run that wrote these files did not finish (complete: false): "
                "rerun albert-create-pretraining-data with the same flags to finish it"
            )


def count_records(path: str, compression: str = "") -> int:
    """Walks a TFRecord file's record headers (not payloads) and returns the number of records.

    Raises ValueError naming the file when a header is damaged or the file ends inside a record.
    Uncompressed files are walked with seeks; GZIP files have to be decompressed.
    """
    count = offset = 0
    try:
        # GFile reads local paths and every filesystem TensorFlow knows (gs://, ...).
        with tf.io.gfile.GFile(path, "rb") as raw:
            f = gzip.GzipFile(fileobj=raw) if compression == "GZIP" else raw
            while header := f.read(12):
                if len(header) < 12:
                    raise UserError(f"TFRecord file {path} is truncated: it ends inside the header at byte {offset}")
                length, length_crc = struct.unpack("<QI", header)
                if masked_crc32c(header[:8]) != length_crc:
                    raise UserError(f"TFRecord file {path} is corrupted: bad record header at byte {offset}")
                if compression == "GZIP":
                    skipped = len(f.read(length + 4))
                else:
                    f.seek(length + 4, 1)
                    skipped = min(length + 4, max(f.size() - offset - 12, 0))
                if skipped < length + 4:
                    raise UserError(
                        f"TFRecord file {path} is truncated: the record at byte {offset} needs {length + 16} bytes, "
                        f"{skipped + 12} are left"
                    )
                offset += length + 16
                count += 1
    except (OSError, EOFError, tf.errors.OpError) as error:
        raise UserError(f"TFRecord file {path} is truncated or unreadable after byte {offset}: {error}") from error
    return count


def traced_as_written(fn):
    """`fn`, for a tf.data transformation (map, filter, scan, interleave) to trace as written.

    tf.data hands its functions to autograph unless told not to: transpiling them cost every
    process 0.34 s of CPU for this reader's and 0.2 s for fine-tuning's (`finetune.inputs`), the
    first time it built them. The functions given here test and loop on Python values only, which
    tracing runs as plain Python; a test on a tensor would fail when the pipeline is built.
    """
    return tf.autograph.experimental.do_not_convert(fn)


def _check(condition: tf.Tensor, message: list) -> tf.Operation:
    """An Assert of `condition` that prints `message` (strings and tensors), its numbers as strings:
    an Assert of data other than strings and int32 is traced as a tf.cond with a graph per branch
    (the training and evaluation parsers' checks traced in 0.60-0.67 s of CPU that way, 0.35-0.40 s
    as one op each: bench/parser_trace.py)."""
    return tf.debugging.Assert(condition, [part if isinstance(part, str) or part.dtype == tf.string
                                           else tf.strings.as_string(part) for part in message])


# Records counted a block at a time: a dataset op per record costs more than reading it.
_COUNT_BLOCK_RECORDS = 256


@tf.function(
    input_signature=[
        (tf.TensorSpec([], tf.int64), tf.TensorSpec([], tf.int64), tf.TensorSpec([], tf.string)),
        tf.TensorSpec([None], tf.string),
    ],
    autograph=False,
)
def _count_block(state, block):
    """scan's step over a file's blocks of records, the last block empty: the file's end, where the
    records seen must be the records expected. The file and the count travel in the state, so one
    trace serves every file (four closures traced for each file cost a run over 16 files 1.1 s more
    of CPU before its first batch: bench/reader_build.py)."""
    seen, expected, filename = state
    is_end = tf.equal(tf.size(block), 0)
    check = _check(
        tf.logical_or(tf.logical_not(is_end), tf.equal(seen, expected)),
        ["corrupted TFRecord file", filename, "only this many records could be read:", seen, "of", expected],
    )
    with tf.control_dependencies([check]):
        return (seen + tf.size(block, out_type=tf.int64), expected, filename), block


@traced_as_written  # interleave's function
def _checked_records(filename: tf.Tensor, compression: tf.Tensor, expected: tf.Tensor) -> tf.data.Dataset:
    """The file's records; fails naming the file if fewer than `expected` could be read."""
    records = tf.data.TFRecordDataset(filename, compression_type=compression).ignore_errors()
    # The empty block after the last is the file's end (a batch is never empty); unbatched, it is no record.
    blocks = records.batch(_COUNT_BLOCK_RECORDS).concatenate(tf.data.Dataset.from_tensors(tf.constant([], tf.string)))
    state = (tf.constant(0, tf.int64), tf.cast(expected, tf.int64), tf.convert_to_tensor(filename, tf.string))
    return blocks.scan(state, _count_block).unbatch()


# Token-id features checked against the model's vocabulary, when the reader is given its size.
_TOKEN_ID_FEATURES = ("input_ids", "masked_lm_ids")


def input_error(error: Exception) -> UserError | None:
    """The reader's own check that failed in `error` as a UserError of one line, else None.

    The checks of the input run inside tf.data, where a failure is an InvalidArgumentError whose
    message is "assertion failed: [part] [value] [part] ..." followed by a graph trace.
    """
    if not isinstance(error, tf.errors.InvalidArgumentError) or "assertion failed: [" not in error.message:
        return None
    first = error.message.split("assertion failed: [", 1)[1].splitlines()[0].replace("\\'", "'")
    return UserError(" ".join(part.strip("[] ") for part in first.rstrip("]").split("] [")))


def _parser(spec: dict, batch_size: int, num_records: int | None, vocab_size: int | None = None):
    """Parses a batch of records; with `num_records` (evaluation) the batch is `(positions,
    records)` and the rows from position `num_records` on, the fillers, get `example_weight` 0.
    With `vocab_size`, a token id outside [0, vocab_size) fails (under XLA the model's own check
    of its ids is compiled away, and such an id reads garbage: a NaN loss some steps later)."""
    names = sorted(spec)

    @traced_as_written
    def parse(*batch: tf.Tensor) -> dict[str, tf.Tensor]:
        positions, serialized = batch if num_records is not None else (None, batch[0])
        ragged = tf.io.parse_example(
            serialized, {name: tf.io.RaggedFeature(spec[name].dtype, row_splits_dtype=tf.int64) for name in names}
        )
        features = {}
        for name in names:
            length = spec[name].shape[0]
            lengths = ragged[name].row_lengths()
            # Checked here because FixedLenFeature's own error does not say which flag is wrong.
            check = _check(
                tf.reduce_all(tf.equal(lengths, length)),
                [
                    f"pretraining record feature {name!r} has length",
                    tf.gather(lengths, tf.argmax(tf.cast(tf.not_equal(lengths, length), tf.int32))),
                    f"but the reader was built for length {length} "
                    f"(max_seq_length / max_predictions_per_seq must match the data)",
                ],
            )
            with tf.control_dependencies([check]):
                values = tf.reshape(ragged[name].flat_values, [batch_size, length])
            if vocab_size is not None and name in _TOKEN_ID_FEATURES:
                bad = tf.logical_or(values < 0, values >= vocab_size)
                check = _check(
                    tf.logical_not(tf.reduce_any(bad)),
                    [
                        f"pretraining record feature {name!r} holds the token id",
                        tf.boolean_mask(values, bad)[:1],
                        f"outside the model's vocabulary of {vocab_size}: the data was made with another "
                        "SentencePiece model than the config's vocab_size",
                    ],
                )
                with tf.control_dependencies([check]):
                    values = tf.identity(values)
            features[name] = values if values.dtype == tf.float32 else tf.cast(values, tf.int32)
        if num_records is not None:
            features[EXAMPLE_WEIGHT] = tf.cast(positions < num_records, tf.float32)
        return features

    return parse


def pretraining_dataset(
    file_patterns: str | Sequence[str],
    *,
    batch_size: int,
    max_seq_length: int,
    max_predictions_per_seq: int,
    is_training: bool,
    input_context: tf.distribute.InputContext | None = None,
    seed: int | None = None,
    deterministic: bool = False,
    compression: str = "auto",
    vocab_size: int | None = None,
) -> tf.data.Dataset:
    """Batches of pretraining features: int32 tensors (float32 `masked_lm_weights`), static shapes.

    Args:
        file_patterns: comma-separated globs, or a list of globs. A glob matching nothing is an error.
        batch_size: examples per batch for this input pipeline (per replica under a strategy's
            `distribute_datasets_from_function`).
        max_seq_length, max_predictions_per_seq: must equal what the data was written with.
        is_training: shuffle files and records and repeat forever; otherwise one ordered pass.
        input_context: this pipeline's share of the files (or of the records, when there are fewer
            files than pipelines).
        seed: seed of the shuffles.
        deterministic: same order on every run (fixed seed 0 when `seed` is None, ordered interleave).
        compression: "auto" (".gz"/".gzip" suffix means GZIP), "gzip" or "none".
        vocab_size: when given, token ids outside [0, vocab_size) are an error (see `input_error`).

    Returns:
        A dataset of dicts with `input_ids`, `input_mask`, `segment_ids`, `token_boundary`
        `[batch, max_seq_length]`, `masked_lm_positions`, `masked_lm_ids`, `masked_lm_weights`
        `[batch, max_predictions_per_seq]` and `next_sentence_labels` `[batch, 1]` (the SOP label);
        in evaluation also `example_weight` `[batch]`, 1 for a record and 0 for the all-zero rows
        that fill up the last step of every replica, so that every record counts once.
    """
    if compression.lower() not in _COMPRESSIONS:
        raise ValueError(f"compression must be 'auto', 'gzip' or 'none', got {compression!r}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be positive, got {batch_size}")
    spec = pretraining_feature_spec(max_seq_length, max_predictions_per_seq)
    files = expand_patterns(file_patterns)
    check_complete(files)
    if deterministic and seed is None:
        seed = 0
    fixed = _COMPRESSIONS[compression.lower()]
    compressions = [fixed if fixed is not None else tfrecord_compression(f) for f in files]

    shard_records = False
    if input_context is not None and input_context.num_input_pipelines > 1:
        if len(files) >= input_context.num_input_pipelines:
            keep = slice(input_context.input_pipeline_id, None, input_context.num_input_pipelines)
            files, compressions = files[keep], compressions[keep]
        else:
            shard_records = True
    counts = [count_records(f, c) for f, c in zip(files, compressions)]
    num_records = sum(counts)
    if not num_records:
        # Training repeats its input forever: an empty one would hang without a word.
        shown = ", ".join(files[:3]) + (f" and {len(files) - 3} more" if len(files) > 3 else "")
        split = input_context is not None and input_context.num_input_pipelines > 1 and not shard_records
        share = " (this input pipeline's share)" if split else ""
        raise UserError(f"the input files hold no records{share}: {shown}")
    if shard_records:  # this pipeline's share of the records, dealt out one by one
        num_records = len(range(input_context.input_pipeline_id, num_records, input_context.num_input_pipelines))

    if is_training and 1 < len(files) <= MAX_OPEN_FILES:
        # All files are open at once: each record is drawn from a file with a probability
        # proportional to its records, so the files run out together and a stretch of the stream
        # mixes documents as a global shuffle would. Taking the files in turn (as below) would let
        # a large file end alone, and over-represent the documents of the small ones meanwhile.
        dataset = tf.data.Dataset.sample_from_datasets(
            [_checked_records(f, c, n).repeat() for f, c, n in zip(files, compressions, counts)],
            weights=[n / sum(counts) for n in counts],
            seed=seed,
        )
    else:
        dataset = tf.data.Dataset.from_tensor_slices((files, compressions, tf.constant(counts, tf.int64)))
        if is_training:
            dataset = dataset.shuffle(len(files), seed=seed, reshuffle_each_iteration=True).repeat()
        dataset = dataset.interleave(
            _checked_records,
            cycle_length=min(len(files), MAX_OPEN_FILES),
            block_length=1 if is_training else None,
            num_parallel_calls=tf.data.AUTOTUNE,
            deterministic=deterministic or not is_training,
        )
    if shard_records:
        dataset = dataset.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    if is_training:
        # No larger than the records: a buffer of all of them already draws from the whole data, and
        # filling a larger one with repeats of a small set cost every run's first step (0.65 s of
        # CPU for 192 records) and put copies of one record side by side.
        buffer = min(SHUFFLE_BUFFER_RECORDS, num_records)
        dataset = dataset.shuffle(buffer, seed=seed, reshuffle_each_iteration=True)
    else:
        # Every record once, in full batches (static shapes): all-zero filler records complete the
        # last step of every replica this pipeline feeds (a replica left without a batch would
        # drop that step), and weigh 0.
        replicas = 1 if input_context is None else max(
            input_context.num_replicas_in_sync // input_context.num_input_pipelines, 1)
        filler = serialize_example({name: [0] * feature.shape[0] for name, feature in spec.items()}, spec)
        fillers = tf.data.Dataset.from_tensors(filler).repeat(-num_records % (batch_size * replicas))
        dataset = dataset.concatenate(fillers).enumerate()
    dataset = dataset.batch(batch_size, drop_remainder=True)
    dataset = dataset.map(
        _parser(spec, batch_size, num_records=None if is_training else num_records, vocab_size=vocab_size),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=deterministic or not is_training,
    )
    options = tf.data.Options()
    options.deterministic = deterministic or not is_training
    dataset = dataset.with_options(options)
    return dataset.prefetch(tf.data.AUTOTUNE)
