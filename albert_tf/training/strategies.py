"""A small factory for the tf.distribute strategies the training loop runs under.

`get_strategy("tpu", tpu="my-tpu")`, `"mirrored"` (all local GPUs, or the CPU),
`"multi_worker"` (workers from the `TF_CONFIG` environment variable), `"one_device"` (the first
GPU, else the CPU) and `"default"` (no distribution). The training loop is the same under all of
them.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import time
import urllib.parse
from typing import Callable

import tensorflow as tf

from albert_tf.utils.cluster import TF_CONFIG_ENV, cluster_task
from albert_tf.training.options import STRATEGIES, WORKER_TIMEOUT_S
from albert_tf.utils.errors import FlagError, UserError


class StrategyUnavailable(UserError, RuntimeError):
    """The TPU or the cluster asked for is not there: the user's setup, one line in a console script."""

# A TPU worker that answers at all answers within this; a dead address must fail in seconds, not
# after the minutes that TensorFlow's own connection retries take.
TPU_CONNECT_TIMEOUT_S = 5.0


class WorkerLostError(UserError):
    """A worker of a multi-worker run died or stopped answering: this worker stops, with one line."""


def get_strategy(name: str, tpu: str | None = None, *, connect_timeout_s: float = TPU_CONNECT_TIMEOUT_S,
                 cpu_devices: int | None = None, worker_timeout_s: float = WORKER_TIMEOUT_S):
    """Returns the `tf.distribute.Strategy` called `name` (one of `STRATEGIES`).

    Args:
        name: "tpu", "mirrored", "multi_worker", "one_device" or "default".
        tpu: for "tpu": a Cloud TPU name, a "grpc://host:port" address or "local" (a TPU VM);
            None reads the `TPU_NAME` environment variable.
        connect_timeout_s: how long a TPU worker address may take to accept a connection.
        cpu_devices: for "mirrored" on a machine without GPUs: split the CPU into this many logical
            devices, one replica each, so that multi-replica runs can be tried on a laptop. It must
            come before TensorFlow's runtime starts (the first op).
        worker_timeout_s: for "multi_worker": a worker not heard from for this long is lost, and
            the collectives of every other worker abort (see `lost_workers_named`). Like
            `cpu_devices`, it must come before TensorFlow's runtime starts.

    Raises:
        ValueError: `name` is not a known strategy, or "tpu" has no TPU to name.
        RuntimeError: no TPU is reachable at the given name or address; `multi_worker` without a
            usable `TF_CONFIG`.
    """
    if name == "tpu":
        return _tpu_strategy(tpu, connect_timeout_s)
    if cpu_devices is not None and name != "mirrored":
        raise ValueError(f"cpu_devices={cpu_devices} is for the 'mirrored' strategy, not {name!r}")
    if name == "mirrored":
        if cpu_devices is None:
            return tf.distribute.MirroredStrategy()
        return tf.distribute.MirroredStrategy(_logical_cpus(cpu_devices))
    if name == "multi_worker":
        _check_tf_config()
        _configure_worker_timeout(worker_timeout_s)
        return tf.distribute.MultiWorkerMirroredStrategy()
    if name == "one_device":
        gpus = tf.config.list_logical_devices("GPU")
        return tf.distribute.OneDeviceStrategy(gpus[0].name if gpus else "/cpu:0")
    if name == "default":
        return tf.distribute.get_strategy()
    raise FlagError(f"unknown strategy {name!r}: choose one of {', '.join(STRATEGIES)}")


def _logical_cpus(count: int) -> list[str]:
    if count < 1:
        raise ValueError(f"cpu_devices must be at least 1, got {count}")
    cpu = tf.config.list_physical_devices("CPU")[0]
    try:
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * count)
    except RuntimeError as error:  # the runtime has started: devices can no longer be split
        if len(tf.config.list_logical_devices("CPU")) != count:
            raise RuntimeError(f"cpu_devices={count}: TensorFlow has already started with "
                               f"{len(tf.config.list_logical_devices('CPU'))} CPU device(s)") from error
    return [device.name for device in tf.config.list_logical_devices("CPU")]


def _check_tf_config():
    raw = os.environ.get(TF_CONFIG_ENV)
    try:
        task = cluster_task()
    except ValueError as error:
        raise StrategyUnavailable(f"TF_CONFIG is not a usable multi-worker config ({error}): {raw}") from None
    if task is None:
        raise StrategyUnavailable(
            "strategy 'multi_worker' needs the TF_CONFIG environment variable (cluster.worker "
            "addresses and this process's task index); it is not set"
        )
    workers = task.cluster.get("worker")
    if not workers:
        raise StrategyUnavailable(f"TF_CONFIG is not a usable multi-worker config (KeyError('worker')): {raw}")
    if (task.task_type or "worker") == "worker" and not 0 <= task.task_index < len(workers):
        raise StrategyUnavailable(f"TF_CONFIG task index {task.task_index} is outside the {len(workers)} workers")


