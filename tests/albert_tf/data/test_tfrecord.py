"""TFRecords and tf.train.Examples written without TensorFlow equal TensorFlow's own, byte for byte."""

import io
import random
import subprocess
import sys

import pytest
import tensorflow as tf

from albert_tf.data.features import example_serializer, pretraining_feature_layout, pretraining_feature_spec
from albert_tf.data.tfrecord import RecordWriter, crc32c, example_encoder, masked_crc32c, read_records

LAYOUT = {
    **pretraining_feature_layout(16, 4),
    "text": ("bytes", 2),
    "empty": ("int64", 0),
}


def _spec():
    dtypes = {"int64": tf.int64, "float": tf.float32, "bytes": tf.string}
    return {name: tf.io.FixedLenFeature([length], dtypes[kind]) for name, (kind, length) in LAYOUT.items()}


def _random_values(rng):
    values = {}
    for name, (kind, length) in LAYOUT.items():
        if kind == "int64":
            # one-byte, two-byte and three-byte varints, the int64 extremes and negatives
            pool = [0, 1, 127, 128, 255, 16383, 16384, 29999, 2**31, 2**63 - 1, -1, -(2**63)]
            values[name] = [rng.choice(pool) if rng.random() < 0.5 else rng.randrange(30000) for _ in range(length)]
        elif kind == "float":
            values[name] = [rng.choice([0.0, 1.0, -0.5, 0.1, 3.4e38, 1e-45]) for _ in range(length)]
        else:
            values[name] = [bytes(rng.randrange(256) for _ in range(rng.randrange(5))) for _ in range(length)]
    return values


def test_crc32c_matches_the_standard_check_value():
    assert crc32c(b"123456789") == 0xE3069283
    assert crc32c(b"") == 0
    # TensorFlow's masking of the CRC of an empty payload: rotate right 15, add 0xa282ead8
    assert masked_crc32c(b"") == 0xA282EAD8


def test_examples_equal_tensorflows_deterministic_serialization():
    rng = random.Random(0)
    ours, theirs = example_encoder(LAYOUT), example_serializer(_spec())
    for _ in range(300):
        values = _random_values(rng)
        assert ours(values) == theirs(values)


@pytest.mark.parametrize("compression", ["none", "gzip"])
def test_files_equal_tensorflows_writer(tmp_path, compression):
    rng = random.Random(1)
    encode = example_encoder(LAYOUT)
    records = [encode(_random_values(rng)) for _ in range(2000)] + [b"", b"x" * 70000]
    tf_path, our_path = tmp_path / "tf.tfrecord", tmp_path / "ours.tfrecord"
    options = tf.io.TFRecordOptions(compression_type="GZIP" if compression == "gzip" else "")
    with tf.io.TFRecordWriter(str(tf_path), options) as writer:
        for record in records:
            writer.write(record)
    with RecordWriter(open(our_path, "wb"), compression) as writer:
        for record in records:
            writer.write(record)
    assert our_path.read_bytes() == tf_path.read_bytes()
    if compression == "none":
        assert read_records(io.BytesIO(our_path.read_bytes())) == records


def test_a_wrong_length_or_name_is_refused():
    encode = example_encoder({"a": ("int64", 2)})
    with pytest.raises(ValueError, match=r"feature 'a' has 3 values, the spec wants 2"):
        encode({"a": [1, 2, 3]})
    with pytest.raises(ValueError, match=r"missing \['a'\], unexpected \['b'\]"):
        encode({"b": [1, 2]})
    with pytest.raises(ValueError, match=r"kind must be one of"):
        example_encoder({"a": ("int32", 2)})


def test_writing_records_does_not_import_tensorflow():
    code = (
        "import sys, albert_tf.data.tfrecord as t, albert_tf.data.features as f, data_prep.shards, data_prep.generation\n"
        "import data_prep.create_pretraining_data\n"
        "t.example_encoder(f.pretraining_feature_layout(8, 2))\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'keras')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
