"""Benchmark of pretraining-data generation and of the tf.data reader (a script, not a test).

Measures, on ../shared/data/corpus (or --corpus_dir):
  1. albert-create-pretraining-data at max_seq_length 128, dupe_factor 5, with 1 and 2 workers:
     instances per second and peak RSS (largest process, and the whole process tree);
  2. peak RSS when the input grows tenfold (the corpus listed 10 times, dupe_factor 1);
  3. the reader, `albert_tf.datasets.pretraining_dataset`: examples per second, parse + batch.

Reference (from issue 3): the original google-research create_pretraining_data.py makes about
400 instances/s at max_seq_length 128 (dupe_factor 1) on this kind of machine, with a peak RSS of
680 MB for 5 MB of text that grows with the input. A base-model train step at batch 8 takes ~3 s
here, i.e. training consumes ~3 examples/s.

    python bench/data_prep_throughput.py [--corpus_dir ../shared/data/corpus] [--skip_tenfold]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import threading
import time

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
ORIGINAL_INSTANCES_PER_S = 400
ORIGINAL_PEAK_RSS_MB = 680
TRAIN_STEP_EXAMPLES_PER_S = 8 / 3.0


def _tree_sample(root_pid: int) -> tuple[float, float, dict[int, float]]:
    """(largest single RSS, summed PSS) in MB, and CPU seconds so far per process, over root_pid
    and its descendants.

    The sum uses PSS because forked workers share TensorFlow's pages with their fork server: RSS
    would count those pages once per process.
    """
    children: dict[int, list[int]] = {}
    rss: dict[int, float] = {}
    cpu: dict[int, float] = {}
    ticks = os.sysconf("SC_CLK_TCK")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{entry}/status") as f:
                status = f.read()
        except OSError:
            continue
        pid, ppid = int(entry), int(fields[1])
        children.setdefault(ppid, []).append(pid)
        cpu[pid] = (int(fields[11]) + int(fields[12])) / ticks  # utime + stime
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                rss[pid] = int(line.split()[1]) / 1024
    stack, seen = [root_pid], []
    while stack:
        pid = stack.pop()
        seen.append(pid)
        stack.extend(children.get(pid, []))
    pss = 0.0
    for pid in seen:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                pss += next(int(line.split()[1]) for line in f if line.startswith("Pss:")) / 1024
        except (OSError, StopIteration):
            pss += rss.get(pid, 0.0)
    return max((rss.get(pid, 0.0) for pid in seen), default=0.0), pss, {pid: cpu.get(pid, 0.0) for pid in seen}


def _run_measured(command: list[str]) -> dict:
    process = subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak = {"single": 0.0, "tree": 0.0}
    cpu_by_pid: dict[int, float] = {}

    def sample():
        # Sampled from /proc because the workers are children of a fork server that the command
        # does not wait for, so their CPU time never reaches this process's RUSAGE_CHILDREN.
        while process.poll() is None:
            single, tree, cpu = _tree_sample(process.pid)
            peak["single"] = max(peak["single"], single)
            peak["tree"] = max(peak["tree"], tree)
            for pid, seconds in cpu.items():
                cpu_by_pid[pid] = max(cpu_by_pid.get(pid, 0.0), seconds)
            time.sleep(0.1)

    sampler = threading.Thread(target=sample, daemon=True)
    started = time.monotonic()
    sampler.start()
    stdout, stderr = process.communicate()
    wall = time.monotonic() - started
    sampler.join()
    cpu = sum(cpu_by_pid.values())
    if process.returncode != 0:
        raise SystemExit(f"command failed ({process.returncode}): {' '.join(command)}\n{stderr[-3000:]}")
    return {
        "wall_s": wall,
        "cpu_s": cpu,
        "peak_single_mb": peak["single"],
        "peak_tree_mb": peak["tree"],
        "stdout": stdout,
    }


def _generate(corpus_glob: str, output_dir: str, workers: int, dupe_factor: int, repeat: int = 1) -> dict:
    command = [
        sys.executable,
        "-m",
        "data_prep.create_pretraining_data",
        "--input_file=" + ",".join([corpus_glob] * repeat),
        f"--output_dir={output_dir}",
        f"--spm_model_file={REPO_ROOT.parent / 'shared' / 'data' / 'albert' / '30k-clean.model'}",
        "--max_seq_length=128",
        "--max_predictions_per_seq=20",
        f"--dupe_factor={dupe_factor}",
        f"--num_output_shards={max(4, 2 * workers)}",
        f"--num_workers={workers}",
        "--skip_bad_lines",
        "--noprogress",
    ]
    measured = _run_measured(command)
    metadata = json.loads((pathlib.Path(output_dir) / "pretraining_data.json").read_text())
    measured["instances"] = metadata["counts"]["instances"]
    measured["generation_s"] = metadata["seconds"]  # worker start-up included, interpreter start-up not
    return measured


def _reader_examples_per_s(pattern: str, batch_size: int, seconds: float = 5.0) -> float:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from albert_tf.datasets import pretraining_dataset

    dataset = pretraining_dataset(
        pattern, batch_size=batch_size, max_seq_length=128, max_predictions_per_seq=20, is_training=True, seed=1
    )
    iterator = iter(dataset)
    for _ in range(20):  # warm-up: fill the shuffle buffer and the prefetch queue
        next(iterator)
    batches, started = 0, time.monotonic()
    while time.monotonic() - started < seconds:
        next(iterator)
        batches += 1
    return batches * batch_size / (time.monotonic() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus_dir", default=str(REPO_ROOT.parent / "shared" / "data" / "corpus"))
    parser.add_argument("--skip_tenfold", action="store_true", help="skip the 10x-input memory run")
    args = parser.parse_args()
    corpus_glob = f"{args.corpus_dir}/*/*"
    corpus_mb = sum(p.stat().st_size for p in pathlib.Path(args.corpus_dir).glob("*/*")) / 1e6
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for workers in (1, 2):
            result = _generate(corpus_glob, f"{scratch}/w{workers}", workers, dupe_factor=5)
            rate = result["instances"] / result["generation_s"]
            per_cpu = result["instances"] / result["cpu_s"]
            rows.append(
                (
                    f"generate, {corpus_mb:.1f} MB, dupe 5, {workers} worker{'s' if workers > 1 else ''}",
                    f"{result['instances']:,} instances in {result['generation_s']:.1f} s, "
                    f"{result['cpu_s']:.1f} CPU-s in all (start-up included)",
                    f"{rate:,.0f} instances/s on this (shared) machine ({rate / ORIGINAL_INSTANCES_PER_S:.0f}x the "
                    f"original); {per_cpu:,.0f} per CPU-second, so {min(workers, 2) * per_cpu:,.0f}/s "
                    f"({min(workers, 2) * per_cpu / ORIGINAL_INSTANCES_PER_S:.0f}x) on {min(workers, 2)} idle core(s)",
                    f"{result['peak_single_mb']:.0f} MB largest process, {result['peak_tree_mb']:.0f} MB all processes (PSS)",
                )
            )
        if not args.skip_tenfold:
            for repeat in (1, 10):
                result = _generate(corpus_glob, f"{scratch}/x{repeat}", 2, dupe_factor=1, repeat=repeat)
                rate = result["instances"] / result["generation_s"]
                rows.append(
                    (
                        f"generate, {corpus_mb * repeat:.0f} MB ({repeat}x corpus), dupe 1, 2 workers",
                        f"{result['instances']:,} instances in {result['generation_s']:.1f} s",
                        f"{rate:,.0f} instances/s",
                        f"{result['peak_single_mb']:.0f} MB largest process, {result['peak_tree_mb']:.0f} MB all processes (PSS)",
                    )
                )
        for batch_size in (8, 64):
            rate = _reader_examples_per_s(f"{scratch}/w2/pretrain-*", batch_size)
            rows.append(
                (
                    f"read (parse + batch {batch_size}, shuffled)",
                    "",
                    f"{rate:,.0f} examples/s " f"({rate / TRAIN_STEP_EXAMPLES_PER_S:,.0f}x a base train step's need)",
                    "",
                )
            )
    load = os.getloadavg()
    print(f"\nmachine: {os.cpu_count()} cores, load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} during the run\n")
    print("| measurement | work | throughput | peak RSS |")
    print("|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
