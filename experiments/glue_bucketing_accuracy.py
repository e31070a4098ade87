"""Does the faster input path change the result? Dev accuracy after a short GLUE fine-tune, with
batches cut to length buckets or padded to max_seq_length, grouped by length or drawn at random,
and in mixed_bfloat16.

Every variant starts from the same random weights (the seed) and trains through the real path
(`finetune.trainer.dataset_fn` and `Trainer.train_steps`), then evaluates the whole dev split with
`finetune.trainer.predict`:
  padded: batches drawn at random, every batch padded to --seq_length (no length buckets);
  bucketed: the same batches, each cut to the smallest length bucket that holds its longest row
      (evaluation also sorts by length within windows);
  grouped: the default, training records grouped by length within windows of shuffled batches
      (other batches than the two above), cut to buckets;
  bf16: grouped, under the mixed_bfloat16 policy, without XLA (oneDNN's bf16 kernels).
The table gives, per seed, the training loss of each logging interval, the final dev accuracy and
loss, the largest difference of the dev logits from the first variant's, and the training time
(the machine may be shared: compare the times only roughly); with several seeds, then each
variant's mean and spread of dev accuracy.

Usage: python experiments/glue_bucketing_accuracy.py [--task SST-2] [--train_steps 200]
       [--variants padded,bucketed,grouped,bf16] [--seeds 12345,1,2]
"""

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
import harness  # noqa: E402  (bench/harness.py: the checkout's paths, the data folder, quiet TensorFlow)


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--task", default="SST-2")
    parser.add_argument("--variants", default="padded,bucketed,bf16")
    harness.add_threads(parser, os.cpu_count())
    parser.add_argument("--albert_config_file", default=None,
                        help="default: a small ALBERT (hidden 64, 2 layers, embedding 32), random weights")
    parser.add_argument("--init_checkpoint", default=None,
                        help="start from this encoder (e.g. an albert-pretrain output_dir such as runs/demo/model, "
                             "with its --spm_model_file) instead of random weights")
    parser.add_argument("--spm_model_file", default=None, help="default: <data_dir>/albert/30k-clean.model")
    parser.add_argument("--seq_length", type=int, default=512)
    parser.add_argument("--train_batch", type=int, default=32)
    parser.add_argument("--eval_batch", type=int, default=64)
    parser.add_argument("--train_steps", type=int, default=200)
    parser.add_argument("--log_every", type=int, default=50)
    parser.add_argument("--learning_rate", type=float, default=1e-3)
    parser.add_argument("--sort_window", type=int, default=None,
                        help="steps per window of grouped training (default: the trainer's SORT_WINDOW)")
    parser.add_argument("--seeds", default="12345", help="comma-separated: a run of every variant per seed")
    parser.add_argument("--jit_compile", type=int, default=1, help="for the float32 variants")
    parser.add_argument("--data_dir", default=str(harness.data_dir()))
    parser.add_argument("--cache_dir", default=os.path.join(tempfile.gettempdir(), "glue_vs_hf_cache"))
    return parser.parse_args()


ARGS = parse_args()
harness.quiet_tensorflow()

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

harness.set_threads(ARGS.threads)

from albert_tf import AlbertConfig  # noqa: E402
from albert_tf.tokenizers.tokenizer import AlbertTokenizer  # noqa: E402
from albert_tf.presets import loader as initialization  # noqa: E402
from albert_tf.training import loop  # noqa: E402
from finetune import trainer  # noqa: E402
from finetune.glue.task import GlueTask  # noqa: E402
from finetune.options import FinetuneOptions  # noqa: E402

SMALL = AlbertConfig(vocab_size=30000, embedding_size=32, hidden_size=64, num_hidden_layers=2,
                     num_attention_heads=2, intermediate_size=256, hidden_dropout_prob=0.0,
                     attention_probs_dropout_prob=0.0)
# name: (length buckets, grouped by length, mixed precision)
VARIANTS = {"padded": (False, False, "none"), "bucketed": (True, False, "none"), "grouped": (True, True, "none"),
            "bf16": (True, True, "bf16")}


