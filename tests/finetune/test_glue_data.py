"""GLUE features, their TFRecord cache and the tf.data input, on real GLUE files and the released
ALBERT SentencePiece model."""

import collections
import os

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.tokenizers.tokenizer import AlbertTokenizer
from finetune import cache
from finetune.glue import data, readers


@pytest.fixture(scope="module")
def tokenizer(small_data_dir):
    return AlbertTokenizer(small_data_dir / "albert" / "30k-clean.model")


@pytest.fixture(scope="module")
def glue_dir(small_data_dir):
    return small_data_dir / "glue"


def test_single_sentence_features(tokenizer, glue_dir):
    example = readers.read_examples("SST-2", glue_dir, "dev").examples[0]
    assert example.text_a == "it 's a charming and often affecting journey . "
    features = next(data.convert_examples([example], "SST-2", tokenizer, 16))
    assert tokenizer.convert_ids_to_tokens(features["input_ids"]) == [
        "[CLS]", "▁it", "▁", "'", "s", "▁a", "▁charming", "▁and", "▁often",
        "▁affecting", "▁journey", "▁", ".", "[SEP]", "<pad>", "<pad>",
    ]  # fmt: skip
    assert features["input_mask"] == [1] * 14 + [0] * 2
    assert features["segment_ids"] == [0] * 16
    assert (features["label_ids"], features["is_real_example"]) == (1, 1)


def test_pair_truncates_the_longer_segment_from_its_end(tokenizer, glue_dir):
    example = readers.read_examples("MRPC", glue_dir, "dev").examples[0]
    a, b = tokenizer.encode(example.text_a), tokenizer.encode(example.text_b)
    assert (len(a), len(b)) == (21, 17)
    # 24 positions leave 21 for the segments: A alone shrinks to 17, then B and A lose one token
    # in turn (B first on ties) down to 11 + 10.
    features = next(data.convert_examples([example], "MRPC", tokenizer, 24))
    assert features["input_ids"] == [2, *a[:11], 3, *b[:10], 3]
    assert tokenizer.convert_ids_to_tokens(a[10:11] + b[9:10]) == ["▁fit", "▁fit"]
    assert features["segment_ids"] == [0] * 13 + [1] * 11
    assert features["input_mask"] == [1] * 24
    assert features["label_ids"] == 1


def test_label_values(tokenizer):
    examples = [
        readers.Example("dev-0", "A man sleeps.", "A man is awake.", "contradiction"),
        readers.Example("dev-1", "A man sleeps.", "A man is asleep.", "entailment"),
        readers.Example("dev-2", "A man sleeps.", "A man dreams.", "neutral"),
        readers.Example("test-0", "A man sleeps.", "Someone sleeps.", None),
    ]
    labels = [f["label_ids"] for f in data.convert_examples(examples, "MNLI", tokenizer, 16)]
    assert labels == [0, 1, 2, 0]
    stsb = [readers.Example("dev-0", "a", "b", 3.8), readers.Example("test-0", "a", "b", None)]
    stsb_labels = [f["label_ids"] for f in data.convert_examples(stsb, "STS-B", tokenizer, 8)]
    assert stsb_labels == [3.8, 0.0]
    rte = [readers.Example("dev-0", "a", "b", "not_entailment")]
    assert next(data.convert_examples(rte, "RTE", tokenizer, 8))["label_ids"] == 1


def _collect(dataset):
    """All batches of a finite dataset as numpy arrays: input ids, labels, weights."""
    ids, labels, weights = [], [], []
    for inputs, label_batch, weight_batch in dataset:
        ids.append(inputs["input_ids"].numpy())
        labels.append(label_batch.numpy())
        weights.append(weight_batch.numpy())
    return np.concatenate(ids), np.concatenate(labels), np.concatenate(weights)


def test_cache_round_trip_and_eval_padding(tokenizer, glue_dir, tmp_path):
    cached = data.cache_features("RTE", glue_dir, "dev", tokenizer, 64, tmp_path)
    examples = readers.read_examples("RTE", glue_dir, "dev").examples
    lengths = [
        len(tokenizer.encode(e.text_a)) + len(tokenizer.encode(e.text_b)) + 3 for e in examples
    ]
    assert (cached.num_examples, cached.num_skipped) == (277, 0)
    assert cached.num_truncated == sum(n > 64 for n in lengths) > 0

    dataset = data.make_dataset(cached, global_batch_size=32, training=False)
    assert dataset.element_spec[0]["input_ids"].shape.as_list() == [32, 64]
    ids, labels, weights = _collect(dataset)
    # 277 real records and 11 of padding fill 9 batches of 32.
    assert ids.shape == (288, 64) and labels.dtype == np.int64 and ids.dtype == np.int32
    np.testing.assert_array_equal(weights, [1.0] * 277 + [0.0] * 11)
    expected = list(data.convert_examples(examples, "RTE", tokenizer, 64))
    np.testing.assert_array_equal(ids[:277], [f["input_ids"] for f in expected])
    np.testing.assert_array_equal(labels[:277], [f["label_ids"] for f in expected])
    assert collections.Counter(labels[:277].tolist()) == {0: 146, 1: 131}
    assert not ids[277:].any() and not labels[277:].any()


