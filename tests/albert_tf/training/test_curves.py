"""curves.png (issue 30 item 5): the series it draws are the run's event files' values, a resumed
run's redone steps replace the abandoned ones, a run without evaluation still plots, and the file
is a PNG of a sensible size."""

import struct
import sys

import pytest
import tensorflow as tf

from albert_tf.training import curves
from albert_tf.training import summaries


class _Options:
    def __init__(self, output_dir):
        self.output_dir = str(output_dir)


def _write(output_dir, kind, points):
    """Writes `{step: {name: value}}` as the loop writes them, into `<output_dir>/<kind>`, and
    closes the writer (a later call makes a new event file, as a resumed run does)."""
    writer = summaries.summary_writer(_Options(output_dir), True, kind)
    for step, metrics in points.items():
        summaries.write_scalars(writer, metrics, step)
    writer.close()


def _png_size(path):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_the_series_are_the_event_files_values_and_a_resume_replaces_what_it_redid(tmp_path):
    # A pretraining run killed after logging step 30 but saved at step 20; the rerun redoes 30, 40.
    _write(tmp_path, "train", {10: {"loss": 5.0, "mlm_accuracy": 0.125, "learning_rate": 1e-3, "examples_per_second": 9.0},
                               20: {"loss": 4.0, "mlm_accuracy": 0.25, "learning_rate": 2e-3, "examples_per_second": 9.0},
                               30: {"loss": 3.5, "mlm_accuracy": 0.375, "learning_rate": 1e-3, "examples_per_second": 9.0}})
    _write(tmp_path, "eval", {20: {"loss": 4.5, "mlm_accuracy": 0.0625, "examples": 24.0}})
    _write(tmp_path, "train", {30: {"loss": 3.25, "mlm_accuracy": 0.5, "learning_rate": 1e-3},
                               40: {"loss": 3.0, "mlm_accuracy": 0.75, "learning_rate": 0.0}})
    _write(tmp_path, "eval", {40: {"loss": 3.5, "mlm_accuracy": 0.5, "examples": 24.0}})

    series = curves.curve_series(str(tmp_path))
    assert list(series) == ["loss", "accuracy and metrics", "learning rate"]
    assert series["loss"] == {"train loss": [(10, 5.0), (20, 4.0), (30, 3.25), (40, 3.0)],
                              "eval loss": [(20, 4.5), (40, 3.5)]}
    assert series["accuracy and metrics"] == {"train mlm_accuracy": [(10, 0.125), (20, 0.25), (30, 0.5), (40, 0.75)],
                                              "eval mlm_accuracy": [(20, 0.0625), (40, 0.5)]}
    learning_rates = series["learning rate"]["train learning_rate"]
    assert [s for s, _ in learning_rates] == [10, 20, 30, 40]
    assert [v for _, v in learning_rates] == pytest.approx([1e-3, 2e-3, 1e-3, 0.0])  # float32 in the files
    # Counts and throughput are TensorBoard's, not the picture's.
    assert not any("examples" in label for panel in series.values() for label in panel)

    path = curves.plot_curves(str(tmp_path))
    assert path == str(tmp_path / "curves.png")
    width, height = _png_size(tmp_path / "curves.png")
    assert (width, height) == (800, 3 * 260)  # 8 inches wide, 2.6 a panel, at 100 dpi
    assert 10_000 < (tmp_path / "curves.png").stat().st_size < 1_000_000
    assert not list(tmp_path.glob("*.incomplete*"))


def test_a_fine_tuning_run_without_evaluation_still_plots(tmp_path):
    _write(tmp_path, "train", {2: {"loss": 0.7, "learning_rate": 2e-5}, 4: {"loss": 0.6, "learning_rate": 0.0}})
    series = curves.curve_series(str(tmp_path))
    assert series == {"loss": {"train loss": [(2, pytest.approx(0.7)), (4, pytest.approx(0.6))]},
                      "learning rate": {"train learning_rate": [(2, pytest.approx(2e-5)), (4, 0.0)]}}
    curves.plot_curves(str(tmp_path))
    assert _png_size(tmp_path / "curves.png") == (800, 2 * 260)


