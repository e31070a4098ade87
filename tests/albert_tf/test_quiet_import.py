"""Importing albert_tf keeps TensorFlow's C++ start-up lines (cuInit, oneDNN, CPU features) from the
user of the library and of the test command (issue 30 item 8), unless the user set
TF_CPP_MIN_LOG_LEVEL to see them."""

import json
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


# ---- TensorFlow loaded settled in the package's own processes ----------------------------------

HOOK_STATE = ("import sys\n{imports}\nfrom albert_tf.utils.quiet import _TensorFlowImport\n"
              "(hook,) = [f for f in sys.meta_path if isinstance(f, _TensorFlowImport)]\n"
              "print(hook.quiet, hook.settled, 'tensorflow' in sys.modules)\n")


def test_console_scripts_load_tensorflow_settled_and_a_users_process_is_left_as_it_is():
    # Without loading TensorFlow (the hook's work is the test below): a console script's process
    # will load it settled and quiet; a user's process that imports the library, quiet only.
    script = _python("-c", HOOK_STATE.format(imports="import albert_tf.cli.entry_point"))
    assert script.stdout.split() == ["True", "True", "False"]
    user = _python("-c", HOOK_STATE.format(imports="import albert_tf"))
    assert user.stdout.split() == ["True", "False", "False"]


SETTLED_LOAD = """
import gc, json, sys
from albert_tf.utils import quiet

collections, results = [], []
gc.callbacks.append(lambda phase, info: collections.append(info["generation"]) if phase == "start" else None)
for settled in (False, True):
    sys.modules.pop("heavy_import", None)
    hook = quiet._TensorFlowImport()
    hook.module, hook.settled = "heavy_import", settled
    sys.meta_path.insert(0, hook)
    frozen, collections[:] = gc.get_freeze_count(), []
    import heavy_import
    results.append({"hook_left": hook not in sys.meta_path, "collecting": gc.isenabled(),
                    "collections": len(collections), "frozen": gc.get_freeze_count() - frozen})
print(json.dumps(results))
"""


def test_a_settled_load_runs_no_collection_and_freezes_what_it_made(tmp_path):
    # A stand-in for TensorFlow's import: it makes cyclic garbage and objects it keeps, enough for
    # the collector to run many times were it not paused. Settled, both are frozen (60,000 objects
    # of this process's for good: the test process's own import of TensorFlow froze 600,000). In a
    # child of its own: the collector's switch is the process's, and a test worker has other threads
    # (run in the worker, the settled load saw one collection once, in a full run beside a CPU-bound
    # process).
    (tmp_path / "heavy_import.py").write_text(
        "kept = []\nfor i in range(30_000):\n    cycle = [i]\n    cycle.append(cycle)\n    kept.append([i])\n")
    plain, settled = json.loads(_python("-c", SETTLED_LOAD, PYTHONPATH=f"{tmp_path}:{REPO_ROOT}").stdout)
    # Either way the hook loads once, then leaves, and the collector is on again after.
    assert plain["hook_left"] and settled["hook_left"] and plain["collecting"] and settled["collecting"]
    assert plain["collections"] > 0 and plain["frozen"] == 0
    assert settled["collections"] == 0 and settled["frozen"] >= 60_000
