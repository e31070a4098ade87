"""What the warm Python (tests/warm_python.py) promises its users: a child runs a command as
`python ARGS...` would, in a process of its own, and ends as that process would."""

import os
import signal
import subprocess
import sys
import time

import pytest

from tests import warm_python as warm_python_module
from tests.conftest import REPO_ROOT
from tests.warm_python import DEVNULL, MISMATCH_EXIT, PIPE, WarmPopen, load_time_env


def test_a_child_has_its_own_pid_folder_environment_arguments_and_exit_status(warm_python, tmp_path):
    code = ("import os, sys; print(os.getpid(), os.getcwd(), os.environ['ASKED'], 'OTHER' in os.environ, sys.argv, "
            "sys.path[0] == ''); print('to stderr', file=sys.stderr); sys.exit(3)")
    ran = warm_python.run(["-c", code, "a b", "c"], cwd=tmp_path,
                          env={**load_time_env(), "ASKED": "yes", "PATH": os.environ["PATH"]},
                          capture_output=True, text=True, timeout=60)
    pid, folder, asked, other, argv, path = ran.stdout.split(" ", 5)
    assert ran.returncode == 3 and ran.stderr == "to stderr\n"
    assert int(pid) not in (os.getpid(), 0) and folder == str(tmp_path) and asked == "yes" and other == "False"
    assert argv + " " + path == "['-c', 'a b', 'c'] True\n"


