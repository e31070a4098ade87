"""A run's scalars: written as TensorBoard event files (`<output_dir>/train`, `<output_dir>/eval`),
read back from them, and printed as one line.

The event files are the run's record: a resumed run appends to the same folders, so reading them
gives the whole run (`albert_tf.training.curves` plots it). `tensorboard --logdir <output_dir>` shows them
(the `tensorboard` extra installs it).

Example:
    >>> writer = summary_writer(options, is_chief=True, name="train")
    >>> write_scalars(writer, {"loss": 2.5}, step=100)
    >>> read_scalars("runs/a/train")["loss"]
    [(100, 2.5)]
"""

from __future__ import annotations

import os

import numpy as np
import tensorflow as tf
from absl import logging
from google.protobuf import message
from tensorflow.core.framework import summary_pb2, types_pb2
from tensorflow.core.util import event_pb2

from albert_tf.utils.errors import reason
from albert_tf.data.tfrecord import read_records

# TensorBoard's scalar plugin metadata, written by hand: tf.summary.scalar lives in the tensorboard
# package, which is not a dependency, while tf.summary.write is TensorFlow's own.
_SCALAR_METADATA = summary_pb2.SummaryMetadata(
    plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars")
).SerializeToString()


def write_scalars(writer, metrics: dict[str, float], step: int):
    """Writes `metrics` as TensorBoard scalars at `step`."""
    with writer.as_default(step=step):
        for name, value in metrics.items():
            tf.summary.write(name, tf.constant(value, tf.float32), metadata=_SCALAR_METADATA)


def summary_writer(options, is_chief, name):
    """A summary writer for `<output_dir>/<name>` on the chief; a no-op writer on other workers."""
    if not is_chief:
        return tf.summary.create_noop_writer()
    return tf.summary.create_file_writer(os.path.join(options.output_dir, name))


def read_scalars(folder: str) -> dict[str, list[tuple[int, float]]]:
    """Every scalar of the event files in `folder`, by name: `(step, value)` pairs in step order.

    Read in the order they were written: a point at a step at or before the last one kept (a run
    resumed from an earlier checkpoint redoing the steps after it, an evaluation repeated at the
    same step) replaces the points from that step on, as TensorBoard drops a restarted run's
    orphans. No folder, or no event file, gives {}. An event file that cannot be read (damaged
    inside, unreadable) is left out with a warning naming it: these are a record to look at,
    never a reason to fail the run that reads them.
    """
    points = []  # (wall time, order read, tag, step, value)
    for path in sorted(tf.io.gfile.glob(os.path.join(folder, "events.out.tfevents.*"))):
        try:
            events = _read_events(path)
        except (ValueError, OSError, tf.errors.OpError, message.DecodeError) as error:
            logging.warning("event file %s cannot be read (%s): its scalars are left out", path, reason(error))
            continue
        for event in events:
            for value in event.summary.value:
                number = _scalar(value)
                if number is not None:
                    points.append((event.wall_time, len(points), value.tag, int(event.step), number))
    series: dict[str, dict[int, float]] = {}
    for _, _, tag, step, number in sorted(points):
        kept = series.setdefault(tag, {})
        if kept and step <= next(reversed(kept)):
            kept = series[tag] = {s: v for s, v in kept.items() if s < step}
        kept[step] = number
    return {tag: sorted(kept.items()) for tag, kept in series.items()}


def _read_events(path: str) -> list:
    # Read in Python (one event a scalar: a long run's thousands cost tf.data seconds), up to a
    # record that a killed run left half-written.
    with tf.io.gfile.GFile(path, "rb") as f:
        return [event_pb2.Event.FromString(record) for record in read_records(f, cut_short_ok=True)]


def _scalar(value) -> float | None:
    """The number of a summary value: a float32 scalar tensor (what `write_scalars` and
    tf.summary.scalar write) or a TF1 `simple_value`; None for anything else (images, text)."""
    if value.HasField("tensor"):
        tensor = value.tensor
        if tensor.dtype != types_pb2.DT_FLOAT or tensor.tensor_shape.dim:
            return None
        return float(np.frombuffer(tensor.tensor_content, np.float32)[0] if tensor.tensor_content
                     else tensor.float_val[0])
    return float(value.simple_value) if value.HasField("simple_value") else None


def train_summary(metrics: dict[str, float], step: int) -> str:
    """The training part of a run's summary line: "train <metrics>" of its last steps, or, for a
    rerun that found its --num_train_steps reached already, that it trained nothing and how to go on."""
    if metrics:
        return "train " + format_metrics(metrics)
    return f"no step left (--num_train_steps={step} reached before; a larger one trains on)"


def format_metrics(metrics: dict[str, float]) -> str:
    """`name value` pairs; a learning rate keeps 3 significant digits (3e-05, not 0.0000), a count
    (`examples`) is an integer."""

    def value(name, v):
        if name == "examples":
            return f"{name} {v:.0f}"
        if name == "examples_per_second":
            return f"{v:.1f} ex/s"
        if name == "learning_rate":
            return f"{name} {v:.3g}"
        return f"{name} {v:.4f}"

    return " ".join(value(k, v) for k, v in metrics.items())
