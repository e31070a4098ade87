"""Which process of a multi-worker cluster this is, read from the `TF_CONFIG` environment variable
(as tf.distribute reads it): free of TensorFlow, for the run folder's lock (`albert_tf.utils.locks`) and
the strategy's checks (`albert_tf.training.strategies`) alike."""

from __future__ import annotations

import dataclasses
import json
import os

TF_CONFIG_ENV = "TF_CONFIG"


@dataclasses.dataclass(frozen=True)
class ClusterTask:
    """The cluster's jobs (job name -> addresses) and this process's task in it."""

    cluster: dict
    task_type: str | None
    task_index: int

    @property
    def follows(self) -> bool:
        """Whether this process is a worker other than the chief (worker 0 where there is no chief)."""
        if self.task_type in ("chief", "master") or not self.cluster:
            return False
        return "chief" in self.cluster or "master" in self.cluster or self.task_type != "worker" or self.task_index != 0


def cluster_task() -> ClusterTask | None:
    """This process's task, or None without a TF_CONFIG. Raises ValueError (naming what is wrong)
    for a TF_CONFIG that is not JSON of a cluster and a task."""
    raw = os.environ.get(TF_CONFIG_ENV)
    if not raw:
        return None
    try:
        config = json.loads(raw)
        cluster, task = config.get("cluster") or {}, config.get("task") or {}
        return ClusterTask(dict(cluster), task.get("type"), int(task.get("index") or 0))
    except (ValueError, AttributeError, TypeError) as error:
        raise ValueError(f"{error!r}") from None
