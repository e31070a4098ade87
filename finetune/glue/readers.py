"""Readers of the GLUE TSV files: every data row of a split becomes an `Example`.

A row is checked before it becomes an example: the exact number of fields of its layout, and a
label the task knows (a finite score within range for STS-B). A row that fails is reported with
its file and line; with `skip_bad_rows=True` it is counted and skipped instead, because some
distributed copies (QQP's train set among them) carry a few broken rows that are not worth
stopping a day-long run for.
"""

from __future__ import annotations

import csv
import dataclasses
import math
import os
import pathlib

from albert_tf.utils.files import files_for, is_url
from finetune.glue.definitions import SplitLayout, Task, get_task


@dataclasses.dataclass(frozen=True)
class Example:
    """One GLUE example.

    Args:
        guid: "<split>-<id>", the id being the row's index column where the file has one, else the
            0-based number of the data row.
        text_a: the first (or only) sentence.
        text_b: the second sentence of a pair; None for single-sentence tasks.
        label: the official label string, the float score for STS-B, or None for prediction splits.
    """

    guid: str
    text_a: str
    text_b: str | None = None
    label: str | float | None = None


@dataclasses.dataclass(frozen=True)
class BadRow:
    """A row that could not become an example: where it is and why."""

    path: str
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.reason}"


class MalformedRowError(ValueError):
    """A malformed row in a GLUE file; `bad_row` says where."""

    def __init__(self, bad_row: BadRow, hint: str = ""):
        super().__init__(f"{bad_row}{hint}")
        self.bad_row = bad_row


@dataclasses.dataclass(frozen=True)
class SplitExamples:
    """The examples of one split, with the rows skipped to get them."""

    task: Task
    split: str
    path: str | pathlib.Path
    examples: list[Example]
    skipped: list[BadRow]


def _join(folder: str | pathlib.Path, *names: str) -> str | pathlib.Path:
    return folder.joinpath(*names) if isinstance(folder, pathlib.Path) else "/".join((folder, *names))


def split_path(task: Task | str, data_dir: str | os.PathLike, split: str) -> str | pathlib.Path:
    """The file of `split` under `data_dir`.

    `data_dir` is either a GLUE data folder holding the task's folder (as the download script
    writes it: `<data_dir>/MRPC/dev.tsv`) or that task folder itself.

    Raises:
        ValueError: the task has no such split.
        FileNotFoundError: the file is not there; the message names every place looked at.
    """
    task = get_task(task) if isinstance(task, str) else task
    layout = task.layout(split)
    # A local folder as a Path; one on another filesystem (gs://) as its name, read through its own.
    data_dir = os.fspath(data_dir).rstrip("/") if is_url(data_dir) else pathlib.Path(data_dir)
    fs = files_for(data_dir)
    if not fs.isdir(str(data_dir)):
        raise FileNotFoundError(f"GLUE data_dir {data_dir} does not exist or is not a folder")
    candidates = [_join(data_dir, task.folder, layout.filename)]
    # Accepting the task folder itself only when it carries the task's name keeps RTE's dev.tsv
    # from being read as QNLI's: the two layouts are identical, so no row check would catch it.
    if os.path.basename(str(data_dir)).lower() == task.folder.lower():
        candidates.append(_join(data_dir, layout.filename))
    for path in candidates:
        # On an object store a name that exists is a file (ram:// calls every prefix a folder).
        if fs.exists(str(path)) if is_url(path) else path.is_file():
            return path
    raise FileNotFoundError(
        f"GLUE task {task.name}: no {split} file in {data_dir} (looked for "
        + " and ".join(str(p) for p in candidates)
        + f"); expected the layout of the GLUE download script, {task.folder}/{layout.filename}"
    )


