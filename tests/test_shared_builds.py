"""tests/shared_builds.py: a folder shared by the modules of a session is built once, whichever
process asks first, and a failed build is made again by the next caller."""

import multiprocessing
import os

import pytest

from tests.shared_builds import copy_of, shared_build


class _Factory:
    """What shared_build reads of pytest's tmp_path_factory: the worker's base temp."""

    def __init__(self, base):
        self.base = base

    def getbasetemp(self):
        return self.base


def _build(folder):
    # Slow enough that a second process asks while the first is building.
    with open(folder.parent / "builds.log", "a") as log:
        log.write(f"{os.getpid()}\n")
    (folder / "weights").write_text("trained")


def _ask(session, worker, queue):
    os.environ["PYTEST_XDIST_WORKER"] = worker
    base = session / f"popen-{worker}"
    base.mkdir(exist_ok=True)
    folder = shared_build(_Factory(base), "run", _build)
    queue.put((str(folder), (folder / "weights").read_text()))


def test_two_workers_share_one_build(tmp_path):
    queue = multiprocessing.get_context("fork").Queue()
    workers = [multiprocessing.get_context("fork").Process(target=_ask, args=(tmp_path, f"gw{i}", queue))
               for i in range(3)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
        assert worker.exitcode == 0
    answers = {queue.get(timeout=5) for _ in workers}
    assert answers == {(str(tmp_path / "shared_builds" / "run"), "trained")}
    assert len((tmp_path / "shared_builds" / "builds.log").read_text().split()) == 1


def test_a_failed_build_is_made_again_and_a_copy_is_private(tmp_path, monkeypatch):
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    factory = _Factory(tmp_path)

    def fails(folder):
        (folder / "half").write_text("")
        raise RuntimeError("out of memory")

    with pytest.raises(RuntimeError, match="out of memory"):
        shared_build(factory, "run", fails)
    folder = shared_build(factory, "run", _build)
    assert sorted(p.name for p in folder.iterdir()) == ["weights"]  # the failed build's file is gone
    assert shared_build(factory, "run", fails) == folder  # built: not made again
    mine = copy_of(folder, tmp_path / "mine")
    (mine / "weights").write_text("changed")
    assert (folder / "weights").read_text() == "trained"
