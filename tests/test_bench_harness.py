"""bench/harness.py, what the bench and experiments scripts share: the data folder, interleaved
timing in rotating order, medians and tables."""

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


def test_interleaved_times_rotate_the_systems_and_keep_every_row(harness):
    order = []
    calls = {(row, name): (lambda row=row, name=name: order.append((row, name)))
             for row in ("forward", "train") for name in ("a", "b", "c")}
    del calls["train", "c"]  # a system may leave out a row
    times = harness.interleaved_times(calls, repeats=3)
    assert set(times) == set(calls) and all(len(seconds) == 3 for seconds in times.values())
    assert order == [
        ("forward", "a"), ("forward", "b"), ("forward", "c"), ("train", "a"), ("train", "b"),
        ("forward", "b"), ("forward", "c"), ("forward", "a"), ("train", "b"), ("train", "a"),
        ("forward", "c"), ("forward", "a"), ("forward", "b"), ("train", "a"), ("train", "b"),
    ]


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
