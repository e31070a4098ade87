"""The suite's own settings (pyproject.toml's addopts): a crashed worker ends the run, reported."""

import shutil
import subprocess
import sys

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


def test_a_crashed_worker_ends_the_run_with_its_test_failed(tmp_path):
    """pytest-xdist 3.8 with --dist=loadscope replaces a crashed worker, which runs the crashing
    test again, and can then wait forever (issues #1323, #1378); with --max-worker-restart=0 the
    run ends, the test that crashed failed."""
    shutil.copy(REPO_ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / "test_one.py").write_text("def test_one():\n    pass\n")
    (tmp_path / "test_two.py").write_text(CRASHING)
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "2", "-p", "no:cacheprovider", "--rootdir",
                             str(tmp_path), "-c", str(tmp_path / "pyproject.toml"), str(tmp_path)],
                            cwd=tmp_path, capture_output=True, text=True, timeout=120)
    output = result.stdout + result.stderr
    assert result.returncode == 1, output[-3000:]
    assert "worker 'gw" in output and "crashed while running 'test_two.py::test_crash'" in output, output[-3000:]
    assert "FAILED test_two.py::test_crash" in output
    # One worker went down, and no new one ran the crashing test again (where the hang begins).
    assert output.count("node down: Not properly terminated") == 1, output[-3000:]
