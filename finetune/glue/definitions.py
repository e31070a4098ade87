"""The GLUE tasks: where each split lives, which columns hold its texts and label, the official
label strings, and the metrics that GLUE reports.

File layouts are those written by the GLUE download script (`glue_data/<folder>/<split>.tsv`, tab
separated, no quoting). Labels are kept as the official strings because the GLUE server reads
submission files in exactly those strings; a task's `labels` order fixes the class ids.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping

# Names of the metrics in `finetune.glue.metrics.METRICS`.
ACCURACY = "accuracy"
F1 = "f1"
MATTHEWS = "matthews_corr"
PEARSON = "pearson"
SPEARMAN = "spearman"

NLI_LABELS = ("contradiction", "entailment", "neutral")
BINARY_ENTAILMENT_LABELS = ("entailment", "not_entailment")
BINARY_LABELS = ("0", "1")


@dataclasses.dataclass(frozen=True)
class SplitLayout:
    """How one split of a task is stored.

    Args:
        filename: the file inside the task's folder.
        num_columns: the exact number of tab-separated fields on every row.
        text_a: column of the first (or only) sentence, 0-based.
        text_b: column of the second sentence of a pair; None for single-sentence tasks.
        label: column of the label; None where the split is unlabelled (test sets).
        guid: column of the row's id in the file, used in example guids; None to number the data
            rows from 0 instead.
        has_header: whether the first line is a header row (only CoLA train/dev have none).
        submission_file: for prediction splits, the name GLUE expects for the submission file.
    """

    filename: str
    num_columns: int
    text_a: int
    text_b: int | None = None
    label: int | None = None
    guid: int | None = None
    has_header: bool = True
    submission_file: str | None = None

    def __post_init__(self):
        for field in ("text_a", "text_b", "label", "guid"):
            column = getattr(self, field)
            if column is not None and not 0 <= column < self.num_columns:
                raise ValueError(
                    f"SplitLayout {self.filename!r}: {field}={column} is outside the "
                    f"{self.num_columns} columns"
                )

    @property
    def is_labelled(self) -> bool:
        return self.label is not None


@dataclasses.dataclass(frozen=True, eq=False)
class Task:
    """One GLUE task.

    Args:
        name: the official name ("CoLA", "STS-B", ...).
        folder: the task's folder inside a GLUE data directory.
        splits: split name -> layout. Labelled splits other than "train" are evaluation splits;
            unlabelled ones are prediction splits.
        labels: the official label strings, in class-id order; None for a regression task.
        metrics: metric names reported on the evaluation splits; where there are two, GLUE's score
            for the task is their mean.
        score_range: for a regression task, the closed range of valid scores; a value outside it
            is a malformed row (most often a column shifted into the score's place).
    """

    name: str
    folder: str
    splits: Mapping[str, SplitLayout]
    labels: tuple[str, ...] | None
    metrics: tuple[str, ...]
    score_range: tuple[float, float] | None = None

    @property
    def is_regression(self) -> bool:
        return self.labels is None

    @property
    def num_labels(self) -> int:
        """Width of the classifier output: one score for regression."""
        return 1 if self.labels is None else len(self.labels)

    @property
    def has_train(self) -> bool:
        return "train" in self.splits

    @property
    def eval_splits(self) -> tuple[str, ...]:
        return tuple(n for n, s in self.splits.items() if n != "train" and s.is_labelled)

    @property
    def predict_splits(self) -> tuple[str, ...]:
        return tuple(n for n, s in self.splits.items() if not s.is_labelled)

    def layout(self, split: str) -> SplitLayout:
        if split not in self.splits:
            raise ValueError(
                f"task {self.name} has no split {split!r}; its splits are: {', '.join(self.splits)}"
            )
        return self.splits[split]

    def label_id(self, label: str) -> int:
        if self.labels is None:
            raise ValueError(f"task {self.name} is a regression task: it has no label ids")
        try:
            return self.labels.index(label)
        except ValueError:
            raise ValueError(
                f"task {self.name} has no label {label!r}; its labels are: {', '.join(self.labels)}"
            ) from None


def _sentence_pair_task(name: str, labels: tuple[str, ...], metrics: tuple[str, ...]) -> Task:
    """QNLI, RTE and WNLI share one layout: `index, sentence1, sentence2[, label]`."""
    labelled = SplitLayout("", num_columns=4, text_a=1, text_b=2, label=3, guid=0)
    return Task(
        name=name,
        folder=name,
        splits={
            "train": dataclasses.replace(labelled, filename="train.tsv"),
            "dev": dataclasses.replace(labelled, filename="dev.tsv"),
            "test": SplitLayout(
                "test.tsv", num_columns=3, text_a=1, text_b=2, guid=0, submission_file=f"{name}.tsv"
            ),
        },
        labels=labels,
        metrics=metrics,
    )


# MNLI rows: index, promptID, pairID, genre, two binary parses, two parses, sentence1, sentence2,
# then the annotator labels (1 in train, 5 in dev) and gold_label last; test stops after sentence2.
_MNLI_DEV = SplitLayout("", num_columns=16, text_a=8, text_b=9, label=15, guid=0)
_MNLI_TEST = SplitLayout("", num_columns=10, text_a=8, text_b=9, guid=0)

_TASK_LIST = (
    Task(
        name="CoLA",
        folder="CoLA",
        splits={
            # source, label, the author's original mark, sentence; no header.
            "train": SplitLayout("train.tsv", num_columns=4, text_a=3, label=1, has_header=False),
            "dev": SplitLayout("dev.tsv", num_columns=4, text_a=3, label=1, has_header=False),
            "test": SplitLayout(
                "test.tsv", num_columns=2, text_a=1, guid=0, submission_file="CoLA.tsv"
            ),
        },
        labels=BINARY_LABELS,
        metrics=(MATTHEWS,),
    ),
    Task(
        name="SST-2",
        folder="SST-2",
        splits={
            "train": SplitLayout("train.tsv", num_columns=2, text_a=0, label=1),
            "dev": SplitLayout("dev.tsv", num_columns=2, text_a=0, label=1),
            "test": SplitLayout(
                "test.tsv", num_columns=2, text_a=1, guid=0, submission_file="SST-2.tsv"
            ),
        },
        labels=BINARY_LABELS,
        metrics=(ACCURACY,),
    ),
    Task(
        name="MRPC",
        folder="MRPC",
        splits={
            # Quality, #1 ID, #2 ID, #1 String, #2 String; test has an index in place of Quality.
            "train": SplitLayout("train.tsv", num_columns=5, text_a=3, text_b=4, label=0),
            "dev": SplitLayout("dev.tsv", num_columns=5, text_a=3, text_b=4, label=0),
            "test": SplitLayout(
                "test.tsv", num_columns=5, text_a=3, text_b=4, guid=0, submission_file="MRPC.tsv"
            ),
        },
        labels=BINARY_LABELS,
        metrics=(ACCURACY, F1),
    ),
    Task(
        name="STS-B",
        folder="STS-B",
        splits={
            # index, genre, filename, year, old_index, source1, source2, sentence1, sentence2, score
            "train": SplitLayout("train.tsv", num_columns=10, text_a=7, text_b=8, label=9, guid=0),
            "dev": SplitLayout("dev.tsv", num_columns=10, text_a=7, text_b=8, label=9, guid=0),
            "test": SplitLayout(
                "test.tsv", num_columns=9, text_a=7, text_b=8, guid=0, submission_file="STS-B.tsv"
            ),
        },
        labels=None,
        metrics=(PEARSON, SPEARMAN),
        score_range=(0.0, 5.0),
    ),
    Task(
        name="QQP",
        folder="QQP",
        splits={
            # id, qid1, qid2, question1, question2, is_duplicate; test: id, question1, question2.
            "train": SplitLayout("train.tsv", num_columns=6, text_a=3, text_b=4, label=5, guid=0),
            "dev": SplitLayout("dev.tsv", num_columns=6, text_a=3, text_b=4, label=5, guid=0),
            "test": SplitLayout(
                "test.tsv", num_columns=3, text_a=1, text_b=2, guid=0, submission_file="QQP.tsv"
            ),
        },
        labels=BINARY_LABELS,
        metrics=(ACCURACY, F1),
    ),
    Task(
        name="MNLI",
        folder="MNLI",
        splits={
            "train": SplitLayout("train.tsv", num_columns=12, text_a=8, text_b=9, label=11, guid=0),
            "dev_matched": dataclasses.replace(_MNLI_DEV, filename="dev_matched.tsv"),
            "dev_mismatched": dataclasses.replace(_MNLI_DEV, filename="dev_mismatched.tsv"),
            "test_matched": dataclasses.replace(
                _MNLI_TEST, filename="test_matched.tsv", submission_file="MNLI-m.tsv"
            ),
            "test_mismatched": dataclasses.replace(
                _MNLI_TEST, filename="test_mismatched.tsv", submission_file="MNLI-mm.tsv"
            ),
        },
        labels=NLI_LABELS,
        metrics=(ACCURACY,),
    ),
    _sentence_pair_task("QNLI", BINARY_ENTAILMENT_LABELS, (ACCURACY,)),
    _sentence_pair_task("RTE", BINARY_ENTAILMENT_LABELS, (ACCURACY,)),
    _sentence_pair_task("WNLI", BINARY_LABELS, (ACCURACY,)),
    Task(
        # The diagnostic set is predicted with an MNLI model and scored only by the GLUE server
        # (its labels are not public), so it has no training or evaluation split and no metric.
        name="AX",
        folder="diagnostic",
        splits={
            "test": SplitLayout(
                "diagnostic.tsv",
                num_columns=3,
                text_a=1,
                text_b=2,
                guid=0,
                submission_file="AX.tsv",
            ),
        },
        labels=NLI_LABELS,
        metrics=(),
    ),
)

TASKS: dict[str, Task] = {task.name: task for task in _TASK_LIST}
TASK_NAMES: tuple[str, ...] = tuple(TASKS)


def _normalize(name: str) -> str:
    return name.lower().replace("-", "").replace("_", "")


_BY_NORMALIZED_NAME = {_normalize(name): task for name, task in TASKS.items()}
_BY_NORMALIZED_NAME["diagnostic"] = TASKS["AX"]


def get_task(name: str) -> Task:
    """The task called `name`, ignoring case, hyphens and underscores ("sst2" finds SST-2)."""
    task = _BY_NORMALIZED_NAME.get(_normalize(name))
    if task is None:
        raise ValueError(f"unknown GLUE task {name!r}; the tasks are: {', '.join(TASK_NAMES)}")
    return task
