"""The strategy factory: known names, and fast, clear failures where there is no TPU."""

import pytest
import tensorflow as tf

from albert_tf.training import strategies
from tests.helpers import ReservedPorts


def test_unknown_name_lists_the_known_ones():
    with pytest.raises(ValueError, match="tpu, mirrored, multi_worker, one_device, default"):
        strategies.get_strategy("horovod")


@pytest.mark.parametrize(
    "name,cls",
    [
        ("mirrored", tf.distribute.MirroredStrategy),
        ("one_device", tf.distribute.OneDeviceStrategy),
    ],
)
def test_local_strategies(name, cls):
    strategy = strategies.get_strategy(name)
    assert isinstance(strategy, cls)
    assert strategy.num_replicas_in_sync == 1


def test_default_is_the_no_op_strategy():
    assert strategies.get_strategy("default") is tf.distribute.get_strategy()


def test_tpu_without_a_name_says_how_to_give_one():
    with pytest.raises(ValueError, match="--tpu="):
        strategies.get_strategy("tpu")


def test_tpu_at_a_dead_address_fails_within_seconds():
    with ReservedPorts(1) as dead:  # held for the whole attempt
        port = dead.ports[0]
        with pytest.raises(RuntimeError, match=f"no TPU reachable for --tpu='grpc://127.0.0.1:{port}'"):
            strategies.get_strategy("tpu", tpu=f"grpc://127.0.0.1:{port}", connect_timeout_s=2)


def test_tpu_local_without_tpu_hardware_fails_clearly():
    with pytest.raises(RuntimeError, match="TPU 'local' did not initialise"):
        strategies.get_strategy("tpu", tpu="local")


def test_tpu_name_that_cannot_be_resolved(monkeypatch):
    with pytest.raises(RuntimeError, match="no TPU named 'no-such-tpu-xyz'"):
        strategies.get_strategy("tpu", tpu="no-such-tpu-xyz")


def test_multi_worker_without_tf_config(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    with pytest.raises(RuntimeError, match="TF_CONFIG"):
        strategies.get_strategy("multi_worker")
    monkeypatch.setenv("TF_CONFIG", "{not json")
    with pytest.raises(RuntimeError, match="not a usable multi-worker config"):
        strategies.get_strategy("multi_worker")
