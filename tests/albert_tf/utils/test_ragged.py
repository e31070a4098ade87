"""albert_tf.utils.ragged: the same tensors as TensorFlow's ragged ops, in a graph of fewer ops."""

import numpy as np
import pytest
import tensorflow as tf

from albert_tf.utils import ragged

# Rows of every kind: empty ones first, last and in between, a long one beside short ones.
LENGTHS = [[0, 3, 0, 1, 7, 0], [5], [0], [], [2, 2, 2], [1, 0, 0, 9]]


def _ragged(lengths, seed, dtype=tf.int64):
    values = np.random.default_rng(seed).integers(-50, 50, sum(lengths))
    return tf.RaggedTensor.from_row_lengths(tf.constant(values, dtype), tf.constant(lengths, tf.int64))


def _nodes(function, *args):
    graph = tf.function(function, autograph=False).get_concrete_function(*args).graph.as_graph_def()
    return len(graph.node) + sum(len(f.node_def) for f in graph.library.function)


def _contents(tensors):
    """Each tensor of `tensors` (one or a list) as comparable lists: its row splits where ragged,
    its dtype and its values."""
    contents = []
    for t in tensors if isinstance(tensors, list) else [tensors]:
        splits = t.row_splits.numpy().tolist() if isinstance(t, tf.RaggedTensor) else None
        values = t.flat_values if isinstance(t, tf.RaggedTensor) else t
        contents.append((splits, values.dtype, values.numpy().tolist()))
    return contents


@pytest.mark.parametrize("lengths", LENGTHS)
def test_each_is_tensorflows_op_eager_and_traced(lengths):
    rt = _ragged(lengths, 0)
    keep = tf.constant(np.random.default_rng(1).integers(0, 2, len(rt.flat_values)).astype(bool))
    counts = tf.constant(np.random.default_rng(2).integers(0, 4, len(lengths)), tf.int64)
    width = max(lengths, default=0) + 2
    dense = tf.constant(np.arange(len(lengths) * width).reshape(len(lengths), width), tf.int64)
    others = [_ragged(lengths, 3), _ragged([1] * len(lengths), 4), _ragged(lengths[::-1], 5)]
    seconds = [rt + 100, *(other - 100 for other in others)]
    cases = {
        "row_ids": (lambda: ragged.row_ids(rt.row_splits), lambda: rt.value_rowids()),
        "lengths_row_ids": (lambda: ragged.lengths_row_ids(rt.row_lengths()), lambda: rt.value_rowids()),
        "repeat": (lambda: ragged.repeat(tf.range(len(lengths), dtype=tf.int64) * 10, counts),
                   lambda: tf.repeat(tf.range(len(lengths), dtype=tf.int64) * 10, counts)),
        "from_value_rowids": (lambda: ragged.from_value_rowids(rt.flat_values, rt.value_rowids(), len(lengths)),
                              lambda: rt),
        "from_tensor": (lambda: ragged.from_tensor(dense, rt.row_lengths()),
                        lambda: tf.RaggedTensor.from_tensor(dense, lengths=rt.row_lengths())),
        "boolean_mask": (lambda: ragged.boolean_mask(rt, keep),
                         lambda: tf.ragged.boolean_mask(rt, rt.with_flat_values(keep))),
        "masked": (lambda: ragged.masked(keep, rt.flat_values, tf.strings.as_string(rt.flat_values)),
                   lambda: [tf.boolean_mask(rt.flat_values, keep),
                            tf.boolean_mask(tf.strings.as_string(rt.flat_values), keep)]),
        "concat_rows": (lambda: ragged.concat_rows([rt, *others], seconds),
                        lambda: [tf.concat([rt, *others], axis=1), tf.concat(seconds, axis=1)]),
    }
    for name, (ours, theirs) in cases.items():
        assert _contents(ours()) == _contents(theirs()), name
        assert _contents(tf.function(ours)()) == _contents(tf.function(theirs)()), name


def test_fewer_ops_than_tensorflows():
    spec = tf.RaggedTensorSpec([None, None], tf.int64, row_splits_dtype=tf.int64)
    columns = lambda x: ([x, x + 1, x], [x - 1, x, x + 2], [x, x, x])  # noqa: E731
    pairs = {
        "row_ids": (lambda x: ragged.row_ids(x.row_splits), lambda x: x.value_rowids()),
        "repeat": (lambda x: ragged.repeat(x.row_lengths(), x.row_lengths()),
                   lambda x: tf.repeat(x.row_lengths(), x.row_lengths())),
        "boolean_mask": (lambda x: ragged.boolean_mask(x, x.flat_values > 0).flat_values,
                         lambda x: tf.ragged.boolean_mask(x, x.with_flat_values(x.flat_values > 0)).flat_values),
        "concat_rows, three columns": (
            lambda x: [c.flat_values for c in ragged.concat_rows(*columns(x))],
            lambda x: [tf.concat(c, axis=1).flat_values for c in columns(x)]),
        "from_row_lengths": (lambda x: ragged.from_row_lengths(x.flat_values, x.row_lengths()).flat_values,
                             lambda x: tf.RaggedTensor.from_row_lengths(x.flat_values, x.row_lengths()).flat_values),
    }
    counts = {name: (_nodes(ours, spec), _nodes(theirs, spec)) for name, (ours, theirs) in pairs.items()}
    assert all(ours < theirs * 0.7 for ours, theirs in counts.values()), counts
