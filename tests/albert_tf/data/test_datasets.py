"""pretraining_dataset: parsing, batching, shuffling, sharding and errors that name their cause."""

import numpy as np
import pytest
import tensorflow as tf

import albert_tf.data.datasets
from albert_tf.data.datasets import count_records, pretraining_dataset
from albert_tf.data.features import EXAMPLE_WEIGHT, pretraining_feature_spec, serialize_example

SEQ, PREDS = 16, 4


def _record(index: int) -> dict:
    """A record whose every feature encodes its index, so order and content can be checked."""
    return {
        "input_ids": [index] + [5] * (SEQ - 1),
        "input_mask": [1] * SEQ,
        "segment_ids": [0] * 8 + [1] * 8,
        "token_boundary": [1] * SEQ,
        "masked_lm_positions": [1, 2, 3, 0],
        "masked_lm_ids": [index % 7, 8, 9, 0],
        "masked_lm_weights": [1.0, 1.0, 1.0, 0.0],
        "next_sentence_labels": [index % 2],
    }


def _write(path, indices, compression="", seq=SEQ, preds=PREDS):
    spec = pretraining_feature_spec(seq, preds)
    with tf.io.TFRecordWriter(str(path), tf.io.TFRecordOptions(compression_type=compression)) as writer:
        for i in indices:
            values = _record(i)
            if seq != SEQ:
                values = {k: (v[:1] * seq if len(v) == SEQ else v) for k, v in values.items()}
            writer.write(serialize_example(values, spec))


@pytest.fixture
def shards(tmp_path):
    """Four files of 25 records: file k holds indices 25k .. 25k+24 (the last one gzip-compressed)."""
    paths = []
    for k in range(4):
        gz = k == 3
        path = tmp_path / f"part-{k}.tfrecord{'.gz' if gz else ''}"
        _write(path, range(25 * k, 25 * k + 25), "GZIP" if gz else "")
        paths.append(path)
    return paths


def _indices(dataset, batches=None):
    out = []
    for n, batch in enumerate(dataset):
        if batches is not None and n >= batches:
            break
        out += batch["input_ids"][:, 0].numpy().tolist()
    return out


def test_evaluation_reads_every_record_once_in_order_with_static_int32_batches(tmp_path, shards):
    dataset = pretraining_dataset(
        str(tmp_path / "part-*"), batch_size=8, max_seq_length=SEQ, max_predictions_per_seq=PREDS, is_training=False
    )
    spec = dataset.element_spec
    assert spec["input_ids"].shape == (8, SEQ) and spec["input_ids"].dtype == tf.int32
    assert spec["masked_lm_weights"].shape == (8, PREDS) and spec["masked_lm_weights"].dtype == tf.float32
    assert spec["next_sentence_labels"].shape == (8, 1) and spec["next_sentence_labels"].dtype == tf.int32
    assert spec[EXAMPLE_WEIGHT].shape == (8,) and spec[EXAMPLE_WEIGHT].dtype == tf.float32
    batches = list(dataset)
    # Files are read round-robin, record by record: 12 full batches of 8, then 4 records and 4 rows
    # of zeros that weigh nothing, so all 100 count once.
    assert len(batches) == 13
    weights = np.concatenate([b[EXAMPLE_WEIGHT].numpy() for b in batches])
    assert weights.tolist() == [1.0] * 100 + [0.0] * 4
    indices = _indices(dataset)
    assert indices[:100] == [25 * k + j for j in range(25) for k in range(4)]
    filler = {name: values[4:].numpy() for name, values in batches[-1].items()}
    assert all(not values.any() for values in filler.values()), filler
    batch = next(iter(dataset))
    assert batch["masked_lm_ids"][:, 0].numpy().tolist() == [i % 7 for i in indices[:8]]
    assert batch["next_sentence_labels"][:, 0].numpy().tolist() == [i % 2 for i in indices[:8]]
    assert batch["segment_ids"].numpy().tolist() == [[0] * 8 + [1] * 8] * 8


def test_training_shuffles_repeats_and_is_reproducible_in_deterministic_mode(shards, monkeypatch):
    # A buffer smaller than the 100 records keeps the test fast and still mixes files and passes.
    monkeypatch.setattr(albert_tf.data.datasets, "SHUFFLE_BUFFER_RECORDS", 64)

    def make(seed):
        return pretraining_dataset(
            [str(p) for p in shards],
            batch_size=10,
            max_seq_length=SEQ,
            max_predictions_per_seq=PREDS,
            is_training=True,
            seed=seed,
            deterministic=True,
        )

    # 1,500 records from 100 repeated: each index is expected 15 times, so missing one has a
    # probability of about 100 * exp(-15) = 3e-5.
    first = _indices(make(1), batches=150)
    assert sorted(set(first)) == list(range(100))
    assert first[:100] != sorted(first[:100])  # shuffled
    assert first == _indices(make(1), batches=150)  # deterministic
    assert first != _indices(make(2), batches=150)


