"""Does pretraining help? GLUE fine-tuning from the demo's pretrained model vs from random weights.

Two runs of albert-finetune-glue that differ only in where the encoder starts: the checkpoint of a
pretraining run (default: runs/demo/model, written by ./run_demo.sh) and random weights of the same
config. Both train on the same subset of the task's train split (the first --train_examples rows;
SST-2 by default, --task for another) with the same seed, steps and learning rate, and are scored on
the FULL dev set (872 sentences for SST-2) by the task's first GLUE metric. The pair is repeated for
each of --seeds (the seed sets the head's initialisation, the random encoder's weights, dropout and
shuffling): one fine-tuning run on 4,000 sentences moves by a point or two from seed to seed, more
than the difference being measured.

Usage: python experiments/glue_pretraining_helps.py [--task SST-2] [--pretrained runs/demo/model]
           [--train_examples 4000] [--seq_length 32] [--steps 600] [--learning_rate 2e-4]
           [--seeds 12345,1,2,3] [--output_dir /tmp/glue_helps]
"""

import argparse
import json
import os
import shutil
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
import harness  # noqa: E402  (bench/harness.py: the checkout's paths, the data folder, quiet TensorFlow)

REPO = str(harness.REPO)


def add_comparison_arguments(parser: argparse.ArgumentParser):
    """The flags of a pretrained-vs-random comparison on SST-2 (shared with sst2_linear_probe.py)."""
    parser.add_argument("--pretrained", default=os.path.join(REPO, "runs", "demo", "model"),
                        help="an albert-pretrain output_dir (albert_config.json + checkpoints)")
    parser.add_argument("--spm_model_file", default=os.path.join(REPO, "runs", "demo", "vocab.model"))
    parser.add_argument("--data_dir", default=str(harness.data_dir() / "glue"))
    parser.add_argument("--train_examples", type=int, default=4000, help="the first N rows of SST-2 train")
    parser.add_argument("--seq_length", type=int, default=32)


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_comparison_arguments(parser)
    parser.add_argument("--task", default="SST-2", help="a labelled GLUE task; scored by its first metric")
    parser.add_argument("--output_dir", default="/tmp/glue_pretraining_helps")
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--learning_rate", type=float, default=2e-4)
    parser.add_argument("--seeds", default="12345,1,2,3", help="comma-separated; one pair of runs per seed")
    args = parser.parse_args()
    args.seeds = [int(seed) for seed in args.seeds.split(",")]
    return args


def main():
    args = parse_args()
    harness.quiet_tensorflow()
    from finetune.glue import cli
    from finetune.glue.definitions import get_task

    task = get_task(args.task)
    if not (task.has_train and task.eval_splits):
        raise SystemExit(f"--task {task.name}: needs a train and a labelled dev split")
    metric, dev = task.metrics[0], task.eval_splits[0]

    config_file = os.path.join(args.pretrained, "albert_config.json")
    common = [
        f"--task={task.name}", f"--data_dir={args.data_dir}", f"--spm_model_file={args.spm_model_file}",
        f"--albert_config_file={config_file}", "--do_train", "--do_eval", "--export=false",
        f"--max_seq_length={args.seq_length}", f"--train_batch_size={args.batch_size}",
        f"--num_train_steps={args.steps}", f"--num_warmup_steps={args.steps // 10}",
        f"--learning_rate={args.learning_rate}", f"--max_train_examples={args.train_examples}",
        f"--save_checkpoints_steps={args.steps}", "--steps_per_loop=50",
        "--eval_batch_size=64", "--progress_bar=false",
    ]
    starts = {"pretrained": [f"--init_checkpoint={args.pretrained}"], "random": []}
    rows = {name: [] for name in starts}
    for seed in args.seeds:
        for name, init in starts.items():
            output_dir = os.path.join(args.output_dir, f"{name}_seed{seed}")
            shutil.rmtree(output_dir, ignore_errors=True)
            began = time.perf_counter()
            summary = cli.finetune(["albert-finetune-glue", f"--output_dir={output_dir}", f"--seed={seed}",
                                    *init, *common])
            rows[name].append({
                "seed": seed,
                metric: summary["eval"][dev][metric],
                "dev_examples": summary["eval"][dev]["examples"],
                "final_train_loss": summary["train"]["train"]["loss"],
                "wall_seconds": time.perf_counter() - began,
            })
            print(name, json.dumps(rows[name][-1]), flush=True)

    print(f"\n{task.name}: {args.train_examples} train examples, sequence {args.seq_length}, batch "
          f"{args.batch_size}, {args.steps} steps (~{args.steps * args.batch_size / args.train_examples:.1f} "
          f"epochs), lr {args.learning_rate}; full {dev} set ({rows['random'][0]['dev_examples']} examples)")
    print("| seed | " + " | ".join(f"{name}: {dev} {metric}" for name in starts) + " | difference |")
    print("|---|" + "---|" * (len(starts) + 1))
    for pretrained, random in zip(rows["pretrained"], rows["random"]):
        print(f"| {pretrained['seed']} | {pretrained[metric]:.4f} | {random[metric]:.4f} | "
              f"{pretrained[metric] - random[metric]:+.4f} |")
    means = {name: statistics.mean(row[metric] for row in rows[name]) for name in starts}
    print(f"| mean | {means['pretrained']:.4f} | {means['random']:.4f} | {means['pretrained'] - means['random']:+.4f} |")
    with open(os.path.join(args.output_dir, "results.json"), "w") as f:
        json.dump({"settings": vars(args), "metric": metric, "results": rows, f"mean_dev_{metric}": means}, f,
                  indent=2)


if __name__ == "__main__":
    main()
