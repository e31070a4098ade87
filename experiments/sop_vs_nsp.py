"""Does sentence-order prediction learn what next-sentence prediction cannot?
The paper's Table 5 at small scale: a model pretrained with NSP vs one pretrained with SOP.

Both models have the same config, seed, steps and optimizer and see records made from the same
text with the same masks' statistics; they differ only in the sentence-pair task of their records:
next-sentence prediction (B is the true continuation or, label 1, a piece of another document) or
sentence-order prediction (A and B consecutive, label 1 when swapped). Each is then scored on
held-out records of BOTH tasks with its one 2-way head (label 0 = "coherent" in both tasks).

Held-out text: the last --heldout_fraction of every book of data/corpus/train.txt (cut at a
sentence end) is kept out of training, so the held-out records come from the same books but from
passages the models never saw, and NSP has other documents to draw its random segments from.

The paper (Table 5, base models): NSP-trained 90.5 NSP / 52.0 SOP; SOP-trained
78.9 NSP / 86.5 SOP. The pattern to look for: NSP-trained near chance on SOP; SOP-trained above
chance on both.

Defaults: the demo's model and training (configs/albert_demo.json, 3,000 LAMB steps of batch 16 at
0.01, sequence 128), about 20 CPU minutes in all on 2 cores.
Usage: python experiments/sop_vs_nsp.py [--steps 3000] [--output_dir /tmp/sop_vs_nsp]
           [--records_dir /tmp/sop_vs_nsp]  (train and score on an earlier run's records)
"""

import argparse
import bisect
import itertools
import json
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
import harness  # noqa: E402  (bench/harness.py: the checkout's paths, the data folder, quiet TensorFlow)

REPO = str(harness.REPO)
TASKS = ("nsp", "sop")


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", default=os.path.join(REPO, "data", "corpus", "train.txt"),
                        help="one document per line")
    parser.add_argument("--output_dir", default="/tmp/sop_vs_nsp")
    parser.add_argument("--albert_config_file", default=os.path.join(REPO, "configs", "albert_demo.json"))
    parser.add_argument("--spm_model_file", default=None,
                        help="default: a new 8,000-piece vocabulary trained on the training split")
    parser.add_argument("--heldout_fraction", type=float, default=0.1)
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--dupe_factor", type=int, default=10)
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--learning_rate", type=float, default=0.01)
    parser.add_argument("--steps_per_loop", type=int, default=50)
    parser.add_argument("--seed", type=int, default=12345)
    parser.add_argument("--records_dir", default=None,
                        help="an earlier run's --output_dir: its records/ are used as they are")
    return parser.parse_args()


def split_documents(corpus: str, train_path: str, heldout_path: str, fraction: float):
    """Writes the head of every document to train_path and its tail to heldout_path, cut at the
    first sentence end (by the data tools' own splitter) past 1 - fraction of its characters."""
    from data_prep.documents import input_lines, split_sentences

    with open(train_path, "w", encoding="utf-8") as train, open(heldout_path, "w", encoding="utf-8") as heldout:
        for line in input_lines(corpus):
            sentences = split_sentences(line.decode("utf-8"))
            if not sentences:
                continue
            lengths = list(itertools.accumulate(len(sentence) + 1 for sentence in sentences))
            cut = bisect.bisect_left(lengths, lengths[-1] * (1 - fraction)) + 1
            train.write(" ".join(sentences[:cut]) + "\n")
            heldout.write(" ".join(sentences[cut:]) + "\n")


def run(*command):
    print("$", " ".join(command), flush=True)
    subprocess.run(command, check=True, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})


def create_records(text: str, output_dir: str, spm: str, task: str, dupe_factor: int, args):
    shutil.rmtree(output_dir, ignore_errors=True)
    run(
        "albert-create-pretraining-data", f"--input_file={text}", "--input_format=document_per_line",
        f"--output_dir={output_dir}", f"--spm_model_file={spm}", f"--max_seq_length={args.max_seq_length}",
        "--max_predictions_per_seq=20", f"--dupe_factor={dupe_factor}", "--num_output_shards=2",
        "--num_workers=2", f"--random_seed={args.seed}", "--progress=false",
        f"--random_next_sentence={task == 'nsp'}",
    )


def evaluate(model_dir: str, config, heldout: dict, args) -> dict:
    """MLM and pair-task accuracy of the final checkpoint in model_dir on each held-out set."""
    from albert_tf.utils.patterns import expand_patterns
    from albert_tf.training.options import PretrainingOptions
    from albert_tf.training.pretraining import PretrainingTask, file_dataset_fn
    from albert_tf.training.loop import Trainer

    options = PretrainingOptions(
        output_dir=model_dir, train_batch_size=args.batch_size, max_seq_length=args.max_seq_length,
        num_train_steps=args.steps, num_warmup_steps=0, seed=args.seed,
    )
    run_state = Trainer(config, PretrainingTask(), options)
    if run_state.restore_or_initialize() != args.steps:
        raise RuntimeError(f"{model_dir} holds no checkpoint of step {args.steps}")
    results = {}
    for task, pattern in heldout.items():
        dataset_fn = file_dataset_fn(expand_patterns(pattern), options, is_training=False)
        data = run_state.distribute(dataset_fn, run_state.per_replica_eval_batch)
        results[task] = run_state.evaluate(data)
    return results


