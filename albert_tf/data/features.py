"""TFRecord feature specs, defined once for the writers, the tf.data readers and serving parsers.

The pretraining names and dtypes are those of the original ALBERT release, so records written by
either tool load in either model. A layout (name -> (kind, length)) is the TensorFlow-free form of a
spec: data-prep workers write records from it with `albert_tf.data.tfrecord`, and TensorFlow is imported
only by the functions here that build TensorFlow objects.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Mapping

from albert_tf.utils.validation import require_positive_ints

# Not in the records: the reader adds it to evaluation batches, 1 for a record and 0 for a filler
# row completing the last step; the pretraining losses weight examples by it where it is present.
EXAMPLE_WEIGHT = "example_weight"
# Written by data prep beside the pretraining records (settings, counts, "complete"); the reader
# checks it. Here, not in datasets.py, so that data prep never imports TensorFlow.
PRETRAINING_METADATA_FILE = "pretraining_data.json"

if TYPE_CHECKING:
    import tensorflow as tf


def read_pretraining_metadata(path: str) -> dict:
    """The object of a `pretraining_data.json` (local or gs://...); a UserError naming the file when
    it is not JSON, or not the object data prep writes."""
    import json

    from albert_tf.utils.errors import UserError
    from albert_tf.utils.files import files_for

    with files_for(path).open(path, "rb") as f:
        raw = f.read()
    try:
        value = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as error:
        raise UserError(f"{path}: not valid JSON: not UTF-8 ({error.reason} at byte {error.start})") from None
    except json.JSONDecodeError as error:
        raise UserError(f"{path}: not valid JSON: {error.msg} at line {error.lineno} column {error.colno}") from None
    if not isinstance(value, dict) or not isinstance(value.get("settings", {}), dict):
        raise UserError(f"{path} holds {type(value).__name__ if not isinstance(value, dict) else 'settings that are not an object'}, "
                        "not what albert-create-pretraining-data writes (an object of settings, counts and complete)")
    return value


def pretraining_feature_layout(max_seq_length: int, max_predictions_per_seq: int) -> dict[str, tuple[str, int]]:
    """The pretraining record's features as (kind, length): "int64" or "float" lists."""
    require_positive_ints({"max_seq_length": max_seq_length, "max_predictions_per_seq": max_predictions_per_seq})
    return {
        "input_ids": ("int64", max_seq_length),
        "input_mask": ("int64", max_seq_length),
        "segment_ids": ("int64", max_seq_length),
        "token_boundary": ("int64", max_seq_length),
        "masked_lm_positions": ("int64", max_predictions_per_seq),
        "masked_lm_ids": ("int64", max_predictions_per_seq),
        "masked_lm_weights": ("float", max_predictions_per_seq),
        "next_sentence_labels": ("int64", 1),
    }


def pretraining_feature_spec(max_seq_length: int, max_predictions_per_seq: int) -> dict[str, tf.io.FixedLenFeature]:
    """Masked-LM + sentence-order records (ALBERT.md §3).

    `next_sentence_labels` holds the SOP label (0 = original order, 1 = swapped); the name is the
    original's. `token_boundary` is 1 at [CLS], [SEP] and word-start pieces.
    """
    import tensorflow as tf

    dtypes = {"int64": tf.int64, "float": tf.float32}
    return {
        name: tf.io.FixedLenFeature([length], dtypes[kind])
        for name, (kind, length) in pretraining_feature_layout(max_seq_length, max_predictions_per_seq).items()
    }


def classification_feature_spec(max_seq_length: int, regression: bool = False) -> dict[str, tf.io.FixedLenFeature]:
    """Sentence (pair) classification records; `label_ids` is a float32 score when `regression`."""
    import tensorflow as tf

    require_positive_ints({"max_seq_length": max_seq_length})
    sequence = tf.io.FixedLenFeature([max_seq_length], tf.int64)
    return {
        "input_ids": sequence,
        "input_mask": sequence,
        "segment_ids": sequence,
        "label_ids": tf.io.FixedLenFeature([], tf.float32 if regression else tf.int64),
        "is_real_example": tf.io.FixedLenFeature([], tf.int64),
    }


def multiple_choice_feature_spec(max_seq_length: int, num_choices: int = 4) -> dict[str, tf.io.FixedLenFeature]:
    """Multiple-choice records (RACE): each sequence feature holds one row per choice, written
    flat (choice-major) and parsed as [num_choices, max_seq_length]; `label_ids` is the answer's
    index."""
    import tensorflow as tf

    require_positive_ints({"max_seq_length": max_seq_length, "num_choices": num_choices})
    rows = tf.io.FixedLenFeature([num_choices, max_seq_length], tf.int64)
    return {
        "input_ids": rows,
        "input_mask": rows,
        "segment_ids": rows,
        "label_ids": tf.io.FixedLenFeature([], tf.int64),
    }


def span_feature_spec(max_seq_length: int) -> dict[str, tf.io.FixedLenFeature]:
    """Extractive question answering records (SQuAD): one window of a context per record.

    `p_mask` is 1 where no answer can start or end; `start_positions`, `end_positions` the gold
    span (0 = [CLS] when the window has none, then `is_impossible` is 1); `example_index` and
    `window_index` tie the record to its question; `char_starts`, `char_ends` give each window
    piece's characters in the context (-1 elsewhere) and `max_context` marks the pieces that have
    their most context in this window (see finetune/squad/features.py).
    """
    import tensorflow as tf

    require_positive_ints({"max_seq_length": max_seq_length})
    sequence = tf.io.FixedLenFeature([max_seq_length], tf.int64)
    scalar = tf.io.FixedLenFeature([], tf.int64)
    names = ("input_ids", "input_mask", "segment_ids", "p_mask", "char_starts", "char_ends", "max_context")
    scalars = ("start_positions", "end_positions", "is_impossible", "example_index", "window_index")
    return {**{name: sequence for name in names}, **{name: scalar for name in scalars}}


def feature_layout(spec: Mapping[str, tf.io.FixedLenFeature]) -> dict[str, tuple[str, int]]:
    """The layout (name -> (kind, number of values)) of a spec of fixed-length features."""
    import tensorflow as tf

    kinds = {tf.int64: "int64", tf.float32: "float", tf.string: "bytes"}
    layout = {}
    for name, feature in spec.items():
        if feature.dtype not in kinds:
            raise ValueError(f"tf.train.Example cannot hold dtype {feature.dtype.name}")
        length = 1
        for dim in feature.shape:
            length *= dim
        layout[name] = (kinds[feature.dtype], length)
    return layout


def example_builder(spec: Mapping[str, tf.io.FixedLenFeature]) -> Callable[[Mapping], tf.train.Example]:
    """A function turning a dict of python lists (or scalars, or numpy arrays) into a tf.train.Example.

    The keys must be exactly the spec's and each value must have the spec's length, so that what
    is written always parses with the same spec (`albert_tf.data.tfrecord.example_builder`, with
    TensorFlow's message class). The per-feature plan is worked out once, because writers call
    this for every record.
    """
    import tensorflow as tf

    from albert_tf.data.tfrecord import example_builder as layout_example_builder

    return layout_example_builder(feature_layout(spec), tf.train.Example)


def to_example(values: Mapping, spec: Mapping[str, tf.io.FixedLenFeature]) -> tf.train.Example:
    """`example_builder(spec)(values)`: a tf.train.Example of `values` checked against `spec`."""
    return example_builder(spec)(values)


def example_serializer(spec: Mapping[str, tf.io.FixedLenFeature]) -> Callable[[Mapping], bytes]:
    """Like `example_builder`, returning bytes with map entries in a fixed order (reproducible files)."""
    build = example_builder(spec)
    return lambda values: build(values).SerializeToString(deterministic=True)


def serialize_example(values: Mapping, spec: Mapping[str, tf.io.FixedLenFeature]) -> bytes:
    """`values` as a serialized tf.train.Example matching `spec` (see `example_serializer`)."""
    return example_serializer(spec)(values)


def tagging_feature_spec(max_seq_length: int) -> dict[str, tf.io.FixedLenFeature]:
    """Token tagging records (named entities): one window of a sentence per record.

    `label_ids` holds a word's label on its first piece (-1 where nothing is learnt), `word_ids`
    the word's index where the word is read (its first piece, in its most-context window; -1
    elsewhere); `example_index` and `window_index` tie the record to its sentence (see
    `albert_tf.data.tagging`).
    """
    import tensorflow as tf

    require_positive_ints({"max_seq_length": max_seq_length})
    sequence = tf.io.FixedLenFeature([max_seq_length], tf.int64)
    scalar = tf.io.FixedLenFeature([], tf.int64)
    names = ("input_ids", "input_mask", "segment_ids", "label_ids", "word_ids")
    return {**{name: sequence for name in names}, "example_index": scalar, "window_index": scalar}
