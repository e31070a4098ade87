"""The paper's fine-tuning hyperparameters per GLUE task (ALBERT Table 14, as in the released
run_glue.sh), each overridable.

Steps and batch sizes are those of the release, so a run with a preset sees as many examples as
the paper's did. AX has no preset: it is predicted with the MNLI model.
"""

from __future__ import annotations

import dataclasses

from finetune.glue.tasks import get_task


@dataclasses.dataclass(frozen=True)
class FinetuneHparams:
    """Hyperparameters of one fine-tuning run.

    Args:
        learning_rate: peak learning rate of AdamW, reached after the warmup.
        batch_size: global training batch size (split across replicas).
        train_steps: optimizer steps.
        warmup_steps: steps of linear warmup from 0, then linear decay to 0 at `train_steps`.
        max_seq_length: tokens per example, [CLS] and [SEP]s included.
        classifier_dropout: dropout on the pooled output before the classifier.

    Example:
        >>> glue_hparams("RTE", learning_rate=1e-5).learning_rate
        1e-05
    """

    learning_rate: float
    batch_size: int
    train_steps: int
    warmup_steps: int
    max_seq_length: int = 512
    classifier_dropout: float = 0.1

    def __post_init__(self):
        if not self.learning_rate > 0:
            raise ValueError(f"learning_rate must be positive, got {self.learning_rate}")
        for field in ("batch_size", "train_steps"):
            if getattr(self, field) < 1:
                raise ValueError(f"{field} must be at least 1, got {getattr(self, field)}")
        # A pair needs [CLS] a [SEP] b [SEP] with at least one token of each sentence.
        if self.max_seq_length < 5:
            raise ValueError(f"max_seq_length must be at least 5, got {self.max_seq_length}")
        if not 0 <= self.warmup_steps <= self.train_steps:
            raise ValueError(
                f"warmup_steps must be in [0, train_steps={self.train_steps}], "
                f"got {self.warmup_steps}"
            )
        if not 0.0 <= self.classifier_dropout < 1.0:
            raise ValueError(f"classifier_dropout must be in [0, 1), got {self.classifier_dropout}")


# Read as the paper's table: learning rate, batch size, train steps, warmup steps.
PAPER_HPARAMS: dict[str, FinetuneHparams] = {
    "CoLA": FinetuneHparams(1e-5, 16, 5336, 320),
    "STS-B": FinetuneHparams(2e-5, 16, 3598, 214),
    "SST-2": FinetuneHparams(1e-5, 32, 20935, 1256),
    "MNLI": FinetuneHparams(3e-5, 128, 10000, 1000),
    "QNLI": FinetuneHparams(1e-5, 32, 33112, 1986),
    "QQP": FinetuneHparams(5e-5, 128, 14000, 1000),
    "RTE": FinetuneHparams(3e-5, 32, 800, 200),
    "MRPC": FinetuneHparams(2e-5, 32, 800, 200),
    "WNLI": FinetuneHparams(2e-5, 16, 2000, 250),
}


def glue_hparams(task: str, **overrides) -> FinetuneHparams:
    """The paper's hyperparameters for `task`, with `overrides` (field=value) replacing any.

    An override of None keeps the preset's value, so command-line flags that default to None can
    be passed straight through.

    Raises:
        ValueError: an unknown task, a task without a preset (AX), an unknown field, or an invalid
            value.
    """
    name = get_task(task).name
    if name not in PAPER_HPARAMS:
        raise ValueError(
            f"GLUE task {name} has no fine-tuning preset (it is predicted with a model fine-tuned "
            f"on MNLI); the tasks with presets are: {', '.join(PAPER_HPARAMS)}"
        )
    fields = {f.name for f in dataclasses.fields(FinetuneHparams)}
    unknown = sorted(set(overrides) - fields)
    if unknown:
        raise ValueError(
            f"unknown hyperparameter(s) {', '.join(unknown)}; "
            f"the fields are: {', '.join(sorted(fields))}"
        )
    given = {key: value for key, value in overrides.items() if value is not None}
    return dataclasses.replace(PAPER_HPARAMS[name], **given)
