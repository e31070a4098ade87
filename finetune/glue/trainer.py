"""GLUE fine-tuning on the shared trainer (finetune/trainer.py), under the names GLUE code uses.

`GlueFinetuning(config, task, options, strategy)` is `finetune.trainer.Finetuning` of a
`finetune.glue.task.GlueTask`, whose `predict` returns `(logits [N, num_labels], label_ids [N],
examples_per_second)`.

Example:
    >>> options = FinetuneOptions(output_dir="/tmp/mrpc", train_batch_size=32, learning_rate=2e-5,
    ...                           num_train_steps=800, num_warmup_steps=200)
    >>> run = GlueFinetuning(config, get_task("MRPC"), options, strategy)
    >>> run.restore_or_initialize(lambda model: initialize_encoder(model, "pretrain_dir"))
    >>> train(run, train_features)
    >>> logits, label_ids, rate = run.predict(dev_features)
"""

from __future__ import annotations

from albert_tf.config import AlbertConfig
from finetune.glue.task import GlueTask
from finetune.glue.tasks import Task
from finetune.trainer import TASK_FILE, FinetuneOptions, Finetuning, train

__all__ = ["TASK_FILE", "FinetuneOptions", "GlueFinetuning", "train"]


class GlueFinetuning(Finetuning):
    """One fine-tuning run of a GLUE task's classifier."""

    def __init__(self, config: AlbertConfig, task: Task | str, options: FinetuneOptions, strategy=None):
        super().__init__(config, GlueTask(task), options, strategy)

    def predict(self, cached):
        """The logits of every example of `cached` in file order, their labels and the rate."""
        predictions, rate = super().predict(cached)
        return predictions["logits"], predictions["label_ids"], rate
