"""Checks of user-given values shared by configs, options and feature specs."""

from __future__ import annotations

from typing import Iterable, Mapping


def check_positions(max_seq_length: int, max_position_embeddings: int | None, flag: str = "--max_seq_length") -> None:
    """Refuses a sequence length over the model's positions: a FlagError (exit code 2) naming `flag`."""
    if max_position_embeddings is not None and max_seq_length > max_position_embeddings:
        from albert_tf.utils.errors import FlagError

        raise FlagError(f"{flag} {max_seq_length} exceeds the model's max_position_embeddings "
                        f"({max_position_embeddings})")


def require_positive_ints(values: Mapping[str, object], owner: str = "") -> None:
    """Raises ValueError naming the first value that is not a positive integer.

    `bool` is refused although Python counts it as an int: `True` is never a meant size.
    `owner` prefixes the name in the message (e.g. "AlbertConfig." gives "AlbertConfig.vocab_size").
    """
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(f"{owner}{name} must be a positive integer, got {value!r}")


def require_choice(name: str, value, choices: Iterable, error: type[Exception] = ValueError) -> None:
    """Raises `error` (ValueError; a FlagError for a flag's value) naming `name` and the choices (in
    their order) unless `value` is one of them: the one "must be one of" of every check."""
    choices = tuple(choices)
    if value not in choices:
        raise error(f"{name} must be one of {', '.join(map(str, choices))}, got {value!r}")
