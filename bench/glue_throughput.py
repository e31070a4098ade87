"""GLUE fine-tuning and evaluation throughput of albert base on SST-2 at sequence 128, on the CPU.

Rows (examples per second, after a warm-up call that compiles; the best of the repeats, because
on a shared machine other processes only ever slow a repeat down, and the median beside it):
  fine-tuning: the fine-tuning loop of finetune/trainer.py (forward, backward, the release's
      AdamW with clipping) on cached SST-2 train features, global batch 32 as in the paper;
  evaluation: `finetune.trainer.predict` on SST-2 dev features (input pipeline, compiled forward,
      gathering and reordering the outputs, dropping the padding rows; each batch cut to the
      length bucket of its longest row);
  raw forward: the same compiled forward pass on one in-memory batch of the evaluation batch size,
      padded to --seq_length, called in a loop: the ceiling that evaluation was measured against
      before batches were cut to length buckets (goal: within 10%); evaluation may now pass it.
The model has random weights (throughput does not depend on them); the vocabulary is the released
30k-clean.model from the shared data folder.

Usage: python bench/glue_throughput.py [--threads 2] [--train_steps 4] [--eval_examples 256]
"""

import argparse
import dataclasses
import os
import pathlib
import statistics
import tempfile
import time

import harness


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    harness.add_threads(parser)
    parser.add_argument("--size", default="albert_base_v2")
    parser.add_argument("--albert_config_file", default=None, help="instead of --size")
    parser.add_argument("--spm_model_file", default=None, help="default: <data_dir>/albert/30k-clean.model")
    parser.add_argument("--seq_length", type=int, default=128)
    parser.add_argument("--train_batch", type=int, default=32)
    parser.add_argument("--eval_batch", type=int, default=32)
    parser.add_argument("--train_steps", type=int, default=4, help="timed updates per repeat")
    parser.add_argument("--eval_examples", type=int, default=256, help="dev examples per evaluation")
    harness.add_repeats(parser, 3)
    parser.add_argument("--data_dir", default=str(harness.data_dir()))
    parser.add_argument("--jit_compile", type=int, default=1)
    return parser.parse_args()


ARGS = parse_args()
harness.quiet_tensorflow()

import tensorflow as tf  # noqa: E402

harness.set_threads(ARGS.threads)

from albert_tf import AlbertConfig  # noqa: E402
from albert_tf.tokenizers.tokenizer import AlbertTokenizer  # noqa: E402
from albert_tf.training import loop  # noqa: E402
from finetune import trainer  # noqa: E402
from finetune.glue import data  # noqa: E402
from finetune.glue.task import GlueTask  # noqa: E402
from finetune.options import FinetuneOptions  # noqa: E402
from finetune.glue.definitions import get_task  # noqa: E402


def subset(cached: data.CachedFeatures, n: int, folder: str) -> data.CachedFeatures:
    """The first `n` records of a cached split as a cached split of their own."""
    path = os.path.join(folder, f"{cached.split}-first{n}.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        for record in tf.data.TFRecordDataset(str(cached.path)).take(n):
            writer.write(record.numpy())
    n = min(n, cached.num_records)
    return dataclasses.replace(cached, path=pathlib.Path(path), num_records=n, num_examples=n)


def main():
    glue = os.path.join(ARGS.data_dir, "glue")
    tokenizer = AlbertTokenizer(ARGS.spm_model_file or os.path.join(ARGS.data_dir, "albert", "30k-clean.model"))
    task = get_task("SST-2")
    config = (AlbertConfig.from_json_file(ARGS.albert_config_file) if ARGS.albert_config_file
              else AlbertConfig.named(ARGS.size))
    model_name = os.path.basename(ARGS.albert_config_file) if ARGS.albert_config_file else ARGS.size
    work = tempfile.mkdtemp(prefix="glue_throughput_")
    began = time.perf_counter()
    train = data.cache_features(task, glue, "train", tokenizer, ARGS.seq_length, os.path.join(work, "features"))
    dev = data.cache_features(task, glue, "dev", tokenizer, ARGS.seq_length, os.path.join(work, "features"))
    print(f"tokenized SST-2 train ({train.num_examples}) and dev ({dev.num_examples}) in "
          f"{time.perf_counter() - began:.1f} s")
    dev = subset(dev, ARGS.eval_examples, work)

    options = FinetuneOptions(
        output_dir=os.path.join(work, "run"), train_batch_size=ARGS.train_batch, eval_batch_size=ARGS.eval_batch,
        max_seq_length=ARGS.seq_length, learning_rate=1e-5, num_train_steps=100000, num_warmup_steps=0,
        steps_per_loop=ARGS.train_steps, jit_compile=bool(ARGS.jit_compile), max_train_examples=4096,
    )
    run = loop.Trainer(config, GlueTask(task), options, tf.distribute.OneDeviceStrategy("/cpu:0"))
    iterator = iter(run.distribute(trainer.dataset_fn(run, train, for_training=True), run.per_replica_batch))

    rates = {"fine-tuning": [], "evaluation": [], "raw forward": []}
    run.train_steps(iterator, 1)  # compiles
    trainer.predict(run, dev)  # compiles
    batch = next(iter(data.make_dataset(dev, global_batch_size=ARGS.eval_batch, training=False)))[0]
    tf.nest.map_structure(lambda t: t.numpy(), run._forward(batch))
    forward_calls = max(1, ARGS.eval_examples // ARGS.eval_batch)
    for repeat in range(ARGS.repeats):
        began = time.perf_counter()
        run.train_steps(iterator, ARGS.train_steps)
        rates["fine-tuning"].append(ARGS.train_steps * ARGS.train_batch / (time.perf_counter() - began))
        _, rate = trainer.predict(run, dev)
        rates["evaluation"].append(rate)
        began = time.perf_counter()
        for _ in range(forward_calls):
            outputs = run._forward(batch)
        tf.nest.map_structure(lambda t: t.numpy(), outputs)
        rates["raw forward"].append(forward_calls * ARGS.eval_batch / (time.perf_counter() - began))
        print(f"repeat {repeat + 1}/{ARGS.repeats}: " + ", ".join(f"{k} {v[-1]:.1f}" for k, v in rates.items()),
              flush=True)

    best = {k: max(v) for k, v in rates.items()}
    medians = {k: statistics.median(v) for k, v in rates.items()}
    print(f"\n{model_name}, SST-2, sequence {ARGS.seq_length}, {ARGS.threads} threads, "
          f"XLA {'on' if ARGS.jit_compile else 'off'}, {ARGS.repeats} repeats")
    print(f"| {'row':<12} | {'batch':>5} | {'best ex/s':>9} | {'median ex/s':>11} | {'best vs raw forward':>19} |")
    print(f"|{'-' * 14}|{'-' * 7}|{'-' * 11}|{'-' * 13}|{'-' * 21}|")
    for name, value in best.items():
        batch_size = ARGS.train_batch if name == "fine-tuning" else ARGS.eval_batch
        ratio = f"{value / best['raw forward']:.1%}" if name != "fine-tuning" else ""
        print(f"| {name:<12} | {batch_size:>5} | {value:>9.2f} | {medians[name]:>11.2f} | {ratio:>19} |")
    if best["evaluation"] < 0.9 * best["raw forward"]:
        print("evaluation is more than 10% below raw forward throughput")


if __name__ == "__main__":
    main()
