"""`curves.png`: a run's loss, accuracy (or task metric) and learning rate against step, train
and eval, drawn from the run's own event files at the end of training.

Read from `<output_dir>/train` and `<output_dir>/eval` (`albert_tf.training.summaries.read_scalars`), so a
resumed run plots the whole run, not only its last part. One panel a kind of value: losses
(`loss`, `mlm_loss`, a split's `dev/loss`), the other metrics (`mlm_accuracy`, `sop_accuracy`,
a task's `dev/accuracy`, `dev/f1`, ...) and the learning rate; counts and throughput are left to
TensorBoard. Train values are the mean over the updates of each compiled loop, logged at its last
step; eval values are whole evaluations. A picture is never worth a failed run: an event file that
cannot be read is left out, and a PNG that cannot be written is not written, each with a warning
naming the file.

Example:
    >>> plot_curves("runs/demo/model")
    'runs/demo/model/curves.png'
"""

from __future__ import annotations

import logging
import os

from absl import logging as absl_logging

from albert_tf.utils.errors import reason
from albert_tf.utils.atomic import atomic_open
from albert_tf.training.summaries import read_scalars

CURVES_FILE = "curves.png"
PANELS = ("loss", "accuracy and metrics", "learning rate")
# Counts and rates: not curves a reader compares runs by.
_LEFT_OUT = ("examples_per_second", "examples", "skipped_rows")


def _panel(tag: str) -> str | None:
    name = tag.rsplit("/", 1)[-1]
    if name in _LEFT_OUT:
        return None
    if name == "learning_rate":
        return "learning rate"
    return "loss" if name.endswith("loss") else "accuracy and metrics"


def curve_series(output_dir: str) -> dict[str, dict[str, list[tuple[int, float]]]]:
    """The series `curves.png` draws, by panel (those of `PANELS` that have any), each a dict of
    `"<train|eval> <tag>"` to its `(step, value)` points."""
    panels: dict[str, dict[str, list[tuple[int, float]]]] = {}
    for kind in ("train", "eval"):
        for tag, points in read_scalars(os.path.join(output_dir, kind)).items():
            panel = _panel(tag)
            if panel is not None:
                panels.setdefault(panel, {})[f"{kind} {tag}"] = points
    return {panel: panels[panel] for panel in PANELS if panel in panels}


def plot_curves(output_dir: str) -> str | None:
    """Writes `<output_dir>/curves.png` from the run's event files; returns its path (None when no
    scalar was written yet)."""
    series = curve_series(output_dir)
    if not series:
        return None
    # Matplotlib's one-time notices ("building the font cache", a config folder it cannot write)
    # are not the user's business at the end of a run; a level the user set is kept.
    if logging.getLogger("matplotlib").level == logging.NOTSET:
        logging.getLogger("matplotlib").setLevel(logging.ERROR)
    from matplotlib.figure import Figure  # here: only the end of a run draws (and pays the import)

    figure = Figure(figsize=(8, 2.6 * len(series)), dpi=100, layout="constrained")
    axes = figure.subplots(len(series), 1, sharex=True, squeeze=False)[:, 0]
    for ax, (panel, curves) in zip(axes, series.items()):
        for label, points in curves.items():
            steps, values = zip(*points)
            # Evaluations are few: marked, so that one evaluation still shows.
            marker = "o" if label.startswith("eval ") else ("." if len(points) == 1 else None)
            ax.plot(steps, values, label=label, marker=marker, markersize=4,
                    linestyle="--" if label.startswith("eval ") else "-")
        ax.set_ylabel(panel)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small", loc="best")
    axes[-1].set_xlabel("step")
    figure.suptitle(os.path.basename(os.path.normpath(output_dir)) or output_dir)
    path = os.path.join(output_dir, CURVES_FILE)
    try:
        with atomic_open(path, "wb") as f:  # a gs:// folder too
            figure.savefig(f, format="png")
    except OSError as error:  # a full disk: the run's results come first
        absl_logging.warning("%s was not written (%s)", path, error.strerror or reason(error))
        return None
    return path
