"""Record order (issue 18 item 4), shard assignment by content, inputs identified by content.

Batch composition through the training reader (shuffle buffer 10,000, batches of 256) is compared
with a global shuffle of the same records on two figures: distinct documents per batch, and the
share of record pairs in a batch that come from the same document.
"""

import os
import random

import numpy as np
import pytest

from data_prep.documents import BadInputError
from data_prep.generation import SHUFFLE_BUCKETS, RecordShuffler, shard_of
from data_prep.instances import InstanceOptions
from data_prep.shards import STATS_DIR, GenerationConfig, generate_shards, run_generation

BATCH = 256


def _composition(batches):
    """(mean distinct documents per batch, mean share of same-document pairs per batch)."""
    distinct, shared = [], []
    for labels in batches:
        _, counts = np.unique(labels, return_counts=True)
        distinct.append(len(counts))
        shared.append(float((counts * (counts - 1)).sum()) / (len(labels) * (len(labels) - 1)))
    return float(np.mean(distinct)), float(np.mean(shared))


def _documents_of_records(config, output_dir):
    """Maps each record (by its input_ids and masked positions) to (shard, document) as generated."""
    import tensorflow as tf

    from albert_tf.data.features import pretraining_feature_spec

    made = []
    (output_dir / STATS_DIR).mkdir()
    generate_shards(config, str(output_dir), range(config.num_output_shards), record_hook=lambda *a: made.append(a))
    spec = pretraining_feature_spec(config.options.max_seq_length, config.options.max_predictions_per_seq)
    parsed = tf.io.parse_example([record for _, _, record in made], spec)
    keys = np.concatenate([parsed["input_ids"].numpy(), parsed["masked_lm_positions"].numpy()], axis=1)
    return {row.tobytes(): (shard, document) for row, (shard, document, _) in zip(keys, made)}


