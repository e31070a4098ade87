"""Compression from the name: `.gz`/`.gzip` is gzip, `.bz2` bzip2, `.xz` xz, anything else none
(`compression_of`, `tfrecord_compression`, `open_decompressed`)."""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
from typing import BinaryIO

from albert_tf.utils.errors import UserError

COMPRESSION_SUFFIXES = {".gz": "gzip", ".gzip": "gzip", ".bz2": "bz2", ".xz": "xz"}
_OPENERS = {"gzip": gzip.open, "bz2": bz2.open, "xz": lzma.open}


def compression_of(path: str | os.PathLike) -> str:
    """"gzip", "bz2", "xz" or "none", from the file name's suffix."""
    return COMPRESSION_SUFFIXES.get(os.path.splitext(os.fspath(path))[1].lower(), "none")


def compression_suffix(compression: str) -> str:
    """The suffix a file written with `compression` ("gzip" or "none") gets."""
    return {"gzip": ".gz", "none": ""}[compression]


def tfrecord_compression(path: str | os.PathLike) -> str:
    """`tf.data.TFRecordDataset`'s compression_type for `path`: "GZIP" or ""."""
    compression = compression_of(path)
    if compression not in ("gzip", "none"):
        raise UserError(f"{os.fspath(path)}: a TFRecord file may be gzip-compressed (.gz) or not, not {compression}")
    return "GZIP" if compression == "gzip" else ""


def open_decompressed(raw: BinaryIO, path: str | os.PathLike) -> BinaryIO:
    """`raw` (the file's bytes), decompressed as the name of `path` says."""
    compression = compression_of(path)
    return raw if compression == "none" else _OPENERS[compression](raw, "rb")


DECOMPRESSION_ERRORS = (EOFError, lzma.LZMAError, gzip.BadGzipFile, OSError)
