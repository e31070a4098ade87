"""One output shard's generation, shared by the local tool (shards.py) and the Beam pipeline.

- A document belongs to shard `shard_of(document, num_shards)`: a stable hash of its text, so a
  cluster that reads files in any order, in pieces, on many machines, puts it in the same shard.
- A shard receives its documents in input order (file, then position in the file) and has its own
  `random.Random`, seeded from (random_seed, shard index), that drives everything in it: documents
  are gathered in small windows (a few dozen), each window is visited dupe_factor times in a fresh
  random order, and its documents supply the random B segments of NSP mode.
- Its records are written in a uniformly random order (a second generator, seeded the same way):
  every record goes to one of `SHUFFLE_BUCKETS` buckets at random, and each bucket, shuffled, is
  written after the previous one. Buckets stay in memory up to `SHUFFLE_MEMORY_BYTES` in all and
  spill to files beyond, so memory is bounded however large the shard. Without this the dupe passes
  of a window lay next to each other and a batch held a handful of documents.
Nothing here imports TensorFlow.
"""

from __future__ import annotations

import hashlib
import os
import random
import struct
from collections.abc import Callable, Iterable, Sequence
from typing import BinaryIO

from albert_tf.data.features import pretraining_feature_layout
from albert_tf.data.tfrecord import RecordWriter, example_encoder
from data_prep.instances import (
    InstanceOptions,
    InstanceStats,
    MaskingVocab,
    create_instances_from_document,
    instance_features,
)

# A window closes at this many documents or tokens, whichever comes first.
WINDOW_DOCUMENTS = 64
WINDOW_TOKENS = 200_000
SHUFFLE_BUCKETS = 64
SHUFFLE_MEMORY_BYTES = 32 << 20