def _shuffle_buffers(dataset) -> list[int]:
    """The buffer sizes of the dataset's record shuffles, read from its graph."""
    graph = tf.compat.v1.GraphDef.FromString(dataset._as_serialized_graph().numpy())
    nodes = {node.name: node for node in graph.node}
    shuffles = [node for node in graph.node if node.op.startswith("ShuffleDataset")]
    return [int(tf.make_ndarray(nodes[node.input[1]].attr["value"].tensor)) for node in shuffles]


def test_a_shuffle_buffer_holds_no_more_than_the_records(shards, monkeypatch):
    # 100 records: the buffer is 100, not 10,000 copies of them (the files' own shuffle is by file).
    def make():
        return pretraining_dataset([str(p) for p in shards], batch_size=10, max_seq_length=SEQ,
                                   max_predictions_per_seq=PREDS, is_training=True, seed=1, deterministic=True)

    assert albert_tf.data.datasets.SHUFFLE_BUFFER_RECORDS == 10_000
    assert max(_shuffle_buffers(make())) == 100
    first = _indices(make(), batches=150)
    assert sorted(set(first)) == list(range(100)) and first[:100] != sorted(first[:100])
    monkeypatch.setattr(albert_tf.data.datasets, "SHUFFLE_BUFFER_RECORDS", 64)
    assert max(_shuffle_buffers(make())) == 64


def test_input_context_gives_each_pipeline_its_own_files(shards):
    seen = []
    for pipeline in range(2):
        context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=pipeline, num_replicas_in_sync=2)
        dataset = pretraining_dataset(
            ",".join(str(p) for p in shards),
            batch_size=5,
            max_seq_length=SEQ,
            max_predictions_per_seq=PREDS,
            is_training=False,
            input_context=context,
        )
        seen.append(set(_indices(dataset)))
    assert seen[0].isdisjoint(seen[1])
    assert seen[0] | seen[1] == set(range(100))
    assert seen[0] == set(range(0, 25)) | set(range(50, 75))


def test_input_context_splits_records_when_files_are_fewer_than_pipelines(shards):
    seen = []
    for pipeline in range(3):
        context = tf.distribute.InputContext(num_input_pipelines=3, input_pipeline_id=pipeline)
        dataset = pretraining_dataset(
            str(shards[0]),
            batch_size=1,
            max_seq_length=SEQ,
            max_predictions_per_seq=PREDS,
            is_training=False,
            input_context=context,
        )
        seen.append(_indices(dataset))
    assert seen[0] == list(range(0, 25, 3)) and seen[1] == list(range(1, 25, 3)) and seen[2] == list(range(2, 25, 3))


def test_a_pattern_matching_nothing_is_named(tmp_path, shards):
    with pytest.raises(ValueError, match=r"input pattern '.*nothing-\*\.tfrecord' matches no file"):
        pretraining_dataset(
            f"{shards[0]},{tmp_path}/nothing-*.tfrecord",
            batch_size=2,
            max_seq_length=SEQ,
            max_predictions_per_seq=PREDS,
            is_training=False,
        )


def test_lengths_that_differ_from_the_flags_name_both_values(shards):
    dataset = pretraining_dataset(
        str(shards[0]), batch_size=4, max_seq_length=SEQ * 2, max_predictions_per_seq=PREDS, is_training=False
    )
    with pytest.raises(
        tf.errors.InvalidArgumentError, match=r"has length\] \[16\] \[but the reader was built for length 32"
    ):
        next(iter(dataset))


@pytest.mark.parametrize("num_records", [None, 40], ids=["training", "evaluation"])
def test_the_parsers_checks_are_single_ops(num_records):
    # Each record check is one Assert op: an Assert of other dtypes than strings and int32 is a
    # tf.cond with a function graph per branch, and each parser held 18 such graphs, traced again by
    # every pipeline a run builds (bench/parser_trace.py). The messages are test_bad_input's and
    # test_lengths_that_differ_from_the_flags_name_both_values'.
    spec = pretraining_feature_spec(SEQ, PREDS)
    parse = albert_tf.data.datasets._parser(spec, 4, num_records=num_records, vocab_size=100)
    inputs = [tf.TensorSpec([4], tf.string)] if num_records is None else [tf.TensorSpec([4], tf.int64),
                                                                          tf.TensorSpec([4], tf.string)]
    graph = tf.function(parse, autograph=False).get_concrete_function(*inputs).graph.as_graph_def()
    assert not graph.library.function
    asserts = [node for node in graph.node if node.op == "Assert"]
    assert len(asserts) == len(spec) + 2  # a length each, and the ids of the two token-id features


