"""Pretraining throughput of the training loop (albert_tf.training.loop), side by side with the peers.

    python bench/pretrain_throughput.py [--size albert_base_v2] [--batch 8] [--seq 128] \\
        [--repeats 5] [--input_file 'out/train/*.tfrecord']

Rows, all albert base with random weights at batch 8 x 128 with 20 masked positions, 2 threads:
  albert_tf loop, XLA on and off: one whole update of `Trainer.train_steps` (of `PretrainingTask`) (forward, backward,
      LAMB with its exclusions, clipping, under the one-device strategy) on a synthetic batch;
  the peers' train steps from bench/model_throughput.py: keras-hub's AlbertBackbone with an MLM and
      a 2-way head (XLA on and off) and Hugging Face's PyTorch AlbertForPreTraining, each with Adam.
Timings are interleaved, one update of every system per repeat, and the medians reported.
With --input_file it also times the tf.data reader alone (goal: at least 10x what a step consumes).
Peak memory: the resident peak of a separate process that only runs our loop (XLA on) for a few
updates, so the peers' memory is not counted.
"""

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time

import harness

harness.quiet_tensorflow()

import model_throughput  # noqa: E402  (the peers' systems and the FLOP counts)
import tensorflow as tf  # noqa: E402

from albert_tf.training import pretraining  # noqa: E402
from albert_tf.training import strategies
from albert_tf.training import loop
from albert_tf.training.options import MIXED_PRECISION_POLICIES  # noqa: E402
from albert_tf.config import AlbertConfig  # noqa: E402


def synthetic_dataset_fn(seq, predictions, vocab_size):
    def fn(input_context, batch_size):
        features = {
            "input_ids": tf.random.stateless_uniform([batch_size, seq], [1, 2], 5, vocab_size, tf.int32),
            "input_mask": tf.ones([batch_size, seq], tf.int32),
            "segment_ids": tf.zeros([batch_size, seq], tf.int32),
            "masked_lm_positions": tf.random.stateless_uniform([batch_size, predictions], [3, 4], 1, seq, tf.int32),
            "masked_lm_ids": tf.random.stateless_uniform([batch_size, predictions], [5, 6], 5, vocab_size, tf.int32),
            "masked_lm_weights": tf.ones([batch_size, predictions], tf.float32),
            "next_sentence_labels": tf.zeros([batch_size, 1], tf.int32),
        }
        return tf.data.Dataset.from_tensors(features).repeat()

    return fn


def loop_system(config, args, jit_compile):
    """A function of one (ignored) batch that runs one update of our loop and returns its loss."""
    options = pretraining.PretrainingOptions(
        output_dir=tempfile.mkdtemp(), train_batch_size=args.batch, max_seq_length=args.seq,
        max_predictions_per_seq=args.predictions, num_train_steps=10**6, num_warmup_steps=0,
        jit_compile=jit_compile, mixed_precision=args.mixed_precision,
    )
    run = loop.Trainer(config, pretraining.PretrainingTask(), options, strategies.get_strategy("one_device"))
    iterator = iter(run.distribute(synthetic_dataset_fn(args.seq, args.predictions, config.vocab_size),
                                   run.per_replica_batch))
    run.train_steps(iterator, 2)  # trace and compile
    return lambda batch: tf.constant(run.train_steps(iterator, 1)["loss"])


def time_input(args):
    from albert_tf.data.datasets import pretraining_dataset

    dataset = pretraining_dataset(args.input_file, batch_size=args.batch, max_seq_length=args.seq,
                                  max_predictions_per_seq=args.predictions, is_training=True, seed=0)
    iterator = iter(dataset)
    next(iterator)
    batches = 200
    began = time.perf_counter()
    for _ in range(batches):
        next(iterator)
    return batches * args.batch / (time.perf_counter() - began)


def peak_memory_of_our_run(args) -> float:
    """MiB: the resident peak of a child process running only our loop with XLA."""
    command = [sys.executable, os.path.abspath(__file__), "--memory_child", f"--size={args.size}",
               f"--batch={args.batch}", f"--seq={args.seq}", f"--predictions={args.predictions}",
               f"--threads={args.threads}", f"--mixed_precision={args.mixed_precision}"]
    subprocess.run(command, check=True)
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", default="albert_base_v2")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--predictions", type=int, default=20)
    harness.add_repeats(parser, 5)
    harness.add_threads(parser)
    parser.add_argument("--mixed_precision", default="none", choices=list(MIXED_PRECISION_POLICIES))
    harness.add_skip(parser)
    parser.add_argument("--input_file", default=None)
    parser.add_argument("--memory_child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    harness.set_threads(args.threads, torch=True)
    config = AlbertConfig.named(args.size)

    if args.memory_child:
        step = loop_system(config, args, jit_compile=True)
        for _ in range(3):
            step(None).numpy()
        return

    peak = peak_memory_of_our_run(args)
    builders = {
        "albert_tf loop XLA": lambda: loop_system(config, args, True),
        "albert_tf loop no-XLA": lambda: loop_system(config, args, False),
        "keras-hub XLA": lambda: model_throughput.keras_hub_system(config, True)[1],
        "keras-hub no-XLA": lambda: model_throughput.keras_hub_system(config, False)[1],
        "HF PyTorch": lambda: model_throughput.hugging_face_system(config)[1],
    }
    skip = set(filter(None, args.skip.split(",")))
    systems = {name: build() for name, build in builders.items() if name not in skip}
    batch = model_throughput.random_batch(config, args.batch, args.seq, args.predictions)
    for name, step in systems.items():  # compile and warm up before timing
        for _ in range(2):
            model_throughput.block(step(batch))
    row = f"update {args.batch}x{args.seq}, {args.predictions} masked"
    medians = model_throughput.median_times(systems, {row: (lambda step: step, batch)}, args.repeats)

    print(f"\n{args.size}, {args.mixed_precision} precision, {args.threads} threads, "
          f"median of {args.repeats} interleaved repeats")
    harness.print_table(["system", "s/update", "updates/s", "examples/s"],
                        [[name, f"{medians[row, name]:.3f}", f"{1 / medians[row, name]:.3f}",
                          f"{args.batch / medians[row, name]:.2f}"] for name in systems])
    peers = [medians[row, n] for n in systems if not n.startswith("albert_tf")]
    if "albert_tf loop XLA" in systems and peers:
        print(f"ours (loop, XLA) / fastest peer: {medians[row, 'albert_tf loop XLA'] / min(peers):.2f} (time)")
    if args.input_file:
        examples = time_input(args)
        consumed = args.batch / medians[row, "albert_tf loop XLA"] if "albert_tf loop XLA" in systems else None
        ratio = f", {examples / consumed:,.0f}x what the XLA loop consumes" if consumed else ""
        print(f"input pipeline alone: {examples:,.0f} examples/s{ratio}")
    print(f"peak resident memory of our loop alone (XLA, separate process): {peak:.0f} MiB")


if __name__ == "__main__":
    main()
