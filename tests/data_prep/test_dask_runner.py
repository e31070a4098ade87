"""The Beam pipeline on a running dask.distributed cluster (Beam's DaskRunner): a scheduler and two
worker processes on loopback, started as a user starts them, and the console script run against it
with Beam's own options. Its shards are the local tool's bytes; a worker killed mid-run either
costs nothing (Dask reruns its tasks elsewhere) or fails the run with one line and no shard that
looks finished, and a rerun then gives the same bytes.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import time

import pytest

pytest.importorskip("apache_beam", reason="Apache Beam is not installed: pip install -e '.[beam]'")
pytest.importorskip("distributed", reason="dask.distributed is not installed: pip install -e '.[dask]'")

from data_prep.instances import InstanceOptions  # noqa: E402
from data_prep.shards import METADATA_FILE, STATS_DIR, GenerationConfig, run_generation  # noqa: E402
from tests.data_prep.dask_cluster import LoopbackCluster  # noqa: E402

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FILES = ("shakespeare-macbeth.txt", "blake-poems.txt", "shakespeare-caesar.txt")
SHARDS = 4
RUN_TIMEOUT_S = 240


@pytest.fixture(scope="module")
def inputs(small_data_dir):
    corpus = small_data_dir / "corpus" / "gutenberg"
    return [str(corpus / name) for name in FILES], str(small_data_dir / "albert" / "30k-clean.model")


def _flags(inputs, output_dir, dupe_factor=2):
    files, spm_model = inputs
    return [f"--input_file={','.join(files)}", f"--output_dir={output_dir}", f"--spm_model_file={spm_model}",
            "--max_seq_length=64", "--max_predictions_per_seq=10", f"--dupe_factor={dupe_factor}",
            f"--num_output_shards={SHARDS}", "--skip_bad_lines", "--noprogress"]


@pytest.fixture(scope="module")
def local_shards(tmp_path_factory, inputs):
    """The local tool's shards: what every run here must write, byte for byte."""
    cache = {}

    def shards(dupe_factor):
        if dupe_factor not in cache:
            files, spm_model = inputs
            directory = tmp_path_factory.mktemp(f"local-dupe{dupe_factor}")
            config = GenerationConfig(
                input_files=tuple(files), spm_model_file=spm_model,
                options=InstanceOptions(max_seq_length=64, max_predictions_per_seq=10),
                dupe_factor=dupe_factor, num_output_shards=SHARDS, skip_bad_lines=True,
            )
            result = run_generation(config, str(directory), num_workers=1, progress=False)
            cache[dupe_factor] = (_shard_bytes(directory), result)
        return cache[dupe_factor]

    return shards


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """One cluster of two workers for the tests that run on Dask's default settings: the first
    test's runs use it, the second kills one of its workers (it comes later in this file; a run on
    the worker left would be a run on a Dask cluster all the same). Started once: a cluster is five
    Python processes that each import Dask, and its workers this package once they run a task."""
    with LoopbackCluster(tmp_path_factory.mktemp("cluster"), num_workers=2) as started:
        yield started


def _shard_bytes(directory):
    return {p.name: p.read_bytes() for p in sorted(directory.glob("pretrain-*"))}


