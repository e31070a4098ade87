"""Shared test fixtures: the real data folder and quiet TensorFlow logs."""

import os
import pathlib
import sys

import pytest

from tests.caller_environment import set_aside_the_callers_settings

# First, before TensorFlow loads: the package's, the Hub's and Keras' settings of the caller's shell
# (a user's cache, offline switch, TPU, cluster, Keras backend) set aside.
set_aside_the_callers_settings()

from albert_tf.utils.quiet import quiet_tensorflow, set_tensorflow_log_level, settle_tensorflow_load  # noqa: E402
# Hooks: -n's settings, where xdist runs.
from tests.xdist_settings import pytest_cmdline_main, pytest_xdist_auto_num_workers  # noqa: F401
from tests.xdist_settings import THREAD_SETTINGS, tensorflow_threads_per_worker  # noqa: E402

# A worker's TensorFlow on its share of the cores, before its runtime starts.
tensorflow_threads_per_worker()

# Then, before TensorFlow loads: the tests run with the log level the tools give TensorFlow, whatever
# the caller's shell exported (TF_CPP_MIN_LOG_LEVEL=3 is common), so that this process, the warm
# Pythons it starts (tests/warm_python.py) and the commands they run as a new process would all
# load TensorFlow alike; and its C++ start-up lines are kept out of the test output. A test process
# is the package's own: TensorFlow loads in it settled, as in a console script (albert_tf.utils.quiet).
set_tensorflow_log_level(override=True)
quiet_tensorflow()
settle_tensorflow_load()

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]


def torch_on_one_thread() -> None:
    """PyTorch (the parity tests' peer: Hugging Face's models, the reference optimizers), where it is
    loaded, on one thread: beside TensorFlow's pool on the two shared cores, its OpenMP pool spent its
    time spinning (test_hf_qa_pipeline and test_hf_heads: 66.7 s of CPU with it, 53.8 s on one
    thread; a step of the 2-layer model 0.5 s instead of 20 ms). Each test process asks before every
    test; a child that imports tests.finetune.hf_tasks, as that module loads."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.get_num_threads() != 1:
        torch.set_num_threads(1)


def pytest_runtest_setup(item):
    torch_on_one_thread()


def pytest_configure(config):
    if config.getoption("numprocesses", None) and not hasattr(config, "workerinput"):
        return  # pytest-xdist's controller runs no test: only its workers load TensorFlow
    # The tests compare float32 results to 1e-5 and below; on an NVIDIA GPU from Ampere on,
    # TensorFlow and XLA would otherwise run float32 matmuls in TensorFloat-32 (10-bit mantissa).
    import tensorflow as tf

    tf.config.experimental.enable_tensor_float_32_execution(False)


# The modules that keep a worker longest, slowest first: each over 25 s of one worker in a full run
# of the README's test command on 2 cores (`--junitxml` holds every test's seconds; measure again
# when a module grows). tests/xdist_settings.py has pytest-xdist hand out whole modules (`--dist
# loadscope`), so a module's fixtures are built once, in this order: the long modules start first and
# the workers end on short ones, together, instead of one running a long module alone at the end.
# Modules not named keep their order, after these.
SLOWEST_MODULES = (
    "albert_tf/training/test_training.py", "test_readme_demo.py", "albert_tf/serving/test_litert.py",
    "albert_tf/training/test_worker_faults.py", "test_docs.py", "finetune/test_squad_cli.py",
    "finetune/test_layer.py", "finetune/test_update_parity.py", "finetune/test_glue_cli.py",
    "albert_tf/serving/test_export.py", "albert_tf/cli/test_quiet_cli.py",
    "albert_tf/presets/test_releases.py", "albert_tf/serving/test_hf_qa_pipeline.py", "test_faults.py",
    "albert_tf/training/test_xla_and_mixed_precision.py", "albert_tf/models/test_model_harness.py",
    "albert_tf/serving/test_task_exports.py", "finetune/test_ner_cli.py", "data_prep/test_record_order.py",
    "albert_tf/presets/test_model_sources.py", "finetune/test_race_task.py",
    "albert_tf/tasks/test_entity_recognizer.py", "data_prep/test_dask_runner.py", "test_resume_flags.py",
)


def pytest_collection_modifyitems(config, items):
    """Runs the slowest modules first (SLOWEST_MODULES), each module's tests together and in their
    order; leaves out the `measure` tests (a figure over the full data that takes many minutes, such
    as int8 SQuAD answers on 200 dev questions) unless `-m` names them: `python -m pytest -q -m measure`."""
    rank = {REPO_ROOT / "tests" / name: i for i, name in enumerate(SLOWEST_MODULES)}
    items.sort(key=lambda item: rank.get(item.path, len(rank)))  # stable: the rest keep their order
    if "measure" in (config.option.markexpr or ""):
        return
    measured = [item for item in items if item.get_closest_marker("measure")]
    if measured:
        config.hook.pytest_deselected(items=measured)
        items[:] = [item for item in items if not item.get_closest_marker("measure")]


SMALL_DATA_DIR = REPO_ROOT / "tests" / "fixtures" / "data"
REQUIRE_DATA = "ALBERT_REQUIRE_DATA"


def shared_data_dir() -> pathlib.Path:
    """The full data: ../shared/data from the repository root, or the folder named by ALBERT_DATA_DIR.

    A fresh clone has neither: the tests that need it are then skipped with the reason, unless
    ALBERT_REQUIRE_DATA=1 (set by .ci/run), which turns the skip into a failure.
    """
    path = pathlib.Path(os.environ.get("ALBERT_DATA_DIR", REPO_ROOT.parent / "shared" / "data"))
    if not path.is_dir():
        reason = f"needs the full data at {path} (set ALBERT_DATA_DIR to the shared data folder)"
        if os.environ.get(REQUIRE_DATA) == "1":
            pytest.fail(f"{reason}; {REQUIRE_DATA}=1 requires it")
        pytest.skip(reason)
    return path


@pytest.fixture(scope="session")
def data_dir() -> pathlib.Path:
    """The full data folder (GLUE, SQuAD, RACE, corpora, albert/30k-clean.model); skip or fail without it."""
    return shared_data_dir()


@pytest.fixture(scope="session")
def small_data_dir() -> pathlib.Path:
    """Small real data carried in tests/fixtures/data, in the full folder's layout (SOURCES.md there)."""
    return SMALL_DATA_DIR