def test_a_task_metric_of_a_split_goes_with_the_metrics_and_its_loss_with_the_losses(tmp_path):
    _write(tmp_path, "train", {8: {"loss": 0.69, "accuracy": 0.5, "learning_rate": 1e-5}})
    _write(tmp_path, "eval", {8: {"dev/accuracy": 0.625, "dev/f1": 0.5, "dev/loss": 0.7}})
    series = curves.curve_series(str(tmp_path))
    assert set(series["loss"]) == {"train loss", "eval dev/loss"}
    assert series["accuracy and metrics"] == {"train accuracy": [(8, 0.5)], "eval dev/accuracy": [(8, 0.625)],
                                              "eval dev/f1": [(8, 0.5)]}


def test_no_event_files_no_picture(tmp_path):
    assert curves.curve_series(str(tmp_path)) == {}
    assert curves.plot_curves(str(tmp_path)) is None
    assert not (tmp_path / "curves.png").exists()
    assert tf.io.gfile.listdir(str(tmp_path)) == []


def test_an_event_file_cut_short_by_a_kill_gives_its_whole_records(tmp_path):
    _write(tmp_path, "train", {1: {"loss": 2.0}, 2: {"loss": 1.5}, 3: {"loss": 1.25}})
    (events,) = (tmp_path / "train").glob("events.out.tfevents.*")
    events.write_bytes(events.read_bytes()[:-3])  # the last record's footer half-written
    assert summaries.read_scalars(str(tmp_path / "train")) == {"loss": [(1, 2.0), (2, 1.5)]}


def _damage(events):
    """Flips a byte of the first record's length: its CRC then fails (`bad TFRecord length CRC`)."""
    data = bytearray(events.read_bytes())
    data[0] ^= 0xFF
    events.write_bytes(bytes(data))


@pytest.mark.faults
def test_a_damaged_event_file_is_left_out_naming_it_and_the_run_ends_well(tmp_path, monkeypatch, capfd):
    """Issue 40 item 3: a damaged event file of an earlier run failed every later run at its very end
    (exit 1, `bad TFRecord length CRC`, no file named), after the training had been done."""
    from absl import logging as absl_logging

    from albert_tf.cli import pretrain
    from albert_tf.utils import quiet
    from tests.albert_tf.tiny import TINY
    from tests.helpers import PRETRAINING_PREDICTIONS, PRETRAINING_SEQ, write_pretraining_records

    out = tmp_path / "run"
    _write(out, "train", {1: {"loss": 9.0}})  # an earlier run's record, then damaged
    (events,) = (out / "train").glob("events.out.tfevents.*")
    _damage(events)
    config = tmp_path / "tiny.json"
    TINY.to_json_file(config)
    records = write_pretraining_records(tmp_path / "train.tfrecord", 8)
    monkeypatch.setattr(sys, "argv", [
        "albert-pretrain", f"--input_file={records}", f"--output_dir={out}", f"--albert_config_file={config}",
        f"--max_seq_length={PRETRAINING_SEQ}", f"--max_predictions_per_seq={PRETRAINING_PREDICTIONS}",
        "--train_batch_size=4", "--num_train_steps=2", "--nojit_compile", "--noprogress_bar"])
    monkeypatch.setattr(quiet, "_verbose_flag", [False])
    monkeypatch.setattr(absl_logging.get_absl_handler().python_handler, "stream", sys.stderr)  # capfd's
    with pytest.raises(SystemExit) as exited:
        pretrain.run()
    captured = capfd.readouterr()
    assert exited.value.code in (None, 0), captured.err
    warnings = [line for line in captured.err.splitlines() if "cannot be read" in line]
    assert len(warnings) == 1 and warnings[0].endswith(
        f"event file {events} cannot be read (bad TFRecord length CRC): its scalars are left out")
    assert "step 2" in captured.out and f"curves {out / 'curves.png'}" in captured.out
    assert _png_size(out / "curves.png")[0] > 0
    assert summaries.read_scalars(str(out / "train"))["loss"][-1][0] == 2  # this run's points are drawn
    assert events.exists()  # the record itself is left as it was


@pytest.mark.faults
def test_a_picture_that_cannot_be_written_is_a_warning(tmp_path, monkeypatch, caplog):
    _write(tmp_path, "train", {1: {"loss": 2.0}})

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device", str(tmp_path / "curves.png"))

    monkeypatch.setattr(curves, "atomic_open", full)
    assert curves.plot_curves(str(tmp_path)) is None
    assert [r.getMessage() for r in caplog.records if r.levelname == "WARNING"] == [
        f"{tmp_path / 'curves.png'} was not written (No space left on device)"]
    assert not (tmp_path / "curves.png").exists()
