"""Faults, round three (issue 29): one run a folder, no silent loss, one line for every user error.

Each test gives the tools a fault or bad input as a user would and asserts the exact line the user
sees and what is left in the output folder. `python -m pytest -q -m faults` runs these with the
other bad-input tests.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time

import pytest

from albert_tf.errors import UserError
from albert_tf.files import LOCK_FILE, locked_run_folder

pytestmark = pytest.mark.faults

HOST = socket.gethostname()
CONFIG = {"vocab_size": 30000, "embedding_size": 16, "hidden_size": 32, "num_hidden_layers": 2,
          "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 64}


def _holder(folder, *, write_after_lock=None):
    """A second Python process holding the lock of `folder` until killed; returns it once it holds it."""
    code = textwrap.dedent(f"""
        import sys, time
        from albert_tf.files import locked_run_folder
        with locked_run_folder({str(folder)!r}):
            {f"open({str(write_after_lock)!r}, 'w').write('mine')" if write_after_lock else "pass"}
            print("locked", flush=True)
            time.sleep(600)
    """)
    process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "locked"
    return process


# ---- 1. one run a folder ---------------------------------------------------------------------------


def test_a_second_run_into_a_locked_folder_is_refused_naming_the_holder(tmp_path, small_data_dir):
    """Two real processes: the second tool run is refused in one line (exit 1) and writes nothing."""
    out = tmp_path / "sqc"
    holder = _holder(out, write_after_lock=out / "first.txt")
    try:
        config = tmp_path / "albert_config.json"
        config.write_text(json.dumps(CONFIG))
        second = subprocess.run(
            [sys.executable, "-m", "finetune.squad.cli", f"--albert_config_file={config}",
             f"--spm_model_file={small_data_dir / 'albert' / '30k-clean.model'}",
             f"--train_file={small_data_dir / 'squad' / 'train-v1.1.articles2-3.json'}",
             f"--output_dir={out}", "--do_train", "--seed=7"],
            capture_output=True, text=True, timeout=120)
        assert second.returncode == 1, second.stderr[-2000:]
        assert second.stderr.splitlines()[-1] == (
            f"error: --output_dir {out} is in use by another run (pid {holder.pid} on host {HOST}): wait for it to "
            "finish, or use another --output_dir")
        assert sorted(os.listdir(out)) == [LOCK_FILE, "first.txt"]  # the first run's, untouched
        assert json.loads((out / LOCK_FILE).read_text()) == {"pid": holder.pid, "host": HOST}
    finally:
        holder.kill()
        holder.wait()


def test_a_lock_left_by_a_killed_run_is_taken_over(tmp_path):
    out = tmp_path / "run"
    holder = _holder(out)
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    assert json.loads((out / LOCK_FILE).read_text())["pid"] == holder.pid  # left behind
    with locked_run_folder(out):
        assert json.loads((out / LOCK_FILE).read_text()) == {"pid": os.getpid(), "host": HOST}
        (out / "result.json").write_text("{}")
    assert sorted(os.listdir(out)) == ["result.json"]  # the lock goes with the run


def test_one_process_may_hold_its_folder_twice_but_a_refused_or_failed_run_leaves_it_as_it_was(tmp_path):
    out = tmp_path / "run"
    with locked_run_folder(out):
        with locked_run_folder(out):  # a tool calling another
            pass
        assert (out / LOCK_FILE).exists()
    assert not out.exists()  # made and left empty: removed
    out.mkdir()
    (out / "old.txt").write_text("kept")
    with pytest.raises(RuntimeError):
        with locked_run_folder(out):
            (out / "new.txt").write_text("half")
            (out / "features").mkdir()
            raise RuntimeError("failed")
    assert sorted(os.listdir(out)) == ["old.txt"]
    with pytest.raises(RuntimeError):
        with locked_run_folder(out, keep_on_failure=lambda folder: True):  # work worth keeping
            (out / "ckpt-1.index").write_text("")
            raise RuntimeError("failed")
    assert sorted(os.listdir(out)) == ["ckpt-1.index", "old.txt"]


def test_the_workers_of_a_cluster_leave_the_lock_to_the_chief(tmp_path, monkeypatch):
    out = tmp_path / "run"
    holder = _holder(out)
    try:
        cluster = {"worker": ["localhost:1", "localhost:2"]}
        monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": cluster, "task": {"type": "worker", "index": 1}}))
        with locked_run_folder(out):  # worker 1 writes beside worker 0 (the chief), which holds it
            pass
        monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": cluster, "task": {"type": "worker", "index": 0}}))
        with pytest.raises(UserError, match=f"is in use by another run \\(pid {holder.pid} on host"):
            with locked_run_folder(out):
                pass
    finally:
        holder.kill()
        holder.wait()
