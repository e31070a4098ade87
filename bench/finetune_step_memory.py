"""Peak memory of one GLUE fine-tuning update of albert base at a long batch: ours or Hugging Face's.

One system per process (peak RSS is a process's high-water mark): albert_tf's `AlbertClassifier`
with a compiled update (forward, backward, Keras AdamW; with or without XLA) or Hugging Face's
PyTorch `AlbertForSequenceClassification` (forward with labels, backward, torch's AdamW), from the
same config with random weights, on one random batch of `--batch` x `--seq_length` tokens (every
token real). Prints the peak RSS after two updates, the RSS before the first (the framework and
the model), and the time of each update (the first includes tracing and compiling).

Usage: python bench/finetune_step_memory.py --system xla|noxla|hf [--seq_length 384] [--batch 32]
"""

import argparse
import os
import resource
import time

import harness


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--system", required=True, choices=["xla", "noxla", "hf"])
    parser.add_argument("--seq_length", type=int, default=384)
    parser.add_argument("--batch", type=int, default=32)
    harness.add_threads(parser, os.cpu_count())
    parser.add_argument("--size", default="albert_base_v2")
    return parser.parse_args()


ARGS = parse_args()
harness.quiet_tensorflow()

import numpy as np  # noqa: E402

from albert_tf import AlbertConfig  # noqa: E402


def peak_rss_mb() -> int:
    """This process's peak RSS so far (Linux reports ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


def hugging_face_update(config, ids, labels):
    import torch
    import transformers

    from albert_tf.presets.convert import config_to_hf

    torch.set_num_threads(ARGS.threads)
    model = transformers.AlbertForSequenceClassification(transformers.AlbertConfig(**config_to_hf(config), num_labels=2))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    batch = {"input_ids": torch.tensor(ids), "attention_mask": torch.ones(ids.shape, dtype=torch.long),
             "token_type_ids": torch.zeros(ids.shape, dtype=torch.long), "labels": torch.tensor(labels)}

    def update():
        loss = model(**batch).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return float(loss)

    return update


def our_update(config, ids, labels, jit_compile):
    import keras
    import tensorflow as tf

    from albert_tf.models import AlbertClassifier

    harness.set_threads(ARGS.threads)
    model = AlbertClassifier(config, 2)
    optimizer = keras.optimizers.AdamW(1e-5)
    inputs = {"input_ids": tf.constant(ids, tf.int32), "input_mask": tf.ones(ids.shape, tf.int32),
              "segment_ids": tf.zeros(ids.shape, tf.int32)}
    targets = tf.constant(labels)
    model(inputs)
    optimizer.build(model.trainable_variables)

    @tf.function(jit_compile=jit_compile)
    def step():
        with tf.GradientTape() as tape:
            logits = model(inputs, training=True)
            loss = tf.reduce_mean(keras.losses.sparse_categorical_crossentropy(targets, logits, from_logits=True))
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss

    return lambda: float(step())


def main():
    config = AlbertConfig.named(ARGS.size)
    rng = np.random.default_rng(0)
    ids = rng.integers(5, config.vocab_size, (ARGS.batch, ARGS.seq_length))
    labels = rng.integers(0, 2, ARGS.batch)
    update = (hugging_face_update(config, ids, labels) if ARGS.system == "hf"
              else our_update(config, ids, labels, jit_compile=ARGS.system == "xla"))
    before = peak_rss_mb()
    seconds = []
    for _ in range(2):
        began = time.perf_counter()
        update()
        seconds.append(time.perf_counter() - began)
    print(f"{ARGS.size}, {ARGS.system}, batch {ARGS.batch} x {ARGS.seq_length}: peak RSS {peak_rss_mb()} MB "
          f"({before} MB before the first update); updates {seconds[0]:.1f} s (first) and {seconds[1]:.1f} s",
          flush=True)


if __name__ == "__main__":
    main()
