"""The suite's own settings (tests/xdist_settings.py): with -n, whole modules per worker in the given
order, and a crashed worker ends the run, reported; without pytest-xdist, plain pytest runs; the
caller's settings of the package, the Hub and Keras set aside (tests/caller_environment.py)."""

import json
import os
import shutil
import subprocess
import sys
import types

from tests.conftest import REPO_ROOT

CRASHING = '''
import os

def test_before():
    pass

def test_crash():
    os.abort()  # as a native fault ends a worker: no Python exception, no report from the worker

def test_after():
    pass
'''

# Written by the controller (the process without `workerinput`) once its options are settled.
REPORT_OPTIONS = '''

def pytest_sessionstart(session):
    import pathlib
    option = session.config.option
    if not hasattr(session.config, "workerinput"):
        values = [getattr(option, name, "absent") for name in ("dist", "loadscopereorder", "maxworkerrestart", "timeout")]
        pathlib.Path(__file__).with_name("options.txt").write_text(" ".join(map(str, values)))
        pathlib.Path(__file__).with_name("workers.txt").write_text(str(len(getattr(option, "tx", None) or [])))
'''


WORKER_ENV = ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID")


def _suite(tmp_path, *tests, report_options=False):
    """A suite of its own in tmp_path: the repository's pyproject.toml, tests/xdist_settings.py as its
    conftest, and the test modules given."""
    shutil.copy(REPO_ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    conftest = (REPO_ROOT / "tests" / "xdist_settings.py").read_text()
    (tmp_path / "conftest.py").write_text(conftest + (REPORT_OPTIONS if report_options else ""))
    for i, text in enumerate(tests):
        (tmp_path / f"test_{i}.py").write_text(text)


def _pytest(tmp_path, *args, env=None):
    # Without what pytest-xdist sets in this worker (the full suite runs these tests in one): the suite of
    # its own is a run of its own.
    env = {k: v for k, v in (os.environ if env is None else env).items() if k not in WORKER_ENV}
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir",
                             str(tmp_path), "-c", str(tmp_path / "pyproject.toml"), *args, str(tmp_path)],
                            cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env)
    return result, result.stdout + result.stderr


def test_a_crashed_worker_ends_the_run_with_its_test_failed(tmp_path):
    """pytest-xdist 3.8 with --dist=loadscope replaces a crashed worker, which runs the crashing
    test again, and can then wait forever (issues #1323, #1378); with --max-worker-restart=0 the
    run ends, the test that crashed failed."""
    _suite(tmp_path, "def test_one():\n    pass\n", CRASHING)
    result, output = _pytest(tmp_path, "-n", "2")
    assert result.returncode == 1, output[-3000:]
    assert "worker 'gw" in output and "crashed while running 'test_1.py::test_crash'" in output, output[-3000:]
    assert "FAILED test_1.py::test_crash" in output
    # One worker went down, and no new one ran the crashing test again (where the hang begins).
    assert output.count("node down: Not properly terminated") == 1, output[-3000:]


def test_with_workers_each_takes_whole_modules_in_the_given_order(tmp_path):
    _suite(tmp_path, "def test_one():\n    pass\n", report_options=True)
    result, output = _pytest(tmp_path, "-n", "2")
    assert result.returncode == 0, output[-3000:]
    assert (tmp_path / "options.txt").read_text() == "loadscope False 0 1800"
    # A --dist or --max-worker-restart given on the command line is kept.
    result, output = _pytest(tmp_path, "-n", "2", "--dist=load", "--max-worker-restart=3", "--timeout=60")
    assert result.returncode == 0, output[-3000:]
    assert (tmp_path / "options.txt").read_text() == "load True 3 60.0"
    # Without -n, nothing is distributed.
    result, output = _pytest(tmp_path)
    assert result.returncode == 0, output[-3000:]
    assert (tmp_path / "options.txt").read_text() == "no True None None"


