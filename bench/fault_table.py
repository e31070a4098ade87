"""Runs the faults and bad inputs of docs/reliability.md's table as a user would, each tool a fresh
process, and prints the table's rows: exit code, the last line on stderr, how many lines stderr had,
and what is in the output folder afterwards.

    python bench/fault_table.py            # about 5 minutes on 2 CPU cores; a scratch folder in /tmp

Only tiny inputs (tests/fixtures) and tiny models: what is measured is what the user sees, not speed.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import signal
import subprocess
import sys
import tempfile
import textwrap
import time

import harness

FIXTURES = harness.REPO / "tests" / "fixtures" / "data"
SPM = FIXTURES / "albert" / "30k-clean.model"
TINY_VOCAB = harness.REPO / "tests" / "fixtures" / "data_prep" / "tiny_vocab.model"
CONFIG = {"vocab_size": 30000, "embedding_size": 16, "hidden_size": 32, "num_hidden_layers": 2,
          "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 64}
ROWS: list[tuple[str, int, str, int, str]] = []


def tool(case: str, module: str, *args, folder: pathlib.Path | None = None) -> tuple[int, str]:
    started = time.monotonic()
    run = subprocess.run([sys.executable, "-m", module, *map(str, args)], capture_output=True, text=True,
                         timeout=600)
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    last = lines[-1] if lines else ""
    left = describe(folder) if folder is not None else ""
    ROWS.append((case, run.returncode, last, len(lines), left))
    print(f"{case}: exit {run.returncode}, {len(lines)} line(s), {time.monotonic() - started:.0f} s", file=sys.stderr)
    return run.returncode, last


def describe(folder: pathlib.Path) -> str:
    if not folder.exists():
        return "nothing (no folder)"
    names = sorted(os.listdir(folder))
    return "the folder, empty" if not names else ", ".join(names)


def main():
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    scratch = pathlib.Path(tempfile.mkdtemp(prefix="albert-faults-"))
    os.chdir(scratch)
    config = scratch / "tiny.json"
    config.write_text(json.dumps(CONFIG))
    blake = (FIXTURES / "corpus" / "gutenberg" / "blake-poems.txt").read_bytes()
    prep = ["data_prep.create_pretraining_data", f"--spm_model_file={SPM}", "--max_seq_length=64",
            "--max_predictions_per_seq=10", "--dupe_factor=1", "--noprogress"]

    # ---- data prep
    (scratch / "short.txt").write_text("hi\n")
    tool("data prep makes no instance", *prep, "--input_file=short.txt", "--output_dir=out1", folder=scratch / "out1")
    (scratch / "two.txt").write_text("The first document has a sentence.\nAnd a second one here.\n\n"
                                     "The other one too.\nIt ends.\n")
    tool("more shards than documents", *prep, "--input_file=two.txt", "--output_dir=out2", "--num_output_shards=4",
         folder=scratch / "out2")
    (scratch / "book.txt").write_text("A first line.\n" + "x" * 1_000_004 + "\n")
    tool("a line of over 1,000,000 characters", *prep, "--input_file=book.txt", "--output_dir=out3",
         folder=scratch / "out3")
    tool("--max_seq_length over 8192", *[a if a != "--max_seq_length=64" else "--max_seq_length=100000" for a in prep],
         "--input_file=two.txt", "--output_dir=out4", folder=scratch / "out4")
    (scratch / "corpus.txt").write_bytes(blake)
    tool("data prep, a first run", *prep, "--input_file=corpus.txt", "--output_dir=data")
    (scratch / "corpus.txt").write_bytes(blake.replace(b"the", b"The", 1))
    tool("a data-prep rerun after the input changed", *prep, "--input_file=corpus.txt", "--output_dir=data",
         folder=scratch / "data")
    (scratch / "corpus.txt").write_bytes(blake)
    (scratch / "bad.txt").write_bytes(blake[:3000] + b"\nA bad \xff byte here.\n" + blake[:3000])
    tool("a byte that is not UTF-8 in the corpus", *prep, "--input_file=bad.txt", "--output_dir=out5",
         folder=scratch / "out5")
    tool("the same under Beam, two worker processes", *prep, "--input_file=bad.txt", "--output_dir=out6",
         "--runner=DirectRunner", "--direct_num_workers=2", "--direct_running_mode=multi_processing",
         folder=scratch / "out6")

    # ---- pretraining
    pretrain = ["albert_tf.cli.pretrain", f"--albert_config_file={config}", "--train_batch_size=4",
                "--num_train_steps=2", "--save_checkpoints_steps=2", "--steps_per_loop=1", "--nojit_compile",
                "--noprogress_bar"]
    (scratch / "empty.tfrecord").write_bytes(b"")
    tool("training input with 0 records", *pretrain, "--input_file=empty.tfrecord", "--max_seq_length=64",
         "--max_predictions_per_seq=10", "--output_dir=run1", folder=scratch / "run1")
    unfinished = scratch / "unfinished"
    unfinished.mkdir()
    for name in os.listdir(scratch / "data"):
        if (scratch / "data" / name).is_file():
            (unfinished / name).write_bytes((scratch / "data" / name).read_bytes())
    metadata = json.loads((unfinished / "pretraining_data.json").read_text())
    (unfinished / "pretraining_data.json").write_text(json.dumps({"settings": metadata["settings"], "complete": False}))
    tool("training on an unfinished data-prep folder", *pretrain, f"--input_file={unfinished}/*.tfrecord",
         "--output_dir=run2", folder=scratch / "run2")
    tool("a file that is not a TFRecord", *pretrain, "--input_file=corpus.txt", "--max_seq_length=64",
         "--max_predictions_per_seq=10", "--output_dir=run3", folder=scratch / "run3")
    tool("records of another length than the flags", *pretrain, "--input_file=data/*.tfrecord",
         "--max_seq_length=128", "--max_predictions_per_seq=10", "--output_dir=run4", folder=scratch / "run4")
    tool("--learning_rate 0", *pretrain, "--input_file=data/*.tfrecord", "--learning_rate=0", "--output_dir=run5",
         folder=scratch / "run5")
    tool("a pretraining run (to start others from)", *pretrain, "--input_file=data/*.tfrecord",
         f"--spm_model_file={SPM}", "--output_dir=run6")
    wide = scratch / "wide.json"
    wide.write_text(json.dumps({**CONFIG, "hidden_size": 48, "intermediate_size": 96}))
    tool("albert-pretrain --init_checkpoint of another model", *[a if not a.startswith("--albert_config_file") else
                                                                  f"--albert_config_file={wide}" for a in pretrain],
         "--input_file=data/*.tfrecord", "--init_checkpoint=run6", "--output_dir=run7", folder=scratch / "run7")
    tool("a wrong --init_checkpoint", *pretrain, "--input_file=data/*.tfrecord", "--init_checkpoint=nope/ckpt-1",
         "--output_dir=run8", folder=scratch / "run8")
    tool("--strategy=tpu without --tpu", *pretrain, "--input_file=data/*.tfrecord", "--strategy=tpu",
         "--output_dir=run9", folder=scratch / "run9")
    (scratch / "a_file").write_text("x")
    tool("an --output_dir that is a file", *pretrain, "--input_file=data/*.tfrecord", "--output_dir=a_file")
    tool("an --output_dir under a file", *pretrain, "--input_file=data/*.tfrecord", "--output_dir=a_file/run")

    # ---- one run a folder: a second run while the first holds the folder, then after it was killed
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import sys, time
        from albert_tf.utils.locks import locked_run_folder
        with locked_run_folder("busy"):
            print("locked", flush=True)
            time.sleep(600)
        """)], stdout=subprocess.PIPE, text=True, cwd=scratch)
    holder.stdout.readline()
    tool("two runs into one output_dir at once (pretraining)", *pretrain, "--input_file=data/*.tfrecord",
         "--output_dir=busy", folder=scratch / "busy")
    tool("two runs into one output_dir at once (SQuAD)", "finetune.squad.cli", f"--albert_config_file={config}",
         f"--spm_model_file={SPM}", f"--train_file={FIXTURES / 'squad' / 'train-v1.1.articles2-3.json'}",
         "--output_dir=busy", "--do_train", "--seed=7", folder=scratch / "busy")
    tool("two runs into one output_dir at once (data prep)", *prep, "--input_file=corpus.txt", "--output_dir=busy",
         folder=scratch / "busy")
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    tool("a lock left by a killed run (SIGKILL), then the run", *pretrain, "--input_file=data/*.tfrecord",
         "--output_dir=busy", folder=scratch / "busy")

    # ---- fine-tuning
    glue = ["finetune.glue.cli", f"--albert_config_file={config}", f"--spm_model_file={SPM}", "--max_seq_length=64"]
    tool("albert-finetune-glue --do_eval with no fine-tuned model", *glue, "--task=RTE",
         f"--data_dir={FIXTURES / 'glue'}", "--output_dir=rte", "--do_eval", folder=scratch / "rte")
    mrpc = scratch / "glue" / "MRPC"
    mrpc.mkdir(parents=True)
    header = b"Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
    (mrpc / "train.tsv").write_bytes(header + b"1\t1\t2\tThe cat sat.\tA cat sat.\n0\t3\t4\tbad \xff byte\tanother\n")
    tool("a GLUE TSV with a byte that is not UTF-8", *glue, "--task=MRPC", "--data_dir=glue", "--output_dir=mrpc",
         "--do_train", folder=scratch / "mrpc")
    (mrpc / "train.tsv").write_bytes(b"1\t1\t2\tThe cat sat.\tA cat sat.\n")
    tool("a GLUE TSV without its header row", *glue, "--task=MRPC", "--data_dir=glue", "--output_dir=mrpc",
         "--do_train", folder=scratch / "mrpc")
    tool("an unknown GLUE --task", *glue, "--task=nope", "--data_dir=glue", "--output_dir=mrpc", "--do_train",
         folder=scratch / "mrpc")
    squad = ["finetune.squad.cli", f"--albert_config_file={config}", f"--spm_model_file={SPM}",
             "--max_seq_length=64", "--max_query_length=16"]
    dev = json.loads((FIXTURES / "squad" / "dev-v1.1.articles1-2.json").read_text())
    dev["data"][1]["paragraphs"][2]["qas"][0]["id"] = dev["data"][0]["paragraphs"][0]["qas"][1]["id"]
    (scratch / "dup.json").write_text(json.dumps(dev))
    tool("duplicate question ids in a SQuAD file", *squad, "--train_file=dup.json", "--predict_file=dup.json",
         "--output_dir=sq1", "--do_train", "--do_predict", folder=scratch / "sq1")
    (scratch / "empty.json").write_text('{"version": "1.1", "data": []}')
    tool('`{"data": []}` as a SQuAD file', *squad, "--train_file=empty.json", "--output_dir=sq2", "--do_train",
         folder=scratch / "sq2")
    (scratch / "broken.json").write_text('{"data": [')
    tool("a SQuAD file that is not JSON", *squad, "--train_file=broken.json", "--output_dir=sq3", "--do_train",
         folder=scratch / "sq3")
    tool("SQuAD --max_seq_length 16", *squad, f"--train_file={FIXTURES / 'squad' / 'train-v1.1.articles2-3.json'}",
         "--max_seq_length=16", "--output_dir=sq4", "--do_train", folder=scratch / "sq4")
    tool("SQuAD --do_predict with no fine-tuned model", *squad,
         f"--predict_file={FIXTURES / 'squad' / 'dev-v1.1.articles1-2.json'}", "--output_dir=sq5", "--do_predict",
         folder=scratch / "sq5")
    for level in ("middle", "high"):
        (scratch / "RACE" / "train" / level).mkdir(parents=True)
    tool("empty RACE train folders", "finetune.race.cli", f"--albert_config_file={config}",
         f"--spm_model_file={SPM}", "--data_dir=RACE", "--max_seq_length=64", "--max_qa_length=16",
         "--output_dir=race", "--do_train", folder=scratch / "race")

    # ---- export and conversion
    (scratch / "full").mkdir()
    (scratch / "full" / "x").write_text("x")
    tool("albert-export into a folder that holds files", "albert_tf.cli.export", "--init_checkpoint=run6",
         "--output_dir=full", folder=scratch / "full")
    tool("albert-export --init_checkpoint of a missing folder, no --spm_model_file", "albert_tf.cli.export",
         "--init_checkpoint=runs/nope", "--output_dir=exp1", folder=scratch / "exp1")
    subprocess.run([sys.executable, "-c", textwrap.dedent(f"""
        from albert_tf import AlbertConfig
        from albert_tf.training import pretraining
        from albert_tf.training import loop
        from albert_tf.checkpoints.run_folder import check_output_dir
        config = AlbertConfig(**{{**{CONFIG!r}, "vocab_size": 300}})
        options = pretraining.PretrainingOptions(output_dir="small", input_file="x", train_batch_size=4,
                                              eval_batch_size=4, max_seq_length=16, max_predictions_per_seq=2,
                                              num_train_steps=2, num_warmup_steps=0)
        check_output_dir("small", config, write=True)
        loop.Trainer(config, pretraining.PretrainingTask(), options).save()
        """)], cwd=scratch, check=True, capture_output=True)
    tool("albert-export, a vocabulary larger than the model's", "albert_tf.cli.export", "--init_checkpoint=small",
         f"--spm_model_file={SPM}", "--max_seq_length=16", "--output_dir=exp2", folder=scratch / "exp2")
    tool("albert-convert with no flags", "albert_tf.cli.convert")

    print("| Case | Exit | Lines on stderr | The last line | Left in the output folder |")
    print("|---|---|---|---|---|")
    for case, code, last, count, left in ROWS:
        last = last.replace(str(scratch) + "/", "").replace(str(harness.REPO) + "/", "").replace("|", "\\|")
        print(f"| {case} | {code} | {count} | `{last}` | {left} |")


if __name__ == "__main__":
    main()