def _run(flags, cluster, timeout=RUN_TIMEOUT_S):
    return subprocess.run(
        [sys.executable, "-m", "data_prep.create_pretraining_data", *flags,
         "--runner=DaskRunner", f"--dask_client_address={cluster.address}"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout,
    )


def _start(flags, cluster):
    return subprocess.Popen(
        [sys.executable, "-m", "data_prep.create_pretraining_data", *flags,
         "--runner=DaskRunner", f"--dask_client_address={cluster.address}"],
        cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def _making_a_shard(cluster, index) -> bool:
    return any(cluster.worker_tmp(index).glob("albert-shard-*"))


def _kill_a_worker_making_a_shard(cluster, run, timeout=RUN_TIMEOUT_S) -> int:
    """Waits until a worker is making a shard (its spill folder exists in the worker's TMPDIR:
    made as the task starts, removed before it ends), then kills that worker (SIGKILL to it and its
    nanny) if, stopped, it still is; returns its index."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for index in range(cluster.num_workers):
            making = functools.partial(_making_a_shard, cluster, index)
            if making() and cluster.kill_worker_if(index, making):
                return index
        if run.poll() is not None:
            pytest.fail(f"the run ended (exit {run.returncode}) before a worker could be killed: {run.stderr.read()[-2000:]}")
        time.sleep(0.005)
    run.kill()
    pytest.fail("no worker started making a shard in time")


def _wait_until_no_shard_is_being_made(cluster, timeout=120):
    """A failed run's client is gone, but a task already running on a worker still finishes (Dask
    cannot stop a running task): waits until no live worker is making a shard."""
    deadline = time.monotonic() + timeout
    live = [i for i, worker in enumerate(cluster.workers) if worker.poll() is None]
    while any(_making_a_shard(cluster, i) for i in live):
        assert time.monotonic() < deadline, "a worker is still making a shard"
        time.sleep(0.1)


def test_shards_on_a_dask_cluster_are_the_local_tools_bytes(tmp_path, inputs, local_shards, cluster):
    expected, local_result = local_shards(2)
    assert len(expected) == SHARDS and all(len(b) > 10_000 for b in expected.values())
    result = _run(_flags(inputs, tmp_path / "out"), cluster)
    assert result.returncode == 0, result.stderr[-3000:]
    assert _shard_bytes(tmp_path / "out") == expected
    metadata = json.loads((tmp_path / "out" / METADATA_FILE).read_text())
    assert metadata["complete"] is True and metadata["runner"] == "DaskRunner"
    assert metadata["counts"] == local_result["counts"] and metadata["counts"]["bad_lines"] == 2
    assert metadata["settings"] == local_result["settings"]
    # A rerun into the finished folder makes nothing; one missing shard is remade alone.
    (tmp_path / "out" / "pretrain-00002-of-00004.tfrecord").unlink()
    again = _run(_flags(inputs, tmp_path / "out"), cluster)
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads((tmp_path / "out" / METADATA_FILE).read_text())["generated_shards"] == 1
    assert _shard_bytes(tmp_path / "out") == expected


@pytest.mark.slow
def test_a_worker_killed_mid_run_costs_nothing_dask_reruns_its_tasks(tmp_path, inputs, local_shards, cluster):
    expected, _ = local_shards(8)
    # Both workers as started, making no shard yet: the one killed below is killed making one of this run's.
    assert all(worker.poll() is None for worker in cluster.workers)
    assert not any(any(cluster.worker_tmp(i).glob("albert-shard-*")) for i in range(cluster.num_workers))
    run = _start(_flags(inputs, tmp_path / "out", dupe_factor=8), cluster)
    try:
        killed = _kill_a_worker_making_a_shard(cluster, run)
        _, stderr = run.communicate(timeout=RUN_TIMEOUT_S)
    finally:
        run.kill()
    assert run.returncode == 0, stderr[-3000:]
    assert cluster.workers[killed].poll() is not None and cluster.workers[1 - killed].poll() is None
    assert _shard_bytes(tmp_path / "out") == expected
    assert [p.name for p in (tmp_path / "out").rglob("*incomplete*")] == []


@pytest.mark.slow
def test_a_worker_killed_when_dask_may_not_retry_fails_in_one_line_and_a_rerun_finishes(
        tmp_path, inputs, local_shards):
    expected, _ = local_shards(8)
    out = tmp_path / "out"
    # A task whose worker dies is not retried: the job fails (Dask's KilledWorker).
    no_retries = {"DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": "0"}
    with LoopbackCluster(tmp_path / "cluster", num_workers=2, scheduler_env=no_retries) as cluster:
        run = _start(_flags(inputs, out, dupe_factor=8), cluster)
        try:
            _kill_a_worker_making_a_shard(cluster, run)
            _, stderr = run.communicate(timeout=RUN_TIMEOUT_S)
        finally:
            run.kill()
        assert run.returncode == 1, stderr[-3000:]
        lines = stderr.strip().splitlines()
        assert len(lines) == 1, stderr[-3000:]
        assert lines[0].startswith("error: the pipeline failed: Dask workers died while running one of its tasks (1 try, the last on tcp://127.0.0.1:")
        assert lines[0].endswith("rerun the same command to make the rest")
        _wait_until_no_shard_is_being_made(cluster)
        # No shard that looks finished unless it is: each one left has its counts and the right bytes.
        left = _shard_bytes(out)
        assert len(left) < SHARDS
        assert all(expected[name] == data for name, data in left.items())
        assert all((out / STATS_DIR / f"{name}.json").exists() for name in left)
        assert [p.name for p in out.rglob("*incomplete*")] == []
        assert json.loads((out / METADATA_FILE).read_text())["complete"] is False

        rerun = _run(_flags(inputs, out, dupe_factor=8), cluster)  # on the one worker left
        assert rerun.returncode == 0, rerun.stderr[-3000:]
        assert json.loads((out / METADATA_FILE).read_text())["generated_shards"] == SHARDS - len(left)
    assert _shard_bytes(out) == expected
