"""The suite's pytest-xdist settings, given only where xdist runs the suite (`-n`), so that plain
`pytest` (no pytest-xdist installed, or `-p no:xdist`) runs any test file: pyproject.toml's addopts
would name options that only xdist defines. tests/conftest.py takes the hooks and the workers'
TensorFlow threads (`tensorflow_threads_per_worker`) from here;
tests/test_suite_config.py runs it alone, as a conftest, in a suite of its own.

With `-n auto` (README: `-n auto --maxprocesses=4`), one worker more than the cores, at most
`--maxprocesses` (`pytest_xdist_auto_num_workers`; PYTEST_XDIST_AUTO_NUM_WORKERS, where set, wins):
a worker spends about a tenth of its time waiting (a child starting, a server answering, a fault
test's deadline), which a worker per core leaves idle. On the 2-core machine, the full suite used
181% of the CPU with two workers and 192% with three (docs/testing.md, "Measured").

With `-n`, unless `--dist` is given:
- each worker takes whole modules (`--dist=loadscope`), in tests/conftest.py's order, slowest first
  (`--no-loadscope-reorder`): a module's fixtures (trained runs, exports, fresh processes) are then
  built once, not once on each worker that got some of its tests;
- a worker that crashes (a native fault in TensorFlow or a library under it) ends the run at once,
  its test reported as failed (`--max-worker-restart=0`, unless given): pytest-xdist 3.8 replaces a
  crashed worker under loadscope, runs the test that crashed again in the new one, and can then wait
  forever for work it re-queued empty (pytest-xdist issues #1323, #1378, pull request #1371), which
  would hold CI to its 90-minute limit;
- a test that waits on something that never comes (a server that never answers, a lost child)
  fails after HANG_SECONDS, with every thread's stack, and the run goes on (pytest-timeout, a test
  extra; `--timeout` given wins). It bounds a hang, not a speed: the longest test takes minutes.
"""

import os

import pytest

HANG_SECONDS = 1800
THREAD_SETTINGS = ("TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS")


def tensorflow_threads_per_worker(environ=os.environ) -> None:
    """In a pytest-xdist worker, TensorFlow's two thread pools, its own and those of every process it
    starts, sized to the worker's share of the cores (at least one thread), whatever the caller's
    shell set: TensorFlow reads these as its runtime starts, so conftest calls this before any op.

    With one worker more than the cores, pools of a thread per core in every process left threads
    spinning for work while the other processes waited for a core: three heavy test modules run side
    by side on the 2 cores used 0.93x the CPU with one thread each (the median of five interleaved
    pairs, 0.89x-1.08x; docs/testing.md). Plain pytest, one process, keeps TensorFlow's own sizes."""
    workers = int(environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
    if workers:
        threads = str(max(1, len(os.sched_getaffinity(0)) // workers))
        for name in THREAD_SETTINGS:
            environ[name] = threads


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook: plain pytest has no such hook
def pytest_xdist_auto_num_workers(config):
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None  # pytest-xdist's own implementation reads it
    from xdist.plugin import pytest_xdist_auto_num_workers as cores

    return cores(config) + 1  # pytest-xdist then caps it at --maxprocesses


@pytest.hookimpl(wrapper=True)
def pytest_cmdline_main(config):
    # A wrapper runs before every plain implementation, so before xdist's own (tryfirst), which turns
    # `-n` with the default `--dist=no` into `--dist=load`. Without xdist there is no `-n`; a worker
    # process has none of its own.
    option = config.option
    if getattr(option, "numprocesses", None) and option.dist == "no":
        option.dist = "loadscope"
        option.loadscopereorder = False
        if option.maxworkerrestart is None:
            option.maxworkerrestart = "0"
        if getattr(option, "timeout", "absent") is None:  # pytest-timeout is loaded; no --timeout given
            option.timeout = HANG_SECONDS
    return (yield)
