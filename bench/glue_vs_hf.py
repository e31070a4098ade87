"""GLUE fine-tuning and evaluation at the paper's 512 tokens: albert_tf's trainer against Hugging
Face's PyTorch AlbertForSequenceClassification with per-batch dynamic padding, in one run.

Ours is the real fine-tuning path: features cached by `finetune.glue.data.cache_features` at
`--seq_length`, batched by the trainer's `dataset_fn` (`finetune.inputs.make_dataset`: training
records grouped by length within windows of shuffled batches, each batch cut to the smallest length
bucket that holds its longest row), updates by `Trainer.train_steps` (the compiled loop:
forward, backward, the release's AdamW with clipping) and evaluation by `finetune.trainer.predict`.
Hugging Face's model is built from the same config (random weights, no download), each batch padded
only to its own longest row as `DataCollatorWithPadding` does: training is forward with labels,
backward, gradient clipping to 1.0 and torch's AdamW, on batches drawn at random from the same
records as its Trainer's default sampler does ("HF PyTorch"), and, as "HF grouped", on our grouped
batches (what its `group_by_length=True` would give it); evaluation is the logits under
`torch.no_grad()`, dev examples in file order.

Each repeat rebuilds our training input from the same seed, so every repeat (and the warm-up that
compiles before timing) sees the same `--train_steps` batches; the timed repeats compile nothing.
A few timed batches are a sample of the lengths: the table of mean columns over `--length_batches`
batches, printed first, says what a long run computes, and the results table gives the timed
batches' own mean columns beside it.
Hugging Face evaluates the dev examples in file order (its Trainer's sequential sampler); ours
sorts them by length within windows of batches, as `finetune.trainer.predict` does. `--ours` picks
our variants (float32 with XLA, the default options; without XLA; mixed_bfloat16 without XLA).
The systems rotate which goes first (PyTorch's OpenMP threads spin a while after their work). The
table gives medians over repeats in examples per second, the ratio ours / Hugging Face's (above 1:
ours is faster), and the mean padded length of a batch for each system and of a real row.

Usage: python bench/glue_vs_hf.py [--tasks SST-2,RTE] [--size albert_base_v2] [--ours xla,noxla,bf16]
       [--rows train,eval] [--repeats 3]
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
    parser.add_argument("--tasks", default="SST-2,RTE")
    harness.add_threads(parser, os.cpu_count())
    parser.add_argument("--size", default="albert_base_v2")
    parser.add_argument("--albert_config_file", default=None, help="instead of --size")
    parser.add_argument("--spm_model_file", default=None, help="default: <data_dir>/albert/30k-clean.model")
    parser.add_argument("--seq_length", type=int, default=512)
    parser.add_argument("--train_batch", type=int, default=32)
    parser.add_argument("--eval_batch", type=int, default=64)
    parser.add_argument("--train_steps", type=int, default=2, help="timed updates per repeat")
    parser.add_argument("--train_examples", type=int, default=2048, help="training records drawn from")
    parser.add_argument("--eval_examples", type=int, default=128, help="dev examples per evaluation")
    harness.add_repeats(parser, 3)
    parser.add_argument("--rows", default="train,eval", help="what to time: train (fine-tuning), eval")
    parser.add_argument("--length_batches", type=int, default=500,
                        help="training batches (and the whole dev split) whose padded lengths are tabled")
    parser.add_argument("--lengths_only", action="store_true", help="table the padded lengths, time nothing")
    parser.add_argument("--ours", default="xla",
                        help="our variants, comma-separated: xla (float32, XLA: the default options), "
                             "noxla (float32, TensorFlow's kernels), bf16 (mixed_bfloat16 without XLA)")
    parser.add_argument("--data_dir", default=str(harness.data_dir()))
    parser.add_argument("--cache_dir", default=os.path.join(tempfile.gettempdir(), "glue_vs_hf_cache"))
    return parser.parse_args()


ARGS = parse_args()
ROWS = ARGS.rows.split(",")
harness.quiet_tensorflow()

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import torch  # noqa: E402

harness.set_threads(ARGS.threads, torch=True)

import transformers  # noqa: E402

from albert_tf import AlbertConfig  # noqa: E402
from albert_tf.presets.convert import config_to_hf  # noqa: E402
from albert_tf.tokenizers.tokenizer import AlbertTokenizer  # noqa: E402
from finetune import inputs  # noqa: E402
from finetune.trainer import SORT_WINDOW  # noqa: E402
from albert_tf.training import loop  # noqa: E402
from finetune import trainer  # noqa: E402
from finetune.glue import data  # noqa: E402
from finetune.glue.task import GlueTask  # noqa: E402
from finetune.options import FinetuneOptions  # noqa: E402
from finetune.glue.definitions import get_task  # noqa: E402


def subset(cached, n: int, folder: str):
    """The first `n` records of a cached split as a cached split of their own."""
    path = os.path.join(folder, f"{cached.task}-{cached.split}-first{n}.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        for record in tf.data.TFRecordDataset(str(cached.path)).take(n):
            writer.write(record.numpy())
    n = min(n, cached.num_records)
    return dataclasses.replace(cached, path=pathlib.Path(path), num_records=n, num_examples=n)


def trimmed(batch: dict) -> dict:
    """A batch as DataCollatorWithPadding makes it: padded to its own longest row, torch tensors."""
    longest = int(np.max(np.sum(batch["input_mask"], axis=-1)))
    return {
        "input_ids": torch.from_numpy(np.ascontiguousarray(batch["input_ids"][:, :longest])).long(),
        "attention_mask": torch.from_numpy(np.ascontiguousarray(batch["input_mask"][:, :longest])).long(),
        "token_type_ids": torch.from_numpy(np.ascontiguousarray(batch["segment_ids"][:, :longest])).long(),
        "labels": torch.from_numpy(np.asarray(batch["label_ids"])).long(),
    }


VARIANTS = {"xla": (True, "none"), "noxla": (False, "none"), "bf16": (False, "bf16")}


class Ours:
    """One task's fine-tuning run, timed through its own input pipeline."""

    def __init__(self, config, task, train, dev, work, variant):
        jit_compile, mixed_precision = VARIANTS[variant]
        options = FinetuneOptions(
            output_dir=os.path.join(work, f"run-{task.name}-{variant}"), train_batch_size=ARGS.train_batch,
            eval_batch_size=ARGS.eval_batch, max_seq_length=ARGS.seq_length, learning_rate=1e-5,
            num_train_steps=100000, num_warmup_steps=0, steps_per_loop=ARGS.train_steps,
            jit_compile=jit_compile, mixed_precision=mixed_precision,
            max_train_examples=ARGS.train_examples,
        )
        self.run = loop.Trainer(config, GlueTask(task), options, tf.distribute.OneDeviceStrategy("/cpu:0"))
        self.train, self.dev = train, dev

    def train_batches(self):
        """The batches that `train` feeds the loop, as numpy (the same seed, the same order), and
        batches drawn at random from the same records (Hugging Face's Trainer's default)."""
        dataset = trainer.dataset_fn(self.run, self.train, for_training=True)(tf.distribute.InputContext(), ARGS.train_batch)
        at_random = inputs.make_dataset(self.train, global_batch_size=ARGS.train_batch, training=True,
                                        seed=self.run.options.seed, max_records=ARGS.train_examples)
        return ([{k: v.numpy() for k, v in batch.items()} for batch in dataset.take(ARGS.train_steps)],
                [{k: v.numpy() for k, v in batch.items()} for batch in at_random.take(ARGS.train_steps)])

    def dev_batches(self):
        """Our evaluation batches, and the dev records in file order in batches (Hugging Face's)."""
        ours = trainer.dataset_fn(self.run, self.dev, for_training=False)(tf.distribute.InputContext(), ARGS.eval_batch)
        in_order = inputs.make_dataset(self.dev, global_batch_size=ARGS.eval_batch, training=False)
        return ([{k: v.numpy() for k, v in batch.items()} for batch in ours],
                [{k: v.numpy() for k, v in batch.items()} for batch in in_order])

    def train_rate(self) -> float:
        # Built afresh from the seed: the same batches every repeat (their reading is timed).
        began = time.perf_counter()
        iterator = iter(self.run.distribute(trainer.dataset_fn(self.run, self.train, for_training=True),
                                            self.run.per_replica_batch))
        self.run.train_steps(iterator, ARGS.train_steps)
        return ARGS.train_steps * ARGS.train_batch / (time.perf_counter() - began)

    def eval_rate(self) -> float:
        return trainer.predict(self.run, self.dev)[1]

    def rates(self, row: str) -> bool:
        return True


