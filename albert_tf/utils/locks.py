"""One run a folder: `locked_run_folder(path)`. Every tool that writes a run folder holds its lock
(`.run.lock`: pid and host, `flock`) while it runs; a second run is refused in one line naming the
holder, a killed holder's lock is taken over, and a failed run leaves the folder as it found it
unless its partial work is worth keeping."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from typing import Callable

from albert_tf.utils.cluster import cluster_task
from albert_tf.utils.errors import FlagError, UserError, os_reason
from albert_tf.utils.files import is_url

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
        raise FlagError(f"--{flag} {path} cannot be created ({os_reason(error)})") from None
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