def test_a_truncated_file_is_named_when_the_dataset_is_built(tmp_path, shards):
    data = shards[1].read_bytes()
    truncated = tmp_path / "truncated.tfrecord"
    truncated.write_bytes(data[: len(data) // 2])
    assert count_records(str(shards[1])) == 25
    with pytest.raises(ValueError, match=r"TFRecord file .*truncated\.tfrecord is truncated"):
        pretraining_dataset(
            str(truncated), batch_size=2, max_seq_length=SEQ, max_predictions_per_seq=PREDS, is_training=False
        )
    gz = shards[3].read_bytes()
    truncated_gz = tmp_path / "truncated.tfrecord.gz"
    truncated_gz.write_bytes(gz[: len(gz) // 2])
    with pytest.raises(ValueError, match=r"truncated\.tfrecord\.gz is truncated"):
        pretraining_dataset(
            str(truncated_gz), batch_size=2, max_seq_length=SEQ, max_predictions_per_seq=PREDS, is_training=False
        )


def test_a_corrupted_record_is_named_when_it_is_read(tmp_path, shards):
    data = bytearray(shards[1].read_bytes())
    data[len(data) // 2] ^= 0xFF  # inside a payload: only the data checksum can tell
    corrupted = tmp_path / "corrupted.tfrecord"
    corrupted.write_bytes(bytes(data))
    dataset = pretraining_dataset(
        [str(shards[0]), str(corrupted)],
        batch_size=2,
        max_seq_length=SEQ,
        max_predictions_per_seq=PREDS,
        is_training=False,
    )
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"corrupted TFRecord file\] \[.*corrupted\.tfrecord\]"):
        _indices(dataset)
    header = bytearray(shards[1].read_bytes())
    header[2] ^= 0x01  # the first record's length field
    bad_header = tmp_path / "bad_header.tfrecord"
    bad_header.write_bytes(bytes(header))
    with pytest.raises(ValueError, match=r"bad_header\.tfrecord is corrupted: bad record header at byte 0"):
        pretraining_dataset(
            str(bad_header), batch_size=2, max_seq_length=SEQ, max_predictions_per_seq=PREDS, is_training=False
        )


def test_training_draws_each_file_through_one_traced_count_and_names_a_corrupted_file(tmp_path, shards):
    """In training each file is a pipeline of its own (drawn in proportion to its records); their
    record counts are checked by one function traced once, not one traced again for every file
    (16 files: 1.1 s more of CPU before the first batch: bench/reader_build.py)."""
    data = bytearray(shards[1].read_bytes())
    data[len(data) // 2] ^= 0xFF  # inside a payload: only the data checksum can tell
    corrupted = tmp_path / "corrupted.tfrecord"
    corrupted.write_bytes(bytes(data))
    dataset = pretraining_dataset([*map(str, shards), str(corrupted)], batch_size=5, max_seq_length=SEQ,
                                  max_predictions_per_seq=PREDS, is_training=True, seed=1, deterministic=True)
    graph = tf.compat.v1.GraphDef.FromString(dataset._as_serialized_graph().numpy())
    functions = [f.signature.name for f in graph.library.function]
    assert len([name for name in functions if name.startswith("__inference__count_block_")]) == 1
    assert len([name for name in functions if "Dataset_scan__count_block" in name]) == 5  # a scan a file, calling it
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"corrupted TFRecord file\] \[.*corrupted\.tfrecord\]"):
        _indices(dataset, batches=200)  # 1,000 records: the files are read to their ends several times


def test_a_record_damaged_past_the_first_counting_block_is_named_with_the_count(tmp_path):
    """Records are counted in blocks: the count runs on across them, and stops at the damage."""
    block = albert_tf.data.datasets._COUNT_BLOCK_RECORDS
    total, damaged = 2 * block + 10, block + 7
    path = tmp_path / "long.tfrecord"
    _write(path, range(total))
    data = bytearray(path.read_bytes())
    record_bytes = len(data) // total  # every record has the same size here
    data[damaged * record_bytes + record_bytes // 2] ^= 0xFF  # inside that record's payload
    path.write_bytes(bytes(data))
    read = []
    dataset = pretraining_dataset(
        str(path), batch_size=1, max_seq_length=SEQ, max_predictions_per_seq=PREDS, is_training=False
    )
    with pytest.raises(
        tf.errors.InvalidArgumentError,
        match=rf"long\.tfrecord\] \[only this many records could be read:\] \[{damaged}\] \[of\] \[{total}\]",
    ):
        for batch in dataset:
            read += batch["input_ids"][:, 0].numpy().tolist()
    assert read == list(range(damaged))


def test_gzip_is_detected_from_the_suffix_or_forced(tmp_path, shards):
    auto = pretraining_dataset(
        str(shards[3]), batch_size=5, max_seq_length=SEQ, max_predictions_per_seq=PREDS, is_training=False
    )
    assert _indices(auto) == list(range(75, 100))
    copy = tmp_path / "no-suffix.rec"
    copy.write_bytes(shards[3].read_bytes())
    forced = pretraining_dataset(
        str(copy),
        batch_size=5,
        max_seq_length=SEQ,
        max_predictions_per_seq=PREDS,
        is_training=False,
        compression="gzip",
    )
    assert np.array_equal(_indices(forced), list(range(75, 100)))
