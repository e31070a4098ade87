"""Readers of the official SQuAD JSON files, v1.1 and v2.0: every question becomes an `Example`.

A file is checked while it is read: each question must have an id of its own (ids are unique), a
question text and a list of answers whose `answer_start` points at the answer's text in the
context. The first problem stops the read with one line naming the file, the article's title and
the question's id. v2.0 files
(questions marked `is_impossible`) are refused unless the caller reads them as v2.0, as the
release's `--version_2_with_negative` asks.
"""

from __future__ import annotations

import dataclasses
import json
import os


class SquadFormatError(ValueError):
    """A SQuAD file that cannot be read; the message names the file, article and question."""


@dataclasses.dataclass(frozen=True)
class Answer:
    """An answer: its text and the character offset where it starts in the context."""

    text: str
    start: int

    @property
    def end(self) -> int:
        """Character offset just past the answer."""
        return self.start + len(self.text)


@dataclasses.dataclass(frozen=True)
class Example:
    """One SQuAD question with its context.

    Args:
        qas_id: the question's id (the key of predictions.json).
        title: the article's title.
        question: the question text.
        context: the paragraph, exactly as in the file (answers are cut from it by offsets).
        answers: the gold answers (several in dev files; empty for an unanswerable question).
        is_impossible: v2.0's mark of a question without an answer in its context.
        plausible_answers: v2.0's plausible but wrong answers of an unanswerable question.
    """

    qas_id: str
    title: str
    question: str
    context: str
    answers: tuple[Answer, ...] = ()
    is_impossible: bool = False
    plausible_answers: tuple[Answer, ...] = ()

    @property
    def train_answer(self) -> Answer | None:
        """The answer training uses: the first gold answer, None when there is none (v2.0)."""
        return self.answers[0] if self.answers and not self.is_impossible else None


def _answers(path, title, qas_id, context, raw, key) -> tuple[Answer, ...]:
    where = f"{path}: article {title!r}, question {qas_id!r}"
    if not isinstance(raw, list):
        raise SquadFormatError(f"{where}: {key!r} is not a list")
    answers = []
    for number, item in enumerate(raw):
        if not isinstance(item, dict) or not isinstance(item.get("text"), str):
            raise SquadFormatError(f"{where}: {key}[{number}] has no 'text' string")
        start = item.get("answer_start")
        if not isinstance(start, int) or isinstance(start, bool):
            raise SquadFormatError(f"{where}: {key}[{number}] has no integer 'answer_start'")
        text = item["text"]
        found = context[start : start + len(text)] if 0 <= start <= len(context) else ""
        if found != text:
            raise SquadFormatError(
                f"{where}: {key}[{number}] answer_start {start} points at {found!r}, "
                f"not at the answer text {text!r}"
            )
        answers.append(Answer(text, start))
    return tuple(answers)


def parse_squad(data: dict, path: str = "<squad>", version_2_with_negative: bool = False) -> list[Example]:
    """The examples of a parsed SQuAD JSON document (see `read_squad`)."""
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        raise SquadFormatError(f"{path}: not a SQuAD file (no top-level 'data' list)")
    examples = []
    first_of: dict[str, str] = {}  # question id -> where it first appears
    for article_number, article in enumerate(data["data"]):
        if not isinstance(article, dict):
            raise SquadFormatError(f"{path}: article {article_number} is not an object")
        title = article.get("title", f"#{article_number}")
        paragraphs = article.get("paragraphs")
        if not isinstance(paragraphs, list):
            raise SquadFormatError(f"{path}: article {title!r} has no 'paragraphs' list")
        for paragraph_number, paragraph in enumerate(paragraphs):
            context = paragraph.get("context") if isinstance(paragraph, dict) else None
            qas = paragraph.get("qas") if isinstance(paragraph, dict) else None
            if not isinstance(context, str) or not isinstance(qas, list):
                raise SquadFormatError(
                    f"{path}: article {title!r}, paragraph {paragraph_number} lacks a 'context' "
                    "string or a 'qas' list"
                )
            for qa_number, qa in enumerate(qas):
                qas_id = qa.get("id") if isinstance(qa, dict) else None
                if not isinstance(qas_id, str):
                    raise SquadFormatError(
                        f"{path}: article {title!r}, paragraph {paragraph_number}, question "
                        f"{qa_number} has no 'id' string"
                    )
                where = f"{path}: article {title!r}, question {qas_id!r}"
                if not isinstance(qa.get("question"), str):
                    raise SquadFormatError(f"{where}: no 'question' string")
                is_impossible = qa.get("is_impossible", False)
                if not isinstance(is_impossible, bool):
                    raise SquadFormatError(f"{where}: 'is_impossible' is not true or false")
                if is_impossible and not version_2_with_negative:
                    raise SquadFormatError(
                        f"{where}: is a v2.0 unanswerable question (is_impossible); "
                        "read v2.0 data with --version_2_with_negative"
                    )
                answers = _answers(path, title, qas_id, context, qa.get("answers"), "answers")
                plausible = _answers(path, title, qas_id, context, qa.get("plausible_answers", []), "plausible_answers")
                if not is_impossible and not answers:
                    raise SquadFormatError(f"{where}: has no answer and is not marked is_impossible")
                if is_impossible and answers:
                    raise SquadFormatError(f"{where}: is marked is_impossible but has answers")
                if qas_id in first_of:
                    raise SquadFormatError(
                        f"{where}: the id is also that of question {first_of[qas_id]}; ids must be unique "
                        "(predictions.json and the official scores are keyed by id)"
                    )
                first_of[qas_id] = f"{qa_number} of article {title!r}, paragraph {paragraph_number}"
                examples.append(
                    Example(
                        qas_id=qas_id,
                        title=title,
                        question=qa["question"],
                        context=context,
                        answers=answers,
                        is_impossible=is_impossible,
                        plausible_answers=plausible,
                    )
                )
    return examples


def load_json(path: str | os.PathLike) -> dict:
    """The parsed JSON of a SQuAD file; malformed JSON is one line naming the file and position."""
    path = os.fspath(path)
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except json.JSONDecodeError as error:
        raise SquadFormatError(f"{path}: not valid JSON: {error.msg} at line {error.lineno} column {error.colno}") from None
    except UnicodeDecodeError as error:
        raise SquadFormatError(f"{path}: not UTF-8 text ({error.reason} at byte {error.start})") from None


def read_squad(path: str | os.PathLike, version_2_with_negative: bool = False) -> list[Example]:
    """Every question of an official SQuAD JSON file (v1.1, or v2.0 when `version_2_with_negative`).

    Raises:
        FileNotFoundError: no such file.
        SquadFormatError: malformed JSON, a missing field, an answer_start that does not point at
            the answer text, or v2.0 data read without `version_2_with_negative`; the message is
            one line naming the file, the article's title and the question's id.
    """
    return parse_squad(load_json(path), os.fspath(path), version_2_with_negative)
