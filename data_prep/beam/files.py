"""Files on any filesystem Apache Beam knows (gs://, s3://, hdfs://, local), for the local tool and
the Beam pipeline alike: `open_raw`, `model_source` and `BeamFiles`, `albert_tf.utils.files`' filesystem interface. A module
of its own, so that the local tool reads a gs:// input without importing the pipeline.
"""

from __future__ import annotations

import logging

from albert_tf.utils.files import files_for, is_url

# Quiet Beam's import-time notes (no BigQuery client, ...); a remote run turns its log back on.
# The BigQuery one goes to the root logger.
logging.getLogger("apache_beam").setLevel(logging.ERROR)
_root_level = logging.getLogger().level
logging.getLogger().setLevel(logging.ERROR)
try:
    from apache_beam.io.filesystem import CompressionTypes
    from apache_beam.io.filesystems import FileSystems
finally:
    logging.getLogger().setLevel(_root_level)


def open_raw(path: str):
    """The raw bytes of `path` on any filesystem Beam knows (no decompression: documents.py does it)."""
    return FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED)


def model_source(path: str) -> str | bytes:
    """What `AlbertTokenizer` loads `path` from: the path itself where it is local, else its bytes
    read through Beam's filesystems (SentencePiece reads local files only; bytes leave no temporary
    copy behind)."""
    if not is_url(path):
        return path
    with files_for(path, BeamFiles).open(path, "rb") as source:
        return source.read()


class BeamFiles:
    """`albert_tf.utils.files`' filesystem interface (`fs`) on Beam's FileSystems (any filesystem Beam knows)."""

    def open(self, path: str, mode: str = "rb", **kwargs):
        if mode == "rb":
            return open_raw(path)
        if mode == "wb":
            return FileSystems.create(path, compression_type=CompressionTypes.UNCOMPRESSED)
        raise ValueError(f"Beam files open in 'rb' or 'wb' mode, not {mode!r}")

    def rename(self, source: str, target: str) -> None:
        FileSystems.rename([source], [target])

    def remove(self, path: str) -> None:
        if FileSystems.exists(path):
            FileSystems.delete([path])

    def exists(self, path: str) -> bool:
        return FileSystems.exists(path)

    def isdir(self, path: str) -> bool:
        return False  # object stores have no folders: something at the exact name is a file

    def makedirs(self, path: str) -> None:
        if not FileSystems.exists(path):
            FileSystems.mkdirs(path)

    def glob(self, pattern: str) -> list[str]:
        return [m.path for m in FileSystems.match([pattern])[0].metadata_list]
