"""albert_tf sets Keras' backend to TensorFlow before Keras loads, and refuses a Keras loaded on
another (albert_tf.utils.backend; a new process with KERAS_BACKEND=jax is in test_config.py)."""

import sys
import types

import pytest

from albert_tf.utils.backend import use_tensorflow_backend


@pytest.mark.parametrize("exported", [None, "jax", "torch", "tensorflow"])
def test_before_keras_loads_the_backend_becomes_tensorflow(exported, monkeypatch):
    monkeypatch.delitem(sys.modules, "keras", raising=False)
    environ = {} if exported is None else {"KERAS_BACKEND": exported}
    use_tensorflow_backend(environ)
    assert environ == {"KERAS_BACKEND": "tensorflow"}


def test_a_keras_loaded_on_another_backend_is_one_line_saying_what_to_do(monkeypatch):
    # What keras.config.backend() answers in a process that loaded Keras with KERAS_BACKEND=torch.
    loaded = types.SimpleNamespace(config=types.SimpleNamespace(backend=lambda: "torch"))
    monkeypatch.setitem(sys.modules, "keras", loaded)
    environ = {"KERAS_BACKEND": "torch"}
    with pytest.raises(ImportError) as refused:
        use_tensorflow_backend(environ)
    assert str(refused.value) == (
        "albert_tf runs on Keras' tensorflow backend, and Keras has loaded with 'torch' (KERAS_BACKEND='torch'): "
        "import albert_tf before keras, or set KERAS_BACKEND=tensorflow")
    assert environ == {"KERAS_BACKEND": "torch"}  # nothing changed


def test_the_tensorflow_keras_of_this_process_is_accepted():
    import keras

    environ = {}
    use_tensorflow_backend(environ)  # Keras loaded (by the tests' TensorFlow), on tensorflow: nothing to do
    assert keras.config.backend() == "tensorflow" and environ == {}
    assert keras.config.floatx() == "float32"  # not a user's keras.json (tests/caller_environment.py)
