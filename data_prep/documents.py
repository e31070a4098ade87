"""Reading the input corpus as a stream of documents (lists of sentence strings).

Two layouts: `sentence_per_line` (the original's: one sentence per line, a blank line between
documents) and `document_per_line` (one document per line, split into sentences here). A file's
end always ends a document. Nothing is held beyond the current document. Files ending in `.gz`,
`.gzip`, `.bz2` or `.xz` are decompressed as they are read (`albert_tf.utils.compression`' rule).
"""

from __future__ import annotations

import logging
import os
import re
from typing import BinaryIO, Callable, Iterator, Sequence

from albert_tf.utils.errors import UserError
from albert_tf.utils.compression import DECOMPRESSION_ERRORS, compression_of, open_decompressed
from albert_tf.utils.files import files_for
from albert_tf.utils.patterns import expand_patterns
from albert_tf.utils.validation import require_choice

INPUT_FORMATS = ("sentence_per_line", "document_per_line")
# A "sentence" this long is a whole text on one line: read as sentence_per_line it would become a
# single document of one sentence, truncated to one instance, without a word.
MAX_SENTENCE_CHARS = 1_000_000
_MAX_LOGGED_BAD_LINES = 10


class BadInputError(UserError):
    """Input that cannot be turned into pretraining data (the message says where and why)."""


def expand_input_patterns(patterns: str | Sequence[str]) -> list[str]:
    """Files matched by comma-separated globs, each glob's matches sorted, in the order given.

    A pattern that matches no file is an error. Repeating a pattern repeats its files (a way to
    weight a corpus), so duplicates are kept. Globs with a scheme (gs://...) go through Beam.
    """
    return expand_patterns(patterns, keep_repeats=True, urls=beam_files, error=BadInputError)


def check_not_all_empty(files: Sequence[str]) -> list[str]:
    """Returns the files that hold no text; raises if that is every file."""
    empty = [f for f in files if not _has_text(f)]
    for path in empty:
        logging.warning("input file %s holds no text", path)
    if len(empty) == len(files):
        raise BadInputError(f"the input files hold no text: {', '.join(files)}")
    return empty


class InputStats:
    """What the reader saw: documents, lines, and lines skipped as not UTF-8."""

    def __init__(self):
        self.documents = 0
        self.lines = 0
        self.bad_lines = 0

    def to_dict(self) -> dict:
        return {"documents": self.documents, "lines": self.lines, "bad_lines": self.bad_lines}


def open_raw(path: str) -> BinaryIO:
    """The bytes of a local file, or of one on a filesystem Apache Beam knows (gs://, s3://, hdfs://...),
    as they are stored (not decompressed)."""
    return files_for(path, beam_files).open(path, "rb")


def beam_files():
    """Apache Beam's filesystems, for input paths with a scheme (the workers do not load TensorFlow)."""
    try:
        from data_prep.beam.files import BeamFiles
    except ImportError:
        raise BadInputError("input paths with a scheme (gs://...) need Apache Beam: pip install 'albert_tf[beam]'") from None
    return BeamFiles()


def input_lines(path: str, opener: Callable[[str], BinaryIO] | None = None) -> Iterator[bytes]:
    """The file's lines as bytes; a compressed file that cannot be decompressed is a BadInputError.

    `opener(path)` gives the raw bytes; by default a local file is opened, and a path with a scheme
    (gs://...) is read through Apache Beam's filesystems.
    """
    raw = (opener or open_raw)(path)
    if compression_of(path) == "none":
        with raw as f:
            yield from f
        return
    try:
        with raw, open_decompressed(raw, path) as f:
            yield from f
    except DECOMPRESSION_ERRORS as error:
        raise BadInputError(f"{path}: not valid {os.path.splitext(path)[1].lower()} data ({error})") from None


def _has_text(path: str) -> bool:
    return any(line.strip() for line in input_lines(path))


def _decoded_lines(path: str, skip_bad_lines: bool, stats: InputStats, opener=None) -> Iterator[str]:
    for line_number, raw in enumerate(input_lines(path, opener), start=1):
        stats.lines += 1
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError as error:
            where = f"{path}:{line_number}: not valid UTF-8 ({error.reason} at byte {error.start} of the line)"
            if not skip_bad_lines:
                raise BadInputError(
                    f"{where}; convert the file or pass --skip_bad_lines to skip such lines"
                ) from None
            stats.bad_lines += 1
            if stats.bad_lines <= _MAX_LOGGED_BAD_LINES:
                logging.warning("skipping %s", where)


def iter_documents(
    files: Sequence[str],
    input_format: str = "sentence_per_line",
    skip_bad_lines: bool = False,
    stats: InputStats | None = None,
    opener: Callable[[str], BinaryIO] | None = None,
) -> Iterator[list[str]]:
    """Yields each document as a list of sentences (stripped, non-empty strings)."""
    require_choice("input_format", input_format, INPUT_FORMATS)
    stats = stats if stats is not None else InputStats()
    for path in files:
        document: list[str] = []
        lines_before = stats.lines
        for line in _decoded_lines(path, skip_bad_lines, stats, opener):
            line = line.strip()
            if input_format == "document_per_line":
                sentences = split_sentences(line)
                if sentences:
                    stats.documents += 1
                    yield sentences
            elif line:
                if len(line) > MAX_SENTENCE_CHARS:
                    raise BadInputError(
                        f"{path}:{stats.lines - lines_before}: a line of {len(line):,} characters read as one sentence "
                        f"(--input_format=sentence_per_line allows {MAX_SENTENCE_CHARS:,}); is the file one "
                        "document a line (--input_format=document_per_line)?"
                    )
                document.append(line)
            elif document:
                stats.documents += 1
                yield document
                document = []
        if document:
            stats.documents += 1
            yield document


# A sentence ends at . ! or ? (maybe followed by closing quotes or brackets) followed by space and
# something that can open a sentence. Abbreviations and initials are the usual false ends.
_SENTENCE_END = re.compile(r"""[.!?]+["'”’)\]]*\s+(?=["'“‘(\[]?[A-Z0-9])""")
_ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof st jr sr vs etc e.g i.e no vol fig mt gen col lt sgt capt inc ltd co u.s cf approx".split()
)


def split_sentences(text: str) -> list[str]:
    """Rule-based sentence split for `document_per_line` input (English-oriented, no model)."""
    sentences = []
    start = 0
    for match in _SENTENCE_END.finditer(text):
        words = text[start : match.start()].split()
        last_word = words[-1].lower().strip("\"'(") if words else ""
        if last_word in _ABBREVIATIONS or (len(last_word) == 1 and last_word.isalpha()):
            continue
        sentences.append(text[start : match.end()].strip())
        start = match.end()
    tail = text[start:].strip()
    if tail:
        sentences.append(tail)
    return [s for s in sentences if s]