@pytest.fixture(scope="session")
def fresh_process(tmp_path_factory):
    """A warm Python without this package (`tests.warm_python.WarmPython`): it has imported only
    tensorflow and tensorflow_text, its children have nothing of the tests' environment but PATH and
    a worker's TensorFlow threads (tests/xdist_settings.py);
    `fresh_process.script(path, *argv)` is what the script printed. One per test worker, shared by
    every test that serves a SavedModel where this package is not (each script checks that)."""
    from tests.warm_python import WarmPython

    # Keras' folder is the suite's (tests/caller_environment.py), not the keras.json of the user's home.
    clean = {"TF_CPP_MIN_LOG_LEVEL": "3", "PATH": "/usr/bin:/bin", "KERAS_HOME": os.environ["KERAS_HOME"],
             **{name: os.environ[name] for name in THREAD_SETTINGS if name in os.environ}}
    warm = WarmPython(tmp_path_factory.mktemp("fresh_process"), clean, preload=("tensorflow", "tensorflow_text"))
    yield warm
    warm.close()


@pytest.fixture(scope="session")
def warm_python(tmp_path_factory):
    """Child Pythons with TensorFlow loaded already (`tests.warm_python.WarmPython`): one warm
    process per test worker forks them; its socket is also in the environment, for command lines."""
    from tests.warm_python import WarmPython

    warm = WarmPython(tmp_path_factory.mktemp("warm_python"), shell=True)
    yield warm
    warm.close()


@pytest.fixture(scope="session")
def multi_worker_python(tmp_path_factory):
    """A warm Python for `albert-pretrain --strategy=multi_worker`, which sets TensorFlow's log
    level to 3 before loading it (a child that does not fails: tests.warm_python.LOAD_TIME_ENV)."""
    from tests.warm_python import WarmPython

    warm = WarmPython(tmp_path_factory.mktemp("multi_worker_python"), {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    yield warm
    warm.close()
