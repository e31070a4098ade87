"""A dask.distributed cluster on 127.0.0.1, started as a user starts one: `dask scheduler`, then one
`dask worker tcp://...` process a worker (each with its nanny, in a session of its own so that
killing it kills the whole worker, as losing its machine would). Used by
tests/data_prep/test_dask_runner.py and bench/data_prep_dask.py.

    with LoopbackCluster(tmp_path, num_workers=2) as cluster:
        ... --runner=DaskRunner --dask_client_address={cluster.address} ...
        cluster.kill_worker(0)
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time

# The workers import this source tree (the DoFns are this package's), first on their path.
REPO_ROOT = str(pathlib.Path(__file__).resolve().parents[2])


def dask_command() -> str:
    """The `dask` console script of this interpreter's environment."""
    beside = pathlib.Path(sys.executable).parent / "dask"
    found = str(beside) if beside.exists() else shutil.which("dask")
    if not found:
        raise FileNotFoundError("no `dask` command: pip install 'albert_tf[dask]'")
    return found


def _address(scheduler_file: pathlib.Path) -> str | None:
    """The scheduler's address from its --scheduler-file, None until the file is there and whole."""
    try:
        return json.loads(scheduler_file.read_text())["address"]
    except (FileNotFoundError, json.JSONDecodeError, KeyError):
        return None


class LoopbackCluster:
    """A scheduler and `num_workers` single-threaded workers on loopback, their logs and temporary
    folders under `directory`; `scheduler_env` adds to the scheduler's environment (Dask's
    configuration, such as DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES)."""

    def __init__(self, directory, num_workers: int = 2, scheduler_env: dict | None = None,
                 start_timeout_s: float = 90.0):
        self.directory = pathlib.Path(directory)
        self.num_workers = num_workers
        self.scheduler_env = scheduler_env or {}
        self.start_timeout_s = start_timeout_s
        self.address: str | None = None
        self.scheduler: subprocess.Popen | None = None
        self.workers: list[subprocess.Popen] = []
        self._logs = []

    def _popen(self, args, name, env=None):
        log = open(self.directory / f"{name}.log", "wb")
        self._logs.append(log)
        return subprocess.Popen([dask_command(), *args], stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, env={**os.environ, **(env or {})})

    def worker_tmp(self, index: int) -> pathlib.Path:
        """The worker's temporary folder (its TMPDIR: where a shard's documents are spilled)."""
        return self.directory / f"worker-{index}-tmp"

    def start(self) -> "LoopbackCluster":
        self.directory.mkdir(parents=True, exist_ok=True)
        scheduler_file = self.directory / "scheduler.json"
        self.scheduler = self._popen(
            ["scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
             "--scheduler-file", str(scheduler_file)], "scheduler", self.scheduler_env)
        deadline = time.monotonic() + self.start_timeout_s
        # Read until it parses: a file being written can be seen before its writer's last write.
        while (address := _address(scheduler_file)) is None:
            self._check_alive(self.scheduler, "scheduler", deadline)
            time.sleep(0.1)
        self.address = address
        for index in range(self.num_workers):
            self.add_worker(index)
        self.wait_for_workers(self.num_workers, deadline)
        return self

    def add_worker(self, index: int) -> subprocess.Popen:
        tmp = self.worker_tmp(index)
        tmp.mkdir(exist_ok=True)
        worker = self._popen(
            ["worker", self.address, "--host", "127.0.0.1", "--nthreads", "1", "--no-dashboard",
             "--name", f"worker-{index}", "--local-directory", str(self.directory / f"worker-{index}")],
            f"worker-{index}", {"TMPDIR": str(tmp), "PYTHONPATH": os.pathsep.join(filter(None, [REPO_ROOT, os.environ.get("PYTHONPATH")]))})
        if index < len(self.workers):
            self.workers[index] = worker
        else:
            self.workers.append(worker)
        return worker

    def wait_for_workers(self, count: int, deadline: float) -> None:
        from distributed import Client

        with Client(self.address, timeout=max(1.0, deadline - time.monotonic())) as client:
            client.wait_for_workers(count, timeout=max(1.0, deadline - time.monotonic()))

    def _check_alive(self, process, name, deadline):
        if process.poll() is not None:
            raise RuntimeError(f"dask {name} exited with {process.returncode}: "
                               + (self.directory / f"{name}.log").read_text()[-2000:])
        if time.monotonic() > deadline:
            raise TimeoutError(f"dask {name} did not start within {self.start_timeout_s:.0f} s")

    def kill_worker(self, index: int) -> None:
        """SIGKILL to the worker and its nanny: the worker is lost, as with its machine."""
        worker = self.workers[index]
        try:
            os.killpg(worker.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        worker.wait(timeout=30)

    def kill_worker_if(self, index: int, busy) -> bool:
        """Kills the worker as kill_worker does if `busy()` holds while it is stopped (SIGSTOP to it
        and its nanny, every thread of theirs stopped): what it was doing as it died is then known,
        not raced against its own progress. Otherwise it goes on (SIGCONT); returns whether it died."""
        from tests.helpers import process_group_states

        worker = self.workers[index]
        try:
            os.killpg(worker.pid, signal.SIGSTOP)
        except ProcessLookupError:
            return False
        deadline = time.monotonic() + 60
        while not all(state in "TtZX" for state in process_group_states(worker.pid)):
            if time.monotonic() > deadline:
                raise TimeoutError(f"dask worker-{index} did not stop within 60 s of SIGSTOP")
            time.sleep(0.001)
        if busy():
            self.kill_worker(index)
            return True
        os.killpg(worker.pid, signal.SIGCONT)
        return False

    def stop(self) -> None:
        processes = [p for p in [*self.workers, self.scheduler] if p is not None]
        for process in processes:
            if process.poll() is None:
                try:
                    os.killpg(process.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for process in processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=20)
        for log in self._logs:
            log.close()

    def __enter__(self) -> "LoopbackCluster":
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc) -> None:
        self.stop()
