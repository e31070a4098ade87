"""Our side of tests/finetune/test_update_parity.py: STEPS updates of the real training loop
(`albert_tf.training.loop.Trainer`) from the reference's starting weights, each step's loss and
trainable weights kept for the test to compare with the reference's steps.

It imports neither PyTorch nor Hugging Face's transformers: the mirrored run's child (a child of the
warm Python, tests/warm_python.py, where two logical CPU devices can still be made) runs this side
alone, and loading those two there was 8.7 s of CPU; the reference's steps are the test's, in its
own process, which has them loaded.

    python -m tests.finetune.update_parity_steps <folder> <case>
        runs `case` on two mirrored replicas from what `write_start` put in <folder>, writes each
        step's weights to <folder>/steps.npz and prints the report (JSON) as its last line.
"""

from __future__ import annotations

import json
import sys

import numpy as np

SEQ, STEPS, WARMUP, PEAK = 64, 20, 4, 1e-3


def batch_size(case: str) -> int:
    return 8 if case == "pretraining_lamb" else 16


def our_steps(tmp, case: str, config, records: dict, initial: dict, strategy_name: str, strategy=None) -> dict:
    """`case` for STEPS updates through the real loop under `strategy_name` (or the one `strategy`
    made of that name), its weights first set to `initial` (our weight names: the reference's
    values); `records` in order, over and over. Returns the run's replicas and accumulation, the
    names of its trainable weights, and each step's loss and trainable weights (by name)."""
    import tensorflow as tf

    from albert_tf.checkpoints.weights import model_weights
    from albert_tf.training import strategies
    from albert_tf.training.loop import Trainer

    strategy = strategy or strategies.get_strategy(strategy_name)
    common = dict(output_dir=f"{tmp}/{case}-{strategy_name}", max_seq_length=SEQ, learning_rate=PEAK,
                  num_train_steps=STEPS, num_warmup_steps=WARMUP, steps_per_loop=1, jit_compile=False)
    if case == "pretraining_lamb":
        from albert_tf.training.options import PretrainingOptions
        from albert_tf.training.pretraining import PretrainingTask

        options = PretrainingOptions(train_batch_size=batch_size(case), max_predictions_per_seq=10, grad_accum_steps=2,
                                     optimizer="lamb", **common)
        task = PretrainingTask()
    else:
        from finetune.glue.task import GlueTask
        from finetune.options import FinetuneOptions
        from tests.conftest import SMALL_DATA_DIR

        options = FinetuneOptions(train_batch_size=batch_size(case), classifier_dropout=0.0,
                                  optimizer=case.split("_", 1)[1], **common)
        task = GlueTask("MRPC", SMALL_DATA_DIR / "glue")
    run = Trainer(config, task, options, strategy)
    # The reference's weights, every one both models have (frozen ones too), as
    # tests.finetune.hf_tasks.map_weights copies them.
    variables = model_weights(run.model)
    copied = [key for key in initial if key in variables]
    for key in copied:
        variables[key].assign(initial[key])
    assert len(copied) >= len(run.model.trainable_variables)
    key_of = {id(v): k for k, v in variables.items()}
    trainable = [key_of[id(v)] for v in run.model.trainable_variables]

    def dataset_fn(input_context, per_replica_batch):
        # The records in order, over and over; each replica takes the next per-replica batch.
        return tf.data.Dataset.from_tensor_slices(records).repeat().batch(per_replica_batch, drop_remainder=True)

    iterator = iter(run.distribute(dataset_fn, run.per_replica_batch))
    losses, weights = [], []
    for _ in range(STEPS):
        losses.append(run.train_steps(iterator, 1)["loss"])
        weights.append({key: variables[key].numpy() for key in trainable})
    return {"replicas": run.num_replicas, "accumulation": options.grad_accum_steps, "trainable": trainable,
            "losses": losses, "weights": weights}


def write_start(folder, config, records: dict, initial: dict) -> None:
    """What the child's `our_steps` starts from, in `folder`."""
    config.to_json_file(f"{folder}/config.json")
    np.savez(f"{folder}/start.npz", **{f"records/{k}": v for k, v in records.items()},
             **{f"initial/{k}": v for k, v in initial.items()})


def read_steps(folder, report: dict) -> dict:
    """The child's report with its steps' weights read back: what `our_steps` returned."""
    with np.load(f"{folder}/steps.npz") as saved:
        weights = [{key: saved[f"{k}/{key}"] for key in report["trainable"]} for k in range(STEPS)]
    return {**report, "weights": weights}


def _child(folder, case):
    from albert_tf import AlbertConfig
    from albert_tf.training import strategies

    with np.load(f"{folder}/start.npz") as start:
        parts = {part: {k.split("/", 1)[1]: start[k] for k in start.files if k.startswith(f"{part}/")}
                 for part in ("records", "initial")}
    config = AlbertConfig.from_json_file(f"{folder}/config.json")
    mirrored = strategies.get_strategy("mirrored", cpu_devices=2)  # the CPU split in two replicas
    result = our_steps(folder, case, config, parts["records"], parts["initial"], "mirrored", mirrored)
    np.savez(f"{folder}/steps.npz", **{f"{k}/{key}": value for k, step in enumerate(result.pop("weights"))
                                       for key, value in step.items()})
    return result


if __name__ == "__main__":
    print(json.dumps(_child(*sys.argv[1:])))
