"""The checks every layer and model of albert_tf must pass, as keras-hub's TestCase.run_*_test:
its config rebuilds it exactly, a `.keras` file gives it back, its outputs stay float32 under
mixed bfloat16, a preset folder gives it back, and a SavedModel of it answers as it does.

tests/albert_tf/models/test_model_harness.py runs them on every model class."""

import keras
import numpy as np
import tensorflow as tf


def _flat(outputs):
    if isinstance(outputs, dict):
        return [np.asarray(outputs[k], np.float32) for k in sorted(outputs) if not isinstance(outputs[k], list)]
    return [np.asarray(outputs, np.float32)]


def _tensors(outputs) -> dict:
    if isinstance(outputs, dict):
        return {k: v for k, v in outputs.items() if not isinstance(v, list)}
    return {"output": outputs}


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


def assert_float32_outputs(outputs):
    """Every floating output is float32 (what a mixed bfloat16 model must give its losses and users)."""
    values = _tensors(outputs)
    assert values
    for name, value in values.items():
        dtype = tf.as_dtype(value.dtype)
        assert not dtype.is_floating or dtype == tf.float32, f"{name} is {dtype.name}"


def assert_preset_round_trip(model, call, save, load):
    """`save(model)` writes a preset folder (albert_tf.presets.folder); `load(folder)` gives a model
    of the same class with identical weights and outputs."""
    expected = _flat(call(model))
    loaded = load(save(model))
    assert type(loaded) is type(model)
    for got, want in zip(loaded.weights, model.weights, strict=True):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want), err_msg=want.path)
    for got, want in zip(_flat(call(loaded)), expected, strict=True):
        np.testing.assert_array_equal(got, want)


def assert_saved_model_round_trip(model, inputs, path, atol=1e-5):
    """A SavedModel of the model's inference call, loaded without its Python classes, gives its outputs."""
    expected = _tensors(model(inputs, training=False))
    signature = {k: tf.TensorSpec([None] * np.ndim(v), tf.as_dtype(np.asarray(v).dtype)) for k, v in inputs.items()}
    archive = keras.export.ExportArchive()
    archive.track(model)
    archive.add_endpoint("serve", lambda features: _tensors(model(features, training=False)),
                         input_signature=[signature])
    archive.write_out(str(path), verbose=False)
    loaded = tf.saved_model.load(str(path))  # kept: its variables live as long as it does
    served = loaded.serve({k: tf.constant(v) for k, v in inputs.items()})
    assert sorted(served) == sorted(expected)
    for name, want in expected.items():
        np.testing.assert_allclose(np.asarray(served[name], np.float64), np.asarray(want, np.float64),
                                   atol=atol, rtol=0, err_msg=name)
