"""Does pretraining help? SST-2 fine-tuning from the demo's pretrained model vs from random weights.

Two runs of albert-finetune-glue that differ only in where the encoder starts: the checkpoint of a
pretraining run (default: runs/demo/model, written by ./run_demo.sh) and random weights of the same
config. Both train on the same subset of SST-2 train (the first --train_examples rows) with the same
seed, steps and learning rate, and are scored on the FULL SST-2 dev set (872 sentences).

Usage: python bench/glue_pretraining_helps.py [--pretrained runs/demo/model] [--train_examples 4000]
           [--seq_length 32] [--steps 600] [--learning_rate 5e-5] [--output_dir /tmp/glue_helps]
"""

import argparse
import json
import os
import shutil
import time

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pretrained", default=os.path.join(REPO, "runs", "demo", "model"),
                        help="an albert-pretrain output_dir (albert_config.json + checkpoints)")
    parser.add_argument("--spm_model_file", default=os.path.join(REPO, "runs", "demo", "vocab.model"))
    parser.add_argument("--data_dir", default=os.path.join(REPO, "..", "shared", "data", "glue"))
    parser.add_argument("--output_dir", default="/tmp/glue_pretraining_helps")
    parser.add_argument("--train_examples", type=int, default=4000)
    parser.add_argument("--seq_length", type=int, default=32)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--learning_rate", type=float, default=5e-5)
    parser.add_argument("--seed", type=int, default=12345)
    return parser.parse_args()


def main():
    args = parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from finetune.glue import cli

    config_file = os.path.join(args.pretrained, "albert_config.json")
    common = [
        "--task=SST-2", f"--data_dir={args.data_dir}", f"--spm_model_file={args.spm_model_file}",
        f"--albert_config_file={config_file}", "--do_train", "--do_eval", "--export=false",
        f"--max_seq_length={args.seq_length}", f"--train_batch_size={args.batch_size}",
        f"--num_train_steps={args.steps}", f"--num_warmup_steps={args.steps // 10}",
        f"--learning_rate={args.learning_rate}", f"--max_train_examples={args.train_examples}",
        f"--save_checkpoints_steps={args.steps}", "--steps_per_loop=50", f"--seed={args.seed}",
        "--eval_batch_size=64", "--progress_bar=false",
    ]
    rows = {}
    for name, init in (("pretrained", [f"--init_checkpoint={args.pretrained}"]), ("random", [])):
        output_dir = os.path.join(args.output_dir, name)
        shutil.rmtree(output_dir, ignore_errors=True)
        began = time.perf_counter()
        summary = cli.finetune(["albert-finetune-glue", f"--output_dir={output_dir}", *init, *common])
        rows[name] = {
            "dev_accuracy": summary["eval"]["dev"]["accuracy"],
            "dev_examples": summary["eval"]["dev"]["examples"],
            "final_train_loss": summary["train"]["train"]["loss"],
            "train_examples_per_second": summary["train"]["examples_per_second"],
            "wall_seconds": time.perf_counter() - began,
        }
        print(name, json.dumps(rows[name]), flush=True)

    print(f"\nSST-2: {args.train_examples} train examples, sequence {args.seq_length}, batch {args.batch_size}, "
          f"{args.steps} steps (~{args.steps * args.batch_size / args.train_examples:.1f} epochs), "
          f"lr {args.learning_rate}; full dev set")
    print("| encoder start | SST-2 dev accuracy | final train loss | wall s |")
    print("|---|---|---|---|")
    for name, row in rows.items():
        print(f"| {name} | {row['dev_accuracy']:.4f} ({row['dev_examples']} sentences) | "
              f"{row['final_train_loss']:.3f} | {row['wall_seconds']:.0f} |")
    with open(os.path.join(args.output_dir, "results.json"), "w") as f:
        json.dump({"settings": vars(args), "results": rows}, f, indent=2)


if __name__ == "__main__":
    main()
