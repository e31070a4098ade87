"""SQuAD throughput at sequence 384, ours beside Hugging Face's AlbertForQuestionAnswering, on the CPU.

Rows, each measured for both in the same run (the machine may be shared: every row is repeated and
the median and best are printed, with ours / theirs of the medians):
  feature creation (questions/s): dev-v1.1 questions -> windowed records with gold spans.
      Ours: finetune.squad.features.convert_examples. Theirs: the fast AlbertTokenizerFast (Rust)
      with overflowing windows and offset mappings, then the gold span mapped onto tokens, as
      transformers' examples/question-answering/run_qa.py prepares training features.
  training (examples/s): one optimizer step (forward, backward, AdamW, clipping) on a batch of
      records. Ours: AlbertSpanLabeler, the release's AdamW, a jit-compiled tf.function step as the
      trainer runs it. Theirs: AlbertForQuestionAnswering with torch.optim.AdamW and clipping.
  prediction (questions/s): questions -> answers: features, the forward pass over their windows in
      batches, and post-processing (n_best 20, max_answer_length 30). Ours: the features above,
      a jit-compiled forward pass and finetune.squad.postprocess; theirs: their features, a
      torch.no_grad forward pass and run_qa's post-processing (top-20 starts x ends per window).
The two models have the same config (default albert_base_v2, random weights: speed does not
depend on them) and the released 30k-clean.model vocabulary.

Usage: python bench/squad_throughput.py [--threads 2] [--size albert_base_v2] [--repeats 3]
"""

import argparse
import os
import statistics
import time

import harness


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    harness.add_threads(parser)
    harness.add_model(parser, 384)
    parser.add_argument("--feature_questions", type=int, default=2000)
    parser.add_argument("--train_batch", type=int, default=4)
    parser.add_argument("--train_steps", type=int, default=2, help="timed steps per repeat")
    parser.add_argument("--predict_questions", type=int, default=16)
    parser.add_argument("--predict_batch", type=int, default=8)
    harness.add_repeats(parser, 3)
    parser.add_argument("--data_dir", default=str(harness.data_dir()))
    return parser.parse_args()


ARGS = parse_args()
harness.quiet_tensorflow()

import numpy as np  # noqa: E402
import sentencepiece as spm  # noqa: E402
import tensorflow as tf  # noqa: E402
import torch  # noqa: E402

harness.set_threads(ARGS.threads, torch=True)

import transformers  # noqa: E402

from albert_tf import AlbertConfig  # noqa: E402
from albert_tf.models import AlbertSpanLabeler  # noqa: E402
from albert_tf.training.optimization import create_optimizer  # noqa: E402
from albert_tf.tokenizers.tokenizer import AlbertTokenizer  # noqa: E402
from finetune.squad import features, postprocess, readers  # noqa: E402
from finetune.squad.model import v1_loss_sums  # noqa: E402

INPUTS = ("input_ids", "input_mask", "segment_ids")


# ---- Hugging Face's side (run_qa.py's recipe) ----------------------------------------------------

def hf_tokenizer(spm_path):
    processor = spm.SentencePieceProcessor(model_file=spm_path)
    vocab = [(processor.IdToPiece(i), processor.GetScore(i)) for i in range(processor.GetPieceSize())]
    return transformers.AlbertTokenizerFast(vocab=vocab)


def hf_features(tokenizer, examples, training):
    encoded = tokenizer([e.question for e in examples], [e.context for e in examples], truncation="only_second",
                        max_length=ARGS.seq_length, stride=128, return_overflowing_tokens=True,
                        return_offsets_mapping=True, return_token_type_ids=True, padding="max_length")
    sample = encoded["overflow_to_sample_mapping"]
    starts, ends = [], []
    for i, offsets in enumerate(encoded["offset_mapping"]):
        sequence_ids = encoded.sequence_ids(i)
        example = examples[sample[i]]
        if not training or example.train_answer is None:
            continue
        answer = example.train_answer
        first = sequence_ids.index(1)
        last = len(sequence_ids) - 1 - sequence_ids[::-1].index(1)
        if not (offsets[first][0] <= answer.start and offsets[last][1] >= answer.end):
            starts.append(0), ends.append(0)
            continue
        while first < len(offsets) and sequence_ids[first] == 1 and offsets[first][0] <= answer.start:
            first += 1
        while sequence_ids[last] == 1 and offsets[last][1] >= answer.end:
            last -= 1
        starts.append(first - 1), ends.append(last + 1)
    encoded["start_positions"], encoded["end_positions"] = starts, ends
    return encoded


