"""bench/harness.py, what the bench and experiments scripts share: the data folder, interleaved
timing in a fresh random order, medians and tables."""

import importlib.util
import pathlib

import pytest

from tests.conftest import REPO_ROOT


@pytest.fixture(scope="module")
def harness():
    spec = importlib.util.spec_from_file_location("harness", REPO_ROOT / "bench" / "harness.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_data_dir_follows_the_environment_as_the_tests_do(harness, monkeypatch, tmp_path):
    monkeypatch.delenv("ALBERT_DATA_DIR", raising=False)
    assert harness.REPO == REPO_ROOT
    assert harness.data_dir() == REPO_ROOT.parent / "shared" / "data"
    monkeypatch.setenv("ALBERT_DATA_DIR", str(tmp_path / "data"))
    assert harness.data_dir() == tmp_path / "data"
    assert harness.reference_dir() == tmp_path / "reference"
    assert harness.spm_model() == tmp_path / "data" / "albert" / "30k-clean.model"


def test_interleaved_times_shuffle_each_round_pause_before_each_call_and_keep_every_row(harness, monkeypatch):
    events = []
    monkeypatch.setattr(harness.time, "sleep", lambda seconds: events.append(("pause", seconds)))
    calls = {(row, name): (lambda row=row, name=name: events.append((row, name)))
             for row in ("forward", "train") for name in ("a", "b", "c")}
    del calls["train", "c"]  # a system may leave out a row
    repeats = 30
    times = harness.interleaved_times(calls, repeats=repeats, pause=0.25, seed=3)
    assert set(times) == set(calls) and all(len(seconds) == repeats for seconds in times.values())
    # A pause of the given length before every call, and nothing else between calls.
    assert events[0::2] == [("pause", 0.25)] * (len(calls) * repeats)
    runs = events[1::2]
    rounds = [runs[i: i + len(calls)] for i in range(0, len(runs), len(calls))]
    forward_orders = [tuple(name for row, name in r if row == "forward") for r in rounds]
    # Each round runs every system of each row once, rows in their order...
    assert all([row for row, _ in r] == ["forward"] * 3 + ["train"] * 2 for r in rounds)
    assert all(sorted(order) == ["a", "b", "c"] for order in forward_orders)
    # ...in a fresh order: all six orders of three systems turn up in 30 rounds, so each system
    # follows each other one (a fixed rotation gives 3 orders, a fixed order 1).
    assert len(set(forward_orders)) == 6
    assert forward_orders == [tuple(name for row, name in r if row == "forward")
                              for r in _rounds(harness, calls, repeats, seed=3)]  # the seed repeats
    assert forward_orders != [tuple(name for row, name in r if row == "forward")
                              for r in _rounds(harness, calls, repeats, seed=4)]


def _rounds(harness, calls, repeats, seed):
    order = []
    recorded = {key: (lambda key=key: order.append(key)) for key in calls}
    harness.interleaved_times(recorded, repeats=repeats, pause=0, seed=seed)
    return [order[i: i + len(calls)] for i in range(0, len(order), len(calls))]


def test_quartiles_are_the_median_and_the_interquartile_range(harness):
    assert harness.quartiles([5.0, 1.0, 3.0, 2.0, 4.0]) == (2.0, 3.0, 4.0)
    assert harness.quartiles([7.0]) == (7.0, 7.0, 7.0)  # --repeats 1


def test_medians_and_table(harness, capsys):
    assert harness.medians({("r", "a"): [3.0, 1.0, 2.0], "b": [4.0, 1.0]}) == {("r", "a"): 2.0, "b": 2.5}
    harness.print_table(["row", "ours"], [["forward", "1.00"], ["train", 2]])
    assert capsys.readouterr().out == "| row | ours |\n|---|---|\n| forward | 1.00 |\n| train | 2 |\n"


def test_only_the_harness_quiets_tensorflow():
    scripts = sorted((REPO_ROOT / "bench").glob("*.py")) + sorted((REPO_ROOT / "experiments").glob("*.py"))
    assert len(scripts) > 20
    for path in scripts:
        text = pathlib.Path(path).read_text()
        assert "sets the TF environment" not in text, path
        assert "os.environ.setdefault(\"TF_CPP_MIN_LOG_LEVEL\"" not in text or path.name == "harness.py", path
