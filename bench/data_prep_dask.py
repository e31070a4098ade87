"""Pretraining data on a dask.distributed cluster against the local tool and the DirectRunner, in one
run (a script, not a test).

The same input, flags and seed three ways: the local tool with 2 worker processes, Beam's
DirectRunner with 2 processes, and Beam's DaskRunner on a cluster started here as a user starts one
(`dask scheduler` and two `dask worker tcp://...` processes, one thread each, on loopback). For each:
end-to-end wall time (interpreter start-up included), instances, and peak RSS (VmHWM) of the
launcher and of the largest worker; for Dask, each worker's peak (`resource.getrusage` in the
worker, run there through the client after the job) and its RSS when idle before the job. The
shards of the three must be byte-identical; the script stops if they are not.

    python bench/data_prep_dask.py [--input_file '../shared/data/corpus/gutenberg/*.txt'] \\
        [--dupe_factor 2] [--num_output_shards 8]
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import tempfile

import harness
from data_prep_throughput import _run_measured

from tests.data_prep.dask_cluster import LoopbackCluster


def _worker_memory(address: str) -> dict[str, dict[str, float]]:
    """Each Dask worker's RSS now and its peak RSS so far, in MB, measured inside the worker."""
    from distributed import Client

    def measure():
        import resource

        import psutil

        return {"rss_mb": psutil.Process().memory_info().rss / 2**20,
                "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}

    with Client(address, timeout=30) as client:
        return client.run(measure)


def _shard_bytes(directory: pathlib.Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.glob("pretrain-*"))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--input_file", default=str(harness.data_dir() / "corpus" / "gutenberg" / "*.txt"))
    parser.add_argument("--spm_model_file", default=str(harness.spm_model()))
    parser.add_argument("--dupe_factor", type=int, default=2)
    parser.add_argument("--num_output_shards", type=int, default=8)
    args = parser.parse_args()

    scratch = pathlib.Path(tempfile.mkdtemp(prefix="albert-dask-bench-"))
    common = [
        sys.executable, "-m", "data_prep.create_pretraining_data", f"--input_file={args.input_file}",
        f"--spm_model_file={args.spm_model_file}", "--max_seq_length=128", "--max_predictions_per_seq=20",
        f"--dupe_factor={args.dupe_factor}", f"--num_output_shards={args.num_output_shards}", "--skip_bad_lines",
        "--noprogress",
    ]
    kinds = {
        "local tool, 2 workers": ["--num_workers=2"],
        "Beam DirectRunner, 2 processes": ["--runner=DirectRunner", "--direct_num_workers=2",
                                           "--direct_running_mode=multi_processing"],
        "Beam DaskRunner, scheduler + 2 workers": ["--runner=DaskRunner"],
    }
    results, shards = {}, {}
    with LoopbackCluster(scratch / "cluster", num_workers=2) as cluster:
        idle = _worker_memory(cluster.address)
        for kind, extra in kinds.items():
            output_dir = scratch / kind.split(",")[0].replace(" ", "-")
            if "DaskRunner" in extra[0]:
                extra = extra + [f"--dask_client_address={cluster.address}"]
            measured = _run_measured([*common, f"--output_dir={output_dir}", *extra])
            metadata = json.loads((output_dir / "pretraining_data.json").read_text())
            measured["instances"] = metadata["counts"]["instances"]
            results[kind] = measured
            shards[kind] = _shard_bytes(output_dir)
        after = _worker_memory(cluster.address)

    reference = shards["local tool, 2 workers"]
    for kind, found in shards.items():
        if found != reference:
            raise SystemExit(f"{kind}: the shards differ from the local tool's")
    size_mb = sum(len(b) for b in reference.values()) / 2**20
    print(f"input {args.input_file}, max_seq_length 128, dupe_factor {args.dupe_factor}, "
          f"{args.num_output_shards} shards: {results['local tool, 2 workers']['instances']:,} instances, "
          f"{size_mb:.1f} MB of shards, byte-identical in all three runs\n")
    print("| run | wall time | instances/s | launcher peak RSS | largest worker peak RSS |")
    print("|---|---|---|---|---|")
    for kind, m in results.items():
        if "DaskRunner" in kind:
            worker = max(w["peak_mb"] for w in after.values())
        else:
            worker = m["worker_hwm_mb"]
        print(f"| {kind} | {m['wall_s']:.1f} s | {m['instances'] / m['wall_s']:,.0f} | "
              f"{m['launcher_hwm_mb']:.0f} MB | {worker:.0f} MB |")
    print("\n| Dask worker | RSS idle, before the jobs | peak RSS after the job |")
    print("|---|---|---|")
    for address in sorted(after):
        print(f"| {address} | {idle[address]['rss_mb']:.0f} MB | {after[address]['peak_mb']:.0f} MB |")


if __name__ == "__main__":
    main()
