"""Shared test fixtures: the real data folder and quiet TensorFlow logs."""

import os
import pathlib

import albert_tf  # noqa: F401 (first: TensorFlow's C++ start-up lines are kept out of the test output)
import pytest

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]


def pytest_configure(config):
    # The tests compare float32 results to 1e-5 and below; on an NVIDIA GPU from Ampere on,
    # TensorFlow and XLA would otherwise run float32 matmuls in TensorFloat-32 (10-bit mantissa).
    import tensorflow as tf

    tf.config.experimental.enable_tensor_float_32_execution(False)


def pytest_collection_modifyitems(config, items):
    """Leaves out the `measure` tests (a figure over the full data that takes many minutes, such as
    int8 SQuAD answers on 200 dev questions) unless `-m` names them: `python -m pytest -q -m measure`."""
    if "measure" in (config.option.markexpr or ""):
        return
    measured = [item for item in items if item.get_closest_marker("measure")]
    if measured:
        config.hook.pytest_deselected(items=measured)
        items[:] = [item for item in items if not item.get_closest_marker("measure")]


SMALL_DATA_DIR = REPO_ROOT / "tests" / "fixtures" / "data"
REQUIRE_DATA = "ALBERT_REQUIRE_DATA"


def shared_data_dir() -> pathlib.Path:
    """The full data: ../shared/data from the repository root, or the folder named by ALBERT_DATA_DIR.

    A fresh clone has neither: the tests that need it are then skipped with the reason, unless
    ALBERT_REQUIRE_DATA=1 (set by .ci/run), which turns the skip into a failure.
    """
    path = pathlib.Path(os.environ.get("ALBERT_DATA_DIR", REPO_ROOT.parent / "shared" / "data"))
    if not path.is_dir():
        reason = f"needs the full data at {path} (set ALBERT_DATA_DIR to the shared data folder)"
        if os.environ.get(REQUIRE_DATA) == "1":
            pytest.fail(f"{reason}; {REQUIRE_DATA}=1 requires it")
        pytest.skip(reason)
    return path


@pytest.fixture(scope="session")
def data_dir() -> pathlib.Path:
    """The full data folder (GLUE, SQuAD, RACE, corpora, albert/30k-clean.model); skip or fail without it."""
    return shared_data_dir()


@pytest.fixture(scope="session")
def small_data_dir() -> pathlib.Path:
    """Small real data carried in tests/fixtures/data, in the full folder's layout (SOURCES.md there)."""
    return SMALL_DATA_DIR
