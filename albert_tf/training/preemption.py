"""SIGTERM, the way cloud VMs announce a preemption: every worker saves a checkpoint at the same
step, then stops, so that a restart loses no completed step.

tf.distribute's `PreemptionCheckpointHandler` does this for a loop of its own (it restores on
creation, counts its own runs and adds its variable to the checkpoint); this is the same for
`albert_tf.training.loop.run_loop`. A SIGTERM is noted by a Python signal handler, which runs when the
compiled loop call in progress returns (at most `steps_per_loop` updates later). After every call
the workers add up their notes in one all-reduce, so they all see the same answer at the same
step, including those that got no signal; then each takes part in the save (the chief's copy is
kept) and raises `Preempted`: one line, exit code 143 (128 + SIGTERM, as a shell reports a process
that SIGTERM ended).

    with PreemptionWatcher(strategy) as watcher:
        for ...:
            run.train_steps(...)
            if watcher.should_stop():
                raise watcher.stopped(step, run.save())
"""

from __future__ import annotations

import os
import signal
import threading

import tensorflow as tf

from albert_tf.utils.errors import UserError
from albert_tf.training.strategies import is_multi_worker

PREEMPTED_EXIT_CODE = 128 + signal.SIGTERM


class Preempted(UserError):
    """The run stopped for a SIGTERM (here or on another worker), after saving a checkpoint."""

    def __init__(self, message: str):
        super().__init__(message, exit_code=PREEMPTED_EXIT_CODE)


class PreemptionWatcher:
    """Notes a SIGTERM to this process while it is entered, and tells every worker, at the same
    loop boundary, whether any of them got one (see the module's docstring).

    Outside the main thread (where Python cannot install signal handlers) it watches nothing.
    """

    def __init__(self, strategy):
        self._strategy = strategy
        self._signalled = False
        self._previous = None
        self._multi_worker = is_multi_worker(strategy)
        if self._multi_worker:
            self._agree = tf.function(self._agree_fn, autograph=False)

    def __enter__(self) -> "PreemptionWatcher":
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGTERM, self._note)
        return self

    def __exit__(self, *exc) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGTERM, self._previous)
            self._previous = None

    def _note(self, signum, frame) -> None:
        self._signalled = True

    def _agree_fn(self, signalled):
        def replica_fn():
            # Placed on this replica's device (a function argument has none: the collective
            # would have no destination).
            value = tf.identity(signalled)
            return tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, value)

        return self._strategy.run(replica_fn)

    def should_stop(self) -> bool:
        """Whether this worker or any other got a SIGTERM; the same answer on every worker (under a
        multi-worker strategy this is a collective: every worker must ask at the same step)."""
        if not self._multi_worker:
            return self._signalled
        total = self._agree(tf.constant(1.0 if self._signalled else 0.0))
        return float(self._strategy.experimental_local_results(total)[0]) > 0

    def stopped(self, step: int, checkpoint: str) -> Preempted:
        """The error to raise once the checkpoint of `step` is saved (at `checkpoint`)."""
        who = "this worker" if self._signalled else "another worker"
        return Preempted(
            f"stopped by SIGTERM to {who} (a preemption) after step {step}, saved as "
            f"{os.path.basename(checkpoint)}; rerun the same command to resume from it"
        )
