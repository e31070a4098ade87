"""Output folders: `prepare_output_dir(path)` makes `path` a folder this process can write, or
refuses it in one line naming the flag when it is a file, cannot be created, or cannot be written
(or, for a tool that writes a whole folder, holds files other than a killed run's partial ones).

Example:
    >>> prepare_output_dir("runs/a")
"""

from __future__ import annotations

import os

from albert_tf.utils.atomic import PARTIAL_SUFFIX, holds_files
from albert_tf.utils.errors import FlagError, os_reason, reason
from albert_tf.utils.files import files_for, is_url


def prepare_output_dir(
    path: str | os.PathLike, flag: str = "output_dir", fs=None, create: bool = True, empty: bool = False,
    argument: str | None = None,
) -> None:
    """Makes `path` a folder this process can write, or raises a FlagError of one line naming `--flag`:
    it is a file, it cannot be created (a part of it is a file, no permission), or it cannot be
    written (read-only, no permission); with `empty`, it holds something (for tools that write a
    whole folder, never into another one). An existing local folder is tested by writing a file in it.

    With `create=False` nothing is made: a missing folder is only checked to be creatable (its
    nearest existing parent is a folder this process may write), so that a tool can refuse a bad
    flag at once and still leave nothing behind when it fails later on other input.

    A library call names its `argument` (`save_to_preset`'s `preset_dir`) in place of `--flag`, which
    its caller never gave.
    """
    named = argument or f"--{flag}"
    path = os.fspath(path)
    fs = fs or files_for(path)
    if fs.exists(path) and not fs.isdir(path):
        raise FlagError(f"{named} {path} is a file, not a folder")
    if empty and fs.isdir(path) and (fs.glob(os.path.join(path, "*")) if is_url(path) else holds_files(path)):
        raise FlagError(f"{named} {path} is not empty")
    if is_url(path):
        if create:
            try:
                fs.makedirs(path)
            except Exception as error:  # gfile's and Beam's errors are not all OSErrors
                raise FlagError(f"{named} {path} cannot be created ({reason(error)})") from None
        return  # an object store has no folder permissions to test without writing an object
    if not os.path.isdir(path):
        parent = os.path.dirname(os.path.abspath(path))
        while not os.path.exists(parent):
            parent = os.path.dirname(parent)
        if not os.path.isdir(parent):
            raise FlagError(f"{named} {path} cannot be created (a part of the path is a file)")
        if not os.access(parent, os.W_OK | os.X_OK):
            why = "Read-only file system" if _read_only(parent) else "Permission denied"
            raise FlagError(f"{named} {path} cannot be created ({why}: {parent} is not writable)")
        if not create:
            return
        try:
            os.makedirs(path, exist_ok=True)
        except OSError as error:
            raise FlagError(f"{named} {path} cannot be created ({os_reason(error)})") from None
    probe = os.path.join(path, f".write-test{PARTIAL_SUFFIX}-{os.getpid()}")
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        return
    except OSError as error:
        raise FlagError(f"{named} {path} is not writable ({os_reason(error)})") from None
    os.remove(probe)


def _read_only(path: str) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):
        return False
