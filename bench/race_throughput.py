"""RACE throughput at 512 tokens on the CPU: albert_tf's multiple-choice model beside Hugging Face's
AlbertForMultipleChoice (PyTorch), same config, random weights, in one run.

A question is four rows of 512 tokens (one per option). Rows, in questions per second:
  training: one update on a batch of questions (forward over the four rows, softmax cross-entropy
      over the options, backward, AdamW); ours is XLA-compiled, as the fine-tuning trainer runs it;
  prediction: the options' probabilities of a batch of questions, no dropout.
Each repeat times both systems once per row, alternating which goes first (PyTorch's OpenMP threads
keep spinning a while after their work); the table shows medians and the ratio ours / Hugging
Face's (above 1: ours is faster). The inputs are real RACE rows (dev/middle, the released
30k-clean.model), so padding is what fine-tuning sees.

Usage: python bench/race_throughput.py [--threads 2] [--size albert_base_v2] [--repeats 5]
"""

import argparse
import os

import harness


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    harness.add_threads(parser)
    harness.add_model(parser, 512)
    parser.add_argument("--max_qa_length", type=int, default=128)
    parser.add_argument("--train_batch", type=int, default=2, help="questions per update (4 rows each)")
    parser.add_argument("--predict_batch", type=int, default=4, help="questions per prediction call")
    harness.add_repeats(parser, 5)
    parser.add_argument("--data_dir", default=str(harness.data_dir()))
    return parser.parse_args()


ARGS = parse_args()
harness.quiet_tensorflow()

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import torch  # noqa: E402

harness.set_threads(ARGS.threads, torch=True)

import keras  # noqa: E402
import transformers  # noqa: E402

from albert_tf import AlbertConfig  # noqa: E402
from albert_tf.presets.convert import config_to_hf  # noqa: E402
from albert_tf.models import AlbertMultipleChoice, classifier_sums  # noqa: E402
from albert_tf.tokenizers.tokenizer import AlbertTokenizer  # noqa: E402
from finetune.race import features, readers  # noqa: E402


def race_batch(n: int, offset: int) -> dict:
    questions = readers.read_questions(os.path.join(ARGS.data_dir, "race", "dev", "middle"))[offset:offset + n]
    tokenizer = AlbertTokenizer(os.path.join(ARGS.data_dir, "albert", "30k-clean.model"))
    rows = list(features.convert_questions(questions, tokenizer, ARGS.seq_length, ARGS.max_qa_length))
    batch = {k: np.asarray([r[k] for r in rows], np.int32) for k in features.SEQUENCE_FEATURES}
    batch["label_ids"] = np.asarray([r["label_ids"] for r in rows], np.int32)
    return batch


def albert_tf_system(config):
    model = AlbertMultipleChoice(config, num_choices=4)
    model.build()
    optimizer = keras.optimizers.AdamW(1e-5, weight_decay=0.01)

    @tf.function(jit_compile=True)
    def train(batch):
        with tf.GradientTape() as tape:
            logits = model({k: batch[k] for k in features.SEQUENCE_FEATURES}, training=True)
            weights = tf.ones_like(batch["label_ids"], tf.float32)
            loss = classifier_sums(logits, batch["label_ids"], weights, False)["loss"] / tf.reduce_sum(weights)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply(grads, model.trainable_variables)
        return loss

    @tf.function(jit_compile=True)
    def predict(batch):
        return tf.nn.softmax(model({k: batch[k] for k in features.SEQUENCE_FEATURES}, training=False), axis=-1)

    return lambda b: train(b).numpy(), lambda b: predict(b).numpy()


def hugging_face_system(config):
    values = config_to_hf(config)
    model = transformers.AlbertForMultipleChoice(
        transformers.AlbertConfig(**{**values, "classifier_dropout_prob": 0.1}))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5, weight_decay=0.01)

    def tensors(b):
        return {
            "input_ids": torch.from_numpy(b["input_ids"]).long(),
            "attention_mask": torch.from_numpy(b["input_mask"]).long(),
            "token_type_ids": torch.from_numpy(b["segment_ids"]).long(),
        }

    def train(b):
        model.train()
        out = model(**tensors(b), labels=torch.from_numpy(b["label_ids"]).long())
        optimizer.zero_grad()
        out.loss.backward()
        optimizer.step()
        return out.loss.detach().numpy()

    def predict(b):
        model.eval()
        with torch.no_grad():
            return torch.softmax(model(**tensors(b)).logits, dim=-1).numpy()

    return train, predict


def main():
    config = AlbertConfig.named(ARGS.size)
    systems = {"albert_tf": albert_tf_system(config), "HF PyTorch": hugging_face_system(config)}
    train_batch = race_batch(ARGS.train_batch, 0)
    predict_batch = race_batch(ARGS.predict_batch, 100)
    rows = {"training": (0, train_batch, ARGS.train_batch), "prediction": (1, predict_batch, ARGS.predict_batch)}
    for name, system in systems.items():  # compile and warm up before timing
        for pick, batch, _ in rows.values():
            system[pick](batch)
        print(f"warmed up {name}", flush=True)
    calls = {(row, name): (lambda system=system, pick=pick, batch=batch: system[pick](batch))
             for row, (pick, batch, _) in rows.items() for name, system in systems.items()}
    times = harness.medians(harness.interleaved_times(calls, ARGS.repeats, progress=True))

    print(f"\n{ARGS.size}, RACE rows of {ARGS.seq_length} tokens (4 per question), {ARGS.threads} threads, "
          f"median of {ARGS.repeats} interleaved repeats (a shared machine)\n")
    table = []
    for row, (_, _, questions) in rows.items():
        rate = {name: questions / times[row, name] for name in systems}
        table.append([row, questions, f"{rate['albert_tf']:.3f}", f"{rate['HF PyTorch']:.3f}",
                      f"{rate['albert_tf'] / rate['HF PyTorch']:.2f}"])
    harness.print_table(["row", "questions/batch", "albert_tf q/s", "HF PyTorch q/s", "ours / HF"], table)

if __name__ == "__main__":
    main()