def test_plain_pytest_runs_without_xdist(tmp_path):
    """`pip install pytest && python -m pytest tests/albert_tf/test_config.py` on a clone: pytest-xdist
    blocked (-p no:xdist), or not loaded at all as where it is not installed (no plugin is loaded from
    the installed packages), the suite's configuration names no option that only xdist defines."""
    _suite(tmp_path, "def test_one():\n    pass\n", report_options=True)
    result, output = _pytest(tmp_path, "-p", "no:xdist")
    assert result.returncode == 0 and "1 passed" in output, output[-3000:]
    assert (tmp_path / "options.txt").read_text() == "absent absent absent None"  # pytest-timeout, no limit
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    result, output = _pytest(tmp_path, env=env)
    assert result.returncode == 0 and "1 passed" in output, output[-3000:]
    assert (tmp_path / "options.txt").read_text() == "absent absent absent absent"
    # -n itself is then unknown, as it should be: a usage error (exit code 4), not a silent serial run.
    result, output = _pytest(tmp_path, "-n", "2", env=env)
    assert result.returncode == 4 and "unrecognized arguments: -n" in output, output[-3000:]


def test_auto_starts_a_worker_more_than_the_cores_within_maxprocesses(tmp_path):
    from xdist.plugin import pytest_xdist_auto_num_workers as xdist_auto

    auto = types.SimpleNamespace(option=types.SimpleNamespace(numprocesses="auto"))
    cores = xdist_auto(auto)  # the cores pytest-xdist's own `auto` counts
    _suite(tmp_path, "def test_one():\n    pass\n", report_options=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_XDIST_AUTO_NUM_WORKERS"}
    for maxprocesses in (cores, cores + 1, cores + 2):
        result, output = _pytest(tmp_path, "-n", "auto", f"--maxprocesses={maxprocesses}", env=env)
        assert result.returncode == 0, output[-3000:]
        assert (tmp_path / "workers.txt").read_text() == str(min(cores + 1, maxprocesses)), maxprocesses
    # pytest-xdist's own variable still chooses the number.
    result, output = _pytest(tmp_path, "-n", "auto", env={**env, "PYTEST_XDIST_AUTO_NUM_WORKERS": "1"})
    assert result.returncode == 0, output[-3000:]
    assert (tmp_path / "workers.txt").read_text() == "1"


THREADS_SEEN = '''
import os
import pathlib

def test_threads():
    seen = " ".join(os.environ.get(name, "-") for name in ("TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS"))
    pathlib.Path(__file__).with_name(f"threads_{os.environ.get('PYTEST_XDIST_WORKER', 'main')}.txt").write_text(seen)
'''


def test_each_worker_gives_tensorflow_its_share_of_the_cores(tmp_path):
    """Set in a worker as the real conftest does, before TensorFlow starts: its pools and those of what
    it starts get the cores divided by the workers (at least one thread), whatever the shell set;
    plain pytest keeps the shell's values."""
    _suite(tmp_path, THREADS_SEEN, THREADS_SEEN)
    with open(tmp_path / "conftest.py", "a") as conftest:
        conftest.write("\ntensorflow_threads_per_worker()\n")
    cores = len(os.sched_getaffinity(0))
    env = {**os.environ, "TF_NUM_INTRAOP_THREADS": "7", "TF_NUM_INTEROP_THREADS": "5"}
    for workers in (2, cores + 1):
        for old in tmp_path.glob("threads_*.txt"):
            old.unlink()
        result, output = _pytest(tmp_path, "-n", str(workers), env=env)
        assert result.returncode == 0, output[-3000:]
        share = str(max(1, cores // workers))
        assert {p.read_text() for p in tmp_path.glob("threads_gw*.txt")} == {f"{share} {share}"}, workers
    result, output = _pytest(tmp_path, "-p", "no:xdist", env=env)
    assert result.returncode == 0, output[-3000:]
    assert (tmp_path / "threads_main.txt").read_text() == "7 5"


def test_only_the_processes_that_run_tests_load_tensorflow():
    # tests/conftest.py's pytest_configure, in a new Python without TensorFlow: pytest-xdist's
    # controller (-n, no workerinput) skips TensorFlow, which it used to load for nothing (14 s of
    # CPU at the start of a run); a worker loads it (as plain pytest does: no -n, the same branch).
    code = ("import sys, types\nimport tests.conftest as conftest\n"
            "config = types.SimpleNamespace(getoption=lambda name, default=None: {given}, {worker})\n"
            "conftest.pytest_configure(config)\nprint('tensorflow' in sys.modules)\n")
    found = []
    for given, worker in (("'auto'", "dummy=0"), ("2", "workerinput={}")):
        result = subprocess.run([sys.executable, "-c", code.format(given=given, worker=worker)], cwd=REPO_ROOT,
                                capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, result.stderr[-2000:]
        found.append(result.stdout.split()[-1])
    assert found == ["False", "True"]


# What a user of this package, of Keras and of the Hub may keep in their shell: their cache, offline,
# a short timeout, verbose tools, a TPU VM's name, a cluster's TF_CONFIG, the Hub's settings, another
# Keras backend (jax is not installed here). tests/caller_environment.py sets them aside.
USERS_SHELL = {"ALBERT_TF_OFFLINE": "1", "ALBERT_TF_TIMEOUT": "abc", "ALBERT_TF_VERBOSE": "1", "TPU_NAME": "my-tpu",
               "TF_CONFIG": json.dumps({"cluster": {"worker": ["localhost:1", "localhost:2"]},
                                        "task": {"type": "worker", "index": 1}}),
               "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_ENDPOINT": "http://127.0.0.1:9",
               "KERAS_BACKEND": "jax"}


def test_the_callers_settings_are_set_aside_for_the_tests_and_what_they_start():
    from tests.caller_environment import set_aside_the_callers_settings

    environ = {**USERS_SHELL, "ALBERT_TF_HOME": "/home/user/.cache/albert_tf", "HF_HOME": "/home/user/.hf",
               "KERAS_HOME": "/home/user/.keras",
               "ALBERT_DATA_DIR": "/data", "ALBERT_REQUIRE_DATA": "1", "TF_CPP_MIN_LOG_LEVEL": "3", "PATH": "/bin"}
    home = set_aside_the_callers_settings(environ)
    assert environ == {"ALBERT_TF_HOME": os.path.join(home, "albert_tf"), "HF_HOME": os.path.join(home, "huggingface"),
                       "KERAS_BACKEND": "tensorflow", "KERAS_HOME": os.path.join(home, "keras"),
                       "ALBERT_DATA_DIR": "/data", "ALBERT_REQUIRE_DATA": "1", "PATH": "/bin",
                       "TF_CPP_MIN_LOG_LEVEL": "3"}  # the log level is conftest's next step
    assert os.path.isdir(home) and not os.listdir(home)


def test_a_module_that_reads_them_passes_in_such_a_shell_and_leaves_the_users_cache_alone(tmp_path):
    # The download tests failed here in a shell with ALBERT_TF_OFFLINE=1 ("... is not in the cache").
    cache = tmp_path / "users_cache"
    (cache / "downloads").mkdir(parents=True)
    (cache / "downloads" / "theirs.tar.gz").write_bytes(b"the user's")
    before = sorted((p.relative_to(cache), p.stat().st_mtime_ns) for p in cache.rglob("*"))
    # Their keras.json, as Keras writes it (its keys), naming another backend and half precision.
    (tmp_path / "home" / ".keras").mkdir(parents=True)
    (tmp_path / "home" / ".keras" / "keras.json").write_text(json.dumps(
        {"floatx": "float16", "epsilon": 1e-07, "backend": "jax", "image_data_format": "channels_last"}))
    env = {**os.environ, **USERS_SHELL, "ALBERT_TF_HOME": str(cache), "HF_HOME": str(tmp_path / "users_hf"),
           "HOME": str(tmp_path / "home")}
    env.pop("KERAS_HOME", None)  # the suite's own, from this process: the user's is their home's
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                             "tests/albert_tf/presets/test_download_faults.py", "tests/albert_tf/utils/test_backend.py"],
                            cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    assert " passed" in result.stdout and " failed" not in result.stdout
    assert sorted((p.relative_to(cache), p.stat().st_mtime_ns) for p in cache.rglob("*")) == before
    assert not (tmp_path / "users_hf").exists() and os.listdir(tmp_path / "home" / ".keras") == ["keras.json"]
