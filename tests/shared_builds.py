"""Folders built once per test session and shared by every module that reads them.

A module-scoped fixture builds once per module; a trained run or an export that several modules
read alike (a fine-tuned SQuAD run, a small pretrained model) would be built once in each. Here it is
built once in the whole run of the suite: under pytest-xdist by whichever worker asks first, while
another worker asking for it waits on its lock and then reads the same folder.

A shared folder is read-only for its users: a test that writes into a run (resumes it, exports into
its folder) copies it first (`copy_of`). A build that fails leaves no mark: the next module to ask
builds it again (and fails in its own test, naming the error).

Example:
    >>> @pytest.fixture(scope="module")
    ... def squad_run(tmp_path_factory):
    ...     return shared_build(tmp_path_factory, "squad_v1_run", lambda folder: _train(folder))
"""

from __future__ import annotations

import fcntl
import os
import pathlib
import shutil
from typing import Callable


def _shared_root(tmp_path_factory) -> pathlib.Path:
    # Under pytest-xdist each worker has its own base temp (…/pytest-N/popen-gwK); their parent is
    # the run's, common to every worker of this session and to no other session.
    base = tmp_path_factory.getbasetemp()
    root = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "shared_builds"
    root.mkdir(exist_ok=True)
    return root


def shared_build(tmp_path_factory, name: str, build: Callable[[pathlib.Path], object]) -> pathlib.Path:
    """The folder `name`, made by `build(folder)` the first time any module of this session asks
    for it; every later call (in any worker) returns the same folder, built."""
    root = _shared_root(tmp_path_factory)
    folder, done = root / name, root / f"{name}.done"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, also if the build raises
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)  # a failed build's leftovers
            folder.mkdir()
            build(folder)
            done.touch()
    return folder


def copy_of(folder: pathlib.Path, destination: pathlib.Path) -> pathlib.Path:
    """A private copy of a shared folder, for a test that writes into it."""
    shutil.copytree(folder, destination)
    return destination
