"""CoNLL-style token-tag files: one token and its tag a line, a blank line between sentences.

    EU      NNP  B-NP  B-ORG
    rejects VBZ  B-VP  O

Fields are separated by tabs or spaces and the tag is the last (CoNLL-2003's four columns and
WNUT-17's two alike), every line of a file holding as many as its first (a token with a space in
it, `New York<TAB>B-LOC`, would otherwise be read as "New"); `-DOCSTART-` lines are skipped, and so
is a UTF-8 byte order mark at the start of the file. Tags are read in one of three schemes and
converted to BIO (IOB2), the one the models learn:

- "bio" (IOB2): B-X opens every entity, I-X continues it;
- "iob1" (CoNLL-2003's original files): I-X opens an entity, B-X only one that directly follows
  an entity of the same type;
- "bioes" (IOBES): S-X a one-word entity, E-X an entity's last word (BILOU's U-X and L-X too).

Any other tag is an error naming the file and line.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Optional, Sequence

from albert_tf.data.tagging import OUTSIDE, bio_labels, entity_types, split_tag
from albert_tf.utils.errors import UserError
from albert_tf.utils.validation import require_choice

SCHEMES = ("bio", "iob1", "bioes")
DOCSTART = "-DOCSTART-"
_PREFIXES = {"bio": "BI", "iob1": "BI", "bioes": "BIESLU"}


@dataclasses.dataclass(frozen=True)
class Sentence:
    """A sentence's words and BIO tags, and the line of the file it starts on (1-based)."""

    words: tuple[str, ...]
    tags: tuple[str, ...]
    line: int


def to_bio(tags: Sequence[str], scheme: str) -> list[str]:
    """`tags` of `scheme` as BIO tags (they must be valid tags of the scheme: `read_conll` checks)."""
    require_choice("scheme", scheme, SCHEMES)
    bio = []
    previous = (OUTSIDE, None)
    for tag in tags:
        prefix, kind = split_tag(tag)
        if prefix == OUTSIDE:
            bio.append(OUTSIDE)
        elif scheme == "bioes":
            bio.append(f"{'B' if prefix in ('B', 'S', 'U') else 'I'}-{kind}")
        elif scheme == "iob1":
            opens = prefix == "B" or previous[0] == OUTSIDE or previous[1] != kind
            bio.append(f"{'B' if opens else 'I'}-{kind}")
        else:
            bio.append(tag)
        previous = (prefix, kind)
    return bio


def read_conll(path: str | os.PathLike, scheme: str = "bio", tagged: bool = True) -> list[Sentence]:
    """The sentences of a CoNLL-style file, their tags converted from `scheme` to BIO; with
    `tagged=False` (a file to predict) a line may hold its token alone, whose tag is then "O".

    A line of one field (when `tagged`), a line of other fields than the file's first (a line
    holding a token alone apart, when not `tagged`), a tag that is not of the scheme, or a file
    that is not UTF-8 is a UserError naming the file and line.
    """
    require_choice("scheme", scheme, SCHEMES)
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise UserError(f"no CoNLL file {path}")
    sentences: list[Sentence] = []
    words: list[str] = []
    tags: list[str] = []
    start = 0
    columns = None  # (fields, line) of the file's first line of a token and its tag

    def close():
        if words:
            sentences.append(Sentence(tuple(words), tuple(to_bio(tags, scheme)), start))
        words.clear()
        tags.clear()

    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                raise UserError(f"{path}:{number}: not UTF-8 ({error.reason} at byte {error.start})") from None
            if number == 1:
                line = line.removeprefix("\ufeff")  # the byte order mark some editors write: no word
            fields = line.split()
            if not fields:
                close()
                continue
            if fields[0] == DOCSTART:
                close()
                continue
            if not tagged and len(fields) == 1:
                fields.append(OUTSIDE)
            if len(fields) < 2:
                raise UserError(f"{path}:{number}: {line.strip()!r} has no tag: a line holds a token and its tag "
                                "(tab- or space-separated, the tag last)")
            if tagged or len(fields) > 1:
                columns = columns or (len(fields), number)
                if len(fields) != columns[0]:
                    raise UserError(f"{path}:{number}: {len(fields)} fields where line {columns[1]} has {columns[0]}: "
                                    "every line holds the same columns, the token first and its tag last (a token "
                                    "with a space in it?)")
            tag = fields[-1]
            prefix, kind = split_tag(tag)
            if tag != OUTSIDE and (prefix not in _PREFIXES[scheme] or not kind or len(prefix) != 1):
                raise UserError(f"{path}:{number}: tag {tag!r} is not a {scheme.upper()} tag (O, or "
                                f"{'/'.join(_PREFIXES[scheme])}-<type>); is --tag_scheme right?")
            if not words:
                start = number
            words.append(fields[0])
            tags.append(tag)
    close()
    return sentences


def labels_of(sentences: Sequence[Sentence]) -> list[str]:
    """The BIO label list of the entity types the sentences hold: "O", then B- and I- of each type
    (sorted), whether or not each was seen."""
    types = sorted({split_tag(tag)[1] for s in sentences for tag in s.tags if tag != OUTSIDE})
    return bio_labels(types)


def check_tags(sentences: Sequence[Sentence], labels: Sequence[str], path: str | os.PathLike,
               source: Optional[str] = None) -> None:
    """A UserError naming the file and line of the first tag whose type the labels lack (a type
    seen only in dev or test: the model has no output for it)."""
    known = set(labels)
    for sentence in sentences:
        for offset, tag in enumerate(sentence.tags):
            if tag not in known:
                raise UserError(
                    f"{os.fspath(path)}:{sentence.line + offset}: type {split_tag(tag)[1]!r} is not among the "
                    f"labels ({', '.join(entity_types(labels)) or 'none'}{', of ' + source if source else ''}): "
                    "a type the model never learnt cannot be scored")
