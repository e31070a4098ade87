"""Shared test fixtures: the real data folder and quiet TensorFlow logs."""

import os
import pathlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pytest

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]


def pytest_configure(config):
    # The tests compare float32 results to 1e-5 and below; on an NVIDIA GPU from Ampere on,
    # TensorFlow and XLA would otherwise run float32 matmuls in TensorFloat-32 (10-bit mantissa).
    import tensorflow as tf

    tf.config.experimental.enable_tensor_float_32_execution(False)


def shared_data_dir() -> pathlib.Path:
    """../shared/data from the repository root, or the folder named by ALBERT_DATA_DIR."""
    path = pathlib.Path(os.environ.get("ALBERT_DATA_DIR", REPO_ROOT.parent / "shared" / "data"))
    if not path.is_dir():
        pytest.fail(f"real test data not found at {path}: set ALBERT_DATA_DIR to the shared data folder")
    return path


@pytest.fixture(scope="session")
def data_dir() -> pathlib.Path:
    return shared_data_dir()