class HuggingFace:
    """AlbertForSequenceClassification from the same config, fed the given batches trimmed."""

    def __init__(self, config, num_labels, train_batches, dev_batches):
        values = {**config_to_hf(config), "classifier_dropout_prob": 0.1, "num_labels": num_labels}
        self.model = transformers.AlbertForSequenceClassification(transformers.AlbertConfig(**values))
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=1e-5, weight_decay=0.01)
        self.train_batches = train_batches
        # Dev batches without our filler rows: DataCollatorWithPadding's last batch is short.
        self.dev_batches = []
        for batch in dev_batches:
            real = batch["example_weight"] > 0
            if real.any():
                self.dev_batches.append({k: v[real] for k, v in batch.items()})

    def train_rate(self) -> float:
        self.model.train()
        began = time.perf_counter()
        for batch in self.train_batches:
            loss = self.model(**trimmed(batch)).loss
            self.optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
            self.optimizer.step()
        loss.item()
        return len(self.train_batches) * ARGS.train_batch / (time.perf_counter() - began)

    def rates(self, row: str) -> bool:
        """Whether this system times `row` (the grouped peer trains only)."""
        return bool(self.train_batches if row == "train" else self.dev_batches)

    def eval_rate(self) -> float:
        self.model.eval()
        began = time.perf_counter()
        count = 0
        with torch.no_grad():
            for batch in self.dev_batches:
                features = trimmed(batch)
                del features["labels"]
                self.model(**features).logits.numpy()
                count += len(batch["input_ids"])
        return count / (time.perf_counter() - began)


