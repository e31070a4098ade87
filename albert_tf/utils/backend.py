"""albert_tf runs on Keras' TensorFlow backend, whatever the caller's shell or `~/.keras/keras.json`
names (a `KERAS_BACKEND=jax` exported for the user's other Keras work).

Keras chooses its backend once, as it loads, from `KERAS_BACKEND` (before keras.json). Importing
`albert_tf` before Keras sets it to `tensorflow` for the process, so the console scripts and a
library user's models run as they should; a Keras already loaded on another backend cannot be
changed, and importing the package then fails in one line that says what to do. The setting is the
process's environment, as TensorFlow's log level is (albert_tf.utils.quiet): a process it starts
inherits it.
"""

from __future__ import annotations

import os
import sys

BACKEND_ENV = "KERAS_BACKEND"
BACKEND = "tensorflow"


def use_tensorflow_backend(environ=os.environ) -> None:
    """Before Keras loads: Keras' backend for this process is TensorFlow. Raises ImportError (one
    line) if Keras has loaded already on another backend."""
    keras = sys.modules.get("keras")
    config = getattr(keras, "config", None)  # None while Keras itself is still loading
    if config is not None:
        loaded = config.backend()
        if loaded != BACKEND:
            raise ImportError(f"albert_tf runs on Keras' {BACKEND} backend, and Keras has loaded with {loaded!r} "
                              f"({BACKEND_ENV}={environ.get(BACKEND_ENV, '')!r}): import albert_tf before keras, or "
                              f"set {BACKEND_ENV}={BACKEND}")
        return
    environ[BACKEND_ENV] = BACKEND