def _configure_worker_timeout(timeout_s: float) -> None:
    """Sets the heartbeat timeout of TensorFlow's coordination service, which MultiWorkerMirrored-
    Strategy configures with its defaults unless one is configured before it (as here).

    Each worker's agent sends the service (on worker 0, or the chief) a heartbeat; a worker silent
    for `timeout_s` is declared dead and every worker's collectives abort with UnavailableError.
    That is what ends a run whose peer machine vanished without closing its connections (a dead
    process on a live machine is noticed at once: its sockets are reset). Collective timeouts
    (CommunicationOptions.timeout_seconds) would do it too, but TensorFlow starts a thread per
    collective for them and calls them a debugging aid.
    """
    if not (isinstance(timeout_s, (int, float)) and timeout_s > 0):
        raise FlagError(f"worker_timeout_s must be a positive number of seconds, got {timeout_s!r}")
    from tensorflow.compiler.xla.tsl.protobuf import coordination_config_pb2
    from tensorflow.python.distribute import multi_worker_util
    from tensorflow.python.eager import context

    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    cluster_spec = resolver.cluster_spec()
    jobs = [coordination_config_pb2.CoordinatedJob(name=job, num_tasks=cluster_spec.num_tasks(job))
            for job in ("chief", "worker") if job in cluster_spec.jobs]
    context.context().configure_coordination_service(
        service_type="standalone",
        service_leader=multi_worker_util.coordination_leader(cluster_spec),
        coordinated_jobs=jobs,
        heartbeat_timeout_in_ms=int(timeout_s * 1000),
    )


# What TensorFlow says when a collective cannot complete because a peer is gone.
_LOST_PEER_ERRORS = ("UnavailableError", "DeadlineExceededError", "AbortedError", "CancelledError")
_TASK = re.compile(r"/job:(\w+)/replica:\d+/task:(\d+)")


def is_multi_worker(strategy) -> bool:
    """Whether `strategy` spans several worker processes (MultiWorkerMirroredStrategy with a cluster)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or isinstance(strategy, tf.distribute.TPUStrategy):
        return False
    jobs = resolver.cluster_spec().as_dict()
    return sum(len(jobs.get(job, ())) for job in ("chief", "worker")) > 1


@contextlib.contextmanager
def lost_workers_named(strategy, output_dir: str, step: Callable[[], int]):
    """Under a multi-worker `strategy`, a collective aborted because a peer died or went silent
    becomes a `WorkerLostError`: one line naming the worker, the step and the checkpoint to resume
    from. Anything else passes unchanged."""
    try:
        yield
    except tf.errors.OpError as error:
        if not is_multi_worker(strategy) or type(error).__name__ not in _LOST_PEER_ERRORS:
            raise
        message = error.message or ""
        this = _worker_name(strategy)
        peers = [f"{job} {task}" for job, task in dict.fromkeys(_TASK.findall(message)) if f"{job} {task}" != this]
        who = ", ".join(peers) if peers else "a worker"
        latest = tf.train.latest_checkpoint(output_dir)
        resume = f"the last checkpoint, {os.path.basename(latest)}" if latest else "step 0 (no checkpoint yet)"
        raise WorkerLostError(
            f"{who} of the cluster was lost (died, or silent for the --worker_timeout_s) at step {step()}; "
            f"{this} stops: restart every worker with the same command to resume from {resume}"
        ) from None


def _worker_name(strategy) -> str:
    resolver = strategy.cluster_resolver
    return f"{resolver.task_type} {resolver.task_id}"


def _tpu_strategy(tpu, connect_timeout_s):
    tpu = tpu or os.environ.get("TPU_NAME")
    if not tpu:
        raise FlagError(
            "strategy 'tpu' needs a TPU: pass --tpu=<name, grpc://host:port or 'local'> "
            "or set TPU_NAME"
        )
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)
    except Exception as error:  # the Cloud TPU API lookup fails in many ways; all mean "no TPU".
        raise StrategyUnavailable(f"no TPU named {tpu!r} could be resolved: {error}") from error
    master = resolver.master()
    if master:
        _probe(master, connect_timeout_s, tpu)
        tf.config.experimental_connect_to_cluster(resolver)
    try:
        tf.tpu.experimental.initialize_tpu_system(resolver)
    except (tf.errors.OpError, ValueError) as error:
        raise StrategyUnavailable(f"TPU {tpu!r} did not initialise: {str(error).splitlines()[0]}") from error
    return tf.distribute.TPUStrategy(resolver)


def _probe(master: str, timeout_s: float, tpu: str):
    """Fails fast when the TPU worker at `master` ("grpc://host:port") does not accept connections."""
    address = urllib.parse.urlparse(master if "://" in master else f"grpc://{master}")
    host, port = address.hostname, address.port or 8470
    start = time.monotonic()
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return
    except OSError as error:
        raise StrategyUnavailable(
            f"no TPU reachable for --tpu={tpu!r}: {host}:{port} did not accept a connection "
            f"within {timeout_s:.0f} s ({error}, after {time.monotonic() - start:.1f} s)"
        ) from error