def _reader_batches(config, output_dir, documents, seed):
    from albert_tf.data.datasets import pretraining_dataset

    dataset = pretraining_dataset(
        f"{output_dir}/pretrain-*",
        batch_size=BATCH,
        max_seq_length=config.options.max_seq_length,
        max_predictions_per_seq=config.options.max_predictions_per_seq,
        is_training=True,
        seed=seed,
        deterministic=True,  # the figures are then the same on every run, not a draw near the bound
    )
    labels = {d: i for i, d in enumerate(sorted(set(documents.values())))}
    batches = []
    for batch in dataset.take(len(documents) // BATCH):
        keys = np.concatenate([batch["input_ids"].numpy(), batch["masked_lm_positions"].numpy()], axis=1)
        keys = keys.astype(np.int64)
        batches.append([labels[documents[row.tobytes()]] for row in keys])
    return batches, labels


def _global_shuffle_batches(documents, labels, seed):
    all_labels = np.array([labels[d] for d in documents.values()])
    np.random.default_rng(seed).shuffle(all_labels)
    return [all_labels[i : i + BATCH] for i in range(0, len(all_labels) - BATCH + 1, BATCH)]


@pytest.mark.slow
@pytest.mark.parametrize("num_output_shards", [1, 4, 16])
def test_batches_are_composed_like_a_global_shuffles(tmp_path, data_dir, num_output_shards):
    """The reference corpus (87 documents), dupe_factor 8: about 25,000 records, 2.5 reader buffers."""
    corpus = str(data_dir.parent / "reference" / "release-pretraining-data" / "corpus.txt")
    spm_model = str(data_dir / "albert" / "30k-clean.model")
    config = GenerationConfig(
        input_files=(corpus,),
        spm_model_file=spm_model,
        options=InstanceOptions(max_seq_length=128, max_predictions_per_seq=20),
        dupe_factor=8,
        random_seed=1,
        num_output_shards=num_output_shards,
    )
    documents = _documents_of_records(config, tmp_path)
    assert len(documents) > 20_000
    ours, shuffled = [], []
    for seed in (1, 2):
        batches, labels = _reader_batches(config, tmp_path, documents, seed)
        ours.append(_composition(batches))
        shuffled.append(_composition(_global_shuffle_batches(documents, labels, seed)))
    (distinct, shared), (distinct_global, shared_global) = np.mean(ours, axis=0), np.mean(shuffled, axis=0)
    print(f"{num_output_shards} shard(s): {distinct:.1f} documents a batch ({distinct_global:.1f} shuffled), "
          f"{shared:.2%} of pairs share one ({shared_global:.2%} shuffled)")
    assert abs(distinct / distinct_global - 1) < 0.05
    assert abs(shared / shared_global - 1) < 0.05


def test_the_record_shuffler_writes_a_permutation_with_bounded_memory(tmp_path):
    records = [f"record {i}".encode() * (1 + i % 7) for i in range(3000)]
    orders = []
    for memory in (1 << 30, 2000):  # everything in memory; spilled, and buckets split again
        written = []
        shuffler = RecordShuffler(random.Random(5), str(tmp_path / "spill."), memory_bytes=memory)
        for record in records:
            shuffler.add(record)
        shuffler.write_to(written.append)
        assert sorted(written) == sorted(records) and written != records
        assert os.listdir(tmp_path) == []
        orders.append(written)
    # the same generator and records give the same order again
    again = []
    shuffler = RecordShuffler(random.Random(5), str(tmp_path / "spill."), memory_bytes=2000)
    for record in records:
        shuffler.add(record)
    shuffler.write_to(again.append)
    assert again == orders[1]


def test_the_record_shuffler_is_uniform():
    """Where the first of 40 records lands, over 4,000 shuffles: every position about equally often."""
    positions = np.zeros(40)
    for seed in range(4000):
        written = []
        shuffler = RecordShuffler(random.Random(seed), "/nonexistent/", memory_bytes=1 << 20)
        for i in range(40):
            shuffler.add(bytes([i]))
        shuffler.write_to(written.append)
        positions[written.index(b"\x00")] += 1
    expected = 4000 / 40
    chi2 = float(((positions - expected) ** 2 / expected).sum())
    assert chi2 < 70  # 39 degrees of freedom: p > 0.003
    assert SHUFFLE_BUCKETS > 1


def test_a_document_goes_to_the_shard_its_text_names():
    document = ["The first sentence.", "The second one."]
    assert shard_of(document, 1000) == shard_of(list(document), 1000)
    assert shard_of(document, 1000) == 150  # stable across runs, machines and versions
    counts = np.bincount([shard_of([f"document {i}"], 8) for i in range(8000)], minlength=8)
    assert counts.min() > 900


def test_a_rerun_after_an_input_changed_refuses_and_keeps_the_old_shards(tmp_path, small_data_dir):
    """Issue 19 item 3: crash, edit an input keeping its size, rerun: never two datasets mixed."""
    source = small_data_dir / "corpus" / "gutenberg" / "blake-poems.txt"
    text = tmp_path / "poems.txt"
    text.write_bytes(source.read_bytes())
    config = GenerationConfig(
        input_files=(str(text),),
        spm_model_file=str(small_data_dir / "albert" / "30k-clean.model"),
        options=InstanceOptions(max_seq_length=64, max_predictions_per_seq=10),
        dupe_factor=1,
        num_output_shards=2,
    )
    out = tmp_path / "out"
    run_generation(config, str(out), progress=False)
    (out / "pretrain-00001-of-00002.tfrecord").unlink()  # as if the run had died before this shard
    kept = (out / "pretrain-00000-of-00002.tfrecord").read_bytes()
    data = text.read_bytes()
    text.write_bytes(data.replace(b"Tiger", b"Tyger"))
    assert text.stat().st_size == len(data) and text.read_bytes() != data
    with pytest.raises(BadInputError, match=r"holds shards made from other input \(.*poems\.txt changed since: sha256"):
        run_generation(config, str(out), progress=False)
    assert sorted(p.name for p in out.glob("pretrain-*")) == ["pretrain-00000-of-00002.tfrecord"]
    assert (out / "pretrain-00000-of-00002.tfrecord").read_bytes() == kept
