"""Pretraining throughput of the training loop (albert_tf.training), with and without XLA.

    python bench/pretrain_throughput.py --preset albert_base_v2 --batch 8 --seq 128 --steps 20 \\
        [--input_file 'out/train/*.tfrecord']

Times whole updates (forward, backward, LAMB, under the one-device strategy) after a warm-up
loop, on synthetic batches so that only the step is measured; with --input_file it also times the
tf.data reader alone, to check that the input pipeline outruns the step. Prints a table and the
peak resident memory of the process.
"""

import argparse
import resource
import tempfile
import time

import tensorflow as tf

from albert_tf import strategies, training
from albert_tf.config import AlbertConfig


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


def time_steps(config, args, jit_compile):
    options = training.PretrainingOptions(
        output_dir=tempfile.mkdtemp(), train_batch_size=args.batch, max_seq_length=args.seq,
        max_predictions_per_seq=args.predictions, num_train_steps=10**6, num_warmup_steps=0,
        jit_compile=jit_compile, mixed_precision=args.mixed_precision,
    )
    run = training.Pretraining(config, options, strategies.get_strategy("one_device"))
    iterator = iter(run.distribute(synthetic_dataset_fn(args.seq, args.predictions, config.vocab_size),
                                   run.per_replica_batch))
    run.train_steps(iterator, 2)  # trace and compile
    began = time.perf_counter()
    run.train_steps(iterator, args.steps)
    return args.steps / (time.perf_counter() - began)


def time_input(args):
    from albert_tf.datasets import pretraining_dataset

    dataset = pretraining_dataset(args.input_file, batch_size=args.batch, max_seq_length=args.seq,
                                  max_predictions_per_seq=args.predictions, is_training=True, seed=0)
    iterator = iter(dataset)
    next(iterator)
    batches = 200
    began = time.perf_counter()
    for _ in range(batches):
        next(iterator)
    return batches * args.batch / (time.perf_counter() - began)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="albert_base_v2")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--predictions", type=int, default=20)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--mixed_precision", default="none", choices=list(training.MIXED_PRECISION_POLICIES))
    parser.add_argument("--input_file", default=None)
    args = parser.parse_args()
    config = AlbertConfig.from_preset(args.preset)

    rows = []
    for jit in (False, True):
        steps_per_second = time_steps(config, args, jit)
        rows.append((f"{args.preset} step, XLA {'on' if jit else 'off'}", steps_per_second,
                     steps_per_second * args.batch))
    if args.input_file:
        examples = time_input(args)
        rows.append(("input pipeline alone", examples / args.batch, examples))
    print(f"batch {args.batch} x {args.seq}, {args.mixed_precision} precision, {tf.config.threading.get_intra_op_parallelism_threads() or 'all'} threads")
    print(f"{'what':<40} {'steps/s':>10} {'examples/s':>12}")
    for name, steps, examples in rows:
        print(f"{name:<40} {steps:>10.2f} {examples:>12.1f}")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak resident memory: {peak:.0f} MiB")


if __name__ == "__main__":
    main()