def label_one_fraction(pattern: str, args) -> float:
    """The share of label 1 (random or swapped) in held-out records, for the majority baseline."""
    from albert_tf.data.datasets import pretraining_dataset
    from albert_tf.data.features import EXAMPLE_WEIGHT
    from albert_tf.utils.patterns import expand_patterns

    ones = total = 0.0
    for batch in pretraining_dataset(expand_patterns(pattern), batch_size=64, max_seq_length=args.max_seq_length,
                                     max_predictions_per_seq=20, is_training=False):
        real = batch[EXAMPLE_WEIGHT].numpy()  # 0 for the rows filling up the last batch
        ones, total = ones + float((batch["next_sentence_labels"].numpy()[:, 0] * real).sum()), total + real.sum()
    return ones / total


def make_records(args):
    """Splits the corpus, trains a vocabulary (unless given) and writes the records of both tasks;
    returns the records folder and the held-out glob of each task."""
    train_text = os.path.join(args.output_dir, "train_split.txt")
    heldout_text = os.path.join(args.output_dir, "heldout_split.txt")
    split_documents(args.corpus, train_text, heldout_text, args.heldout_fraction)

    spm = args.spm_model_file
    if spm is None:
        prefix = os.path.join(args.output_dir, "vocab")
        spm = prefix + ".model"
        if not os.path.exists(spm):
            run("albert-train-vocab", f"--input_file={train_text}", "--input_format=document_per_line",
                f"--model_prefix={prefix}", "--vocab_size=8000")

    heldout = {}
    for task in TASKS:
        create_records(train_text, os.path.join(args.output_dir, "records", f"train_{task}"), spm, task,
                       args.dupe_factor, args)
        create_records(heldout_text, os.path.join(args.output_dir, "records", f"heldout_{task}"), spm, task,
                       2, args)
        heldout[task] = os.path.join(args.output_dir, "records", f"heldout_{task}", "*.tfrecord")
    return os.path.join(args.output_dir, "records"), heldout


def main():
    args = parse_args()
    os.makedirs(args.output_dir, exist_ok=True)
    began = time.perf_counter()
    if args.records_dir:
        records = os.path.join(args.records_dir, "records")
        heldout = {task: os.path.join(records, f"heldout_{task}", "*.tfrecord") for task in TASKS}
    else:
        records, heldout = make_records(args)

    for task in TASKS:
        model_dir = os.path.join(args.output_dir, f"pretrained_{task}")
        shutil.rmtree(model_dir, ignore_errors=True)
        run(
            "albert-pretrain", f"--input_file={os.path.join(records, f'train_{task}', '*.tfrecord')}",
            f"--output_dir={model_dir}", f"--albert_config_file={args.albert_config_file}",
            f"--train_batch_size={args.batch_size}", f"--max_seq_length={args.max_seq_length}",
            "--max_predictions_per_seq=20", f"--learning_rate={args.learning_rate}",
            f"--num_train_steps={args.steps}", f"--num_warmup_steps={args.steps // 10}",
            f"--save_checkpoints_steps={args.steps}", f"--steps_per_loop={args.steps_per_loop}",
            f"--seed={args.seed}", "--progress_bar=false",
        )

    harness.quiet_tensorflow()
    from albert_tf import AlbertConfig

    config = AlbertConfig.from_json_file(args.albert_config_file)
    results = {task: evaluate(os.path.join(args.output_dir, f"pretrained_{task}"), config, heldout, args)
               for task in TASKS}

    majority = {task: max(p, 1 - p) for task in TASKS for p in [label_one_fraction(heldout[task], args)]}
    print(f"\nRecords in {records}: held-out passages of {args.corpus} "
          f"(last {args.heldout_fraction:.0%} of every document); "
          f"{args.steps} steps of batch {args.batch_size}, LAMB {args.learning_rate}; "
          f"{time.perf_counter() - began:.0f} s in all")
    print("| pretrained with | MLM accuracy | NSP accuracy | SOP accuracy |")
    print("|---|---|---|---|")
    for task in TASKS:
        r = results[task]
        print(f"| {task.upper()} | {r['sop']['mlm_accuracy']:.3f} | {r['nsp']['sop_accuracy']:.3f} "
              f"({r['nsp']['examples']:.0f} pairs) | {r['sop']['sop_accuracy']:.3f} "
              f"({r['sop']['examples']:.0f} pairs) |")
    print(f"| (majority label) | | {majority['nsp']:.3f} | {majority['sop']:.3f} |")
    with open(os.path.join(args.output_dir, "results.json"), "w") as f:
        json.dump({"settings": vars(args), "results": results, "majority": majority}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
