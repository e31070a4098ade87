"""docs/quickstart.ipynb runs from top to bottom (issue 30, item 9): executed with nbclient on a
tiny preset (configs/albert_tiny.json, random weights, the release's vocabulary) and a few SST-2
rows, through the environment variables its first cell reads."""


import pytest

from tests.conftest import REPO_ROOT, SMALL_DATA_DIR

NOTEBOOK = REPO_ROOT / "docs" / "quickstart.ipynb"


@pytest.fixture(scope="module")
def tiny_preset(tmp_path_factory):
    from albert_tf import AlbertConfig, AlbertEncoder

    encoder = AlbertEncoder(AlbertConfig.from_json_file(REPO_ROOT / "configs" / "albert_tiny.json"))
    folder = tmp_path_factory.mktemp("preset") / "albert_tiny"
    encoder.save_to_preset(folder, SMALL_DATA_DIR / "albert" / "30k-clean.model")
    return folder


def _text(cell) -> str:
    return "".join(output.text for output in cell.outputs if output.output_type == "stream")


def test_the_saved_notebook_holds_the_outputs_of_a_run():
    import nbformat

    notebook = nbformat.read(NOTEBOOK, as_version=4)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert [cell.execution_count for cell in code] == list(range(1, len(code) + 1)), \
        "cells not run in order from a fresh kernel: run the notebook top to bottom and save it"
    assert "SavedModel and Keras model agree" in "".join(_text(cell) for cell in code)


@pytest.mark.slow  # about 60 s of CPU: a kernel loading TensorFlow, a fit, an export
def test_the_notebook_runs_from_a_preset_to_the_served_answers(tiny_preset, tmp_path, monkeypatch):
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.read(NOTEBOOK, as_version=4)
    for name, value in {"PRESET": tiny_preset, "GLUE_DIR": SMALL_DATA_DIR / "glue", "TRAIN_ROWS": 32,
                        "EVAL_ROWS": 16, "EPOCHS": 1, "SEQUENCE_LENGTH": 32, "OUTPUT_DIR": tmp_path}.items():
        monkeypatch.setenv(f"QUICKSTART_{name}", str(value))
    # The kernel inherits this process's environment (PYTHONPATH: the repository under test).
    NotebookClient(notebook, timeout=240, kernel_name="python3",
                   resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()
    printed = "\n".join(_text(cell) for cell in notebook.cells if cell.cell_type == "code")
    assert f"preset {tiny_preset}; 32 training rows, 16 dev rows, 1 epochs, 32 tokens" in printed
    assert "32 training rows, positive share" in printed and "16 dev rows" in printed
    assert "dev accuracy on 16 rows: " in printed
    # The notebook checks that the SavedModel's probabilities are the Keras model's (to 1e-5).
    assert f"SavedModel and Keras model agree; exported to {tmp_path / 'sst2'}" in printed
    assert (tmp_path / "sst2" / "saved_model.pb").is_file()
