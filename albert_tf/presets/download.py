"""Downloads into the cache: a progress bar, resumed after an interruption, checked, one at a time.

The cache is `ALBERT_TF_HOME` (default `~/.cache/albert_tf`). A download is written to
`<target>.download` and renamed once complete (and, where a sha256 was given, checked), so a killed
download resumes where it stopped (an HTTP Range request) and a finished file is never partial. A
lock file per target makes a second process wait for the first (saying so once) and then use its
file. A network that gives less than `MIN_BYTES` in `ALBERT_TF_TIMEOUT` seconds (default 20) fails,
so a dead or dripping connection fails within seconds instead of hanging; the bar moves as bytes
arrive. `ALBERT_TF_OFFLINE=1` never touches the network. A URL with a user name or password is
refused, and the password is never printed.

http(s) goes through urllib; any other scheme (gs://, ...) through tf.io.gfile.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import socket
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

from albert_tf.utils.errors import UserError, reason

CHUNK = 1 << 16  # the most one read waits for: a slow connection still moves the bar
MIN_BYTES = 1 << 16  # what a connection must give in ALBERT_TF_TIMEOUT seconds
PARTIAL_SUFFIX = ".download"
HINT = ("to use a local copy, pass its path instead: the tarball, its unpacked folder or a converted "
        "preset folder (docs/presets.md)")


def home() -> str:
    """The cache folder: ALBERT_TF_HOME, or ~/.cache/albert_tf."""
    return os.environ.get("ALBERT_TF_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "albert_tf")


def offline() -> bool:
    return os.environ.get("ALBERT_TF_OFFLINE", "").lower() in ("1", "true", "yes")


def timeout() -> float:
    """ALBERT_TF_TIMEOUT in seconds (default 20): a positive number (0 would make sockets non-blocking)."""
    value = os.environ.get("ALBERT_TF_TIMEOUT", "20")
    try:
        seconds = float(value)
    except ValueError:
        seconds = None
    if seconds is None or not 0 < seconds < float("inf"):
        raise UserError(f"ALBERT_TF_TIMEOUT={value!r} is not a number of seconds above 0 (unset, it is 20)",
                        exit_code=2)
    return seconds


def without_password(url: str) -> str:
    """`url` with its password (if any) shown as `***`."""
    parts = urllib.parse.urlsplit(url)
    if parts.password is None:
        return url
    netloc = f"{parts.username}:***@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


def check_url(url: str) -> None:
    """Refuses a URL with a user name or password: it would be kept in the cache's names and echoed in
    messages, and urllib does not send it anyway."""
    parts = urllib.parse.urlsplit(url)
    if parts.username is not None or parts.password is not None:
        raise UserError(f"{without_password(url)}: a URL with a user name or password is not supported; "
                        "download the file yourself and pass its path (the tarball, its unpacked folder or a "
                        "converted preset folder)")


def split_checksum(url: str) -> tuple[str, str | None]:
    """`url#sha256=<hex>` -> (url, hex); pip's form of a pinned download."""
    base, _, fragment = url.partition("#")
    if not fragment:
        return url, None
    key, _, value = fragment.partition("=")
    if key != "sha256" or len(value) != 64 or any(c not in "0123456789abcdef" for c in value.lower()):
        raise UserError(f"{without_password(url)}: the part after '#' must be sha256=<64 hex digits>")
    return base, value.lower()


def cache_write_error(path: str, error: OSError) -> UserError:
    """The one line for the disk refusing a write of `path` in the cache (a full disk, a read-only
    or misplaced ALBERT_TF_HOME): a local fault, not a download failing."""
    return UserError(f"cannot write {path} in the cache ({reason(error)}); free space or set "
                     f"ALBERT_TF_HOME to a writable folder (now {home()})")


@contextlib.contextmanager
def writing_in_cache(path: str):
    """Names `path` and the cache in one line when the disk refuses a write there."""
    try:
        yield
    except OSError as error:
        raise cache_write_error(path, error) from None


@contextlib.contextmanager
def locked(path: str):
    """Holds an exclusive lock on `path` (a lock file) for the block; another process waits. The
    file is removed when the block ends, however it ends (a failed download leaves no lock in the
    cache); a waiter that then holds the lock of the removed file takes a new one."""
    waited = False
    while True:
        with writing_in_cache(path):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            handle = open(path, "a")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not waited:
                print(f"waiting for another process to finish its download or conversion into the cache ({path})",
                      file=sys.stderr, flush=True)
                waited = True
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            current = os.path.samestat(os.fstat(handle.fileno()), os.stat(path))
        except FileNotFoundError:
            current = False
        if current:
            break
        handle.close()  # its holder removed it between this open and flock
    with handle:
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                os.remove(path)  # before unlocking: a waiter then sees its file gone
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
    check_url(url)
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
    if isinstance(error, urllib.error.HTTPError):  # a redirect loop's reason is three lines
        return f"HTTP {error.code} {' '.join(str(error.reason).split())}"
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
            _copy(response.read1, f, bar)
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
        _copy(source.read, f, bar)


def _copy(read, file, bar) -> None:
    """`read(CHUNK)` into `file` until the end; a connection giving less than MIN_BYTES in a window of
    ALBERT_TF_TIMEOUT seconds fails (each read's own timeout never ends a drip of a byte at a time)."""
    window = timeout()
    started, got = time.monotonic(), 0
    while chunk := read(CHUNK):
        file.write(chunk)
        bar.update(len(chunk))
        got += len(chunk)
        if got >= MIN_BYTES:
            started, got = time.monotonic(), 0
        elif time.monotonic() - started > window:
            raise ConnectionError(f"less than {MIN_BYTES // 1024} KiB in {window:g} s: the connection is too slow or "
                                  "stalled; rerun to resume (ALBERT_TF_TIMEOUT sets the seconds)")
