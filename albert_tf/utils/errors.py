"""The project's one type of error for a user's mistake, and how an error reads as one line.

A `UserError` is a mistake in what the user gave (a flag, a file, a value, an output folder), not
a bug of ours: its message names the flag, file or line and says what to do, and every console
script prints it as one line, `error: <message>`, and exits with its `exit_code` (2 for a flag, 1
for the rest), without a traceback (`--verbose` or ALBERT_TF_VERBOSE=1 shows one). Anything else
that escapes a console script is a bug and keeps its traceback.

It subclasses ValueError, so library callers that catch ValueError keep working.

Example:
    >>> raise UserError("--learning_rate must be a positive number, got 0.0", exit_code=2)
"""

from __future__ import annotations

import errno
import sys

USAGE_EXIT_CODE = 2  # a flag is wrong (or missing): as absl and argparse exit
INPUT_EXIT_CODE = 1  # a file, a folder or a value in it is wrong


class UserError(ValueError):
    """A mistake in the user's input; `exit_code` is what a console script exits with."""

    def __init__(self, message: str, exit_code: int = INPUT_EXIT_CODE):
        super().__init__(message)
        self.exit_code = exit_code


class FlagError(UserError):
    """A flag's value is wrong or missing (exit code 2); the message names the flag."""

    def __init__(self, message: str):
        super().__init__(message, USAGE_EXIT_CODE)


# TensorFlow errors that come from the user's files or machine, not from our code.
_TF_ENVIRONMENT_ERRORS = ("NotFoundError", "PermissionDeniedError", "DataLossError", "AlreadyExistsError",
                          "ResourceExhaustedError")


def one_line(error: BaseException) -> tuple[str, int] | None:
    """`(message, exit_code)` when `error` is the user's or the machine's, None for a bug of ours.

    User errors: `UserError`, absl's flag and usage errors; the machine's: an OSError (a missing or
    unreadable file, a full disk), TensorFlow's file errors, and Ctrl-C (exit code 130).
    """
    from absl import app, flags

    if isinstance(error, UserError):
        return str(error), error.exit_code
    if isinstance(error, (flags.Error, app.UsageError)):
        return _first_line(str(error)), USAGE_EXIT_CODE
    if isinstance(error, KeyboardInterrupt):
        return "interrupted", 130
    if isinstance(error, OSError):
        return _os_error(error), INPUT_EXIT_CODE
    tf = sys.modules.get("tensorflow")
    if tf is not None and isinstance(error, tf.errors.OpError) and type(error).__name__ in _TF_ENVIRONMENT_ERRORS:
        return _first_line(error.message), INPUT_EXIT_CODE
    return None


def _os_error(error: OSError) -> str:
    if error.errno == errno.ENOSPC:
        where = f" writing {error.filename}" if error.filename else ""
        return f"no space left on the device{where}: free some space and rerun (finished work is kept)"
    if error.filename is not None and error.strerror:
        target = f" -> {error.filename2}" if error.filename2 else ""
        return f"{error.strerror}: {error.filename}{target}"
    return _first_line(str(error))


def _first_line(message: str) -> str:
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()]
    return lines[0] if lines else "(no message)"


def reason(error: BaseException) -> str:
    """The first line of an error's message (TensorFlow's `.message` included), or its type's name."""
    message = str(getattr(error, "message", None) or error)
    return _first_line(message) if message.strip() else type(error).__name__


def os_reason(error: OSError) -> str:
    """Why a folder could not be made or written, as the one line of a FlagError."""
    if error.errno == errno.ENOTDIR:
        return "a part of the path is a file"
    return error.strerror or str(error)
