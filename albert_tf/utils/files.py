"""The one rule, for every tool, for writing files, finding them, reading their compression and
preparing an output folder.

- **Written aside, then renamed.** A file is written as `<path>.incomplete-<pid>` and renamed to
  `path` only when complete; on an error the partial file is removed. A reader (another worker, a
  rerun, a later tool) never sees half a file, and a killed run leaves only `*.incomplete-*`
  files, which `remove_partials` clears: `atomic_path`, `atomic_open`, `write_json`, `PartialFile`;
  a whole folder (an export) the same way: `atomic_folder`.
- **Globs.** `expand_patterns("a/*.txt,b.txt")`: comma-separated globs, each one's matches sorted,
  in the order given; folders are not matches; a glob that matches nothing is an error naming it.
- **Compression from the name.** `.gz`/`.gzip` is gzip, `.bz2` bzip2, `.xz` xz, anything else
  none: `compression_of`, `tfrecord_compression`, `open_decompressed`.
- **Output folders.** `prepare_output_dir(path)`: created if missing, refused in one line naming
  the flag when it is a file, cannot be created, or cannot be written (or, for a tool that writes a
  whole folder, holds files other than a killed run's partial ones).
- **One run a folder.** `locked_run_folder(path)`: every tool that writes a run folder holds its
  lock (`.run.lock`: pid and host, `flock`) while it runs; a second run is refused in one line
  naming the holder, a killed holder's lock is taken over, and a failed run leaves the folder as
  it found it unless its partial work is worth keeping.

Local paths go through `os`; a path with a scheme (gs://, s3://, ...) through TensorFlow's
`tf.io.gfile`, imported only then, so that the data-prep workers and the Beam pipeline stay free of
TensorFlow. A caller may pass its own `fs` object with the same methods as `LocalFiles` (the
Beam pipeline passes Apache Beam's FileSystems).

Example:
    >>> prepare_output_dir("runs/a")
    >>> write_json("runs/a/result.json", {"loss": 1.5})
    >>> with atomic_open("runs/a/predictions.tsv", "w") as f:
    ...     f.write("index\\tprediction\\n")
"""

from __future__ import annotations

import bz2
import contextlib
import errno
import glob as glob_module
import gzip
import json
import lzma
import os
from collections.abc import Iterator, Sequence
from typing import BinaryIO, Callable

from albert_tf.utils.cluster import cluster_task
from albert_tf.utils.errors import FlagError, UserError, reason

PARTIAL_SUFFIX = ".incomplete"
COMPRESSION_SUFFIXES = {".gz": "gzip", ".gzip": "gzip", ".bz2": "bz2", ".xz": "xz"}
_OPENERS = {"gzip": gzip.open, "bz2": bz2.open, "xz": lzma.open}


def is_url(path: str | os.PathLike) -> bool:
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


def files_for(path: str | os.PathLike, urls: Callable[[], object] | None = None):
    """The filesystem of `path`: local files, or for a URL `urls()` (default: TensorFlow's gfile)."""
    if not is_url(path):
        return LOCAL
    return urls() if urls is not None else GFiles()


# ---- written aside, then renamed ------------------------------------------------------------------


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


# ---- globs -----------------------------------------------------------------------------------------


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


# ---- compression from the name ---------------------------------------------------------------------


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


# ---- output folders --------------------------------------------------------------------------------


def prepare_output_dir(
    path: str | os.PathLike, flag: str = "output_dir", fs=None, create: bool = True, empty: bool = False
) -> None:
    """Makes `path` a folder this process can write, or raises a FlagError of one line naming `--flag`:
    it is a file, it cannot be created (a part of it is a file, no permission), or it cannot be
    written (read-only, no permission); with `empty`, it holds something (for tools that write a
    whole folder, never into another one). An existing local folder is tested by writing a file in it.

    With `create=False` nothing is made: a missing folder is only checked to be creatable (its
    nearest existing parent is a folder this process may write), so that a tool can refuse a bad
    flag at once and still leave nothing behind when it fails later on other input.
    """
    path = os.fspath(path)
    fs = fs or files_for(path)
    if fs.exists(path) and not fs.isdir(path):
        raise FlagError(f"--{flag} {path} is a file, not a folder")
    if empty and fs.isdir(path) and (fs.glob(os.path.join(path, "*")) if is_url(path) else holds_files(path)):
        raise FlagError(f"--{flag} {path} is not empty")
    if is_url(path):
        if create:
            try:
                fs.makedirs(path)
            except Exception as error:  # gfile's and Beam's errors are not all OSErrors
                raise FlagError(f"--{flag} {path} cannot be created ({reason(error)})") from None
        return  # an object store has no folder permissions to test without writing an object
    if not os.path.isdir(path):
        parent = os.path.dirname(os.path.abspath(path))
        while not os.path.exists(parent):
            parent = os.path.dirname(parent)
        if not os.path.isdir(parent):
            raise FlagError(f"--{flag} {path} cannot be created (a part of the path is a file)")
        if not os.access(parent, os.W_OK | os.X_OK):
            why = "Read-only file system" if _read_only(parent) else "Permission denied"
            raise FlagError(f"--{flag} {path} cannot be created ({why}: {parent} is not writable)")
        if not create:
            return
        try:
            os.makedirs(path, exist_ok=True)
        except OSError as error:
            raise FlagError(f"--{flag} {path} cannot be created ({_os_reason(error)})") from None
    probe = os.path.join(path, f".write-test{PARTIAL_SUFFIX}-{os.getpid()}")
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        return
    except OSError as error:
        raise FlagError(f"--{flag} {path} is not writable ({_os_reason(error)})") from None
    os.remove(probe)