def read_examples(
    task: Task | str,
    data_dir: str | os.PathLike,
    split: str,
    *,
    skip_bad_rows: bool = False,
) -> SplitExamples:
    """Reads one split of a task.

    Args:
        task: a `Task` or its name ("MRPC", "sst-2", ...).
        data_dir: the GLUE data folder or the task's own folder (see `split_path`).
        split: a split of the task: "train", "dev", "test"; MNLI has "dev_matched",
            "dev_mismatched", "test_matched" and "test_mismatched"; AX has only "test".
        skip_bad_rows: count and skip malformed rows instead of raising on the first.

    Raises:
        MalformedRowError: a data row has the wrong number of fields or an unknown label (unless
            `skip_bad_rows`), or the header row has the wrong number of fields (always: then the
            file is not the one the task expects).

    Example:
        >>> dev = read_examples("MRPC", "../shared/data/glue", "dev")
        >>> len(dev.examples), dev.examples[0].label
        (408, '1')
    """
    task = get_task(task) if isinstance(task, str) else task
    layout = task.layout(split)
    path = split_path(task, data_dir, split)
    examples: list[Example] = []
    skipped: list[BadRow] = []
    # Decoded line by line, so that a byte that is not UTF-8 is a bad row (file and line named,
    # skippable) rather than an error of the whole file that names neither.
    line_number = [0]

    def decoded_lines(f):
        for raw in f:
            line_number[0] += 1
            try:
                # utf-8-sig on the first line: MRPC's header starts with a byte-order mark.
                yield raw.decode("utf-8-sig" if line_number[0] == 1 else "utf-8")
            except UnicodeDecodeError as error:
                bad_row = BadRow(str(path), line_number[0],
                                 f"not valid UTF-8 ({error.reason} at byte {error.start} of the line)")
                if not skip_bad_rows or (layout.has_header and line_number[0] == 1):
                    raise MalformedRowError(bad_row, " (skip_bad_rows counts and skips such rows)") from None
                skipped.append(bad_row)

    with files_for(path).open(str(path), "rb") as f:
        rows = csv.reader(decoded_lines(f), delimiter="\t", quoting=csv.QUOTE_NONE)
        if layout.has_header:
            header = next(rows, None)
            if header is None:
                raise MalformedRowError(BadRow(str(path), 1, "empty file: no header row"))
            if len(header) != layout.num_columns:
                raise MalformedRowError(
                    BadRow(
                        str(path),
                        line_number[0],
                        f"header has {len(header)} fields, the {task.name} {split} layout has "
                        f"{layout.num_columns}: is this the right file?",
                    )
                )
            if _is_data_row(task, layout, split, header):
                # Read as the header, the first example would be lost without a word.
                raise MalformedRowError(BadRow(
                    str(path), line_number[0],
                    f"the first row is a data row, not the header of the {task.name} {split} layout: "
                    "the file lacks its header row; add it (the GLUE download script's files have one)"))
        for row_number, fields in enumerate(rows):
            example_or_reason = _parse_row(task, layout, split, row_number, fields)
            if isinstance(example_or_reason, Example):
                examples.append(example_or_reason)
                continue
            bad_row = BadRow(str(path), line_number[0], example_or_reason)
            if not skip_bad_rows:
                raise MalformedRowError(bad_row, " (skip_bad_rows counts and skips such rows)")
            skipped.append(bad_row)
    return SplitExamples(task=task, split=split, path=path, examples=examples, skipped=skipped)


def _is_data_row(task: Task, layout: SplitLayout, split: str, header: list[str]) -> bool:
    """Whether a header row holds data instead: a label the task knows, or a numeric row id."""
    if layout.label is not None:
        return isinstance(_parse_row(task, layout, split, 0, header), Example)
    return layout.guid is not None and header[layout.guid].strip().isdigit()


def _parse_row(
    task: Task, layout: SplitLayout, split: str, row_number: int, fields: list[str]
) -> Example | str:
    """The row's example, or the reason it is malformed."""
    if len(fields) != layout.num_columns:
        return f"expected {layout.num_columns} tab-separated fields, found {len(fields)}"
    row_id = fields[layout.guid] if layout.guid is not None else str(row_number)
    label: str | float | None = None
    if layout.label is not None:
        raw_label = fields[layout.label]
        if task.labels is not None:
            if raw_label not in task.labels:
                return (
                    f"unknown label {raw_label!r}; {task.name} labels are: {', '.join(task.labels)}"
                )
            label = raw_label
        else:
            try:
                label = float(raw_label)
            except ValueError:
                return f"score {raw_label!r} is not a number"
            low, high = task.score_range or (-math.inf, math.inf)
            if not (math.isfinite(label) and low <= label <= high):
                return f"score {raw_label!r} is outside {task.name}'s range [{low}, {high}]"
    return Example(
        guid=f"{split}-{row_id}",
        text_a=fields[layout.text_a],
        text_b=fields[layout.text_b] if layout.text_b is not None else None,
        label=label,
    )
