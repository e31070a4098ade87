"""Multi-worker pretraining that outlives a lost worker: two `albert-pretrain --strategy=multi_worker`
processes on loopback (TF_CONFIG), one killed (SIGKILL), frozen (SIGSTOP, as a machine that vanished
without closing its connections) or preempted (SIGTERM) mid-run. The other stops in stated time
with one line; restarting both resumes from the last checkpoint (and a preemption's checkpoint is
at the step reached: no completed step is lost) and ends with the weights of an uninterrupted run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import numpy as np
import pytest
import tensorflow as tf

from tests.albert_tf.training.paused_pretrain import pause_env
from tests.conftest import REPO_ROOT
from tests.helpers import ReservedPorts, cli_flags, latest_step, write_random_records as write_records
from tests.warm_python import DEVNULL

pytestmark = pytest.mark.slow

STEPS, SAVE_EVERY = 16, 4
RUN_TIMEOUT_S = 300


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("data")
    write_records(directory / "train-0.tfrecord", 96, seed=0)
    write_records(directory / "train-1.tfrecord", 96, seed=1)
    return directory


def _flags(data_dir, output_dir, steps=STEPS, **extra):
    return cli_flags(data_dir, output_dir, steps, strategy="multi_worker", save_checkpoints_steps=SAVE_EVERY, **extra)


class Workers:
    """Two albert-pretrain processes forming one cluster, children of `warm` (the
    `multi_worker_python` fixture: TensorFlow loaded already); each one's stderr in a file."""

    def __init__(self, warm, flags, log_dir, name, paused: tuple[int, int] | None = None):
        """`paused` (worker, step): that worker is albert-pretrain pausing after `step` (paused_pretrain.py),
        saying so in log_dir/`name`-paused."""
        self._ports = ReservedPorts(2)  # the cluster's until kill()
        cluster = {"worker": [f"localhost:{p}" for p in self._ports.ports]}
        self.logs = [log_dir / f"{name}-worker-{i}.stderr" for i in range(2)]
        self.pause_folder = log_dir / f"{name}-paused"
        self.processes = []
        for i in range(2):
            module, pause = "albert_tf.cli.pretrain", {}
            if paused and paused[0] == i:
                self.pause_folder.mkdir()
                module, pause = "tests.albert_tf.training.paused_pretrain", pause_env(paused[1], self.pause_folder)
            with open(self.logs[i], "w") as err:
                self.processes.append(warm.popen(
                    ["-m", module, *flags], cwd=REPO_ROOT, stdout=DEVNULL, stderr=err, text=True,
                    env={**os.environ, **ReservedPorts.ENV, **pause,
                         "TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": "worker", "index": i}})},
                ))

    def stderr(self, i) -> str:
        return self.logs[i].read_text()

    def wait(self, i, timeout=RUN_TIMEOUT_S) -> int:
        return self.processes[i].wait(timeout=timeout)

    def wait_all(self, timeout=RUN_TIMEOUT_S) -> list[int]:
        deadline = time.monotonic() + timeout
        return [p.wait(timeout=max(1.0, deadline - time.monotonic())) for p in self.processes]

    def wait_until_paused(self, timeout=RUN_TIMEOUT_S):
        """Until the worker given as `paused` has paused; `go()` lets it go on."""
        deadline = time.monotonic() + timeout
        while not (self.pause_folder / "paused").exists():
            for i, p in enumerate(self.processes):
                if p.poll() is not None:
                    pytest.fail(f"worker {i} ended (exit {p.returncode}) before the pause: {self.stderr(i)[-3000:]}")
            assert time.monotonic() < deadline, "no pause in time"
            time.sleep(0.02)

    def go(self):
        (self.pause_folder / "go").write_text("")

    def kill(self):
        for p in self.processes:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=30)
        self._ports.close()


@pytest.fixture
def workers(multi_worker_python):
    started = []

    def start(flags, log_dir, name, paused=None):
        started.append(Workers(multi_worker_python, flags, log_dir, name, paused))
        return started[-1]

    yield start
    for w in started:
        w.kill()


def _model_tensors(directory):
    reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(str(directory)))
    return {n: reader.get_tensor(n) for n in reader.get_variable_to_shape_map() if n.startswith("model/")}


def _summary_steps(directory):
    """The steps in each TensorBoard file of `directory`/train, oldest file first."""
    files = sorted((directory / "train").glob("events.out.tfevents.*"), key=lambda p: p.stat().st_mtime)
    return [sorted({e.step for e in tf.compat.v1.train.summary_iterator(str(f)) if e.summary.value}) for f in files]


@pytest.fixture(scope="module")
def uninterrupted(data_dir, tmp_path_factory, multi_worker_python):
    """The weights of a two-worker run that nothing interrupts."""
    output_dir = tmp_path_factory.mktemp("uninterrupted") / "run"
    run = Workers(multi_worker_python, _flags(data_dir, output_dir), output_dir.parent, "straight")
    try:
        codes = run.wait_all()
    finally:
        run.kill()
    assert codes == [0, 0], run.stderr(0)[-3000:] + run.stderr(1)[-3000:]
    assert _summary_steps(output_dir) == [list(range(1, STEPS + 1))]
    return _model_tensors(output_dir)


def _assert_same_weights(directory, expected):
    found = _model_tensors(directory)
    assert sorted(found) == sorted(expected) and len(found) > 30
    for name, value in expected.items():
        np.testing.assert_allclose(found[name], value, atol=1e-6, err_msg=name)


