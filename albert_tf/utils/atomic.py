"""Files written aside, then renamed: a reader (another worker, a rerun, a later tool) never sees
half a file.

A file is written as `<path>.incomplete-<pid>` and renamed to `path` only when complete; on an error
the partial file is removed, and a killed run leaves only `*.incomplete-*` files, which
`remove_partials` clears: `atomic_path`, `atomic_open`, `write_json`, `PartialFile`; a whole folder
(an export) the same way: `atomic_folder`.

Example:
    >>> write_json("runs/a/result.json", {"loss": 1.5})
    >>> with atomic_open("runs/a/predictions.tsv", "w") as f:
    ...     f.write("index\\tprediction\\n")
"""

from __future__ import annotations

import contextlib
import glob as glob_module
import json
import os
from collections.abc import Iterator
from typing import BinaryIO

from albert_tf.utils.errors import UserError
from albert_tf.utils.files import files_for, is_url
from albert_tf.utils.locks import LOCK_FILE

PARTIAL_SUFFIX = ".incomplete"


def partial_path(path: str | os.PathLike) -> str:
    """Where `path` is written until it is complete (unique to this process)."""
    return f"{os.fspath(path)}{PARTIAL_SUFFIX}-{os.getpid()}"


def is_partial(name: str) -> bool:
    """Whether `name` is a file being written (or left behind by a killed run)."""
    return f"{PARTIAL_SUFFIX}-" in os.path.basename(name)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, fs=None) -> Iterator[str]:
    """Yields the partial name to write `path` under; renames it to `path` when the block ends
    without an error, removes it when the block raises."""
    fs = fs or files_for(path)
    partial = partial_path(path)
    try:
        yield partial
    except BaseException:
        with contextlib.suppress(OSError):
            fs.remove(partial)
        raise
    fs.rename(partial, os.fspath(path))


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "w", fs=None, **kwargs):
    """`open(path, mode)` written aside and renamed at the end of the block (text is UTF-8)."""
    fs = fs or files_for(path)
    if "b" not in mode:
        kwargs.setdefault("encoding", "utf-8")
    with atomic_path(path, fs) as partial:
        with fs.open(partial, mode, **kwargs) as f:
            yield f


def write_json(path: str | os.PathLike, value, fs=None, sort_keys: bool = True) -> None:
    """`value` as indented JSON with a final newline, written aside and renamed."""
    data = (json.dumps(value, indent=2, sort_keys=sort_keys) + "\n").encode("utf-8")
    with atomic_open(path, "wb", fs) as f:
        f.write(data)


class PartialFile:
    """A file written aside over a longer time: `.file` is open for writing at once, `commit()`
    renames it to `path` (after `.file` is closed), `discard()` removes it."""

    def __init__(self, path: str, fs=None, mode: str = "wb"):
        self.path = path
        self.partial = partial_path(path)
        self._fs = fs or files_for(path)
        self.file: BinaryIO = self._fs.open(self.partial, mode)

    def commit(self) -> None:
        self.file.close()
        self._fs.rename(self.partial, self.path)

    def discard(self) -> None:
        with contextlib.suppress(OSError):
            self.file.close()
        with contextlib.suppress(OSError):
            self._fs.remove(self.partial)


def remove_partials(folder: str, fs=None) -> list[str]:
    """Removes the partial files a killed run left in `folder`; returns their paths."""
    fs = fs or files_for(folder)
    found = [p for p in fs.glob(os.path.join(glob_module.escape(folder), f"*{PARTIAL_SUFFIX}-*"))]
    for path in found:
        fs.remove(path)
    return found


def _dead_partial(name: str) -> bool:
    """Whether partial `name` (ending in -<pid>) was left by a process no longer running here."""
    try:
        pid = int(name.rsplit("-", 1)[1])
        os.kill(pid, 0)
    except (ValueError, IndexError, ProcessLookupError):
        return True
    except PermissionError:  # another user's live process
        return False
    return False


def _remove(path: str) -> None:
    import shutil

    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            os.remove(path)


def holds_files(path: str | os.PathLike) -> bool:
    """Whether local folder `path` holds anything but a run's lock and partial files (what an
    export or a conversion, which write a whole folder, refuse to write into)."""
    path = os.fspath(path)
    return os.path.isdir(path) and any(name != LOCK_FILE and not is_partial(name) for name in os.listdir(path))


@contextlib.contextmanager
def atomic_folder(path: str | os.PathLike, replace: bool = False) -> Iterator[str]:
    """The rule above for a whole folder (an export: files that only make sense together). Yields
    the folder to write, beside `path` under its partial name; when the block ends without an error
    it becomes `path`, when it raises it is removed. `path` must be missing or hold nothing but a
    lock and partial files (a `UserError` naming it otherwise), unless `replace`: then the previous
    folder is replaced once the new one is complete, never before. Partial folders that killed
    runs left beside `path` are removed first. A path with a scheme (gs://...) is written in place:
    object stores cannot rename folders.
    """
    path = os.fspath(path).rstrip("/") or "/"
    if is_url(path):
        if not replace and files_for(path).glob(os.path.join(path, "*")):
            raise UserError(f"{path} is not empty: write into a new or empty folder")
        yield path
        return
    if os.path.exists(path) and not os.path.isdir(path):
        raise UserError(f"{path} is a file, not a folder")
    if not replace and holds_files(path):
        raise UserError(f"{path} is not empty: write into a new or empty folder")
    parent, base = os.path.split(os.path.abspath(path))
    for name in os.listdir(parent) if os.path.isdir(parent) else ():
        if name.startswith(base) and name[len(base):].split(PARTIAL_SUFFIX)[0] in ("", ".old") \
                and is_partial(name) and _dead_partial(name):
            _remove(os.path.join(parent, name))
    staging = partial_path(path)
    try:
        yield staging
    except BaseException:
        _remove(staging)
        raise
    if not os.path.exists(path):
        os.rename(staging, path)
    elif replace:
        old = partial_path(path + ".old")
        os.rename(path, old)
        os.rename(staging, path)
        _remove(old)
    else:  # an empty folder, e.g. one a tool holds the lock of
        for name in os.listdir(path):
            if is_partial(name):
                _remove(os.path.join(path, name))
        for name in os.listdir(staging):
            os.rename(os.path.join(staging, name), os.path.join(path, name))
        os.rmdir(staging)