def shard_of(sentences: Sequence[str], num_shards: int) -> int:
    """The shard of a document: a hash of its sentences, independent of where it was read."""
    digest = hashlib.blake2b("\n".join(sentences).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % num_shards


def encode_documents(tokenizer, documents: Sequence[Sequence[str]]) -> list[list[list[int]]]:
    """Each document's sentences as piece ids, sentences without pieces dropped.

    One SentencePiece call for a batch of documents: one call per document costs more than the
    encoding itself. A document left without sentences is to be skipped by the caller.
    """
    encoded = tokenizer.encode_batch([s for sentences in documents for s in sentences], num_threads=1)
    result, position = [], 0
    for sentences in documents:
        result.append([e for e in encoded[position : position + len(sentences)] if e])
        position += len(sentences)
    return result


def shard_rngs(random_seed: int, index: int) -> tuple[random.Random, random.Random]:
    """(instances, record order) generators of shard `index`."""
    return (
        random.Random(f"albert_tf pretraining data: seed {random_seed}, shard {index}"),
        random.Random(f"albert_tf pretraining data: seed {random_seed}, shard {index}, record order"),
    )


class _OtherDocuments(Sequence):
    """The window without one document: where random B segments come from."""

    def __init__(self, window, excluded):
        self._window, self._excluded = window, excluded

    def __len__(self):
        return len(self._window) - 1

    def __getitem__(self, index):
        return self._window[index + (index >= self._excluded)]


class RecordShuffler:
    """Collects records and writes them in a uniformly random order with bounded memory.

    Each record goes to a random bucket; buckets spill to files named `spill_prefix + "NN"` (then
    `"NN.MM"` when a bucket is itself too large to shuffle in memory) once the records held pass
    `memory_bytes`. The order depends only on the generator and the records, never on spilling.
    """

    def __init__(self, rng: random.Random, spill_prefix: str, memory_bytes: int = SHUFFLE_MEMORY_BYTES):
        self._rng = rng
        self._prefix = spill_prefix
        self._memory = memory_bytes
        self._buckets: list[list[bytes]] = [[] for _ in range(SHUFFLE_BUCKETS)]
        self._held = 0
        self._spilled: set[int] = set()
        self.records = 0

    def add(self, record: bytes) -> None:
        self._buckets[self._rng.randrange(SHUFFLE_BUCKETS)].append(record)
        self._held += len(record) + 64
        self.records += 1
        if self._held > self._memory:
            for b, bucket in enumerate(self._buckets):
                if bucket:
                    _append_records(f"{self._prefix}{b:02d}", bucket)
                    self._spilled.add(b)
                    bucket.clear()
            self._held = 0

    def write_to(self, write: Callable[[bytes], None]) -> None:
        """Writes every record, shuffled, and removes the spill files."""
        for b, bucket in enumerate(self._buckets):
            if b in self._spilled:
                path = f"{self._prefix}{b:02d}"
                _append_records(path, bucket)
                bucket.clear()
                self._write_file(path, write)
            else:
                self._rng.shuffle(bucket)
                for record in bucket:
                    write(record)
                bucket.clear()
        self._spilled.clear()

    def _write_file(self, path: str, write: Callable[[bytes], None]) -> None:
        if os.path.getsize(path) <= self._memory:
            records = list(_read_records(path))
            os.remove(path)
            self._rng.shuffle(records)
            for record in records:
                write(record)
            return
        parts = [f"{path}.{k:02d}" for k in range(SHUFFLE_BUCKETS)]
        pending: list[list[bytes]] = [[] for _ in parts]
        held = 0
        for record in _read_records(path):
            pending[self._rng.randrange(SHUFFLE_BUCKETS)].append(record)
            held += len(record) + 64
            if held > self._memory:
                for part, records in zip(parts, pending):
                    _append_records(part, records)
                    records.clear()
                held = 0
        os.remove(path)
        for part, records in zip(parts, pending):
            _append_records(part, records)
            self._write_file(part, write)

    def discard(self) -> None:
        for b in self._spilled:
            _remove_tree(f"{self._prefix}{b:02d}")
        self._spilled.clear()


def _append_records(path: str, records: Sequence[bytes]) -> None:
    with open(path, "ab") as f:
        for record in records:
            f.write(struct.pack("<I", len(record)))
            f.write(record)


def _read_records(path: str) -> Iterable[bytes]:
    with open(path, "rb") as f:
        while header := f.read(4):
            yield f.read(struct.unpack("<I", header)[0])


def _remove_tree(path: str) -> None:
    directory, name = os.path.split(path)
    for entry in os.listdir(directory or "."):
        if entry == name or entry.startswith(name + "."):
            os.remove(os.path.join(directory, entry))


class ShardGenerator:
    """One shard: documents in (as piece ids, in input order), shuffled records out.

    `record_hook(document_number, record)`, when given, sees every record as it is made, with the
    number (from 0, in arrival order) of the document it came from: for measuring record order.
    `shuffle_memory_bytes` bounds the records held before they spill to files; it changes memory
    and disk use, never the bytes written.
    """

    def __init__(
        self,
        index: int,
        options: InstanceOptions,
        vocab: MaskingVocab,
        dupe_factor: int,
        random_seed: int,
        spill_prefix: str,
        record_hook: Callable[[int, bytes], None] | None = None,
        shuffle_memory_bytes: int = SHUFFLE_MEMORY_BYTES,
    ):
        self.index = index
        self.options = options
        self.vocab = vocab
        self.dupe_factor = dupe_factor
        self.rng, order_rng = shard_rngs(random_seed, index)
        self.stats = InstanceStats(options.ngram)
        self.window: list[list[list[int]]] = []
        self.window_tokens = 0
        self.documents = 0
        self._hook = record_hook
        layout = pretraining_feature_layout(options.max_seq_length, options.max_predictions_per_seq)
        self._encode = example_encoder(layout)
        self._records = RecordShuffler(order_rng, spill_prefix, shuffle_memory_bytes)

    def add(self, document: list[list[int]]) -> int:
        """Takes the next document; returns the number of instances made so far from it (for progress)."""
        self.window.append(document)
        self.window_tokens += sum(len(s) for s in document)
        if len(self.window) >= WINDOW_DOCUMENTS or self.window_tokens >= WINDOW_TOKENS:
            return self._flush()
        return 0

    def _flush(self) -> int:
        made = 0
        first = self.documents
        for _ in range(self.dupe_factor):
            order = list(range(len(self.window)))
            self.rng.shuffle(order)
            for d in order:
                instances = create_instances_from_document(
                    self.window[d], self.rng, self.vocab, self.options, _OtherDocuments(self.window, d), self.stats
                )
                for instance in instances:
                    record = self._encode(instance_features(instance, self.options))
                    if self._hook is not None:
                        self._hook(first + d, record)
                    self._records.add(record)
                made += len(instances)
        self.documents += len(self.window)
        self.window = []
        self.window_tokens = 0
        return made

    def finish(self, file: BinaryIO, compression: str) -> int:
        """Writes every record of the shard to `file` (closed at the end); returns the instances made
        by the last window."""
        made = self._flush()
        with RecordWriter(file, compression) as writer:
            self._records.write_to(writer.write)
        return made

    def discard(self) -> None:
        self._records.discard()
