"""The check every layer and model of albert_tf must pass: its config rebuilds it exactly."""

import keras
import numpy as np


def _flat(outputs):
    if isinstance(outputs, dict):
        return [np.asarray(outputs[k], np.float32) for k in sorted(outputs) if not isinstance(outputs[k], list)]
    return [np.asarray(outputs, np.float32)]


def assert_config_round_trip(layer, call):
    """`from_config(get_config())` with the same weights gives identical outputs and config."""
    expected = _flat(call(layer))
    clone = type(layer).from_config(layer.get_config())
    call(clone)  # builds the clone's variables
    assert len(clone.weights) == len(layer.weights)
    clone.set_weights(layer.get_weights())
    assert clone.get_config() == layer.get_config()
    assert clone.dtype_policy.name == layer.dtype_policy.name
    for got, want in zip(_flat(call(clone)), expected):
        np.testing.assert_array_equal(got, want)
    return clone


def assert_keras_file_round_trip(model, call, path):
    """A `.keras` save and load gives identical outputs."""
    expected = _flat(call(model))
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert type(loaded) is type(model)
    for got, want in zip(_flat(call(loaded)), expected):
        np.testing.assert_array_equal(got, want)
