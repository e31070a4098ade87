"""SIGTERM during the training loop on one worker: a checkpoint of the step reached, one line (exit
code 143), the signal's handler given back, and a resumed run that ends as an uninterrupted one.
The same with two worker processes is in test_worker_faults.py."""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.training import pretraining
from albert_tf.training import loop
from albert_tf.training.preemption import PREEMPTED_EXIT_CODE, Preempted
from tests.helpers import LOOP_CONFIG as CONFIG
from tests.helpers import loop_options as options, random_dataset_fn, run_weights as weights

STEPS, SIGNALLED_AT = 9, 5


class SignalledAt(loop.Trainer):
    """A run that sends itself SIGTERM once it has completed step `at` (as a cloud VM would)."""

    at = SIGNALLED_AT

    def train_steps(self, iterator, num_steps):
        metrics = super().train_steps(iterator, num_steps)
        if self.current_step == self.at:
            os.kill(os.getpid(), signal.SIGTERM)
        return metrics


def test_sigterm_saves_the_step_reached_and_the_resumed_run_ends_as_uninterrupted(tmp_path):
    opts = options(tmp_path / "run", num_train_steps=STEPS, save_checkpoints_steps=100, steps_per_loop=1)
    before = signal.getsignal(signal.SIGTERM)
    run = SignalledAt(CONFIG, pretraining.PretrainingTask(), opts)
    run.restore_or_initialize()
    with pytest.raises(Preempted) as raised:
        loop.run_loop(run, random_dataset_fn())
    assert raised.value.exit_code == PREEMPTED_EXIT_CODE == 143
    assert str(raised.value) == (
        f"stopped by SIGTERM to this worker (a preemption) after step {SIGNALLED_AT}, saved as "
        f"ckpt-{SIGNALLED_AT}; rerun the same command to resume from it"
    )
    assert signal.getsignal(signal.SIGTERM) is before  # the handler is the loop's only while it runs
    assert tf.train.latest_checkpoint(str(tmp_path / "run")).endswith(f"ckpt-{SIGNALLED_AT}")

    resumed = loop.Trainer(CONFIG, pretraining.PretrainingTask(), opts)
    assert resumed.restore_or_initialize() == SIGNALLED_AT  # no completed step lost
    assert loop.run_loop(resumed, random_dataset_fn())["step"] == STEPS

    straight = loop.Trainer(CONFIG, pretraining.PretrainingTask(), options(tmp_path / "straight", num_train_steps=STEPS,
                                                     save_checkpoints_steps=100, steps_per_loop=1))
    straight.restore_or_initialize()
    loop.run_loop(straight, random_dataset_fn())
    for a, b in zip(weights(resumed), weights(straight)):
        np.testing.assert_allclose(a, b, atol=1e-6)