def padded_lengths(batches, hf_batches) -> tuple[float, float, float, float]:
    """Mean over batches of our padded length, of Hugging Face's (the longest row of its batch),
    of Hugging Face's on our batches, and the mean length of a real row."""
    def longest(of):
        return float(np.mean([int(np.max(np.sum(b["input_mask"], axis=-1))) for b in of]))

    ours = [b["input_ids"].shape[1] for b in batches]
    real = [float(np.sum(b["input_mask"][b["example_weight"] > 0])) / max(1, int(np.sum(b["example_weight"] > 0)))
            for b in batches]
    return float(np.mean(ours)), longest(hf_batches), longest(batches), float(np.mean(real))


def length_table(task, train, dev):
    """Mean columns a batch computes over many training batches and the whole dev split: ours
    (grouped or sorted by length, the task's buckets; and without grouping), Hugging Face's (each
    batch's longest row, batches at random or in file order; and on our grouped batches)."""
    seed = FinetuneOptions(output_dir="unused").seed  # the seed of the timed runs
    task_buckets = GlueTask(task).length_buckets(ARGS.seq_length)
    rows = {}
    for split, cached, training, batch in (("train", train, True, ARGS.train_batch), ("dev", dev, False, ARGS.eval_batch)):
        def masks(**kwargs):
            dataset = inputs.make_dataset(cached, global_batch_size=batch, training=training, seed=seed, **kwargs)
            return [b["input_mask"].numpy() for b in (dataset.take(ARGS.length_batches) if training else dataset)]

        def longest(batches):
            return [int(np.max(np.sum(m, -1))) for m in batches]

        grouped = masks(length_buckets=task_buckets, sort_window=SORT_WINDOW)
        ungrouped = masks(length_buckets=task_buckets)
        hf = longest(masks())
        rows[split] = (len(grouped), np.mean([m.shape[-1] for m in grouped]),
                       np.mean([m.shape[-1] for m in ungrouped]), np.mean(hf), np.mean(longest(grouped)))
    return rows


