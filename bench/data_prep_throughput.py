"""Benchmark of pretraining-data generation and of the tf.data reader (a script, not a test).

Measures, on ../shared/data/corpus (or --corpus_dir):
  1. albert-create-pretraining-data at max_seq_length 128, dupe_factor 5, with 1 and 2 workers:
     instances per second and peak RSS (largest process, and the whole process tree);
  2. peak RSS when the input grows tenfold (the corpus listed 10 times, dupe_factor 1);
  3. the reader, `albert_tf.data.datasets.pretraining_dataset`: examples per second, parse + batch.

Reference (from issue 3): the original google-research create_pretraining_data.py makes about
400 instances/s at max_seq_length 128 (dupe_factor 1) on this kind of machine, with a peak RSS of
680 MB for 5 MB of text that grows with the input. A base-model train step at batch 8 takes ~3 s
here, i.e. training consumes ~3 examples/s.

    python bench/data_prep_throughput.py [--corpus_dir ../shared/data/corpus] [--skip_tenfold]

With --release, instead: the release's comparison on its 1.7 MB reference corpus
(../shared/reference/release-pretraining-data/corpus.txt: max_seq_length 128, dupe_factor 20,
seed 1), run side by side in one run, --repeats times each, medians and ratios: the original
google-research/albert create_pretraining_data.py (--original_dir: a checkout holding it and its
tokenization.py; it runs under TensorFlow's compat.v1), the local tool with 2 workers, and the Beam
pipeline on the DirectRunner with 1 worker and with 2 processes; end-to-end wall time (interpreter
start-up included), instances/s, and peak RSS (VmHWM) of the launcher and of the largest worker
process; then, at dupe_factor 2, memory against input size: the corpus once, listed ten times, and
as ten distinct copies with 4 and with 40 shards; and what a Beam worker process holds before any
work (Beam's harness, the pipeline's lighter one, and with the pipeline's modules loaded).

    python bench/data_prep_throughput.py --release --original_dir /tmp/albert --repeats 3

With --beam_memory_scales 1,10,30,60, instead: the Beam DirectRunner in 2 processes on that many
distinct copies of the release corpus (4 shards a copy, dupe_factor 2): peak RSS of the largest
worker and of the launcher.
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

import harness

ORIGINAL_INSTANCES_PER_S = 400
ORIGINAL_PEAK_RSS_MB = 680
TRAIN_STEP_EXAMPLES_PER_S = 8 / 3.0


def _tree_sample(root_pid: int) -> tuple[float, float, dict[int, float], dict[int, float]]:
    """(largest single RSS, summed PSS) in MB, CPU seconds so far per process, and each process's
    peak RSS so far (the kernel's VmHWM, which no sampling interval misses), over root_pid and its
    descendants.

    The sum uses PSS because forked workers share TensorFlow's pages with their fork server: RSS
    would count those pages once per process.
    """
    children: dict[int, list[int]] = {}
    rss: dict[int, float] = {}
    hwm: dict[int, float] = {}
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
            elif line.startswith("VmHWM:"):
                hwm[pid] = int(line.split()[1]) / 1024
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
    return (
        max((rss.get(pid, 0.0) for pid in seen), default=0.0),
        pss,
        {pid: cpu.get(pid, 0.0) for pid in seen},
        {pid: hwm[pid] for pid in seen if pid in hwm},
    )


def _run_measured(command: list[str], cwd=harness.REPO) -> dict:
    process = subprocess.Popen(command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak = {"single": 0.0, "tree": 0.0}
    cpu_by_pid: dict[int, float] = {}
    hwm_by_pid: dict[int, float] = {}

    def sample():
        # Sampled from /proc because the workers are children of a fork server that the command
        # does not wait for, so their CPU time never reaches this process's RUSAGE_CHILDREN.
        while process.poll() is None:
            single, tree, cpu, hwm = _tree_sample(process.pid)
            peak["single"] = max(peak["single"], single)
            peak["tree"] = max(peak["tree"], tree)
            for pid, seconds in cpu.items():
                cpu_by_pid[pid] = max(cpu_by_pid.get(pid, 0.0), seconds)
            for pid, mb in hwm.items():
                hwm_by_pid[pid] = max(hwm_by_pid.get(pid, 0.0), mb)
            time.sleep(0.05)

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
        # The command's own process (for Beam: the launcher, which is also the DirectRunner's engine)
        # and its largest child (the local tool's workers, Beam's worker processes), by VmHWM.
        "launcher_hwm_mb": hwm_by_pid.get(process.pid, 0.0),
        "worker_hwm_mb": max((mb for pid, mb in hwm_by_pid.items() if pid != process.pid), default=None),
        "stdout": stdout,
    }


def _generate(corpus_glob: str, output_dir: str, workers: int, dupe_factor: int, repeat: int = 1) -> dict:
    command = [
        sys.executable,
        "-m",
        "data_prep.create_pretraining_data",
        "--input_file=" + ",".join([corpus_glob] * repeat),
        f"--output_dir={output_dir}",
        f"--spm_model_file={harness.spm_model()}",
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
    harness.quiet_tensorflow()
    from albert_tf.data.datasets import pretraining_dataset

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


RELEASE_CORPUS = harness.reference_dir() / "release-pretraining-data" / "corpus.txt"
SPM_MODEL = harness.spm_model()
RELEASE_FLAGS = ["--max_seq_length=128", "--max_predictions_per_seq=20", "--dupe_factor=20", "--random_seed=1"]


def _ours_command(kind: str, corpus: str, output_dir: str, repeat: int) -> list[str]:
    command = [
        sys.executable,
        "-m",
        "data_prep.create_pretraining_data",
        "--input_file=" + ",".join([corpus] * repeat),
        f"--output_dir={output_dir}",
        f"--spm_model_file={SPM_MODEL}",
        *RELEASE_FLAGS,
        "--num_output_shards=4",
        "--noprogress",
    ]
    if kind == "local, 2 workers":
        return command + ["--num_workers=2"]
    if kind == "Beam DirectRunner, 1 worker":
        return command + ["--runner=DirectRunner"]
    return command + ["--runner=DirectRunner", "--direct_num_workers=2", "--direct_running_mode=multi_processing"]


def _original_command(original_dir: str, corpus: str, output_dir: str, repeat: int) -> list[str]:
    os.makedirs(output_dir, exist_ok=True)
    vocab = SPM_MODEL.with_suffix(".vocab")
    return [
        sys.executable,
        str(pathlib.Path(original_dir) / "create_pretraining_data.py"),
        "--input_file=" + ",".join([corpus] * repeat),
        f"--output_file={output_dir}/original.tfrecord",
        f"--vocab_file={vocab}",
        f"--spm_model_file={SPM_MODEL}",
        *RELEASE_FLAGS,
    ]


def _count_records(directory: str) -> int:
    from albert_tf.data.tfrecord import read_records

    total = 0
    for path in sorted(pathlib.Path(directory).glob("*.tfrecord")):
        with open(path, "rb") as f:
            total += len(read_records(f))
    return total


def _median(values):
    values = sorted(values)
    return values[len(values) // 2] if len(values) % 2 else (values[len(values) // 2 - 1] + values[len(values) // 2]) / 2


_PEAK_PROBE = (
    "import sys\n{code}\n"
    "print([int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmHWM')][0] / 1024)\n"
)
# What a Beam worker process holds before it does any work.
WORKER_FLOORS = {
    "Beam's SDK harness alone (python -m apache_beam.runners.worker.sdk_worker_main)": (
        "import apache_beam.runners.worker.sdk_worker_main"
    ),
    "the pipeline's worker harness (python -m data_prep.beam.worker)": (
        "from data_prep.beam.worker import hide_unused_modules\nhide_unused_modules()\n"
        "import apache_beam.runners.worker.sdk_worker_main"
    ),
    "the same, with the pipeline's modules and the SentencePiece model loaded": (
        "from data_prep.beam.worker import hide_unused_modules\nhide_unused_modules()\n"
        "import apache_beam.runners.worker.sdk_worker_main\nimport data_prep.beam.pipeline\n"
        "from albert_tf.tokenizers.tokenizer import AlbertTokenizer\nAlbertTokenizer('{model}')"
    ),
}


def _floor_mb(code: str) -> float:
    probe = _PEAK_PROBE.format(code=code.format(model=SPM_MODEL))
    out = subprocess.run([sys.executable, "-c", probe], cwd=harness.REPO, capture_output=True, text=True, check=True)
    return float(out.stdout.split()[-1])


def _distinct_copies(corpus: pathlib.Path, directory: str, copies: int) -> list[str]:
    """`copies` files, each the corpus with every document's first line marked with the copy's
    number: ten times the text, and ten times the distinct documents (the shard of a document is a
    hash of its text, so the corpus listed ten times puts ten copies of each document in one shard)."""
    paths = []
    for copy in range(copies):
        path = pathlib.Path(directory) / f"copy-{copy}.txt"
        with open(corpus, encoding="utf-8") as source, open(path, "w", encoding="utf-8") as out:
            starts = True
            for line in source:
                if line.strip() and starts:
                    line = f"Copy {copy}. {line}"
                starts = not line.strip()
                out.write(line)
        paths.append(str(path))
    return paths


def _mb(value) -> str:
    return "" if value is None else f"{value:.0f} MB"


def _memory_run(kind: str, files: list, output_dir: str, shards: int) -> tuple[dict, int]:
    """One memory run of `kind` at dupe_factor 2 into `shards` shards: (measurements, instances);
    the output is removed afterwards."""
    import shutil

    command = []
    for arg in _ours_command(kind, ",".join(str(f) for f in files), output_dir, 1):
        if arg == "--dupe_factor=20":
            arg = "--dupe_factor=2"
        elif arg.startswith("--num_output_shards="):
            arg = f"--num_output_shards={shards}"
        command.append(arg)
    measured = _run_measured(command)
    instances = _count_records(output_dir)
    shutil.rmtree(output_dir, ignore_errors=True)
    return measured, instances


def beam_worker_memory_at_scales(scales: list[int]) -> None:
    """The Beam DirectRunner in 2 processes on `scale` distinct copies of the release corpus with
    4 shards a copy, dupe_factor 2: peak RSS of the largest worker and of the launcher."""
    print("| input, dupe 2 | shards | instances | wall s | largest worker peak RSS | launcher peak RSS |")
    print("|---|---|---|---|---|---|", flush=True)
    with tempfile.TemporaryDirectory() as scratch:
        copies = _distinct_copies(RELEASE_CORPUS, scratch, max(scales))
        for scale in scales:
            measured, instances = _memory_run("Beam DirectRunner, 2 processes", copies[:scale],
                                              f"{scratch}/out-{scale}", 4 * scale)
            print(f"| {1.73 * scale:.0f} MB ({scale} distinct copies) | {4 * scale} | {instances:,} | "
                  f"{measured['wall_s']:.1f} | {_mb(measured['worker_hwm_mb'])} | {_mb(measured['launcher_hwm_mb'])} |",
                  flush=True)


def release_comparison(original_dir: str | None, repeats: int, tenfold: bool) -> None:
    import shutil

    corpus = str(RELEASE_CORPUS)
    kinds = (["original create_pretraining_data.py"] if original_dir else []) + [
        "local, 2 workers",
        "Beam DirectRunner, 1 worker",
        "Beam DirectRunner, 2 processes",
    ]
    print("| input | system | instances | wall s (end to end) | instances/s | vs original | launcher peak RSS | "
          "largest worker peak RSS |")
    print("|---|---|---|---|---|---|---|---|", flush=True)
    results: dict[str, list[dict]] = {}
    base = None
    with tempfile.TemporaryDirectory() as scratch:
        for attempt in range(repeats):
            # the systems take turns within every repeat, so a load change on the shared machine hits all
            for kind in kinds:
                output_dir = f"{scratch}/{kind[:5]}-{attempt}"
                if kind.startswith("original"):
                    measured = _run_measured(_original_command(original_dir, corpus, output_dir, 1), original_dir)
                else:
                    measured = _run_measured(_ours_command(kind, corpus, output_dir, 1))
                measured["instances"] = _count_records(output_dir)
                results.setdefault(kind, []).append(measured)
                shutil.rmtree(output_dir, ignore_errors=True)
                print(f"<!-- run {attempt + 1}: {kind}: {measured['instances']:,} instances, {measured['wall_s']:.1f} s, "
                      f"{measured['launcher_hwm_mb']:.0f} MB -->", flush=True)
        for kind in kinds[: len(kinds) if repeats else 0]:
            runs = results[kind]
            wall = _median([r["wall_s"] for r in runs])
            rate = _median([r["instances"] / r["wall_s"] for r in runs])
            if kind.startswith("original"):
                base = rate
            ratio = f"{rate / base:.1f}x" if base else "not run"
            launcher = _median([r["launcher_hwm_mb"] for r in runs])
            workers = [r["worker_hwm_mb"] for r in runs if r["worker_hwm_mb"] is not None]
            print(f"| 1.7 MB, dupe 20 | {kind} | {runs[0]['instances']:,} | {wall:.1f} | {rate:,.0f} | {ratio} | "
                  f"{_mb(launcher)} | {_mb(_median(workers)) if workers else 'in the launcher'} |", flush=True)
        if tenfold:
            memory_against_input(kinds[-3:], corpus, scratch)
    load = os.getloadavg()
    print(f"\nmachine: {os.cpu_count()} cores, shared with other jobs; load average {load[0]:.1f} {load[1]:.1f} "
          f"{load[2]:.1f} at the end; medians of {repeats} interleaved runs (the dupe-2 rows: one run each)")


def memory_against_input(kinds: list[str], corpus: str, scratch: str) -> None:
    """Peak memory at dupe_factor 2 for the corpus once and ten times, in one run: listed ten times
    with 4 shards (each shard gets ten times the documents), and as ten distinct copies with 4 and
    with 40 shards (shards scaled to the input: each gets what it got from the corpus once). The
    original is left out: it holds every instance of its input in memory at once."""
    copies = _distinct_copies(pathlib.Path(corpus), scratch, 10)
    inputs = [
        ("1.7 MB (1x), 4 shards", [corpus], 4),
        ("17 MB (1x listed 10 times), 4 shards", [corpus] * 10, 4),
        ("17 MB (10 distinct copies), 4 shards", copies, 4),
        ("17 MB (10 distinct copies), 40 shards", copies, 40),
    ]
    print("\n| input, dupe 2 | system | instances | wall s | launcher peak RSS | largest worker peak RSS |")
    print("|---|---|---|---|---|---|", flush=True)
    for kind in kinds:
        for label, files, shards in inputs:
            measured, instances = _memory_run(kind, files, f"{scratch}/{kind[:5]}-{shards}-{len(files)}", shards)
            worker = _mb(measured["worker_hwm_mb"]) if kind != "Beam DirectRunner, 1 worker" else "in the launcher"
            print(f"| {label} | {kind} | {instances:,} | {measured['wall_s']:.1f} | {_mb(measured['launcher_hwm_mb'])} | "
                  f"{worker} |", flush=True)
    print("\n| a Beam worker process before any work | peak RSS |")
    print("|---|---|")
    for label, code in WORKER_FLOORS.items():
        print(f"| {label} | {_floor_mb(code):.0f} MB |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus_dir", default=str(harness.data_dir() / "corpus"))
    parser.add_argument("--skip_tenfold", action="store_true", help="skip the 10x-input memory run")
    parser.add_argument("--release", action="store_true", help="the release comparison on its reference corpus")
    parser.add_argument("--original_dir", help="a google-research/albert checkout, for --release")
    harness.add_repeats(parser, 3)
    parser.add_argument(
        "--beam_memory_scales",
        help="instead: Beam workers' peak memory on this many distinct copies of the release corpus, e.g. 1,10,30",
    )
    args = parser.parse_args()
    if args.beam_memory_scales:
        beam_worker_memory_at_scales([int(s) for s in args.beam_memory_scales.split(",")])
        return
    if args.release:
        release_comparison(args.original_dir, args.repeats, not args.skip_tenfold)
        return
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
