"""What a test pays before its first step: tracing and first-call costs of the tiny test models
(python bench/trace_costs.py [--repeats 3]), for docs/testing.md's "Where the suite's time goes".

Each case runs in a new process (a trace is paid once a process and model), the cases interleaved
in a fresh random order each repeat; the table gives medians of wall time, and of the process's
CPU time for the trace (which the machine's other jobs disturb less):
- `trainer`: albert_tf.training.loop.Trainer on the pretraining task with the tests' LOOP_CONFIG
  (tests/helpers.py), one update: tracing its loop (without autograph, as the trainer traces all
  its functions), the first call (Grappler optimises the graph there), a second call; `trainer, no
  Grappler` the same with TensorFlow's graph optimiser off, to show its share (the tests and the
  tools keep it on);
- `plain step`: a classifier's forward, gradient and Adam update in one tf.function, traced with
  autograph and without, to show autograph's share.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import time

import harness

CASES = ("trainer", "trainer, no Grappler", "plain step, autograph", "plain step, no autograph")


def _trainer(grappler: bool) -> dict:
    import tempfile

    import tensorflow as tf

    if not grappler:
        tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})
    from albert_tf.training import loop, pretraining
    from tests.helpers import LOOP_CONFIG, pretraining_options, random_dataset_fn

    run = loop.Trainer(LOOP_CONFIG, pretraining.PretrainingTask(), pretraining_options(tempfile.mkdtemp()))
    iterator = iter(run.distribute(random_dataset_fn(), run.per_replica_batch))
    steps = tf.constant(1, tf.int32)
    times = _traced(lambda: run._train_loop.get_concrete_function(iterator, steps))
    for name in ("first call", "second call"):
        start = time.perf_counter()
        run._train_loop(iterator, steps)
        times[name] = time.perf_counter() - start
    return times


def _plain_step(autograph: bool) -> dict:
    import keras
    import tensorflow as tf

    from albert_tf.models.classifier import AlbertClassifier
    from tests.helpers import LOOP_CONFIG

    model = AlbertClassifier(LOOP_CONFIG, num_classes=2)
    batch = {"input_ids": tf.ones([4, 16], tf.int32), "input_mask": tf.ones([4, 16], tf.int32),
             "segment_ids": tf.zeros([4, 16], tf.int32)}
    model(batch)
    optimizer = keras.optimizers.Adam(1e-3)
    optimizer.build(model.trainable_variables)

    def step(features):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(model(features, training=True))
        optimizer.apply(tape.gradient(loss, model.trainable_variables), model.trainable_variables)
        return loss

    return _traced(lambda: tf.function(step, autograph=autograph).get_concrete_function(batch))


def _traced(trace) -> dict:
    """The wall and CPU seconds of `trace()`."""
    start, cpu = time.perf_counter(), time.process_time()
    trace()
    return {"trace": time.perf_counter() - start, "trace CPU": time.process_time() - cpu}


def child(case: str) -> dict:
    harness.quiet_tensorflow("3")
    if case.startswith("trainer"):
        return _trainer(grappler="no Grappler" not in case)
    return _plain_step(autograph="no autograph" not in case)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    harness.add_repeats(parser, 3)
    parser.add_argument("--child", choices=CASES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child)))
        return
    results = {case: [] for case in CASES}
    for _ in range(args.repeats):
        for case in random.sample(CASES, len(CASES)):
            out = subprocess.run([sys.executable, __file__, "--child", case], capture_output=True, text=True,
                                 check=True).stdout
            results[case].append(json.loads(out.strip().splitlines()[-1]))
    columns = ("trace", "trace CPU", "first call", "second call")
    rows = [[case] + [f"{statistics.median(r[c] for r in runs):.2f}" if c in runs[0] else "" for c in columns]
            for case, runs in results.items()]
    harness.print_table(["case (medians of %d, seconds)" % args.repeats, *columns], rows)


if __name__ == "__main__":
    main()
