"""How the replicas of a tf.distribute strategy share a run: each one's part of the global batch,
which worker this is, and an fp16 overflow on any replica made every replica's.
"""

from __future__ import annotations

import tensorflow as tf


def replica_batch_size(global_batch_size: int, num_replicas: int, grad_accum_steps: int = 1) -> int:
    """The per-replica batch; an uneven split is an error, never a silently different batch."""
    if global_batch_size % num_replicas:
        raise ValueError(
            f"the global batch of {global_batch_size} is not divisible by the {num_replicas} "
            f"replicas of the strategy"
        )
    per_replica = global_batch_size // num_replicas
    if per_replica % grad_accum_steps:
        raise ValueError(
            f"the per-replica batch of {per_replica} (global {global_batch_size} / {num_replicas} "
            f"replicas) is not divisible by grad_accum_steps={grad_accum_steps}"
        )
    return per_replica


def worker_id(strategy) -> int:
    """This worker's index in the cluster (0 without one)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    return int(resolver.task_id or 0) if resolver is not None else 0


def share_overflow(ctx, grads):
    """Makes one replica's fp16 overflow every replica's.

    Keras's LossScaleOptimizer judges the gradients before they are summed across replicas, and
    under merge-call strategies by the first replica's alone: an overflow elsewhere would reach
    the weights. Poisoning every replica's gradients then makes all of them skip the step and
    lower the scale together.
    """
    grads = [tf.convert_to_tensor(g) for g in grads]
    finite = tf.reduce_all([tf.reduce_all(tf.math.is_finite(g)) for g in grads])
    overflows = ctx.all_reduce(tf.distribute.ReduceOp.SUM, 1.0 - tf.cast(finite, tf.float32))
    all_finite = tf.equal(overflows, 0.0)
    return [tf.where(all_finite, g, tf.constant(float("nan"), g.dtype)) for g in grads]
