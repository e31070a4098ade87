"""What a training run pays to start reading its pretraining files, by how many files it reads.

Times `albert_tf.data.datasets.pretraining_dataset` (is_training, files drawn in proportion to their
records, each file's record count checked as it is read) against the original release's reader
(run_pretraining.py's input_fn: the files shuffled, interleaved, records shuffled and parsed, no
checks), on 1, 4, 16 and 64 files of 64 records each (max_seq_length 32, 5 predictions). Each case
runs in a fresh process (tf.data traces its functions once a pipeline; TensorFlow's own start is
left out), the cases in a fresh random order each repeat; the table gives medians of the process's
CPU seconds (`time.process_time`) to build the dataset and to read its first 4 batches of 8.

    python bench/reader_build.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import pathlib
import random
import statistics
import subprocess
import sys
import tempfile
import time

import harness

FILES = (1, 4, 16, 64)
READERS = ("albert_tf", "release")
SEQ, PREDICTIONS, BATCH = 32, 5, 8


def _write_files(folder: pathlib.Path, count: int) -> None:
    from albert_tf.data.features import pretraining_feature_spec, serialize_example

    spec = pretraining_feature_spec(SEQ, PREDICTIONS)
    rng = random.Random(0)
    import tensorflow as tf

    for i in range(count):
        with tf.io.TFRecordWriter(str(folder / f"pretrain-{i:05d}.tfrecord")) as writer:
            for _ in range(64):
                values = {name: [rng.randrange(1, 100) for _ in range(f.shape[0])] for name, f in spec.items()}
                writer.write(serialize_example(values, spec))


def _release_reader(pattern: str):
    """The release's input_fn for training (run_pretraining.py), in TensorFlow 2's names."""
    import tensorflow as tf

    from albert_tf.data.features import pretraining_feature_spec

    spec = pretraining_feature_spec(SEQ, PREDICTIONS)
    files = tf.io.gfile.glob(pattern)
    d = tf.data.Dataset.from_tensor_slices(tf.constant(files)).repeat().shuffle(buffer_size=len(files))
    d = d.interleave(tf.data.TFRecordDataset, cycle_length=min(4, len(files)),
                     num_parallel_calls=tf.data.AUTOTUNE, deterministic=False)
    d = d.shuffle(buffer_size=100)
    return d.batch(BATCH, drop_remainder=True).map(lambda records: tf.io.parse_example(records, spec))


def child(reader: str, folder: str) -> None:
    """In a fresh process: CPU seconds to build the reader and to read 4 batches, as JSON."""
    harness.quiet_tensorflow("3")
    import tensorflow as tf

    harness.set_threads(2)
    tf.constant(0).numpy()
    from albert_tf.data.datasets import pretraining_dataset

    pattern = f"{folder}/pretrain-*"
    began = time.process_time()
    if reader == "albert_tf":
        dataset = pretraining_dataset(pattern, batch_size=BATCH, max_seq_length=SEQ,
                                      max_predictions_per_seq=PREDICTIONS, is_training=True)
    else:
        dataset = _release_reader(pattern)
    built = time.process_time()
    batches = sum(1 for _ in dataset.take(4))
    assert batches == 4
    print(json.dumps({"build": built - began, "first batches": time.process_time() - built}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    harness.add_repeats(parser, 3)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    harness.quiet_tensorflow("3")
    with tempfile.TemporaryDirectory() as tmp:
        folders = {}
        for count in FILES:
            folders[count] = pathlib.Path(tmp) / str(count)
            folders[count].mkdir()
            _write_files(folders[count], count)
        results = {(reader, count): [] for reader in READERS for count in FILES}
        for _ in range(args.repeats):
            cases = list(results)
            random.shuffle(cases)
            for reader, count in cases:
                out = subprocess.run([sys.executable, __file__, "--child", reader, str(folders[count])],
                                     check=True, capture_output=True, text=True).stdout
                results[reader, count].append(json.loads(out.splitlines()[-1]))
    print(f"CPU seconds, medians of {args.repeats} fresh processes each\n")
    print("| files | albert_tf build | albert_tf first 4 batches | release build | release first 4 batches |")
    print("|---|---|---|---|---|")
    for count in FILES:
        cells = [f"{statistics.median(r[key] for r in results[reader, count]):.2f}"
                 for reader in READERS for key in ("build", "first batches")]
        print(f"| {count} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
