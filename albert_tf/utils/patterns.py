"""Globs: `expand_patterns("a/*.txt,b.txt")`, comma-separated globs, each one's matches sorted, in
the order given; folders are not matches; a glob that matches nothing is an error naming it."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Callable

from albert_tf.utils.errors import FlagError, UserError
from albert_tf.utils.files import files_for


def expand_patterns(
    patterns: str | Sequence[str],
    *,
    keep_repeats: bool = False,
    urls: Callable[[], object] | None = None,
    error: type[UserError] = UserError,
    flag: str | None = None,
) -> list[str]:
    """The files of comma-separated globs (a str) or of a list of globs, each glob's matches sorted,
    in the order given; folders are skipped. A glob that matches nothing is an `error`; given the
    `flag` that named the globs, a FlagError that names it.

    A file matched twice is listed once, unless `keep_repeats` (repeating a glob then repeats its
    files, a way to weight a corpus). `urls` gives the filesystem of globs with a scheme.
    """
    if flag is not None:
        try:
            return expand_patterns(patterns, keep_repeats=keep_repeats, urls=urls, error=error)
        except UserError as failure:
            raise FlagError(f"--{flag}: {failure}") from None
    if isinstance(patterns, (str, os.PathLike)):
        patterns = os.fspath(patterns).split(",")
    patterns = [os.fspath(p).strip() for p in patterns if p and os.fspath(p).strip()]
    if not patterns:
        raise error("no input file given")
    found: list[str] = []
    seen: set[str] = set()
    for pattern in patterns:
        fs = files_for(pattern, urls)
        try:
            matches = sorted(fs.glob(pattern))
        except Exception as failure:  # Beam's and gfile's ways to say "nothing there"
            if isinstance(failure, UserError) or not (
                isinstance(failure, (OSError, ValueError)) or type(failure).__name__ == "NotFoundError"
            ):
                raise
            matches = []
        if not matches:
            if fs.isdir(pattern):  # a folder's files are what the user meant, but which of them?
                raise error(f"input pattern {pattern!r} is a folder: give a glob of its files, such as "
                            f"'{pattern.rstrip('/')}/*'")
            raise error(f"input pattern {pattern!r} matches no file")
        for match in matches:
            if keep_repeats or match not in seen:
                seen.add(match)
                found.append(match)
    return found
