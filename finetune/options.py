"""How to fine-tune: the loop's options and fine-tuning's own, free of TensorFlow (the fine-tuning
tools' flags are generated from these fields; `finetune.cli`)."""

from __future__ import annotations

import dataclasses
from typing import Optional

from albert_tf.training.options import TrainingOptions, option_field
from albert_tf.utils.errors import FlagError


@dataclasses.dataclass(frozen=True, kw_only=True)
class FinetuneOptions(TrainingOptions):
    """How to fine-tune: the loop's `albert_tf.training.options.TrainingOptions` (whose defaults are a
    fine-tuning run's) and the fields below; a task's hparams (`FinetuningTask.default_options`)
    fill the CLI's defaults.

    `max_train_examples` keeps the first N training records (short CPU runs). `group_by_length`
    batches training records of similar length together (within windows of
    `finetune.trainer.SORT_WINDOW` batches of the shuffled records), for tasks with length buckets:
    a batch then costs about what its tokens cost. Off, batches are drawn at random as the
    release's were (still cut to a bucket).
    `classifier_dropout` is the dropout on the head's input. `encoder_dropout` replaces the model
    config's hidden and attention dropout while fine-tuning (the paper's "ALBERT DR"); None keeps
    the config's, as the release's scripts did.
    """

    classifier_dropout: float = option_field(0.1, "Dropout on the head's input while training.")
    encoder_dropout: Optional[float] = option_field(None, "The encoder's hidden and attention dropout while fine-tuning, "
                                                    "in place of the model config's (default: the config's).")
    max_train_examples: Optional[int] = option_field(None, "Train on the first N training records only (short CPU runs).")
    group_by_length: bool = option_field(True, "Batch training records of similar length together (within windows of 32 "
                                         "shuffled batches), where the task cuts batches to length buckets (GLUE): a "
                                         "batch costs about what its tokens cost. --nogroup_by_length draws batches "
                                         "at random, as the release did.")

    _positive_optional = ("max_train_examples",)  # positive when given (a flag's lower bound)

    def __post_init__(self):
        super().__post_init__()
        if self.max_train_examples is not None and self.max_train_examples < 1:
            raise FlagError(f"max_train_examples must be positive, got {self.max_train_examples}")
        for name in ("classifier_dropout", "encoder_dropout"):
            value = getattr(self, name)
            if value is not None and not 0.0 <= value < 1.0:
                raise FlagError(f"{name} must be in [0, 1), got {value}")