def test_regression_records_keep_float_scores(tokenizer, glue_dir, tmp_path):
    cached = data.cache_features("sts-b", glue_dir, "dev", tokenizer, 32, tmp_path)
    assert cached.regression and cached.num_examples == 1500
    _, labels, weights = _collect(data.make_dataset(cached, global_batch_size=100, training=False))
    scores = [e.label for e in readers.read_examples("STS-B", glue_dir, "dev").examples]
    assert labels.dtype == np.float32 and weights.sum() == 1500
    np.testing.assert_allclose(labels, scores, atol=1e-6)


def test_cache_is_reused_only_for_the_same_inputs(tokenizer, glue_dir, tmp_path, monkeypatch):
    task_dir = tmp_path / "glue" / "WNLI"
    task_dir.mkdir(parents=True)
    source = (glue_dir / "WNLI" / "dev.tsv").read_text(encoding="utf-8")
    (task_dir / "dev.tsv").write_text(source, encoding="utf-8")
    cache_dir = tmp_path / "cache"
    first = data.cache_features("WNLI", tmp_path / "glue", "dev", tokenizer, 32, cache_dir)
    assert first.num_examples == 71

    def no_reading(*args, **kwargs):
        raise AssertionError("the cache should have been reused")

    with monkeypatch.context() as patch:
        patch.setattr(data, "read_examples", no_reading)
        again = data.cache_features("WNLI", tmp_path / "glue", "dev", tokenizer, 32, cache_dir)
    assert again == first

    other_length = data.cache_features("WNLI", tmp_path / "glue", "dev", tokenizer, 48, cache_dir)
    (task_dir / "dev.tsv").write_text(source + "71\tOne more.\tAnother.\t1\n", encoding="utf-8")
    edited = data.cache_features("WNLI", tmp_path / "glue", "dev", tokenizer, 32, cache_dir)
    assert len({first.path, other_length.path, edited.path}) == 3
    assert edited.num_examples == 72
    assert sorted(p.suffix for p in cache_dir.iterdir()) == [".json"] * 3 + [".tfrecord"] * 3


def test_interrupted_write_leaves_nothing_trusted(tokenizer, glue_dir, tmp_path, monkeypatch):
    calls = []

    def failing_serialize(values, spec):
        calls.append(1)
        if len(calls) == 100:
            raise KeyboardInterrupt
        return original(values, spec)

    original = cache.serialize_example
    with monkeypatch.context() as patch:
        patch.setattr(cache, "serialize_example", failing_serialize)
        with pytest.raises(KeyboardInterrupt):
            data.cache_features("RTE", glue_dir, "dev", tokenizer, 32, tmp_path)
    assert os.listdir(tmp_path) == []
    assert data.cache_features("RTE", glue_dir, "dev", tokenizer, 32, tmp_path).num_examples == 277


def test_skipped_rows_are_counted(tokenizer, glue_dir, tmp_path):
    task_dir = tmp_path / "MRPC"
    task_dir.mkdir()
    lines = (glue_dir / "MRPC" / "dev.tsv").read_text(encoding="utf-8-sig").splitlines()
    lines[5] = "2\t1\t2\tA label MRPC does not have.\tNone."
    (task_dir / "dev.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(readers.MalformedRowError, match=r"dev\.tsv:6: unknown label '2'"):
        data.cache_features("MRPC", tmp_path, "dev", tokenizer, 32, tmp_path / "cache")
    cached = data.cache_features(
        "MRPC", tmp_path, "dev", tokenizer, 32, tmp_path / "cache", skip_bad_rows=True
    )
    assert (cached.num_examples, cached.num_skipped) == (407, 1)


def test_sharded_training_input(tokenizer, glue_dir, tmp_path):
    cached = data.cache_features("RTE", glue_dir, "dev", tokenizer, 32, tmp_path)
    all_ids, _, _ = _collect(data.make_dataset(cached, global_batch_size=1, training=False))

    def context(pipeline):
        return tf.distribute.InputContext(
            num_input_pipelines=2, input_pipeline_id=pipeline, num_replicas_in_sync=2
        )

    # Evaluation: the two pipelines see disjoint halves that together are every record once.
    halves = [
        _collect(
            data.make_dataset(cached, global_batch_size=8, training=False, input_context=context(i))
        )
        for i in range(2)
    ]
    assert [h[0].shape for h in halves] == [(140, 32), (140, 32)]
    assert sum(h[2].sum() for h in halves) == 277

    # Training: per-replica batches of 4, one shuffled pass over this pipeline's half before the
    # next, and the same order for the same seed.
    def first_batches(seed):
        dataset = data.make_dataset(
            cached, global_batch_size=8, training=True, input_context=context(0), seed=seed
        )
        return _collect(dataset.take(34))

    ids, labels, weights = first_batches(seed=7)
    # Static shapes, as XLA and TPUs need: every batch is full.
    training = data.make_dataset(
        cached, global_batch_size=8, training=True, input_context=context(1)
    )
    assert training.element_spec[0]["input_ids"].shape.as_list() == [4, 32]
    assert training.element_spec[1].shape.as_list() == [4]
    assert ids.shape == (136, 32) and weights.sum() == 136
    shard = collections.Counter(map(tuple, all_ids[0::2].tolist()))
    seen = collections.Counter(map(tuple, ids.tolist()))
    assert not seen - shard
    assert not np.array_equal(ids, all_ids[0::2][:136])  # shuffled, not in file order
    np.testing.assert_array_equal(first_batches(seed=7)[0], ids)