def _one_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr[-3000:]
    return lines[0]


def test_a_killed_worker_stops_the_other_at_once_and_a_restart_ends_as_uninterrupted(
        tmp_path, data_dir, uninterrupted, workers):
    output_dir = tmp_path / "run"
    # A dead process on a live machine: its sockets are reset, so the survivor stops without waiting
    # for the --worker_timeout_s. Set to an hour here, the survivor stops within the test's wait only
    # if it does (asserted by what happens, not by how many seconds it took on this machine's load).
    flags = _flags(data_dir, output_dir, worker_timeout_s=3600)
    # The chief waits after a step past ckpt-8 to be killed (the other waits for it in the next
    # step's collective): killed there however far a loaded machine let the run go while this polled.
    run = workers(flags, tmp_path, "killed", paused=(0, 2 * SAVE_EVERY + 1))
    run.wait_until_paused()
    run.processes[0].send_signal(signal.SIGKILL)  # the chief, which also hosts the coordination service
    try:
        code = run.wait(1)
    except subprocess.TimeoutExpired:
        pytest.fail(f"worker 1 still runs {RUN_TIMEOUT_S} s after worker 0 was killed: {run.stderr(1)[-3000:]}")
    assert code == 1, run.stderr(1)[-3000:]
    last = latest_step(output_dir)
    assert last == 2 * SAVE_EVERY
    line = _one_line(run.stderr(1))
    assert line.startswith("error: worker 0 of the cluster was lost (died, or silent for the --worker_timeout_s) at step ")
    assert line.endswith(f"worker 1 stops: restart every worker with the same command to resume from the last "
                         f"checkpoint, ckpt-{last}")

    restart = workers(flags, tmp_path, "restart")
    assert restart.wait_all() == [0, 0], restart.stderr(0)[-3000:]
    assert _summary_steps(output_dir)[-1] == list(range(last + 1, STEPS + 1))  # resumed, not started over
    _assert_same_weights(output_dir, uninterrupted)


def test_sigterm_to_a_worker_saves_the_step_reached_on_every_worker_and_a_restart_loses_nothing(
        tmp_path, data_dir, uninterrupted, workers):
    output_dir = tmp_path / "run"
    flags = _flags(data_dir, output_dir)
    # Worker 1 waits after a step past ckpt-4 for its SIGTERM and goes on once it has it: the signal
    # lands midway however far a loaded machine let the run go while this process polled.
    run = workers(flags, tmp_path, "preempted", paused=(1, SAVE_EVERY + 1))
    run.wait_until_paused()
    run.processes[1].send_signal(signal.SIGTERM)  # not the chief: the chief must save on its word
    run.go()
    assert run.wait_all(timeout=120) == [143, 143], run.stderr(0)[-3000:] + run.stderr(1)[-3000:]
    saved = latest_step(output_dir)
    assert saved == SAVE_EVERY + 2  # noted before step 6 (worker 1 paused after 5), agreed after it
    lines = [_one_line(run.stderr(i)) for i in range(2)]
    tail = f"(a preemption) after step {saved}, saved as ckpt-{saved}; rerun the same command to resume from it"
    assert lines == [f"error: stopped by SIGTERM to another worker {tail}", f"error: stopped by SIGTERM to this worker {tail}"]
    # Every step the run completed is in the checkpoint: the last one it reported is the one saved.
    assert _summary_steps(output_dir)[-1][-1] == saved

    restart = workers(flags, tmp_path, "restart")
    assert restart.wait_all() == [0, 0], restart.stderr(0)[-3000:]
    assert _summary_steps(output_dir)[-1] == list(range(saved + 1, STEPS + 1))
    _assert_same_weights(output_dir, uninterrupted)


def test_a_frozen_worker_stops_the_other_after_the_worker_timeout(tmp_path, data_dir, workers):
    timeout_s = 10
    output_dir = tmp_path / "run"
    # Frozen between steps past ckpt-4 (paused there first: not in a checkpoint's writing, wherever
    # a loaded machine had let the run get to), the chief waiting for it in the next step.
    run = workers(_flags(data_dir, output_dir, steps=10_000, worker_timeout_s=timeout_s), tmp_path, "frozen",
                  paused=(1, SAVE_EVERY + 1))
    run.wait_until_paused()
    run.processes[1].send_signal(signal.SIGSTOP)  # alive, silent, its connections open: a machine gone
    frozen_at = time.monotonic()
    try:
        code = run.wait(0)
    except subprocess.TimeoutExpired:
        pytest.fail(f"worker 0 still runs {RUN_TIMEOUT_S} s after worker 1 froze: {run.stderr(0)[-3000:]}")
    finally:
        run.processes[1].kill()
    stopped_after = time.monotonic() - frozen_at
    assert code == 1, run.stderr(0)[-3000:]
    # Declared lost once silent for the timeout, counted from its last heartbeat (sent every half
    # timeout or so, before it froze): never before half the timeout. A heartbeat that a loaded
    # machine sent late is covered by what the measure adds after the declaration: the survivor
    # noticing, writing its line and exiting, slowed by the same load. (No upper bound: how long
    # after it the survivor gets to run is the machine's load, not the behaviour.)
    assert stopped_after >= timeout_s / 2
    line = _one_line(run.stderr(0))
    assert line.startswith("error: worker 1 of the cluster was lost (died, or silent for the --worker_timeout_s)")