def _read_only(path: str) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):
        return False


def _os_reason(error: OSError) -> str:
    if error.errno == errno.ENOTDIR:
        return "a part of the path is a file"
    return error.strerror or str(error)


# ---- one run a folder ------------------------------------------------------------------------------

LOCK_FILE = ".run.lock"
_held_locks: dict[str, int] = {}  # real path of a folder -> how many blocks of this process hold it


def _cluster_follower() -> bool:
    """Whether this process is a worker of a multi-worker cluster (TF_CONFIG) other than the chief:
    the chief (or worker 0 where there is none) locks the shared output folder for all of them."""
    try:
        task = cluster_task()
    except ValueError:  # the strategy names what is wrong with it
        return False
    return task is not None and task.follows


def _lock_holder(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            holder = json.load(f)
        return f"pid {holder['pid']} on host {holder['host']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "a process that has not yet written its pid"


def _recorded_holder_alive(lock_path: str, host: str) -> bool:
    try:
        with open(lock_path, encoding="utf-8") as f:
            holder = json.load(f)
        pid = int(holder["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return False
    if holder.get("host") != host or pid == os.getpid():
        return holder.get("host") != host  # another host's pid cannot be checked from here
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def locked_run_folder(
    path: str | os.PathLike, flag: str = "output_dir", keep_on_failure: Callable[[str], bool] | None = None
) -> Iterator[str]:
    """Makes `path` (a local folder) if missing and holds its lock for the block: one run a folder.

    The lock is `<path>/.run.lock`, recording the holder's pid and host, held with `flock`, which
    the kernel drops when the holder dies: a lock left by a killed run (on this host, or on
    another one sharing the folder over NFS) is taken over, never a live one. A second run is
    refused with one line naming the holder's pid and host (exit code 1). The lock is removed when
    the block ends. A process that holds the lock already (a tool calling another) re-enters it;
    the workers of a multi-worker cluster other than the chief leave it to the chief. A folder
    with a scheme (gs://...) has no lock: object stores have no `flock`.

    When the block raises and `keep_on_failure(path)` is not true (default: nothing is kept), what
    the block added to the folder is removed, and the folder itself if the block made it: a
    refused or failed run leaves the folder as it found it. A tool whose partial work is worth
    keeping (checkpoints, complete shards) says so with `keep_on_failure`.
    """
    import fcntl
    import shutil
    import socket

    path = os.fspath(path)
    if is_url(path) or _cluster_follower():
        yield path
        return
    real = os.path.realpath(path)
    if _held_locks.get(real):
        _held_locks[real] += 1
        try:
            yield path
        finally:
            _held_locks[real] -= 1
        return
    created = not os.path.isdir(path)
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as error:
        raise FlagError(f"--{flag} {path} cannot be created ({_os_reason(error)})") from None
    before = set(os.listdir(path))
    lock_path = os.path.join(path, LOCK_FILE)
    while True:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            busy = False
        except BlockingIOError:
            busy = True
        except OSError:  # a filesystem without flock: the recorded pid, where it is of this host, decides
            busy = _recorded_holder_alive(lock_path, socket.gethostname())
        if busy:
            os.close(fd)
            if created:
                with contextlib.suppress(OSError):
                    os.rmdir(path)
            raise UserError(
                f"--{flag} {path} is in use by another run ({_lock_holder(lock_path)}): wait for it to "
                f"finish, or use another --{flag}"
            ) from None
        try:
            same_file = os.path.samestat(os.fstat(fd), os.stat(lock_path))
        except FileNotFoundError:
            same_file = False
        if same_file:  # else the holder removed it between our open and flock: take the new one
            break
        os.close(fd)
    record = json.dumps({"pid": os.getpid(), "host": socket.gethostname()}).encode("utf-8")
    os.ftruncate(fd, 0)
    os.pwrite(fd, record + b"\n", 0)
    _held_locks[real] = 1
    try:
        yield path
    except BaseException:
        if not (keep_on_failure and keep_on_failure(path)):
            for name in set(os.listdir(path)) - before - {LOCK_FILE}:
                target = os.path.join(path, name)
                if os.path.isdir(target) and not os.path.islink(target):
                    shutil.rmtree(target, ignore_errors=True)
                else:
                    with contextlib.suppress(OSError):
                        os.remove(target)
        raise
    finally:
        del _held_locks[real]
        with contextlib.suppress(OSError):
            os.remove(lock_path)
        os.close(fd)
        if created:
            with contextlib.suppress(OSError):
                os.rmdir(path)  # only when empty: a refused or failed run that made it leaves nothing
