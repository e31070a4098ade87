"""Which filesystem a path is on, and the one interface every tool's file operations go through.

Local paths go through `os`; a path with a scheme (gs://, s3://, ram://, ...) through TensorFlow's
`tf.io.gfile`, imported only then, so that the data-prep workers and the Beam pipeline stay free of
TensorFlow. A caller may pass its own `fs` object with the same methods as `LocalFiles` (the Beam
pipeline passes Apache Beam's FileSystems).

The rules built on it live one a module beside it: files written aside and renamed (`atomic`),
globs (`patterns`), compression from the name (`compression`), output folders (`output_dirs`) and
one run a folder (`locks`).

Example:
    >>> files_for("gs://bucket/run").exists("gs://bucket/run/config.json")
"""

from __future__ import annotations

import contextlib
import glob as glob_module
import os
from typing import Callable


def is_url(path: str | os.PathLike) -> bool:
    """Whether `path` names a filesystem by its scheme (gs://, s3://, ram://, ...) rather than a local path."""
    return "://" in os.fspath(path)


class LocalFiles:
    """Local files through `os`: the interface every `fs` argument here has."""

    def open(self, path: str, mode: str = "rb", **kwargs):
        return open(path, mode, **kwargs)

    def rename(self, source: str, target: str) -> None:
        os.replace(source, target)

    def remove(self, path: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def isdir(self, path: str) -> bool:
        return os.path.isdir(path)

    def makedirs(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)

    def glob(self, pattern: str) -> list[str]:
        return [m for m in glob_module.glob(os.path.expanduser(pattern)) if not os.path.isdir(m)]


class GFiles:
    """Files on any filesystem TensorFlow knows (gs://, s3://, hdfs://, ...), through `tf.io.gfile`."""

    def __init__(self):
        import tensorflow as tf

        self._gfile = tf.io.gfile

    def open(self, path: str, mode: str = "rb", **kwargs):
        return self._gfile.GFile(path, mode)

    def rename(self, source: str, target: str) -> None:
        self._gfile.rename(source, target, overwrite=True)

    def remove(self, path: str) -> None:
        if self._gfile.exists(path):
            self._gfile.remove(path)

    def exists(self, path: str) -> bool:
        return self._gfile.exists(path)

    def isdir(self, path: str) -> bool:
        return self._gfile.isdir(path)

    def makedirs(self, path: str) -> None:
        self._gfile.makedirs(path)

    def glob(self, pattern: str) -> list[str]:
        return [m for m in self._gfile.glob(pattern) if not self._gfile.isdir(m)]


LOCAL = LocalFiles()


# TensorFlow's in-memory filesystem: only TensorFlow, in this process, knows it (no Beam, no worker).
TENSORFLOW_ONLY = ("ram://",)


def files_for(path: str | os.PathLike, urls: Callable[[], object] | None = None):
    """The filesystem of `path`: local files, or for a URL `urls()` (default, and always for a
    filesystem only TensorFlow knows: TensorFlow's gfile)."""
    if not is_url(path):
        return LOCAL
    if urls is None or os.fspath(path).startswith(TENSORFLOW_ONLY):
        return GFiles()
    return urls()
