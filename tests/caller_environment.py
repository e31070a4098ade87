"""The suite runs the same whatever the caller's shell exported (issue 53 item 6): the settings a user
of this package, of Keras or of the Hugging Face Hub keeps in their environment are set aside for
the test processes and everything they start, so that no test reads or writes the user's cache,
waits on their TPU or cluster, or runs on another Keras backend.

- `ALBERT_TF_*` (the package's own: `ALBERT_TF_HOME` the download cache, `ALBERT_TF_OFFLINE`,
  `ALBERT_TF_TIMEOUT`, `ALBERT_TF_VERBOSE`): removed, and `ALBERT_TF_HOME` set to a folder of this
  process's own, removed at its exit. A test about one of them sets it itself (monkeypatch).
- `TPU_NAME`, `TF_CONFIG`: the TPU and the cluster the tools would join; removed. The tests need
  not remove any of these themselves.
- `HF_*` and `TRANSFORMERS_OFFLINE` (the Hub's endpoint, cache, token and offline switch, which
  huggingface_hub reads as it loads): removed, and `HF_HOME` set under the private folder above.
- `KERAS_BACKEND`: `tensorflow`, what the package runs on (a shell's `jax` or `torch` is for the
  user's other Keras programs); `KERAS_HOME` under the private folder, so that the user's
  `keras.json` (a `floatx` of float16, another backend) is not read, nor one written in their home.

TensorFlow's log level is given in conftest beside this (`set_tensorflow_log_level(override=True)`).
The test knobs (`ALBERT_DATA_DIR`, `ALBERT_REQUIRE_DATA`) stay the caller's.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

from albert_tf.utils.backend import BACKEND, BACKEND_ENV

PACKAGE_PREFIX = "ALBERT_TF_"
HUB_PREFIX = "HF_"
REMOVED = ("TPU_NAME", "TF_CONFIG", "TRANSFORMERS_OFFLINE")


def set_aside_the_callers_settings(environ=os.environ) -> str:
    """Gives `environ` (this process's, inherited by every process it starts) the suite's values of
    the settings above; returns the private folder (`ALBERT_TF_HOME`, with `HF_HOME` in it)."""
    for name in list(environ):
        if name.startswith((PACKAGE_PREFIX, HUB_PREFIX)) or name in REMOVED:
            del environ[name]
    home = tempfile.mkdtemp(prefix="albert_tf_tests_home_")
    atexit.register(shutil.rmtree, home, ignore_errors=True)
    environ["ALBERT_TF_HOME"] = os.path.join(home, "albert_tf")
    environ["HF_HOME"] = os.path.join(home, "huggingface")
    environ[BACKEND_ENV] = BACKEND
    environ["KERAS_HOME"] = os.path.join(home, "keras")
    return home