def hf_postprocess(examples, encoded, start_logits, end_logits, n_best=20, max_answer_length=30):
    answers = {}
    by_example = {}
    for i, e in enumerate(encoded["overflow_to_sample_mapping"]):
        by_example.setdefault(e, []).append(i)
    for index, example in enumerate(examples):
        best = (-np.inf, "")
        for i in by_example.get(index, []):
            offsets = encoded["offset_mapping"][i]
            sequence_ids = encoded.sequence_ids(i)
            for s in np.argsort(start_logits[i])[-1 : -n_best - 1 : -1]:
                for e in np.argsort(end_logits[i])[-1 : -n_best - 1 : -1]:
                    if sequence_ids[s] != 1 or sequence_ids[e] != 1 or e < s or e - s + 1 > max_answer_length:
                        continue
                    score = start_logits[i][s] + end_logits[i][e]
                    if score > best[0]:
                        best = (score, example.context[offsets[s][0] : offsets[e][1]])
        answers[example.qas_id] = best[1]
    return answers


# ---- the benchmark ------------------------------------------------------------------------------

def timed(fn):
    began = time.perf_counter()
    fn()
    return time.perf_counter() - began


def main():
    spm_path = os.path.join(ARGS.data_dir, "albert", "30k-clean.model")
    examples = readers.read_squad(os.path.join(ARGS.data_dir, "squad", "dev-v1.1.json"))
    ours_tok, theirs_tok = AlbertTokenizer(spm_path), hf_tokenizer(spm_path)
    settings = features.FeatureSettings(max_seq_length=ARGS.seq_length)
    config = AlbertConfig.named(ARGS.size)
    hf_config = transformers.AlbertConfig(
        vocab_size=config.vocab_size, embedding_size=config.embedding_size, hidden_size=config.hidden_size,
        num_hidden_layers=config.num_hidden_layers, num_attention_heads=config.num_attention_heads,
        intermediate_size=config.intermediate_size, hidden_act="gelu_new",
        max_position_embeddings=config.max_position_embeddings, type_vocab_size=config.type_vocab_size,
        hidden_dropout_prob=config.hidden_dropout_prob, attention_probs_dropout_prob=config.attention_probs_dropout_prob,
        num_labels=2)
    torch.manual_seed(0)
    theirs = transformers.AlbertForQuestionAnswering(hf_config)
    ours = AlbertSpanLabeler(config)
    ours.build()
    optimizer = create_optimizer("adamw", 3e-5, num_train_steps=1000, num_warmup_steps=0)
    torch_optimizer = torch.optim.AdamW(theirs.parameters(), lr=3e-5, weight_decay=0.01, eps=1e-6)

    feature_examples = examples[: ARGS.feature_questions]
    train_records = features.stack_records(features.convert_examples(examples[:64], ours_tok, settings))
    batch = {k: tf.constant(v[: ARGS.train_batch]) for k, v in train_records.items()}
    hf_train = hf_features(theirs_tok, examples[:64], training=True)
    torch_batch = {
        "input_ids": torch.tensor(hf_train["input_ids"][: ARGS.train_batch]),
        "attention_mask": torch.tensor(hf_train["attention_mask"][: ARGS.train_batch]),
        "token_type_ids": torch.tensor(hf_train["token_type_ids"][: ARGS.train_batch]),
        "start_positions": torch.tensor(hf_train["start_positions"][: ARGS.train_batch]),
        "end_positions": torch.tensor(hf_train["end_positions"][: ARGS.train_batch]),
    }

    @tf.function(jit_compile=True)
    def train_step(features_):
        with tf.GradientTape() as tape:
            outputs = ours({k: features_[k] for k in INPUTS}, training=True)
            loss = v1_loss_sums(outputs["start_logits"], outputs["end_logits"], features_,
                                tf.ones([ARGS.train_batch]))["loss"] / ARGS.train_batch
        grads = tape.gradient(loss, ours.trainable_variables)
        optimizer.apply_gradients(zip(grads, ours.trainable_variables))
        return loss

    forward = tf.function(lambda inputs: ours(inputs, training=False), jit_compile=True)

    def torch_train_step():
        theirs.train()
        loss = theirs(**torch_batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(theirs.parameters(), 1.0)
        torch_optimizer.step()
        torch_optimizer.zero_grad()

    predict_examples = examples[: ARGS.predict_questions]

    def ours_predict():
        records = features.stack_records(features.convert_examples(predict_examples, ours_tok, settings))
        n, size = len(records["input_ids"]), ARGS.predict_batch
        starts, ends = [], []
        for i in range(0, n, size):
            # The last, smaller batch has its own compiled shape (traced in the warm-up).
            out = forward({k: records[k][i : i + size] for k in INPUTS})
            starts.append(out["start_logits"].numpy()), ends.append(out["end_logits"].numpy())
        return postprocess.postprocess_v1(predict_examples, records, np.concatenate(starts)[:n],
                                          np.concatenate(ends)[:n]).answers

    def theirs_predict():
        encoded = hf_features(theirs_tok, predict_examples, training=False)
        theirs.eval()
        starts, ends = [], []
        with torch.no_grad():
            for i in range(0, len(encoded["input_ids"]), ARGS.predict_batch):
                out = theirs(input_ids=torch.tensor(encoded["input_ids"][i : i + ARGS.predict_batch]),
                             attention_mask=torch.tensor(encoded["attention_mask"][i : i + ARGS.predict_batch]),
                             token_type_ids=torch.tensor(encoded["token_type_ids"][i : i + ARGS.predict_batch]))
                starts.append(out.start_logits.numpy()), ends.append(out.end_logits.numpy())
        return hf_postprocess(predict_examples, encoded, np.concatenate(starts), np.concatenate(ends))

    # Warm-up: compiles our steps, lets torch pick its kernels.
    train_step(batch), torch_train_step(), ours_predict(), theirs_predict()
    rates = {name: {"ours": [], "Hugging Face": []} for name in ("feature creation", "training", "prediction")}
    for repeat in range(ARGS.repeats):
        n = len(feature_examples)
        rates["feature creation"]["ours"].append(
            n / timed(lambda: features.stack_records(features.convert_examples(feature_examples, ours_tok, settings))))
        rates["feature creation"]["Hugging Face"].append(n / timed(lambda: hf_features(theirs_tok, feature_examples, True)))
        rates["training"]["ours"].append(
            ARGS.train_steps * ARGS.train_batch / timed(lambda: [train_step(batch).numpy() for _ in range(ARGS.train_steps)]))
        rates["training"]["Hugging Face"].append(
            ARGS.train_steps * ARGS.train_batch / timed(lambda: [torch_train_step() for _ in range(ARGS.train_steps)]))
        rates["prediction"]["ours"].append(len(predict_examples) / timed(ours_predict))
        rates["prediction"]["Hugging Face"].append(len(predict_examples) / timed(theirs_predict))
        print(f"repeat {repeat + 1}/{ARGS.repeats}: " + "; ".join(
            f"{row} {v['ours'][-1]:.1f} vs {v['Hugging Face'][-1]:.1f}" for row, v in rates.items()), flush=True)

    print(f"\n{ARGS.size}, sequence {ARGS.seq_length}, {ARGS.threads} threads, {ARGS.repeats} repeats "
          f"(training batch {ARGS.train_batch}, prediction batch {ARGS.predict_batch}, "
          f"{ARGS.predict_questions} dev-v1.1 questions predicted, {len(feature_examples)} featurized)")
    print(f"| {'row':<28} | {'ours median':>11} | {'HF median':>9} | {'ours best':>9} | {'HF best':>7} | {'ours/HF':>7} |")
    print(f"|{'-' * 30}|{'-' * 13}|{'-' * 11}|{'-' * 11}|{'-' * 9}|{'-' * 9}|")
    units = {"feature creation": "questions/s", "training": "examples/s", "prediction": "questions/s"}
    for row, values in rates.items():
        ours_median, theirs_median = statistics.median(values["ours"]), statistics.median(values["Hugging Face"])
        print(f"| {row + ' (' + units[row] + ')':<28} | {ours_median:>11.2f} | {theirs_median:>9.2f} | "
              f"{max(values['ours']):>9.2f} | {max(values['Hugging Face']):>7.2f} | {ours_median / theirs_median:>7.2f} |")


if __name__ == "__main__":
    main()
