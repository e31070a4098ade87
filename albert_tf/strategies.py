"""A small factory for the tf.distribute strategies the training loop runs under.

`get_strategy("tpu", tpu="my-tpu")`, `"mirrored"` (all local GPUs, or the CPU),
`"multi_worker"` (workers from the `TF_CONFIG` environment variable), `"one_device"` (the first
GPU, else the CPU) and `"default"` (no distribution). The training loop is the same under all of
them.
"""

from __future__ import annotations

import json
import os
import socket
import time
import urllib.parse

import tensorflow as tf

from albert_tf.choices import STRATEGIES
from albert_tf.errors import FlagError, UserError


class StrategyUnavailable(UserError, RuntimeError):
    """The TPU or the cluster asked for is not there: the user's setup, one line in a console script."""

# A TPU worker that answers at all answers within this; a dead address must fail in seconds, not
# after the minutes that TensorFlow's own connection retries take.
TPU_CONNECT_TIMEOUT_S = 5.0


def get_strategy(name: str, tpu: str | None = None, *, connect_timeout_s: float = TPU_CONNECT_TIMEOUT_S,
                 cpu_devices: int | None = None):
    """Returns the `tf.distribute.Strategy` called `name` (one of `STRATEGIES`).

    Args:
        name: "tpu", "mirrored", "multi_worker", "one_device" or "default".
        tpu: for "tpu": a Cloud TPU name, a "grpc://host:port" address or "local" (a TPU VM);
            None reads the `TPU_NAME` environment variable.
        connect_timeout_s: how long a TPU worker address may take to accept a connection.
        cpu_devices: for "mirrored" on a machine without GPUs: split the CPU into this many logical
            devices, one replica each, so that multi-replica runs can be tried on a laptop. It must
            come before TensorFlow's runtime starts (the first op).

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
    raw = os.environ.get("TF_CONFIG")
    if not raw:
        raise StrategyUnavailable(
            "strategy 'multi_worker' needs the TF_CONFIG environment variable (cluster.worker "
            "addresses and this process's task index); it is not set"
        )
    try:
        config = json.loads(raw)
        workers = config["cluster"]["worker"]
        index = int(config["task"]["index"])
    except (ValueError, KeyError, TypeError) as error:
        raise StrategyUnavailable(f"TF_CONFIG is not a usable multi-worker config ({error!r}): {raw}") from error
    if config["task"].get("type", "worker") == "worker" and not 0 <= index < len(workers):
        raise StrategyUnavailable(f"TF_CONFIG task index {index} is outside the {len(workers)} workers")


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