def test_modules_scripts_and_console_scripts_run_as_python_runs_them(warm_python, tmp_path):
    script = tmp_path / "script.py"
    script.write_text("import sys\nprint(__name__, sys.argv)\nraise SystemExit('a message')\n")
    ran = warm_python.run([script, "x"], capture_output=True, text=True, timeout=60)
    assert (ran.returncode, ran.stdout, ran.stderr) == (1, f"__main__ {[str(script), 'x']}\n", "a message\n")
    ran = warm_python.run(["-m", "tests.warm_python_target", "y"], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=60)
    target = REPO_ROOT / "tests" / "warm_python_target.py"
    assert ran.returncode == 0 and ran.stdout.split() == ["__main__", str(target), "y"]
    ran = warm_python.run(["albert-presets", "--nosuch"], capture_output=True, text=True, timeout=60)
    installed = subprocess.run(["albert-presets", "--nosuch"], capture_output=True, text=True, timeout=60,
                               env={**os.environ, "PATH": f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}"})
    assert (ran.returncode, ran.stdout, ran.stderr) == (installed.returncode, installed.stdout, installed.stderr)
    assert installed.returncode == 2


def test_a_child_finds_the_packages_libraries_loaded_and_runs_its_scripts_as_python_does(warm_python):
    # Loaded before the fork (PRELOAD's "PACKAGE.*"): what the tools import as they run.
    code = "import sys; print(*(name in sys.modules for name in sys.argv[1:]))"
    names = ["finetune.trainer", "albert_tf.training.loop", "albert_tf.cli.pretrain", "data_prep.beam.pipeline"]
    ran = warm_python.run(["-c", code, *names], capture_output=True, text=True, timeout=60)
    assert (ran.returncode, ran.stdout, ran.stderr) == (0, "True True False False\n", "")
    # A script run with -m was not loaded: runpy would otherwise warn that it found it in sys.modules.
    ran = warm_python.run(["-m", "albert_tf.cli.presets", "--nosuch"], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=60)
    assert (ran.returncode, ran.stderr) == (2, "error: Unknown command line flag 'nosuch' (see --help)\n")


def test_a_child_handles_signals_as_a_new_python_does(warm_python):
    code = ("import signal; print([signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE, "
            "signal.SIGXFSZ, signal.SIGHUP, signal.SIGCHLD)], signal.pthread_sigmask(signal.SIG_BLOCK, []))")

    def warm_and_new():
        warm = warm_python.run(["-c", code], capture_output=True, text=True, timeout=60)
        # As a command in the foreground, where SIGINT's default holds: a test run started in the
        # background (pytest &) ignores SIGINT, and a child would inherit that; a warm child does not.
        new = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        return warm, new

    warm, new = warm_and_new()
    assert warm.stdout == new.stdout and "Handlers.SIG_IGN: 1>, <Handlers.SIG_IGN" in new.stdout
    # Signals the caller ignores stay ignored in a new process, as under `nohup pytest ...` (SIGHUP).
    before = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        warm, new = warm_and_new()
    finally:
        signal.signal(signal.SIGHUP, before)
    assert warm.stdout == new.stdout and "Handlers.SIG_IGN: 1>, <Handlers.SIG_DFL: 0>] set()" in new.stdout


def test_an_exception_is_a_traceback_and_status_1(warm_python):
    ran = warm_python.run(["-c", "raise ValueError('no')"], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 1
    assert ran.stderr.splitlines() == ["Traceback (most recent call last):", '  File "<string>", line 1, in <module>',
                                       "ValueError: no"]


def test_signals_reach_the_child_and_end_it_as_they_would(warm_python):
    for number, expected in ((signal.SIGTERM, -signal.SIGTERM), (signal.SIGKILL, -signal.SIGKILL),
                             (signal.SIGINT, -signal.SIGINT)):
        child = warm_python.popen(["-c", "import time; print('up', flush=True); time.sleep(60)"], stdout=PIPE,
                                  stderr=DEVNULL, text=True)
        assert child.stdout.readline() == "up\n"
        assert child.poll() is None
        child.send_signal(number)
        assert child.wait(timeout=30) == expected
        child.stdout.close()


def test_a_wait_past_its_timeout_raises_and_a_run_past_it_kills_the_child(warm_python, monkeypatch):
    child = warm_python.popen(["-c", "import time; time.sleep(60)"])
    with pytest.raises(subprocess.TimeoutExpired):
        child.wait(timeout=0.2)
    child.kill()
    assert child.wait(timeout=30) == -signal.SIGKILL
    # The run's child's pid as the warm process tells it on forking it: the child need not have run
    # a line by the timeout (a pid file it wrote was missing if a loaded machine started it late).
    started = []

    class Told(WarmPopen):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            started.append(self.pid)

    monkeypatch.setattr(warm_python_module, "WarmPopen", Told)
    with pytest.raises(subprocess.TimeoutExpired):
        warm_python.run(["-c", "import time; time.sleep(600)"], timeout=1)
    # The run's child is killed, not left to sleep (said by the process table, not by a stopwatch).
    (pid,) = started
    deadline = time.monotonic() + 60
    while _alive(pid):
        assert time.monotonic() < deadline, "the timed-out child still runs"
        time.sleep(0.05)


def test_a_child_whose_caller_hangs_up_is_killed(warm_python, tmp_path):
    child = WarmPopen(["-c", "import os, time; print(os.getpid(), flush=True); time.sleep(60)"], stdout=PIPE,
                      text=True, warm=warm_python.socket)
    pid = int(child.stdout.readline())
    child._conn.close()  # as a caller that died would
    deadline = time.monotonic() + 30
    while _alive(pid):
        assert time.monotonic() < deadline, "the child outlived its caller"
        time.sleep(0.05)


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as stat:  # a zombie not yet reaped is dead
            return stat.read().split(")")[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):  # reaped in between
        return False


def test_a_child_that_changes_what_tensorflow_read_as_it_loaded_fails(warm_python):
    code = "import os; os.environ['TF_CPP_MIN_LOG_LEVEL'] = '3'"
    ran = warm_python.run(["-c", code], capture_output=True, text=True, timeout=60)
    assert ran.returncode == MISMATCH_EXIT
    assert ran.stderr.startswith("warm_python: this command ran with TF_CPP_MIN_LOG_LEVEL='3' (loaded with '2')")
    ran = warm_python.run(["-c", "pass"], env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "0"}, capture_output=True,
                          text=True, timeout=60)
    assert ran.returncode == MISMATCH_EXIT


def test_values_that_load_alike_are_alike_in_any_caller_environment(warm_python):
    """A caller's KERAS_BACKEND=tensorflow or CUDA_VISIBLE_DEVICES beside a child without it (issue 53)."""
    from tests.warm_python import as_loaded

    keras_backend = [as_loaded("KERAS_BACKEND", value) for value in (None, "tensorflow", "jax")]
    assert keras_backend[0] == keras_backend[1] != keras_backend[2]
    assert as_loaded("TF_CPP_MIN_LOG_LEVEL", "2") != as_loaded("TF_CPP_MIN_LOG_LEVEL", "3")
    # This process was loaded with the tools' level, whatever the caller exported (tests/conftest.py).
    assert os.environ["TF_CPP_MIN_LOG_LEVEL"] == "2"
    others = {k: v for k, v in os.environ.items() if k not in ("KERAS_BACKEND", "CUDA_VISIBLE_DEVICES")}
    for env in (others, {**others, "KERAS_BACKEND": "tensorflow"}):
        ran = warm_python.run(["-c", "pass"], env=env, capture_output=True, text=True, timeout=60)
        assert (ran.returncode, ran.stderr) == (0, "")
    ran = warm_python.run(["-c", "pass"], env={**others, "KERAS_BACKEND": "jax"}, capture_output=True, text=True,
                          timeout=60)
    assert ran.returncode == MISMATCH_EXIT and "KERAS_BACKEND='jax'" in ran.stderr


def test_a_command_line_runs_its_command_in_a_warm_child(warm_python, tmp_path):
    line = f"{sys.executable} {REPO_ROOT / 'tests' / 'warm_python.py'} -c \"import sys; print(input()); sys.exit(4)\""
    ran = subprocess.run(["bash", "-c", f"echo hello | {line}"], capture_output=True, text=True, timeout=60)
    assert (ran.returncode, ran.stdout) == (4, "hello\n")