def run_variant(name, seed, config, tokenizer, work):
    if ARGS.sort_window is not None:
        trainer.SORT_WINDOW = ARGS.sort_window
    buckets, grouped, precision = VARIANTS[name]
    task = GlueTask(ARGS.task, os.path.join(ARGS.data_dir, "glue"))
    if not buckets:
        task.length_buckets = lambda max_seq_length: None
    train_features = task.features("train", tokenizer, ARGS.seq_length, ARGS.cache_dir)
    dev_features = task.features("dev", tokenizer, ARGS.seq_length, ARGS.cache_dir)
    options = FinetuneOptions(
        output_dir=os.path.join(work, f"{name}-{seed}"), train_batch_size=ARGS.train_batch,
        eval_batch_size=ARGS.eval_batch, max_seq_length=ARGS.seq_length, learning_rate=ARGS.learning_rate,
        num_train_steps=ARGS.train_steps, num_warmup_steps=ARGS.train_steps // 10, steps_per_loop=ARGS.log_every,
        seed=seed, group_by_length=grouped, mixed_precision=precision, jit_compile=bool(ARGS.jit_compile) and precision == "none",
    )
    run = loop.Trainer(config, task, options, tf.distribute.OneDeviceStrategy("/cpu:0"))
    start = None
    if ARGS.init_checkpoint:
        def start(model):
            return initialization.initialize_encoder(model, ARGS.init_checkpoint, None)
    run.restore_or_initialize(start)
    iterator = iter(run.distribute(trainer.dataset_fn(run, train_features, for_training=True), run.per_replica_batch))
    losses = []
    began = time.perf_counter()
    for _ in range(ARGS.train_steps // ARGS.log_every):
        losses.append(run.train_steps(iterator, ARGS.log_every)["loss"])
        print(f"{name}, seed {seed}: step {run.current_step} loss {losses[-1]:.4f}", flush=True)
    seconds = time.perf_counter() - began
    predictions, rate = trainer.predict(run, dev_features)
    logits = predictions["logits"]
    results = task.evaluate("dev", predictions, dev_features)
    print(f"{name}, seed {seed}: dev {results} in {seconds:.0f} s of training, evaluation {rate:.1f} examples/s", flush=True)
    return {"losses": losses, "results": results, "logits": logits, "seconds": seconds, "eval_rate": rate}


def main():
    if ARGS.init_checkpoint:
        config = initialization.init_config(ARGS.init_checkpoint, ARGS.albert_config_file)
    else:
        config = AlbertConfig.from_json_file(ARGS.albert_config_file) if ARGS.albert_config_file else SMALL
    tokenizer = AlbertTokenizer(ARGS.spm_model_file or os.path.join(ARGS.data_dir, "albert", "30k-clean.model"))
    work = tempfile.mkdtemp(prefix="glue_bucketing_accuracy_")
    names = ARGS.variants.split(",")
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        raise SystemExit(f"--variants: unknown {unknown}; known: {sorted(VARIANTS)}")
    seeds = [int(seed) for seed in ARGS.seeds.split(",")]
    outcome = {(name, seed): run_variant(name, seed, config, tokenizer, work) for seed in seeds for name in names}

    first = names[0]
    model = ARGS.albert_config_file or "small ALBERT (H 64, 2 layers)"
    start = f"from {ARGS.init_checkpoint}" if ARGS.init_checkpoint else "random init"
    window = ARGS.sort_window or trainer.SORT_WINDOW
    print(f"\n{ARGS.task}, {model}, {start}, grouping window {window} steps, max_seq_length {ARGS.seq_length}, batch {ARGS.train_batch}, "
          f"{ARGS.train_steps} steps at learning rate {ARGS.learning_rate}, {ARGS.threads} threads")
    steps = [ARGS.log_every * (k + 1) for k in range(ARGS.train_steps // ARGS.log_every)]
    print("| variant | seed | " + " | ".join(f"loss, steps {s - ARGS.log_every + 1}-{s}" for s in steps)
          + f" | dev accuracy | dev loss | largest logit difference to {first} | training s | evaluation ex/s |")
    print("|---" * (len(steps) + 7) + "|")
    for (name, seed), o in outcome.items():
        difference = float(np.max(np.abs(o["logits"] - outcome[(first, seed)]["logits"])))
        print(f"| {name} | {seed} | " + " | ".join(f"{v:.4f}" for v in o["losses"])
              + f" | {o['results']['accuracy']:.4f} | {o['results']['loss']:.4f} | {difference:.2e} | "
                f"{o['seconds']:.0f} | {o['eval_rate']:.1f} |")
    if len(seeds) > 1:
        print("\n| variant | seeds | dev accuracy, mean | standard deviation | min | max |\n|---|---|---|---|---|---|")
        for name in names:
            accuracies = [outcome[(name, seed)]["results"]["accuracy"] for seed in seeds]
            print(f"| {name} | {len(seeds)} | {np.mean(accuracies):.4f} | {np.std(accuracies, ddof=1):.4f} | "
                  f"{min(accuracies):.4f} | {max(accuracies):.4f} |")


if __name__ == "__main__":
    main()
