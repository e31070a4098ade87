"""Readers of the RACE release: every question of every passage file, with its options and answer.

The release ships one JSON object per passage file (`<split>/<level>/<number>.txt`) holding the
`article`, parallel lists of `questions`, `options` (four strings each) and `answers` ("A"-"D"),
and an `id` (the level and the file name, "middle1011.txt"). A reader takes a split folder holding
`middle/` and `high/`, either level's folder alone, or one passage file. A file that breaks the
layout stops the reading with one line naming the file and, where it applies, the question.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
from typing import Iterable, Iterator, Sequence

from albert_tf.data.multiple_choice import LETTERS, NUM_OPTIONS

LEVELS = ("middle", "high")
REQUIRED_KEYS = ("article", "questions", "options", "answers", "id")


@dataclasses.dataclass(frozen=True)
class Question:
    """One RACE question with its passage.

    Args:
        qid: "<passage id>-<index>", the 0-based index of the question in its passage file.
        level: "middle" or "high" (from the folder, else from the passage id), "" if neither says.
        article: the passage's text as released.
        question: the question as released; a cloze question marks its blank with "_".
        options: the four options, in the order of the letters A-D.
        answer: the answer's letter, "A" to "D".
    """

    qid: str
    level: str
    article: str
    question: str
    options: tuple[str, str, str, str]
    answer: str

    @property
    def label(self) -> int:
        """The answer's index among the options (0 for A ... 3 for D)."""
        return LETTERS.index(self.answer)


class BadRaceFile(ValueError):
    """A passage file that does not follow the RACE layout; the message names the file (and the
    question's 0-based index where one question is at fault)."""

    def __init__(self, path: os.PathLike | str, reason: str, question: int | None = None):
        where = f"{path}" if question is None else f"{path}: question {question}"
        super().__init__(f"{where}: {reason}")
        self.path = pathlib.Path(path)
        self.question = question
        self.reason = reason


def passage_files(path: str | os.PathLike, levels: Sequence[str] = LEVELS) -> list[tuple[str, pathlib.Path]]:
    """The passage files under `path` as (level, file) pairs, levels in `levels`' order and files
    sorted by name within a level.

    `path` is a split folder holding `middle/` and/or `high/` (only those of `levels` are read), a
    level's folder (its files are `*.txt`), or a single passage file.

    Raises:
        FileNotFoundError: `path` does not exist, or holds neither level folders nor passage files.
        ValueError: `levels` names an unknown level.
    """
    unknown = [level for level in levels if level not in LEVELS]
    if unknown or not levels:
        raise ValueError(f"levels must be some of {list(LEVELS)}, got {list(levels)}")
    path = pathlib.Path(path)
    if path.is_file():
        return [(_level_of(path, None), path)]
    if not path.is_dir():
        raise FileNotFoundError(f"RACE data {path} does not exist")
    level_dirs = [(level, path / level) for level in levels if (path / level).is_dir()]
    if level_dirs:
        return [(level, file) for level, folder in level_dirs for file in _txt_files(folder)]
    if any((path / level).is_dir() for level in LEVELS):
        raise FileNotFoundError(f"RACE data {path} has no folder of the levels asked for ({', '.join(levels)})")
    files = _txt_files(path)
    if not files:
        raise FileNotFoundError(
            f"RACE data {path} holds no passage files: expected a split folder with middle/ and "
            "high/, one level's folder of *.txt passage files, or one passage file"
        )
    level = path.name if path.name in LEVELS else ""
    if level and level not in levels:
        raise FileNotFoundError(f"RACE data {path} is the {level} level, not one asked for ({', '.join(levels)})")
    return [(level, file) for file in files]


def _txt_files(folder: pathlib.Path) -> list[pathlib.Path]:
    return sorted(p for p in folder.iterdir() if p.suffix == ".txt" and p.is_file())


def _level_of(path: pathlib.Path, passage_id: str | None) -> str:
    if path.parent.name in LEVELS:
        return path.parent.name
    for level in LEVELS:
        if passage_id and passage_id.startswith(level):
            return level
    return ""


def read_passage(path: str | os.PathLike, level: str | None = None) -> list[Question]:
    """The questions of one passage file, in file order.

    Args:
        path: the passage file.
        level: the level to record; by default the parent folder's name or the passage id's prefix.

    Raises:
        BadRaceFile: the file is not UTF-8 JSON, lacks a key, its lists disagree in length, or a
            question lacks four string options or an answer among A-D.
    """
    path = pathlib.Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as error:
        raise BadRaceFile(path, f"not UTF-8 text ({error.reason} at byte {error.start})") from None
    except json.JSONDecodeError as error:
        raise BadRaceFile(path, f"not JSON ({error.msg} at line {error.lineno} column {error.colno})") from None
    if not isinstance(data, dict):
        raise BadRaceFile(path, f"not a RACE passage: a JSON {type(data).__name__}, expected an object")
    missing = [key for key in REQUIRED_KEYS if key not in data]
    if missing:
        raise BadRaceFile(path, f"missing key{'s' if len(missing) > 1 else ''} {', '.join(missing)}")
    article, passage_id = data["article"], data["id"]
    if not isinstance(article, str) or not isinstance(passage_id, str):
        raise BadRaceFile(path, "article and id must be strings")
    questions, options, answers = data["questions"], data["options"], data["answers"]
    for key in ("questions", "options", "answers"):
        if not isinstance(data[key], list):
            raise BadRaceFile(path, f"{key} must be a list, got a {type(data[key]).__name__}")
    if not len(questions) == len(options) == len(answers):
        raise BadRaceFile(
            path,
            f"{len(questions)} questions, {len(options)} option lists and {len(answers)} answers; "
            "they must be as many",
        )
    level = _level_of(path, passage_id) if level is None else level
    result = []
    for index, (question, choices, answer) in enumerate(zip(questions, options, answers)):
        if not isinstance(question, str):
            raise BadRaceFile(path, "the question is not a string", index)
        if not isinstance(choices, list) or len(choices) != NUM_OPTIONS:
            count = len(choices) if isinstance(choices, list) else f"a {type(choices).__name__} of"
            raise BadRaceFile(path, f"{count} options, expected {NUM_OPTIONS}", index)
        if not all(isinstance(choice, str) for choice in choices):
            raise BadRaceFile(path, "an option is not a string", index)
        if answer not in LETTERS:
            raise BadRaceFile(path, f"answer {answer!r} is not one of {', '.join(LETTERS)}", index)
        result.append(Question(
            qid=f"{passage_id}-{index}",
            level=level,
            article=article,
            question=question,
            options=tuple(choices),
            answer=answer,
        ))
    return result


def iter_questions(path: str | os.PathLike, levels: Sequence[str] = LEVELS) -> Iterator[Question]:
    """Every question under `path` (see `passage_files`), passage by passage."""
    for level, file in passage_files(path, levels):
        yield from read_passage(file, level or None)


def read_questions(path: str | os.PathLike, levels: Sequence[str] = LEVELS) -> list[Question]:
    """`iter_questions` as a list."""
    return list(iter_questions(path, levels))


def passages(questions: Iterable[Question]) -> list[str]:
    """The passage ids of `questions`, in first-seen order (for splitting by passage)."""
    seen: dict[str, None] = {}
    for question in questions:
        seen.setdefault(passage_id(question), None)
    return list(seen)


def passage_id(question: Question) -> str:
    """The id of a question's passage (its qid without the question index)."""
    return question.qid.rsplit("-", 1)[0]