def main():
    glue = os.path.join(ARGS.data_dir, "glue")
    tokenizer = AlbertTokenizer(ARGS.spm_model_file or os.path.join(ARGS.data_dir, "albert", "30k-clean.model"))
    config = (AlbertConfig.from_json_file(ARGS.albert_config_file) if ARGS.albert_config_file
              else AlbertConfig.named(ARGS.size))
    model_name = os.path.basename(ARGS.albert_config_file) if ARGS.albert_config_file else ARGS.size
    if set(ROWS) - {"train", "eval"}:
        raise SystemExit(f"--rows: unknown {sorted(set(ROWS) - {'train', 'eval'})}; known: train, eval")
    variants = ARGS.ours.split(",")
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        raise SystemExit(f"--ours: unknown variant(s) {unknown}; known: {sorted(VARIANTS)}")
    work = tempfile.mkdtemp(prefix="glue_vs_hf_")
    systems, lengths = {}, {}
    for name in ARGS.tasks.split(","):
        task = get_task(name)
        began = time.perf_counter()
        train = data.cache_features(task, glue, "train", tokenizer, ARGS.seq_length, ARGS.cache_dir)
        dev = data.cache_features(task, glue, "dev", tokenizer, ARGS.seq_length, ARGS.cache_dir)
        print(f"{name}: mean columns of a batch (| task | split | batches | ours (grouped by length; dev sorted "
              f"within windows) | ours without grouping | Hugging Face (batches at random; dev in file order) | "
              f"Hugging Face on our grouped batches | ours / HF | ours / HF grouped |)")
        for split, (count, ours_mean, ungrouped, hf_mean, hf_grouped) in length_table(task, train, dev).items():
            print(f"| {name} | {split} | {count} | {ours_mean:.1f} | {ungrouped:.1f} | {hf_mean:.1f} | "
                  f"{hf_grouped:.1f} | {ours_mean / hf_mean:.2f} | {ours_mean / hf_grouped:.2f} |", flush=True)
        if ARGS.lengths_only:
            continue
        dev = subset(dev, ARGS.eval_examples, work)
        pair = {f"ours {v}": Ours(config, task, train, dev, work, v) for v in variants}
        first = next(iter(pair.values()))
        train_batches, random_batches = first.train_batches()
        dev_batches, hf_dev_batches = first.dev_batches()
        lengths[name] = {"train": padded_lengths(train_batches, random_batches),
                         "eval": padded_lengths(dev_batches, hf_dev_batches)}
        pair["HF PyTorch"] = HuggingFace(config, task.num_labels, random_batches, hf_dev_batches)
        if "train" in ROWS:
            pair["HF grouped"] = HuggingFace(config, task.num_labels, train_batches, [])
        print(f"{name}: features and models ready in {time.perf_counter() - began:.1f} s; training lengths "
              f"{[b['input_ids'].shape[1] for b in train_batches]} (ours), "
              f"{[int(np.max(np.sum(b['input_mask'], -1))) for b in random_batches]} (Hugging Face), "
              f"{[int(np.max(np.sum(b['input_mask'], -1))) for b in train_batches]} (Hugging Face grouped); "
              f"{len({b['input_ids'].shape[1] for b in train_batches})} training and "
              f"{len({b['input_ids'].shape[1] for b in dev_batches})} evaluation shapes", flush=True)
        for system_name, system in pair.items():
            began = time.perf_counter()
            for row in ROWS:  # ours: compiles every shape of the timed repeats
                if system.rates(row):
                    getattr(system, f"{row}_rate")()
            print(f"{name}: {system_name} warmed up in {time.perf_counter() - began:.1f} s", flush=True)
        systems[name] = pair
    if ARGS.lengths_only:
        return

    rates = {(task, row, system): [] for task in systems for row in ROWS for system in systems[task]
             if systems[task][system].rates(row)}
    for repeat in range(ARGS.repeats):
        for task, pair in systems.items():
            shift = repeat % len(pair)
            names = list(pair)[shift:] + list(pair)[:shift]  # who goes first rotates
            for row in ROWS:
                for system in names:
                    if (task, row, system) in rates:
                        rates[(task, row, system)].append(getattr(pair[system], f"{row}_rate")())
            print(f"repeat {repeat + 1}/{ARGS.repeats} {task}: " + ", ".join(
                f"{row} {system} {rates[(task, row, system)][-1]:.2f}" for row in ROWS for system in pair
                if (task, row, system) in rates), flush=True)

    ours_names = [f"ours {v}" for v in variants]
    print(f"\n{model_name}, max_seq_length {ARGS.seq_length}, train batch {ARGS.train_batch} "
          f"({ARGS.train_steps} updates a repeat), eval batch {ARGS.eval_batch} ({ARGS.eval_examples} dev examples), "
          f"{ARGS.threads} threads, {ARGS.repeats} repeats; examples/s, medians; ours: "
          f"xla = float32 with XLA, noxla = float32 without, bf16 = mixed_bfloat16 without XLA")
    peers = ["HF PyTorch", "HF grouped"]
    print("| task | row | " + " | ".join(ours_names + peers) + " | "
          + " | ".join(f"{n} / {p}" for p in peers for n in ours_names)
          + " | ours' padded length | HF's padded length | HF grouped's padded length | real length |")
    print("|---" * (3 * len(ours_names) + 8) + "|")
    for task in systems:
        for row in ROWS:
            medians = {s: statistics.median(rates[(task, row, s)]) for s in systems[task] if (task, row, s) in rates}
            padded, longest, grouped_longest, real = lengths[task][row]

            def cell(value, digits=2):
                return "" if value is None else f"{value:.{digits}f}"

            print(f"| {task} | {'fine-tuning' if row == 'train' else 'evaluation'} | "
                  + " | ".join(cell(medians.get(n)) for n in ours_names + peers) + " | "
                  + " | ".join(cell(medians[n] / medians[p] if p in medians else None) for p in peers for n in ours_names)
                  + f" | {padded:.1f} | {longest:.1f} | {cell(grouped_longest if row == 'train' else None, 1)} | {real:.1f} |")


if __name__ == "__main__":
    main()
