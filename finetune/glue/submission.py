"""GLUE submission files: `<TASK>.tsv` with one prediction per test row, in the official strings.

The GLUE server reads `index<TAB>prediction` with a header, rows in the order of the test file
(whose index column counts from 0), labels as the task's official strings ("entailment", "1") and
STS-B scores as numbers.
"""

from __future__ import annotations

import os
import pathlib

from albert_tf.utils.atomic import atomic_open
from albert_tf.utils.files import files_for, is_url
from finetune.glue.metrics import predictions_from_outputs
from finetune.glue.definitions import Task, get_task


def prediction_strings(task: Task | str, outputs) -> list[str]:
    """The official string of each prediction: a label, or a score with 3 decimals for STS-B.

    Args:
        task: a `Task` or its name.
        outputs: logits (or probabilities) [N, num_labels]; scores [N] or [N, 1] for STS-B.
    """
    task = get_task(task) if isinstance(task, str) else task
    predictions = predictions_from_outputs(task, outputs)
    if task.is_regression:
        return [f"{score:.3f}" for score in predictions]
    return [task.labels[int(i)] for i in predictions]


def write_submission(
    task: Task | str,
    split: str,
    outputs,
    output_dir: str | os.PathLike,
    *,
    num_examples: int | None = None,
) -> pathlib.Path:
    """Writes the submission file of one prediction split into `output_dir`; returns its path.

    Args:
        task: a `Task` or its name.
        split: a prediction split of the task ("test"; MNLI: "test_matched" or "test_mismatched").
        outputs: the model's outputs on the split's examples, in file order, padding removed.
        output_dir: where to write (created if missing).
        num_examples: the number of examples the split has, checked against `outputs` because a
            file short of rows is rejected by the server only after upload.
    """
    task = get_task(task) if isinstance(task, str) else task
    layout = task.layout(split)
    if layout.submission_file is None:
        raise ValueError(
            f"{task.name} {split} is labelled and has no submission file; the prediction splits "
            f"are: {', '.join(task.predict_splits)}"
        )
    lines = prediction_strings(task, outputs)
    if num_examples is not None and len(lines) != num_examples:
        raise ValueError(
            f"{task.name} {split} has {num_examples} examples but {len(lines)} predictions "
            "were given"
        )
    path = _output_file(output_dir, layout.submission_file)
    with atomic_open(path, "w", newline="\n") as f:
        f.write("index\tprediction\n")
        for index, line in enumerate(lines):
            f.write(f"{index}\t{line}\n")
    return path



def _output_file(output_dir: str | os.PathLike, name: str) -> str | pathlib.Path:
    """`output_dir/name`, the folder made: a local Path, or a name on another filesystem (gs://)."""
    files_for(output_dir).makedirs(os.fspath(output_dir))
    if is_url(output_dir):
        return f"{os.fspath(output_dir).rstrip('/')}/{name}"
    return pathlib.Path(output_dir) / name


def write_predictions_with_labels(task: Task | str, split: str, outputs, label_ids,
                                  output_dir: str | os.PathLike) -> pathlib.Path:
    """Writes `<split>_predictions.tsv` of an evaluation split: `index<TAB>prediction<TAB>label`,
    rows in file order, labels and predictions in the official strings (scores for STS-B)."""
    task = get_task(task) if isinstance(task, str) else task
    predictions = prediction_strings(task, outputs)
    if task.is_regression:
        labels = [f"{float(score):.3f}" for score in label_ids]
    else:
        labels = [task.labels[int(i)] for i in label_ids]
    if len(labels) != len(predictions):
        raise ValueError(f"{len(predictions)} predictions but {len(labels)} labels")
    path = _output_file(output_dir, f"{split}_predictions.tsv")
    with atomic_open(path, "w", newline="\n") as f:
        f.write("index\tprediction\tlabel\n")
        for index, (prediction, label) in enumerate(zip(predictions, labels)):
            f.write(f"{index}\t{prediction}\t{label}\n")
    return path
