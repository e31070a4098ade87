"""--cpu_devices N: N logical CPU devices under --strategy=mirrored, to try multi-replica runs on a
laptop (issue 20, item 7). Devices can only be split before TensorFlow starts: a child process of
the warm Python (tests/warm_python.py: TensorFlow loaded, not started)."""

import pytest

from albert_tf.training import strategies
from tests.conftest import REPO_ROOT

CODE = """
import tensorflow as tf
from albert_tf.training.strategies import get_strategy
strategy = get_strategy("mirrored", cpu_devices=3)
per_replica = strategy.run(lambda: tf.distribute.get_replica_context().replica_id_in_sync_group)
print(strategy.num_replicas_in_sync, sorted(int(v) for v in strategy.experimental_local_results(per_replica)))
"""


def test_mirrored_on_three_logical_cpus_runs_three_replicas(warm_python):
    result = warm_python.run(["-c", CODE], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] == "3 [0, 1, 2]"


def test_cpu_devices_belong_to_the_mirrored_strategy():
    with pytest.raises(ValueError, match="cpu_devices=2 is for the 'mirrored' strategy, not 'one_device'"):
        strategies.get_strategy("one_device", cpu_devices=2)


def test_the_training_tools_take_the_flag():
    from albert_tf.cli import pretrain
    from finetune.glue import cli

    for flag_values in (pretrain.FLAGS, cli.FLAGS):
        flag_values.unparse_flags()
        flag_values(["prog", "--strategy=mirrored", "--cpu_devices=2"])
        assert (flag_values.strategy, flag_values.cpu_devices) == ("mirrored", 2)
        flag_values.unparse_flags()
