"""Downloads into the cache: a progress bar, resumed after an interruption, checked, one at a time.

The cache is `ALBERT_TF_HOME` (default `~/.cache/albert_tf`). A download is written to
`<target>.download` and renamed once complete (and, where a sha256 was given, checked), so a killed
download resumes where it stopped (an HTTP Range request) and a finished file is never partial. A
lock file per target makes a second process wait for the first and then use its file. Network reads
time out after `ALBERT_TF_TIMEOUT` seconds (default 20), so a dead network fails within seconds
instead of hanging; `ALBERT_TF_OFFLINE=1` never touches the network.

http(s) goes through urllib; any other scheme (gs://, ...) through tf.io.gfile.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import socket
import sys
import urllib.error
import urllib.parse
import urllib.request

from albert_tf.errors import UserError, reason

CHUNK = 1 << 20
PARTIAL_SUFFIX = ".download"
HINT = ("to use a local copy, pass its path instead: the tarball, its unpacked folder or a converted "
        "preset folder (docs/presets.md)")


def home() -> str:
    """The cache folder: ALBERT_TF_HOME, or ~/.cache/albert_tf."""
    return os.environ.get("ALBERT_TF_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "albert_tf")


def offline() -> bool:
    return os.environ.get("ALBERT_TF_OFFLINE", "").lower() in ("1", "true", "yes")


def timeout() -> float:
    return float(os.environ.get("ALBERT_TF_TIMEOUT", "20"))


def split_checksum(url: str) -> tuple[str, str | None]:
    """`url#sha256=<hex>` -> (url, hex); pip's form of a pinned download."""
    base, _, fragment = url.partition("#")
    if not fragment:
        return url, None
    key, _, value = fragment.partition("=")
    if key != "sha256" or len(value) != 64 or any(c not in "0123456789abcdef" for c in value.lower()):
        raise UserError(f"{url}: the part after '#' must be sha256=<64 hex digits>")
    return base, value.lower()


@contextlib.contextmanager
def writing_in_cache(path: str):
    """Names `path` and the cache in one line when the disk refuses a write there (a full disk, a
    read-only or misplaced ALBERT_TF_HOME): a local fault, not a download failing."""
    try:
        yield
    except OSError as error:
        raise UserError(f"cannot write {path} in the cache ({reason(error)}); free space or set "
                        f"ALBERT_TF_HOME to a writable folder (now {home()})") from None


@contextlib.contextmanager
def locked(path: str):
    """Holds an exclusive lock on `path` (a lock file) for the block; another process waits."""
    with writing_in_cache(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        handle = open(path, "a")
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def sha256_of(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def fetch(url: str, target: str, sha256: str | None = None, progress: bool = True) -> str:
    """Downloads `url` to `target` unless it is there already; resumes a partial download; checks
    `sha256` before the file takes its name (a mismatch removes it). Call under `locked`."""
    if os.path.isfile(target):
        return target
    if offline():
        raise UserError(f"ALBERT_TF_OFFLINE is set and {url} is not in the cache ({home()}); {HINT}")
    partial = target + PARTIAL_SUFFIX
    with writing_in_cache(target):
        os.makedirs(os.path.dirname(target), exist_ok=True)
    scheme = urllib.parse.urlparse(url).scheme
    try:
        (_fetch_http if scheme in ("http", "https") else _fetch_gfile)(url, partial, progress)
    except UserError:
        raise
    except (urllib.error.URLError, socket.timeout, ConnectionError, OSError) as error:
        raise UserError(f"could not download {url} ({_why(error)}); {HINT}") from None
    except Exception as error:  # tf.io.gfile's errors (gs:// and other filesystems)
        if type(error).__module__.startswith("tensorflow"):
            raise UserError(f"could not download {url} ({reason(error)}); {HINT}") from None
        raise
    if sha256 is not None:
        found = sha256_of(partial)
        if found != sha256:
            os.remove(partial)
            raise UserError(f"{url}: sha256 {found} is not the {sha256} asked for; the download was removed "
                            "and nothing was cached")
    os.replace(partial, target)
    return target


def _why(error: BaseException) -> str:
    if isinstance(error, urllib.error.HTTPError):
        return f"HTTP {error.code} {error.reason}"
    if isinstance(error, urllib.error.URLError):
        return reason(error.reason) if isinstance(error.reason, BaseException) else str(error.reason)
    if isinstance(error, socket.timeout):
        return f"no answer within {timeout():g} s"
    return reason(error)


def _bar(total: int | None, initial: int, url: str, progress: bool):
    from tqdm import tqdm

    name = os.path.basename(urllib.parse.urlparse(url).path) or url
    return tqdm(total=total, initial=initial, unit="B", unit_scale=True, unit_divisor=1024, desc=name,
                disable=not progress, file=sys.stderr, dynamic_ncols=True)


class _PartialFile:
    """The download's file, whose write errors are the cache's (`writing_in_cache`), not the network's."""

    def __init__(self, path: str, have: int):
        self.path = path
        with writing_in_cache(path):
            self.file = open(path, "ab" if have else "wb")

    def write(self, chunk: bytes):
        with writing_in_cache(self.path):
            self.file.write(chunk)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        with writing_in_cache(self.path):
            self.file.close()


def _fetch_http(url: str, partial: str, progress: bool) -> None:
    have = os.path.getsize(partial) if os.path.isfile(partial) else 0
    headers = {"User-Agent": "albert_tf"}
    if have:
        headers["Range"] = f"bytes={have}-"
    try:
        response = urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout())
    except urllib.error.HTTPError as error:
        if error.code == 416 and have:  # the partial file is already whole
            return
        raise
    with response:
        if have and response.status != 206:  # the server ignores Range: start again
            have = 0
        length = response.headers.get("Content-Length")
        total = have + int(length) if length is not None else None
        with _PartialFile(partial, have) as f, _bar(total, have, url, progress) as bar:
            while chunk := response.read(CHUNK):
                f.write(chunk)
                bar.update(len(chunk))
        if total is not None and os.path.getsize(partial) != total:
            raise ConnectionError(f"the connection closed after {os.path.getsize(partial)} of {total} bytes; "
                                  "rerun to resume")


def _fetch_gfile(url: str, partial: str, progress: bool) -> None:
    import tensorflow as tf

    have = os.path.getsize(partial) if os.path.isfile(partial) else 0
    total = tf.io.gfile.stat(url).length
    with tf.io.gfile.GFile(url, "rb") as source, _PartialFile(partial, have) as f, \
            _bar(total, have, url, progress) as bar:
        if have:
            source.seek(have)
        while chunk := source.read(CHUNK):
            f.write(chunk)
            bar.update(len(chunk))
