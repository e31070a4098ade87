"""Importing albert_tf keeps TensorFlow's C++ start-up lines (cuInit, oneDNN, CPU features) from the
user of the library and of the test command (issue 30 item 8), unless the user set
TF_CPP_MIN_LOG_LEVEL to see them."""

import os
import re
import subprocess
import sys

from tests.conftest import REPO_ROOT

# A C++ log line ("I0000 00:00:17... cudart_stub.cc:31] ...", "E0000 ... failed call to cuInit")
# and the lines the issue names.
TENSORFLOW_LINES = re.compile(r"^[IWEF]\d{4} |absl::InitializeLog|oneDNN|cuInit|AVX", re.MULTILINE)

USE = """
import numpy as np
import albert_tf
config = albert_tf.AlbertConfig(vocab_size=50, embedding_size=8, hidden_size=16, num_hidden_layers=1,
                                num_attention_heads=2, intermediate_size=32, max_position_embeddings=16)
encoder = albert_tf.AlbertEncoder(config)
ids = np.array([[1, 2, 3, 4]], np.int32)
outputs = encoder({"input_ids": ids, "input_mask": np.ones_like(ids), "segment_ids": np.zeros_like(ids)})
print(tuple(outputs["sequence_output"].shape))
"""


def _python(*args, **env):
    clean = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    result = subprocess.run([sys.executable, *args], cwd=REPO_ROOT, env=dict(clean, **env),
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    return result


def test_import_and_use_print_no_tensorflow_lines():
    result = _python("-c", USE + "import os; print(os.environ['TF_CPP_MIN_LOG_LEVEL'])")
    assert result.stdout.split() == ["(1,", "4,", "16)", "2"]
    assert not TENSORFLOW_LINES.search(result.stderr), result.stderr


def test_a_users_log_level_is_respected():
    result = _python("-c", USE + "import os; print(os.environ['TF_CPP_MIN_LOG_LEVEL'])", TF_CPP_MIN_LOG_LEVEL="0")
    assert result.stdout.split()[-1] == "0"
    assert TENSORFLOW_LINES.search(result.stderr), result.stderr


def test_the_test_command_prints_no_tensorflow_lines():
    # conftest loads TensorFlow for every test run; a test without a model keeps this one short.
    result = _python("-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_import_graph.py")
    assert re.search(r"^\d+ passed", result.stdout, re.MULTILINE), result.stdout
    assert not TENSORFLOW_LINES.search(result.stdout + result.stderr), result.stdout + result.stderr
